"""Unit tests of the simulated NVIDIA programs and hardware files, run on the host against temp state dirs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from hgxkit.sim import aptrepo
from hgxkit.sim.hwfiles import NodeHardware, lspci_dump, meminfo

FILES = Path(aptrepo.__file__).parent / "data" / "aptrepo" / "files"
NODE = Path(aptrepo.__file__).parent / "data" / "node"


@pytest.fixture
def node(tmp_path: Path):
    """A fake node state: node.json with 8 GPUs, version files, /run; returns a program runner."""
    etc, run, versions = tmp_path / "etc", tmp_path / "run", tmp_path / "versions"
    (etc / "faults").mkdir(parents=True)
    versions.mkdir()
    (etc / "node.json").write_text(NodeHardware("node1").to_json())
    env = {
        **os.environ,
        "PYTHONPATH": str(NODE),
        "HGXKIT_SIM_ETC": str(etc),
        "HGXKIT_SIM_RUN": str(run),
        "HGXKIT_SIM_VERSIONS": str(versions),
        "HGXKIT_SIM_VISIBLE": str(tmp_path / "visible-gpus"),  # written only inside a GPU container (the hook)
    }

    def program(name: str, *args: str, version: str = "580.105.08") -> subprocess.CompletedProcess[str]:
        src = (FILES / name).read_text().replace("@VERSION@", version)
        return subprocess.run([sys.executable, "-c", src, *args], env=env, capture_output=True, text=True)

    def install(pkg: str, version: str) -> None:
        (versions / pkg).write_text(version + "\n")

    def boot() -> None:
        subprocess.run([sys.executable, str(NODE / "hwsim.py"), "boot"], env=env, check=True, capture_output=True)

    program.install, program.boot, program.etc, program.run = install, boot, etc, run  # type: ignore[attr-defined]
    program.visible = tmp_path / "visible-gpus"  # type: ignore[attr-defined]
    return program


def test_nvidia_smi_states(node):
    r = node("nvidia-smi", "-L")
    assert r.returncode == 9 and "couldn't communicate with the NVIDIA driver" in r.stdout
    assert "SIMULATED nvidia-smi" in r.stderr
    node.install("nvidia-kernel-open-dkms", "580.95.05")
    node.install("libnvidia-ml1", "580.95.05")
    assert node("nvidia-smi", "-L").returncode == 9  # installed, not loaded until boot
    node.boot()
    out = node("nvidia-smi", "-L").stdout.splitlines()
    assert len(out) == 8 and out[7].startswith("GPU 7: NVIDIA H200 (UUID: GPU-")
    node.install("libnvidia-ml1", "580.105.08")
    r = node("nvidia-smi", "-L")
    assert r.returncode == 18
    assert r.stdout == "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 580.105\n"


def test_nvidia_smi_in_a_container_sees_its_gpus_numbered_from_0(node):
    """What the real toolkit shows in a `--gpus '"device=4,5,6,7"'` container: four GPUs, 0-3, with the node's
    GPUs 4-7's UUIDs, all on the second socket; the node itself still sees eight."""
    node.install("nvidia-kernel-open-dkms", "580.105.08")
    node.install("libnvidia-ml1", "580.105.08")
    node.boot()
    on_node = node("nvidia-smi", "-L").stdout.splitlines()
    node.visible.write_text("4,5,6,7\n")
    inside = node("nvidia-smi", "-L").stdout.splitlines()
    assert [line.split(" (")[0] for line in inside] == [f"GPU {i}: NVIDIA H200" for i in range(4)]
    assert [line.split("UUID: ")[1] for line in inside] == [line.split("UUID: ")[1] for line in on_node[4:]]
    topo = node("nvidia-smi", "topo", "-m").stdout.splitlines()
    assert topo[0].split("\t")[1:5] == ["GPU0", "GPU1", "GPU2", "GPU3"]
    assert [row.split("\t")[-3] for row in topo[1:5]] == ["1"] * 4  # NUMA affinity: the node's second socket
    minor = node("nvidia-smi", "-q", "-i", "0").stdout
    assert "Minor Number                          : 4" in minor  # /dev/nvidia4: the node's number
    node.visible.write_text("none\n")
    assert node("nvidia-smi", "-L").stdout == ""


