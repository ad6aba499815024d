"""Bring-up decisions as pure functions: preflight findings, reboot reasons, gates, package origins, health."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from hgxkit.node.driver import (
    DriverState,
    driver_package_plan,
    gate_problems,
    package_origin,
    packages_needing_install,
    reboot_reason,
)
from hgxkit.node.health import GpuHealthReport, parse_dcgm_diag, parse_xids
from hgxkit.node.preflight import HostFacts, PreflightPolicy, preflight_problems
from hgxkit.nvidia.host import PciInventory
from hgxkit.nvidia.smi import GpuInfo

GOOD = HostFacts(
    os_id="ubuntu",
    os_version="24.04",
    arch="x86_64",
    pci=PciInventory(8, 4, ["GH100 [H200 SXM 141GB]"] * 8, ["2335"] * 8),
    secure_boot="disabled",
    cgroup_version=2,
    ram_bytes=2 * 1024**4,
    models_dir_free_bytes=3 * 10**12,
)


def checks(facts: HostFacts, policy: PreflightPolicy | None = None) -> list[str]:
    return [p.code for p in preflight_problems(facts, policy or PreflightPolicy())]


def test_a_proper_node_passes_preflight() -> None:
    assert checks(GOOD) == []


@pytest.mark.parametrize(
    ("change", "check", "text"),
    [
        ({"os_id": "centos", "os_version": "9"}, "os", "centos 9; use Ubuntu 22.04, 24.04 or Debian 12"),
        ({"arch": "aarch64"}, "arch", "aarch64; use x86_64"),
        ({"secure_boot": "enabled"}, "secure-boot", "disable Secure Boot in firmware"),
        ({"cgroup_version": 1}, "cgroup", "cgroup v1"),
        ({"ram_bytes": 64 * 1024**3}, "ram", "64 GiB RAM, need 512 GiB"),
        ({"models_dir_free_bytes": 20 * 10**9}, "disk", "20.0 GB free at /data/models, need 400 GB"),
        ({"pci": PciInventory(7, 4, [], ["2335"] * 7)}, "gpu-count", "7 NVIDIA GPUs on PCI, the inventory expects 8"),
        ({"pci": PciInventory(8, 4, [], ["2330"] * 8)}, "gpu-model", "GPU PCI device ids 10de:2330"),
        ({"pci": PciInventory(8, 0, [], ["2335"] * 8)}, "nvswitch", "0 NVSwitches on PCI, expected 4"),
        ({"pci": None}, "pci", "install pciutils"),
        (
            {
                "nvidia_package_origins": {
                    "nvidia-open-580": "cuda-repo",
                    "nvidia-utils-580-server": "distribution-archive",
                }
            },
            "nvidia-package-source",
            "nvidia-open-580 from cuda-repo, nvidia-utils-580-server from distribution-archive",
        ),
    ],
)
def test_each_preflight_failure_names_check_finding_and_remedy(change: dict, check: str, text: str) -> None:
    (problem,) = preflight_problems(replace(GOOD, **change), PreflightPolicy())
    assert problem.code == check
    assert text in str(problem)
    assert problem.remedy


def test_debian_12_is_supported_and_policy_knobs_relax_checks() -> None:
    debian = replace(GOOD, os_id="debian", os_version="12", pci=PciInventory(2, 0, [], ["2335"] * 2))
    assert checks(debian, PreflightPolicy(expected_gpu_count=2, expected_nvswitch_count=0)) == []


@pytest.mark.parametrize(
    ("state", "target", "change", "reason"),
    [
        (DriverState(None, None, "not-installed", None), "580.95.05", True, "the driver packages change"),
        (DriverState("580.95.05", None, "no-driver", "580.95.05"), "580.95.05", False, "no nvidia module is loaded"),
        (
            DriverState("580.105.08", "580.95.05", "version-mismatch", None),
            "580.105.08",
            False,
            "loaded module is 580.95.05",
        ),
        (DriverState("580.95.05", "580.95.05", None, "580.95.05"), "580.95.05", False, None),
    ],
)
def test_reboot_reason(state: DriverState, target: str, change: bool, reason: str | None) -> None:
    got = reboot_reason(state, target, change)
    assert (got is None) if reason is None else (reason in (got or ""))


def test_packages_needing_install_compares_upstream_versions() -> None:
    plan = driver_package_plan(distro="debian12", branch="580", version="580.105.08", flavor="open")
    installed = {"nvidia-open": "580.105.08-1", "nvidia-fabricmanager": "580.95.05-1"}
    assert packages_needing_install(plan, installed) == ["nvidia-fabricmanager", "libnvidia-nscq"]


FABRIC_OK = [(i, "Completed", "Success") for i in range(8)]


def gate(**changes: object) -> list[str]:
    args = {
        "expected_version": "580.105.08",
        "loaded_version": "580.105.08",
        "smi_versions": {"580.105.08"},
        "smi_failure": None,
        "fabric_manager_version": "580.105.08",
        "fabric_manager_active": True,
        "fabric": FABRIC_OK,
        "nvlink_problems": [],
        "expected_gpus": 8,
    } | changes
    return [str(p) for p in gate_problems(**args)]  # type: ignore[arg-type]


def test_gate_passes_when_everything_matches() -> None:
    assert gate() == []


def test_gate_names_each_failure() -> None:
    assert gate(fabric_manager_version="580.95.05") == [
        "[driver-versions] loaded module 580.105.08, userspace (nvidia-smi) 580.105.08, fabric manager 580.95.05; "
        "all must be 580.105.08; rerun bring-up"
    ]
    assert gate(fabric_manager_active=False)[0].startswith(
        "[fabric-manager] nvidia-fabricmanager.service is not active"
    )
    stuck = gate(fabric=[*FABRIC_OK[:7], (7, "In Progress", None)])
    assert stuck == [
        "[fabric-state] fabric not Completed/Success on GPU 7: In Progress/?; wait for fabric manager, then check "
        "`nvidia-smi -q | grep -A3 Fabric` and its journal"
    ]
    assert gate(nvlink_problems=["GPU 3 link 10 is inactive"])[0].startswith("[nvlink] GPU 3 link 10 is inactive")
    assert gate(smi_failure="version-mismatch") == [
        "[nvidia-smi] nvidia-smi fails (version-mismatch); reboot, or reinstall the driver set"
    ]
    assert gate(fabric=FABRIC_OK[:7]) == ["[gpu-count] nvidia-smi lists 7 GPUs; expected 8"]


POLICY = """nvidia-open-580:
  Installed: 580.95.05-0ubuntu1
  Candidate: 580.95.05-0ubuntu1
  Version table:
 *** 580.95.05-0ubuntu1 600
        600 https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64  Packages
        100 /var/lib/dpkg/status
     580.82.07-0ubuntu1 600
        600 https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64  Packages
