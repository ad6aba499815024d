"""The doctor's verdict (hgxkit/node/doctor.py) and the parsing of its facts (hgxkit/node/facts_doctor.py)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import jsonschema

from hgxkit.node.doctor import (
    DockerNow,
    DoctorFacts,
    DoctorPolicy,
    Reach,
    clock_problem,
    diagnose,
    plan_docker,
    plan_driver,
    render_text,
    to_json,
    unreachable,
)
from hgxkit.node.facts_doctor import (
    ClockState,
    DockerMirrors,
    FabricAddresses,
    RunLockHolder,
    SudoState,
    UrlStatus,
)
from hgxkit.node.preflight import HostFacts, PreflightPolicy
from hgxkit.nvidia.host import PciInventory

SCHEMA = json.loads((Path(__file__).resolve().parents[3] / "hgxkit/node/schemas/doctor.schema.json").read_text())
NOW = 1_800_000_000.0
HOST = HostFacts(
    os_id="ubuntu",
    os_version="24.04",
    arch="x86_64",
    pci=PciInventory(8, 4, ["H200"] * 8, ["2335"] * 8),
    secure_boot="disabled",
    cgroup_version=2,
    ram_bytes=2048 * 1024**3,
    models_dir_free_bytes=3_000 * 10**9,
)
FACTS = DoctorFacts(
    user="ubuntu",
    sudo="passwordless",
    host=HOST,
    kernel="6.8.0-45-generic",
    loaded_driver=None,
    docker=DockerNow(),
    node_epoch=NOW + 2,
    ntp_synchronized=True,
    reach=[Reach("Hugging Face Hub", "https://huggingface.co", 200)],
)
POLICY = DoctorPolicy(preflight=PreflightPolicy(), xet_cache_gb=26.0, docker_source="docker-ce")


def test_a_healthy_host_is_ready_and_says_what_bring_up_will_do() -> None:
    d = diagnose("node1", FACTS, POLICY, NOW)
    assert d.ok and d.problems == []
    assert d.actions == [
        "install NVIDIA driver the newest 580 with fabric manager, then stop for a reboot (allow_reboot is false)",
        "install docker-ce",
        "install the NVIDIA container toolkit, then check GPU health",
    ]
    assert ("models_dir", "/data/models: 3000.0 GB free, need 426 GB (incl. 26 GB Xet caches)", True) in d.rows
    assert render_text(d).splitlines()[0] == "node1: ready for bring-up"


def test_each_blocker_is_one_line_with_its_remedy() -> None:
    facts = dataclasses.replace(
        FACTS,
        sudo="denied: sudo: a password is required",
        host=dataclasses.replace(HOST, pci=PciInventory(7, 4, ["H200"] * 7, ["2335"] * 7), models_dir_free_bytes=10**9),
        lock_holder="4242 Tue Dec  1 21:00:00 2026 pyinfra -y inventories/h200.py deploys/bringup.py",
        reach=[Reach("image registry", "https://registry-1.docker.io/v2/", None, "curl: (6) Could not resolve host")],
        fabric=("10.0.0.5", ["10.0.0.5"], ["192.168.1.2"]),
    )
    d = diagnose("node2", facts, POLICY, NOW)
    assert not d.ok
    lines = [line for line in render_text(d).splitlines() if line.startswith("  error:")]
    assert lines == [
        "  error: node2: [sudo] user ubuntu has no passwordless sudo (sudo: a password is required); add "
        "`ubuntu ALL=(ALL) NOPASSWD: ALL` to /etc/sudoers.d/hgxkit on the node, or connect as root",
        "  error: node2: [gpu-count] 7 NVIDIA GPUs on PCI, the inventory expects 8; reseat or RMA the missing GPU "
        "(check `lspci -d 10de:` and the BMC), or set expected_gpu_count",
        "  error: node2: [disk] 1.0 GB free at /data/models, need 426 GB; free space, mount a larger disk there, "
        "or lower min_free_disk_gb",
        "  error: node2: [fabric] fabric_address 10.0.0.5 resolves to 10.0.0.5; the node's addresses are "
        "192.168.1.2; set fabric_address to an address of the node's fabric interface (`ip -o addr` on the node)",
        "  error: node2: [lock] another hgxkit run holds /var/lib/hgxkit/run.lock (4242 Tue Dec  1 21:00:00 2026 "
        "pyinfra -y inventories/h200.py deploys/bringup.py); wait for that run to finish, or stop it, then run again",
        "  error: node2: [reach] no answer from https://registry-1.docker.io/v2/ (image registry): curl: (6) Could "
        "not resolve host; open the route or proxy from the node, or point the inventory at a mirror it reaches",
    ]
    assert "bring-up will" not in render_text(d)


def test_hicache_need_beyond_ram_and_an_unsynchronized_clock_only_warn() -> None:
    facts = dataclasses.replace(FACTS, ntp_synchronized=False)
    d = diagnose("node1", facts, dataclasses.replace(POLICY, hicache_gb=2563.0), NOW)
    assert [(p.code, p.level) for p in d.problems] == [("ram-hicache", "warning"), ("time-sync", "warning")]
    assert d.problems[0].found == (
        "the recipe's HiCache host pools need 2563 GiB, 1984 GiB of RAM is left after the 64 GiB reserve, so the "
        "serve role will refuse this recipe here (bring-up itself is not affected)"
    )
    assert d.ok  # warnings do not stop bring-up


def test_clock_far_off_is_an_error() -> None:
    assert clock_problem(NOW - 600, NOW, True).found == "the node's clock is -600 s off the controller's"
    assert clock_problem(NOW - 60, NOW, None) is None


def test_what_bring_up_will_replace() -> None:
    policy = dataclasses.replace(POLICY, driver_version="580.105.08", allow_reboot=True)
    assert plan_driver("570.86.15", {}, policy) == "replace NVIDIA driver 570.86.15 with 580.105.08, then reboot"
    assert plan_driver(None, {"nvidia-driver-580-open": "580.105.08-1"}, policy) == "keep NVIDIA driver 580.105.08"
    assert plan_docker(DockerNow("26.1.3", {"docker-ce": "5:26.1.3-1"}), "docker-ce") == "keep docker-ce 26.1.3"
    assert plan_docker(DockerNow(snap=True), "docker-ce") == "remove the snap Docker, install docker-ce"


def test_json_follows_its_schema() -> None:
    document = to_json([diagnose("node1", FACTS, POLICY, NOW), unreachable("node9", "timed out")])
    jsonschema.validate(document, SCHEMA)
    assert (document["schema_version"], document["ok"]) == (1, False)
    assert document["hosts"][1]["problems"][0]["code"] == "ssh"


def test_fact_parsers() -> None:
    assert UrlStatus().process(["http=401"]) == (401, "")
    assert UrlStatus().process(["curl: (7) Failed to connect to 10.0.0.1 port 443", "http=000"]) == (
        None,
        "curl: (7) Failed to connect to 10.0.0.1 port 443",
    )
    assert SudoState().process(["denied: sudo: a password is required"]) == "denied: sudo: a password is required"
    assert ClockState().process(["1800000000.5", "yes"]) == (1800000000.5, True)
    assert ClockState().process(["1800000000.5"]) == (1800000000.5, None)
    assert RunLockHolder().process([]) is None
    assert RunLockHolder().process(["busy", "  77 Tue Dec 1 pyinfra"]) == "77 Tue Dec 1 pyinfra"
    assert FabricAddresses().process(["resolved 10.0.0.5", "own 127.0.0.1", "own 10.0.0.5"]) == (
        ["10.0.0.5"],
        ["127.0.0.1", "10.0.0.5"],
    )
    assert DockerMirrors().process(['{"registry-mirrors": ["http://127.0.0.1:5000"]}']) == ["http://127.0.0.1:5000"]
    assert DockerMirrors().process(["not json"]) == []


def test_registry_is_the_mirror_for_hub_images_and_the_named_registry_otherwise() -> None:
    from types import SimpleNamespace

    from hgxkit.cli.doctor import _registry_urls

    def recipe(ref: str) -> SimpleNamespace:
        return SimpleNamespace(image=SimpleNamespace(reference=ref))

    assert _registry_urls(recipe("lmsysorg/sglang:dev"), ["http://127.0.0.1:15000"]) == ["http://127.0.0.1:15000/v2/"]
    assert _registry_urls(recipe("lmsysorg/sglang:dev"), []) == ["https://registry-1.docker.io/v2/"]
    assert _registry_urls(recipe("nvcr.io/nvidia/x:1"), ["http://m"]) == ["https://nvcr.io/v2/"]
    assert _registry_urls(None, []) == []


def test_bad_input_is_one_line_and_exit_2(capsys) -> None:
    from hgxkit.cli.doctor import main

    assert main(["no/such/inventory.py"], {}) == 2
    assert capsys.readouterr().err == "hgxkit: error: no/such/inventory.py: no such inventory file\n"
    assert main(["inventories/h200.py", "--data", "nokey"], {}) == 2
    assert capsys.readouterr().err == "hgxkit: error: --data 'nokey': use KEY=VALUE\n"


def test_hgxkit_doctor_runs_the_checkouts_program(tmp_path) -> None:
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[3]
    result = subprocess.run(
        [sys.executable, "-m", "hgxkit", "doctor", str(tmp_path / "none.py")],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (result.returncode, result.stderr) == (2, f"hgxkit: error: {tmp_path}/none.py: no such inventory file\n")
    outside = subprocess.run(
        [sys.executable, "-m", "hgxkit", "doctor", "x.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"PYTHONPATH": str(root)},
    )
    assert outside.returncode == 2  # the package's own checkout is found from elsewhere too
    assert outside.stderr == "hgxkit: error: x.py: no such inventory file\n"