def test_nvidia_smi_query_formats(node):
    node.install("nvidia-kernel-open-dkms", "580.105.08")
    node.install("libnvidia-ml1", "580.105.08")
    node.boot()
    q = "--query-gpu=index,name,memory.total,power.limit,fabric.state"
    assert node("nvidia-smi", q, "--format=csv").stdout.splitlines()[:2] == [
        "index, name, memory.total [MiB], power.limit [W], fabric.state",
        "0, NVIDIA H200, 143771 MiB, 700.00 W, In Progress",
    ]
    assert node("nvidia-smi", q, "--format=csv,noheader,nounits").stdout.splitlines()[0] == (
        "0, NVIDIA H200, 143771, 700.00, In Progress"
    )
    bad = node("nvidia-smi", "--query-gpu=index,bogus", "--format=csv")
    assert bad.returncode == 2 and 'Field "bogus" is not a valid field to query.' in bad.stdout
    node("nv-fabricmanager", "-c", "x", version="580.105.08")
    assert node("nvidia-smi", "--query-gpu=fabric.status", "--format=csv,noheader").stdout.split() == ["Success"] * 8
    root = ET.fromstring(node("nvidia-smi", "-q", "-x").stdout.split("\n", 2)[2])
    assert root.tag == "nvidia_smi_log" and root.findtext("simulated") == "true"
    assert root.findtext("driver_version") == "580.105.08"
    assert [g.findtext("fabric/state") for g in root.findall("gpu")] == ["Completed"] * 8
    assert root.find("gpu").get("id") == "00000000:18:00.0"


def test_fabric_manager_refuses_mismatch(node):
    node.install("nvidia-kernel-open-dkms", "580.105.08")
    node.boot()
    r = node("nv-fabricmanager", "-c", "x", version="580.95.05")
    assert r.returncode == 1
    assert (
        "fabric manager NVIDIA GPU driver interface version 580.95.05 don't match with driver version 580.105.08"
        in r.stderr
    )
    assert not (node.run / "nvidia" / "fabric.state").exists()


def test_nvlink_and_faults(node):
    node.install("nvidia-kernel-open-dkms", "580.105.08")
    node.install("libnvidia-ml1", "580.105.08")
    node.boot()
    node("nv-fabricmanager", version="580.105.08")
    links = node("nvidia-smi", "nvlink", "-s").stdout.splitlines()
    assert links.count("\t Link 10: 26.562 GB/s") == 8
    (node.etc / "faults" / "nvlink-degraded").touch()
    links = node("nvidia-smi", "nvlink", "-s").stdout.splitlines()
    assert links.count("\t Link 10: 1.562 GB/s") == 1
    errors = node("nvidia-smi", "nvlink", "-e").stdout.splitlines()
    assert "\t Link 10: CRC Errors: 17" in errors


def test_nvidia_ctk_configures_docker_like_the_real_one(node, tmp_path):
    cfg = tmp_path / "daemon.json"
    cfg.write_text('{"log-driver": "json-file"}')
    r = node(
        "nvidia-ctk",
        "runtime",
        "configure",
        "--runtime=docker",
        f"--config={cfg}",
        "--set-as-default",
        version="1.18.0",
    )
    assert r.returncode == 0 and f"Wrote updated config to {cfg}" in r.stderr
    assert json.loads(cfg.read_text()) == {
        "default-runtime": "nvidia",
        "log-driver": "json-file",
        "runtimes": {"nvidia": {"args": [], "path": "nvidia-container-runtime"}},
    }
    assert cfg.read_text().startswith('{\n    "default-runtime"')


def test_lspci_dump_and_meminfo():
    dump = lspci_dump(7, 4)
    blocks = [b for b in dump.split("\n\n") if b]
    assert len(blocks) == 11
    gpu = next(b for b in blocks if b.startswith("18:00.0"))
    assert gpu.splitlines()[1] == "00: de 10 35 23 06 00 00 00 a1 00 02 03 00 00 00 00"
    assert meminfo(2048).splitlines()[0] == "MemTotal:       2147483648 kB"