"""


def test_package_origin_from_apt_cache_policy() -> None:
    assert package_origin(POLICY) == "cuda-repo"
    archive = POLICY.replace(
        "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64  Packages\n        100",
        "http://archive.ubuntu.com/ubuntu noble-updates/restricted amd64 Packages\n        100",
        1,
    )
    assert package_origin(archive) == "distribution-archive"
    mirror = POLICY.replace("https://developer.download.nvidia.com/compute/cuda/repos", "http://mirror.lan/cuda")
    assert package_origin(mirror, "http://mirror.lan/cuda/ubuntu2404/x86_64/") == "cuda-repo"
    assert package_origin(mirror) == "local"


DCGM_PASS = {
    "DCGM Diagnostic": {
        "test_categories": [
            {
                "category": "Deployment",
                "tests": [
                    {
                        "name": "software",
                        "results": [{"entity_id": i, "status": "Pass"} for i in range(8)],
                        "test_summary": {"status": "Pass"},
                    }
                ],
            }
        ]
    },
}


def test_dcgm_diag_pass_and_fail() -> None:
    assert parse_dcgm_diag(json.dumps(DCGM_PASS), 1).passed
    failing = json.loads(json.dumps(DCGM_PASS))
    result = failing["DCGM Diagnostic"]["test_categories"][0]["tests"][0]["results"][3]
    result.update(status="Fail", warnings=[{"message": "row remap failure"}])
    diag = parse_dcgm_diag(json.dumps(failing), 1)
    assert (diag.passed, diag.failures) == (False, ["software on GPU 3: row remap failure"])
    assert parse_dcgm_diag("Error: unable to connect to host engine", 1).failures == [
        "Error: unable to connect to host engine"
    ]


def test_health_report_problems() -> None:
    gpu = GpuInfo(
        0,
        "NVIDIA H200",
        "GPU-0",
        "00000000:18:00.0",
        "580.105.08",
        persistence_mode=True,
        ecc_enabled=True,
        ecc_errors_uncorrected=0,
    )
    clean = GpuHealthReport(parse_dcgm_diag(json.dumps(DCGM_PASS), 1), [gpu], [], expected_gpus=1)
    assert clean.problems() == []
    xids = parse_xids("[  12.3] NVRM: Xid (PCI:0000:18:00): 79, pid=1234, name=python3, GPU has fallen off the bus.")
    bad = replace(clean, gpus=[replace(gpu, persistence_mode=False, ecc_errors_uncorrected=2)], xids=xids)
    assert [p.code for p in bad.problems()] == ["ecc", "persistence", "xid"]
    assert "XID 79 on 0000:18:00: GPU has fallen off the bus." in str(bad.problems()[-1])
