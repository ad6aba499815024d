"""End-to-end negative paths on one simulated node with 7 of 8 GPUs: driver/fabric-manager mismatches."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pyinfra.operations import server
from sim_steps import ADD_REPOS, apt_install, cluster_name, driver_pins

from hgxkit.cli import main as hgxkit_main

pytestmark = pytest.mark.e2e

OLD, NEW = "580.95.05", "580.105.08"


E2E_NEG_CLUSTER = cluster_name("e2e-neg")


def _one(run, command):
    (result,) = run.shell(command).values()
    return result


def test_version_mismatches_and_seven_gpus(sim_nodes, pyinfra_on, capsys):
    (node,) = sim_nodes(1, gpus=7, cluster=E2E_NEG_CLUSTER)
    assert hgxkit_main(["sim", "status", "--json", "--cluster", E2E_NEG_CLUSTER]) == 0
    (listed,) = json.loads(capsys.readouterr().out)["nodes"]
    assert listed["name"] == "node1" and listed["host"] == "127.0.0.1" and listed["user"] == "root"
    assert listed["port"] == node.port and listed["gpus"] == 7 and Path(listed["key"]).is_file()
    run = pyinfra_on([node])

    # 7 of 8 GPUs at PCI level (what a preflight check must catch).
    assert _one(run, "lspci -n -d 10de:2335 | wc -l").stdout.strip() == "7"
    assert _one(run, ADD_REPOS).ok

    # Driver installed but not loaded before the reboot; fabric manager of another version.
    install = _one(run, apt_install(*driver_pins(OLD), f"nvidia-fabricmanager={NEW}-1"))
    assert install.ok, install.stderr
    assert f"simulated module {OLD} installed; it is loaded at the next boot" in install.stdout
    smi = _one(run, "nvidia-smi -L")
    assert not smi.ok
    assert smi.stdout.startswith("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")
    assert "SIMULATED nvidia-smi" in smi.stderr

    metas = run.op(server.reboot, name="reboot", delay=10, reboot_timeout=180)
    assert all(m.did_succeed() for m in metas.values())
    assert _one(run, "cat /run/hgxkit-sim/nvidia/module.version").stdout.strip() == OLD
    assert len(_one(run, "nvidia-smi -L").stdout.splitlines()) == 7

    # Fabric manager version != driver version: the service refuses to start, the fabric stays In Progress.
    fm = _one(run, "systemctl start nvidia-fabricmanager")
    assert not fm.ok
    journal = _one(run, "journalctl -u nvidia-fabricmanager --no-pager -o cat").stdout
    assert f"fabric manager NVIDIA GPU driver interface version {NEW} don't match with driver version {OLD}" in journal
    state = _one(run, "nvidia-smi --query-gpu=fabric.state,fabric.status --format=csv,noheader")
    assert set(state.stdout.strip().splitlines()) == {"In Progress, N/A"}

    # Userspace upgraded after the reboot: NVML reports the version mismatch until the next reboot.
    assert _one(run, apt_install(*driver_pins(NEW))).ok
    smi = _one(run, "nvidia-smi -L")
    assert not smi.ok
    assert smi.stdout.splitlines() == [
        "Failed to initialize NVML: Driver/library version mismatch",
        "NVML library version: 580.105",
    ]

    # After the next reboot everything matches: FM (enabled) starts and the fabric completes.
    assert _one(run, "systemctl enable nvidia-fabricmanager").ok
    metas = run.op(server.reboot, name="reboot", delay=10, reboot_timeout=180)
    assert all(m.did_succeed() for m in metas.values())
    assert _one(run, "systemctl is-active nvidia-fabricmanager").stdout.strip() == "active"
    state = _one(run, "nvidia-smi --query-gpu=index,driver_version,fabric.state --format=csv,noheader,nounits")
    assert state.stdout.strip().splitlines()[-1] == f"6, {NEW}, Completed"
    xml = _one(run, "nvidia-smi -q -x").stdout
    assert "<simulated>true</simulated>" in xml and "<attached_gpus>7</attached_gpus>" in xml
    topo = _one(run, "nvidia-smi topo -m").stdout.splitlines()
    assert topo[1].split("\t")[1:8] == ["X"] + ["NV18"] * 6

    # The pyinfra CLI reaches the same node through inventories/sim.py.
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "HGXKIT_SIM_CLUSTER": E2E_NEG_CLUSTER, "PYINFRA_PROGRESS": "off"}
    cli = subprocess.run(
        [
            str(Path(sys.executable).parent / "pyinfra"),
            "-y",
            "inventories/sim.py",
            "exec",
            "--",
            "nvidia-smi -L | wc -l",
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cli.returncode == 0, cli.stderr + cli.stdout
    assert "[node1] 7" in cli.stdout + cli.stderr