def test_manifest_has_real_names_and_two_driver_versions():
    m = aptrepo.load_manifest()
    names = {p.name for p in m.packages}
    assert {
        "nvidia-open",
        "nvidia-fabricmanager",
        "nvidia-fabricmanager-570",
        "libnvidia-nscq",
        "nvidia-persistenced",
        "nvidia-container-toolkit",
        "nvidia-container-toolkit-base",
        "libnvidia-container1",
        "libnvidia-container-tools",
        "datacenter-gpu-manager-4-cuda13",
    } <= names
    driver = next(p for p in m.packages if p.name == "nvidia-open")
    assert driver.versions == ("580.95.05-1", "580.105.08-1")
    assert m.repos["cuda"].path == "cuda/debian12/x86_64"
    assert aptrepo.upstream("1:4.4.1-1") == "4.4.1"


def test_nvidia_smi_telemetry_follows_the_stand_ins_load_and_loops(node):
    """The simulated telemetry (power, SM clock, utilisation, memory, throttle reasons) follows the load a
    stand-in server reports per GPU, and `-lms` samples until stopped, in the format hgxkit's parser reads."""
    import time

    from hgxkit.nvidia.smi import GPU_QUERY, parse_gpu_csv

    node.install("nvidia-kernel-open-dkms", "580.105.08")
    node.install("libnvidia-ml1", "580.105.08")
    node.boot()
    load = node.run / "gpu-load"
    load.mkdir(parents=True)
    (load / "gpu0").write_text(f"4 0 {time.time():.3f}\n")  # GPU 0 busy with 4 requests; GPU 1 idle
    query = (f"--query-gpu={GPU_QUERY}", "--format=csv,noheader,nounits", "-i", "0,1")
    busy, idle = parse_gpu_csv(node("nvidia-smi", *query).stdout, source="nvidia-smi")
    assert busy.power_w > idle.power_w + 200 and busy.sm_clock_mhz == 1980 and idle.sm_clock_mhz == 345
    assert busy.utilization_pct > 50 and idle.utilization_pct == 0 and busy.memory_used_mib > 100_000
    assert (busy.throttle_mask, idle.throttle_mask) == (0, 1)  # idle GPUs report GpuIdle, as real ones do
    (node.etc / "faults" / "gpu-throttle").touch()
    (throttled, _) = parse_gpu_csv(node("nvidia-smi", *query).stdout, source="nvidia-smi")
    assert throttled.throttle_mask == 0x4 and throttled.sm_clock_mhz < 1980
    src = (FILES / "nvidia-smi").read_text().replace("@VERSION@", "580.105.08")
    env = {
        **os.environ,
        "PYTHONPATH": str(NODE),
        "HGXKIT_SIM_ETC": str(node.etc),
        "HGXKIT_SIM_RUN": str(node.run),
        "HGXKIT_SIM_VERSIONS": str(node.etc.parent / "versions"),
    }
    looping = subprocess.Popen(
        [sys.executable, "-c", src, *query, "-lms", "200"], env=env, stdout=subprocess.PIPE, text=True
    )
    lines = read_lines(looping, 6)  # three rounds of both GPUs: it loops, however slow the machine is
    looping.terminate()
    samples = parse_gpu_csv("".join(lines) + looping.communicate(timeout=30)[0], source="loop")
    assert len(samples) >= 6 and {s.index for s in samples} == {0, 1}


def read_lines(proc: subprocess.Popen[str], count: int, deadline_s: float = 120) -> list[str]:
    """The first `count` lines `proc` prints; a process that stops printing first is killed at `deadline_s`, so
    the test fails with the lines it got instead of hanging."""
    import threading

    assert proc.stdout is not None
    watchdog = threading.Timer(deadline_s, proc.kill)
    watchdog.start()
    lines: list[str] = []
    try:
        while len(lines) < count and (line := proc.stdout.readline()):
            lines.append(line)
    finally:
        watchdog.cancel()
    assert len(lines) == count, f"{len(lines)} lines in {deadline_s} s: {lines}"
    return lines


def test_hwsim_uuids_are_rfc_4122_version_5_as_uuid_makes_them(monkeypatch):
    """hwsim computes the GPUs' UUIDs without importing uuid (the stand-in's start-up cost); they must stay the
    UUIDs `uuid.uuid5(NAMESPACE_URL, ...)` gives, or every simulated node's GPU identities would change."""
    import uuid

    monkeypatch.syspath_prepend(str(NODE))
    import hwsim  # type: ignore[import-not-found]

    for name in ("hgxkit-sim/node1/gpu/0", "hgxkit-sim/n-2/gpu/7", "", "x" * 300, "ünïcode"):
        assert hwsim.uuid5(name) == str(uuid.uuid5(uuid.NAMESPACE_URL, name))
    g = hwsim.Gpu(3, "NVIDIA H200", "GPU-x", "1", "00000000:5D:00.0", 4)
    moved = g.replace(index=0, node_index=3)
    assert (moved.index, moved.on_node, g.index, g.on_node) == (0, 3, 3, 3)
    assert moved != g and moved == hwsim.Gpu(0, "NVIDIA H200", "GPU-x", "1", "00000000:5D:00.0", 4, 3)


