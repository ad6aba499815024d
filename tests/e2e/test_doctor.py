"""End-to-end: `hgxkit doctor` on simulated nodes, one healthy and three that bring-up would refuse.

Four hosts in one inventory: `healthy`; `small-disk` (its /data/models tmpfs remounted at 1 GB); `no-sudo` (an SSH
user made on the node without sudo); `seven-gpus` (a node started with 7 GPUs, the inventory expects 8). The
doctor names each broken host with the remedy, exits 1, and changes nothing on any node (packages, /etc,
systemd unit files, containers and /var/lib/hgxkit compared before and after).
"""

from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest
from sim_steps import cluster_name, node_sh

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = cluster_name("doctor")
CLUSTER7 = cluster_name("doctor7")
SNAPSHOT = (
    "dpkg -l | sha256sum; "
    "find /etc /var/lib/hgxkit -xdev \\( -type f -o -type l \\) -printf '%p %s %T@\\n' 2>/dev/null | sort | sha256sum; "
    "systemctl list-unit-files --no-legend --no-pager | sort | sha256sum; "
    "docker ps -a --format '{{.Names}} {{.Image}} {{.State}}' | sort | sha256sum"
)


def _group_data(cluster: str) -> dict:
    """inventories/sim.py's group data, as the sim inventory gives it for `cluster`."""
    old = os.environ.get("HGXKIT_SIM_CLUSTER")
    os.environ["HGXKIT_SIM_CLUSTER"] = cluster
    try:
        return runpy.run_path(str(ROOT / "inventories" / "sim.py"))["gpu_nodes"][1]
    finally:
        if old is None:
            os.environ.pop("HGXKIT_SIM_CLUSTER")
        else:
            os.environ["HGXKIT_SIM_CLUSTER"] = old


def _host(name: str, node, **data: object) -> tuple[str, dict]:
    ssh = {
        "ssh_hostname": node.host,
        "ssh_port": node.port,
        "ssh_user": node.user,
        "ssh_key": node.key,
        "ssh_strict_host_key_checking": "off",
        "ssh_known_hosts_file": "/dev/null",
    }
    return name, {**ssh, "expected_gpu_count": 8, **data}


def _doctor(inventory: Path, *flags: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "hgxkit", "doctor", str(inventory), *flags]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)


def test_doctor_names_each_broken_host_with_its_remedy_and_changes_nothing(sim_nodes, tmp_path) -> None:
    nodes = sim_nodes(3, cluster=CLUSTER, memory_gib=3072)
    seven = sim_nodes(1, gpus=7, cluster=CLUSTER7, memory_gib=3072)[0]
    node_sh(CLUSTER, "mount -o remount,size=1g /data/models", node="node2")
    node_sh(
        CLUSTER,
        "useradd -m -s /bin/bash nosudo && install -d -o nosudo -m 700 ~nosudo/.ssh && "
        "install -o nosudo -m 600 /root/.ssh/authorized_keys ~nosudo/.ssh/",
        node="node3",
    )
    hosts = [
        _host("healthy", nodes[0]),
        _host("small-disk", nodes[1]),
        _host("no-sudo", nodes[2], ssh_user="nosudo", _sudo=True),
        _host("seven-gpus", seven),
    ]
    inventory = tmp_path / "doctor_inventory.py"
    inventory.write_text(f"gpu_nodes = ({hosts!r}, {_group_data(CLUSTER)!r})\n")
    where = [(CLUSTER, "node1"), (CLUSTER, "node2"), (CLUSTER, "node3"), (CLUSTER7, "node1")]
    before = {w: node_sh(w[0], SNAPSHOT, node=w[1]) for w in where}

    started = time.monotonic()
    result = _doctor(inventory)
    took = time.monotonic() - started
    out = result.stdout
    print(out, result.stderr, f"doctor took {took:.1f} s", sep="\n")
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert "healthy: ready for bring-up" in out
    assert "small-disk: CANNOT be brought up" in out
    assert "error: small-disk: [disk] 1.1 GB free at /data/models, need 426 GB; free space, mount a larger disk" in out
    assert (
        "error: no-sudo: [sudo] user nosudo has no passwordless sudo (sudo: a password is required); add "
        "`nosudo ALL=(ALL) NOPASSWD: ALL` to /etc/sudoers.d/hgxkit on the node, or connect as root"
    ) in out
    assert "error: seven-gpus: [gpu-count] 7 NVIDIA GPUs on PCI, the inventory expects 8; reseat or RMA" in out
    assert "doctor: 1 of 4 hosts ready for bring-up; cannot be brought up: small-disk, no-sudo, seven-gpus" in out

    as_json = _doctor(inventory, "--json")
    assert as_json.returncode == 1
    document = json.loads(as_json.stdout)
    schema = json.loads((ROOT / "hgxkit" / "node" / "schemas" / "doctor.schema.json").read_text())
    jsonschema.validate(document, schema)
    verdicts = {
        h["host"]: (h["ok"], sorted({p["code"] for p in h["problems"] if p["level"] == "error"}))
        for h in document["hosts"]
    }
    assert verdicts == {
        "healthy": (True, []),
        "small-disk": (False, ["disk"]),
        "no-sudo": (False, ["sudo"]),
        "seven-gpus": (False, ["gpu-count"]),
    }
    after = {w: node_sh(w[0], SNAPSHOT, node=w[1]) for w in where}
    assert after == before
