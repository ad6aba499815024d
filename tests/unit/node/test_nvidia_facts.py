"""NVIDIA parsers and pyinfra facts on recorded outputs, including failure outputs."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyinfra.api import Config, Inventory, State
from pyinfra.api.connect import connect_all
from pyinfra.api.facts import get_facts

from hgxkit.node.facts_apt import HeldPackages
from hgxkit.node.facts_driver import NvidiaLoadedModule, NvidiaPci, SecureBootState
from hgxkit.node.facts_gpu import NvidiaSmi, NvidiaTopology, Nvlink
from hgxkit.node.facts_system import CgroupVersion, FreeBytes
from hgxkit.nvidia.smi import gpus_from_xml, parse_query_csv, upstream_version

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "nvidia"


def lines(name: str, rc: int = 0) -> list[str]:
    """A recorded output as the fact sees it: the tool's lines, then the status line the fact appends."""
    return [*(FIXTURES / name).read_text().splitlines(), f"##hgxkit-rc={rc}"]


def test_query_gpu_reports_eight_h200_with_fabric_completed() -> None:
    smi = NvidiaSmi().process(lines("query-gpu-h200.csv"))
    assert smi.ok
    assert [g.index for g in smi.gpus] == list(range(8))
    gpu = smi.gpus[5]
    assert (gpu.name, gpu.bus_id, gpu.driver_version) == ("NVIDIA H200", "00000000:AB:00.0", "580.95.05")
    assert (gpu.memory_total_mib, gpu.power_limit_w, gpu.persistence_mode, gpu.ecc_enabled) == (
        143771,
        700.0,
        True,
        True,
    )
    assert {(g.fabric_state, g.fabric_status) for g in smi.gpus} == {("Completed", "Success")}


def test_query_gpu_with_header_units_and_fabric_in_progress() -> None:
    smi = NvidiaSmi().process(lines("query-gpu-h200-header-fabric-in-progress.csv"))
    assert len(smi.gpus) == 8
    assert smi.gpus[0].memory_total_mib == 143771 and smi.gpus[0].power_limit_w == 700.0
    assert smi.gpus[0].persistence_mode is False
    assert (smi.gpus[0].fabric_state, smi.gpus[0].fabric_status) == ("In Progress", None)


@pytest.mark.parametrize(
    ("fixture", "rc", "failure", "message"),
    [
        ("smi-no-driver.txt", 9, "no-driver", "NVIDIA-SMI has failed because it couldn't communicate"),
        (
            "smi-version-mismatch.txt",
            18,
            "version-mismatch",
            "Failed to initialize NVML: Driver/library version mismatch",
        ),
    ],
)
def test_nvidia_smi_failures_are_states(fixture: str, rc: int, failure: str, message: str) -> None:
    smi = NvidiaSmi().process(lines(fixture, rc))
    assert (smi.ok, smi.failure, smi.gpus) == (False, failure, [])
    assert smi.message.startswith(message)
    assert NvidiaTopology().process(lines(fixture, rc)) is None
    assert Nvlink().process(lines(fixture, rc)) is None


def test_missing_nvidia_smi_is_not_installed() -> None:
    smi = NvidiaSmi().process(["nvidia-smi: not found", "##hgxkit-rc=127"])
    assert smi.failure == "not-installed"


def test_bad_csv_row_is_refused() -> None:
    with pytest.raises(ValueError, match="has 2 cells for 3 fields"):
        parse_query_csv("0, a\n", ["index", "name", "uuid"])


def test_xml_reports_versions_fabric_ecc_and_clocks() -> None:
    gpus, top = gpus_from_xml((FIXTURES / "smi-q-x-h200.xml").read_text())
    assert top == {"driver_version": "580.95.05", "cuda_version": "13.0", "attached_gpus": "2"}
    assert [(g.index, g.bus_id) for g in gpus] == [(0, "00000000:18:00.0"), (1, "00000000:2A:00.0")]
    assert (gpus[1].vbios_version, gpus[1].fabric_state, gpus[1].ecc_errors_uncorrected) == (
        "96.00.AF.00.01",
        "Completed",
        1,
    )
    assert (gpus[0].clocks_max_sm_mhz, gpus[0].clocks_max_mem_mhz, gpus[0].power_limit_w) == (1980, 3201, 700.0)


