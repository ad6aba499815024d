"""End-to-end: two bare simulated HGX-H200 nodes become GPU Docker hosts through pyinfra over @ssh."""

from __future__ import annotations

import json
import time

import pytest
from pyinfra.facts.server import Uptime
from pyinfra.operations import server
from sim_steps import ADD_REPOS, apt_install, cluster_name

from hgxkit.cli import main as hgxkit_main
from hgxkit.sim import nodes as simnodes

pytestmark = pytest.mark.e2e

DRIVER = "580.105.08-1"
TOOLKIT = "1.18.0-1"


E2E_MAIN_CLUSTER = cluster_name("e2e-main")


def _all(results, expect_ok=True):
    for name, r in results.items():
        assert r.ok is expect_ok, f"{name}: ok={r.ok}\nstdout: {r.stdout}\nstderr: {r.stderr}"
    return {name: r.stdout.strip() for name, r in results.items()}


def test_two_bare_nodes_to_gpu_docker_hosts(sim_nodes, pyinfra_on, capsys):
    nodes = sim_nodes(2, cluster=E2E_MAIN_CLUSTER)
    assert [n.name for n in nodes] == ["node1", "node2"]
    assert len({n.port for n in nodes}) == 2 and all(n.host == "127.0.0.1" for n in nodes)
    run = pyinfra_on(nodes)

    # Bare node: systemd and Docker run, 8 H200 + 4 NVSwitch at PCI level, no NVIDIA software.
    assert _all(run.shell("systemctl is-system-running")) == {"node1": "running", "node2": "running"}
    assert set(_all(run.shell("systemctl is-active docker ssh")).values()) == {"active\nactive"}
    assert set(_all(run.shell("lspci -n -d 10de:2335 | wc -l")).values()) == {"8"}
    assert set(_all(run.shell("lspci -n -d 10de:22a3 | wc -l")).values()) == {"4"}
    names = _all(run.shell("lspci -d 10de:2335"))["node1"].splitlines()
    assert names[0] == "18:00.0 3D controller: NVIDIA Corporation GH100 [H200 SXM 141GB] (rev a1)"
    _all(run.shell("command -v nvidia-smi"), expect_ok=False)
    assert set(
        _all(
            # daemon.json holds only the node's registry mirror (hgxkit/sim/serving_registry.py), no nvidia runtime
            run.shell("dpkg-query -W 'nvidia*' 2>/dev/null | wc -l; grep -c nvidia /etc/docker/daemon.json || true")
        ).values()
    ) == {"0\n0"}

    # Install driver, fabric manager and container toolkit from the simulated repository with plain apt.
    _all(run.shell(ADD_REPOS))
    _all(
        run.shell(
            apt_install(
                f"nvidia-open={DRIVER}",
                f"nvidia-fabricmanager={DRIVER}",
                f"libnvidia-nscq={DRIVER}",
                f"nvidia-container-toolkit={TOOLKIT}",
                f"nvidia-container-toolkit-base={TOOLKIT}",
                f"libnvidia-container-tools={TOOLKIT}",
                f"libnvidia-container1={TOOLKIT}",
                "datacenter-gpu-manager-4-cuda13",
            )
        )
    )
    _all(
        run.shell("systemctl enable nvidia-fabricmanager nvidia-dcgm && nvidia-ctk runtime configure --runtime=docker")
    )
    daemon = json.loads(_all(run.shell("cat /etc/docker/daemon.json"))["node1"])
    assert daemon == {
        "registry-mirrors": ["http://127.0.0.1:15000"],  # the node's own, kept by the merge
        "runtimes": {"nvidia": {"args": [], "path": "nvidia-container-runtime"}},
    }
    # Installed, not loaded yet: nvidia-smi fails like the real one until the reboot.
    before = run.shell("nvidia-smi -L")
    assert all(not r.ok and "couldn't communicate with the NVIDIA driver" in r.stdout for r in before.values())

    _all(run.shell("touch /run/hgxkit-e2e-before-reboot"))
    uptime_before = run.fact(Uptime)
    # pyinfra confirms a reboot by the uptime falling below the one it saw before (+ delay): a node younger than
    # its own boot time (a few seconds here) can never pass that check, on real hardware as on a simulated node.
    youngest = min(uptime_before.values())
    if youngest < 30:
        time.sleep(30 - youngest)
        uptime_before = run.fact(Uptime)
    metas = run.op(server.reboot, name="reboot", delay=10, reboot_timeout=180)
    assert all(m.did_succeed() for m in metas.values())
    uptime_after = run.fact(Uptime)
    assert all(uptime_after[n] < uptime_before[n] + 10 for n in uptime_before), (uptime_before, uptime_after)
    gone = _all(run.shell("test -e /run/hgxkit-e2e-before-reboot; echo $?"))
    assert gone == {"node1": "1", "node2": "1"}, "the nodes did not reboot (/run survived)"

    smi = _all(run.shell("nvidia-smi -L"))
    for name, out in smi.items():
        lines = out.splitlines()
        assert len(lines) == 8, (name, out)
        assert all(line.startswith(f"GPU {i}: NVIDIA H200 (UUID: GPU-") for i, line in enumerate(lines))
    query = _all(
        run.shell("nvidia-smi --query-gpu=index,driver_version,fabric.state,fabric.status --format=csv,noheader")
    )
    assert query["node2"].splitlines()[7] == "7, 580.105.08, Completed, Success"
    assert set(_all(run.shell("systemctl is-active nvidia-fabricmanager")).values()) == {"active"}

    gpus = _all(
        run.shell(
            "hgxkit-sim-seed-image >/dev/null && docker run --rm --gpus '\"device=4,5,6,7\"' "
            "hgxkit-sim/busybox env | grep ^NVIDIA_VISIBLE_DEVICES="
        )
    )
    assert gpus == {"node1": "NVIDIA_VISIBLE_DEVICES=4,5,6,7", "node2": "NVIDIA_VISIBLE_DEVICES=4,5,6,7"}

    # DCGM: a passing quick diagnostic, and a failing one once a fault is injected.
    diag = json.loads(_all(run.shell("dcgmi diag -r 1 -j"))["node1"])
    assert diag["simulated"] is True
    assert diag["DCGM Diagnostic"]["test_categories"][0]["tests"][0]["test_summary"] == {"status": "Pass"}
    failing = run.shell("touch /etc/hgxkit-sim/faults/dcgm-diag-fail && dcgmi diag -r 1 -j")
    assert not failing["node1"].ok
    failed = json.loads(failing["node1"].stdout)
    results = failed["DCGM Diagnostic"]["test_categories"][0]["tests"][0]["results"]
    assert [r["entity_id"] for r in results if r["status"] == "Fail"] == [3]

    # `hgxkit sim down` leaves no container, volume or network of the cluster behind.
    run.close()
    capsys.readouterr()
    assert hgxkit_main(["sim", "down", "--cluster", E2E_MAIN_CLUSTER]) == 0
    assert capsys.readouterr().out.strip() == "removed 2 containers, 2 volumes, 1 networks"
    c = simnodes.client()
    flt = {"label": f"hgxkit.sim.cluster={E2E_MAIN_CLUSTER}"}
    assert c.containers.list(all=True, filters=flt) == []
    assert c.volumes.list(filters=flt) == []
    assert c.networks.list(filters=flt) == []
    assert [x.name for x in c.containers.list(all=True) if x.name.startswith(f"hgxkit-sim-{E2E_MAIN_CLUSTER}-")] == []