def test_nvidia_smi_query_loads_no_module_python_does_not_load_at_start(node):
    """The facts' `--query-gpu` runs on every deploy; a real nvidia-smi is a native binary, so the stand-in must
    not charge the node for imports (uuid, dataclasses, pathlib, json, hashlib, datetime, random, ElementTree
    cost it ~40 ms). A booted node's GPUs come from the table its boot wrote."""
    node.install("nvidia-kernel-open-dkms", "580.105.08")
    node.install("libnvidia-ml1", "580.105.08")
    node.boot()
    src = (FILES / "nvidia-smi").read_text().replace("@VERSION@", "580.105.08")
    probe = src.replace("sys.exit(smi.main(sys.argv[1:]))", "smi.main(sys.argv[1:]); print(sorted(sys.modules))")
    assert probe != src
    env = {k: v for k, v in os.environ.items() if not k.startswith("HGXKIT_SIM_")}
    env.update(
        PYTHONPATH=str(NODE),
        HGXKIT_SIM_ETC=str(node.etc),
        HGXKIT_SIM_RUN=str(node.run),
        HGXKIT_SIM_VERSIONS=str(node.etc.parent / "versions"),
        HGXKIT_SIM_VISIBLE=str(node.visible),
    )
    done = subprocess.run(
        [
            sys.executable,
            "-S",
            "-c",
            probe,
            "--query-gpu=index,uuid,fabric.state,memory.total",
            "--format=csv,noheader,nounits",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    rows, modules = done.stdout.splitlines()[:8], done.stdout.splitlines()[-1]
    assert [r.split(", ")[0] for r in rows] == [str(i) for i in range(8)] and rows[0].endswith(", 143771")
    assert rows[3].split(", ")[1] == node("nvidia-smi", "-L").stdout.splitlines()[3].split("UUID: ")[1][:-1]
    for heavy in (
        "uuid",
        "dataclasses",
        "pathlib",
        "json",
        "hashlib",
        "re",
        "datetime",
        "random",
        "xml.etree.ElementTree",
        "inspect",
    ):
        assert f"'{heavy}'" not in modules, heavy


def test_boot_enumerates_the_gpus_node_json_gives_and_programs_read_that_table(node):
    """The table a boot writes is what node.json gives (same UUIDs, serials, buses); a later change to node.json
    shows at the next boot, as new hardware does."""
    node.boot()
    table = (node.run / "gpus").read_text().splitlines()
    assert len(table) == 8 and table[0].split(" ")[0] == "0" and table[7].split(" ")[3] == "00000000:DB:00.0"
    node.install("nvidia-kernel-open-dkms", "580.105.08")
    node.install("libnvidia-ml1", "580.105.08")
    node.boot()
    listed = node("nvidia-smi", "-L").stdout.splitlines()
    assert [line.split("UUID: ")[1][:-1] for line in listed] == [row.split(" ")[1] for row in table]
    (node.etc / "node.json").write_text(NodeHardware("node1", gpus=4).to_json())
    assert len(node("nvidia-smi", "-L").stdout.splitlines()) == 8  # until the next boot
    node.boot()
    assert len(node("nvidia-smi", "-L").stdout.splitlines()) == 4
    (node.run / "gpus").unlink()  # before any boot (or where /run is not mounted): node.json itself
    assert node("nvidia-smi", "-L").stdout.splitlines() == listed[:4]


def test_every_packaged_program_is_executable():
    """The simulated packages install these files with the checkout's modes: a program without its x bits is
    "command not found" on the node (nvidia-smi's gate fails as `not-installed`)."""
    programs = [p for p in FILES.iterdir() if p.read_bytes().startswith(b"#!")]
    assert "nvidia-smi" in {p.name for p in programs}
    assert [p.name for p in programs if p.stat().st_mode & 0o111 != 0o111] == []