def test_topology_is_nv18_between_every_gpu_pair() -> None:
    matrix = NvidiaTopology().process(lines("topo-m-h200.txt"))
    assert matrix is not None
    pairs = {matrix[(f"GPU{a}", f"GPU{b}")] for a in range(8) for b in range(8) if a != b}
    assert pairs == {"NV18"}
    assert matrix[("GPU2", "GPU2")] == "X"
    assert matrix[("GPU5", "NIC1")] == "PIX"


def test_nvlink_all_up_and_a_degraded_link() -> None:
    healthy = Nvlink().process([*lines("nvlink-s-h200.txt"), "##hgxkit-errors"])
    assert healthy is not None
    assert healthy.problems() == []
    assert len(healthy.gpus) == 8 and all(len(g.links) == 18 for g in healthy.gpus)
    status = (FIXTURES / "nvlink-s-h200-gpu3-link10-inactive.txt").read_text().splitlines()
    errors = (FIXTURES / "nvlink-e-h200-gpu3-crc.txt").read_text().splitlines()
    degraded = Nvlink().process([*status, "##hgxkit-errors", *errors, "##hgxkit-rc=0"])
    assert degraded is not None
    assert degraded.problems() == ["GPU 3 link 10 is inactive", "GPU 3 has 12 NVLink crc errors"]


def test_loaded_module_from_proc_or_sys() -> None:
    assert NvidiaLoadedModule().process(lines("proc-driver-nvidia-version.txt")[:-1]) == "580.95.05"
    assert NvidiaLoadedModule().process(["580.105.08"]) == "580.105.08"
    assert NvidiaLoadedModule().process([]) is None


def test_pci_inventory_counts_gpus_and_nvswitches() -> None:
    inventory = NvidiaPci().process(lines("lspci-nn-h200-8gpu.txt"))
    assert inventory is not None
    assert (inventory.gpus, inventory.nvswitches, set(inventory.gpu_device_ids)) == (8, 4, {"2335"})
    seven = [line for line in lines("lspci-nn-h200-8gpu.txt") if not line.startswith("db:00.0")]
    assert NvidiaPci().process(seven).gpus == 7  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("output", "state"),
    [
        ("SecureBoot enabled", "enabled"),
        ("SecureBoot disabled\nPlatform is in Setup Mode", "disabled"),
        ("EFI variables are not supported on this system", "unsupported"),
        ("unknown", "unknown"),
    ],
)
def test_secure_boot(output: str, state: str) -> None:
    assert SecureBootState().process(output.splitlines()) == state


def test_small_host_facts() -> None:
    assert HeldPackages().process(["nvidia-open", "", "libnvidia-nscq"]) == ["libnvidia-nscq", "nvidia-open"]
    assert CgroupVersion().process(["cgroup2fs"]) == 2
    assert CgroupVersion().process(["tmpfs"]) == 1
    assert FreeBytes().process(["123456789"]) == 123456789
    assert FreeBytes().process([""]) is None
    assert upstream_version("1:580.95.05-0ubuntu1") == "580.95.05"


def test_facts_run_through_pyinfra_with_the_fake_connector() -> None:
    query = (FIXTURES / "query-gpu-h200.csv").read_text()
    inventory = Inventory(
        (
            [
                (
                    "@fake/h200-1",
                    {
                        "fake_delay": 0,
                        "fake_delay_jitter": 0,
                        "fake_responses": {
                            "nvidia-smi --query-gpu": query + "##hgxkit-rc=0\n",
                            "mokutil": "SecureBoot disabled\n",
                        },
                    },
                )
            ],
            {},
        )
    )
    state = State(inventory=inventory, config=Config())
    connect_all(state)
    (smi,) = get_facts(state, NvidiaSmi).values()
    (secure_boot,) = get_facts(state, SecureBootState).values()
    assert len(smi.gpus) == 8 and smi.gpus[7].uuid.endswith("0007")
    assert secure_boot == "disabled"
