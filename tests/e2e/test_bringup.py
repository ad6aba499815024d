"""End-to-end: `pyinfra -y inventories/sim.py deploys/bringup.py` on simulated HGX-H200 nodes.

`hgxkit doctor` first (the node is ready, and it says what bring-up will do) -> fresh node -> reboot-required stop (allow_reboot false) -> converged (reboot included) -> a second run
skips bring-up (nothing it judges changed) and a recheck=true run changes nothing -> a mismatched fabric manager is repaired (or refused, per the knob); a node reporting
7 of 8 GPUs fails preflight before any change.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from sim_steps import cluster_name, node_sh

ROOT = Path(__file__).resolve().parents[2]
PYINFRA = str(Path(sys.executable).parent / "pyinfra")

pytestmark = pytest.mark.e2e


BRINGUP7_CLUSTER = cluster_name("bringup7")
BRINGUP_CLUSTER = cluster_name("bringup")
DRY_CLUSTER = cluster_name("bringupdry")


def bringup(cluster: str, *data: str, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    """Run the bring-up deploy with the pyinfra CLI, as a user would."""
    argv = [PYINFRA, "-y", "inventories/sim.py", "deploys/bringup.py"]
    for item in data:
        argv += ["--data", item]
    env = {**os.environ, "HGXKIT_SIM_CLUSTER": cluster, "PYINFRA_PROGRESS": "off"}
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def totals(result: subprocess.CompletedProcess[str]) -> tuple[int, int, int, int]:
    """pyinfra's `Grand total` row: operations, success (changed), error, no change ('-' is 0)."""
    match = re.search(r"Grand total\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)", result.stdout + result.stderr)
    assert match, f"no Grand total in pyinfra output:\n{result.stdout[-3000:]}{result.stderr[-3000:]}"
    ops, success, error, unchanged = (0 if v == "-" else int(v) for v in match.groups())
    return ops, success, error, unchanged


def output(result: subprocess.CompletedProcess[str]) -> str:
    return result.stdout + result.stderr


# What bring-up --dry must leave as it is on a fresh node: packages and holds, apt sources and keys, systemd
# units (files and enablement), hgxkit's and Docker's configuration and state, models_dir, loaded modules.
FRESH_STATE = (
    "dpkg-query -W -f='${Package} ${Version} ${Status}\\n' | sort; apt-mark showhold; "
    "systemctl list-unit-files --no-legend --no-pager | sort; lsmod | sort; "
    "for d in /etc/systemd /etc/hgxkit /etc/apt /etc/docker /etc/modprobe.d /var/lib/hgxkit /data/models; do "
    "[ -e $d ] && find $d -printf '%p %y %s %m %T@ %l\\n' || echo \"$d absent\"; done | sort; "
    "find /etc/systemd /etc/hgxkit /etc/apt /etc/docker /etc/modprobe.d /var/lib/hgxkit /data/models -type f "
    "-exec sha256sum {} + 2>/dev/null | sort"
)


def test_fresh_node_to_gpu_host_and_idempotent(sim_nodes) -> None:
    sim_nodes(1, cluster=BRINGUP_CLUSTER)

    env = {**os.environ, "HGXKIT_SIM_CLUSTER": BRINGUP_CLUSTER}
    doctor = subprocess.run(
        [sys.executable, "-m", "hgxkit", "doctor", "inventories/sim.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr  # the doctor first: read-only, says what follows
    assert "node1: ready for bring-up" in doctor.stdout
    assert "    - install NVIDIA driver 580.105.08 with fabric manager, then reboot\n" in doctor.stdout

    stopped = bringup(BRINGUP_CLUSTER, "allow_reboot=False")
    assert stopped.returncode != 0
    assert "reboot required on node1: the driver packages change (to 580.105.08)" in output(stopped)
    state = node_sh(
        BRINGUP_CLUSTER,
        "test -e /var/run/reboot-required && echo marked; apt-mark showhold; nvidia-smi -L",
        answer=True,
    )
    assert "marked" in state
    assert {"nvidia-open", "nvidia-fabricmanager", "libnvidia-nscq"} <= set(state.split())
    assert "couldn't communicate with the NVIDIA driver" in state  # installed, not loaded: no half state

    converged = bringup(BRINGUP_CLUSTER)
    assert converged.returncode == 0, output(converged)[-4000:]
    assert "Reboot: driver 580.105.08 is installed but no nvidia module is loaded" in output(converged)
    gpus = node_sh(BRINGUP_CLUSTER, "nvidia-smi -L", answer=True)
    assert len(re.findall(r"^GPU \d+: NVIDIA H200", gpus, re.M)) == 8
    fabric = node_sh(
        BRINGUP_CLUSTER, "nvidia-smi --query-gpu=fabric.state,fabric.status --format=csv,noheader", answer=True
    )
    assert set(fabric.strip().splitlines()) == {"Completed, Success"}

    # Unchanged since it passed: the re-run says so and plans no bring-up operation at all.
    again = bringup(BRINGUP_CLUSTER)
    assert again.returncode == 0, output(again)[-4000:]
    assert "node1] bring-up unchanged since the checks passed at" in output(again)
    assert "recheck=true re-checks" in output(again)
    if "Grand total" in output(again):  # pyinfra prints no results table for a run without operations
        ops, changed, errors, unchanged = totals(again)
        assert (changed, errors) == (0, 0) and unchanged == ops < 5
    # A unit disabled behind hgxkit's back (its .wants symlink gone; no package or state file changed, the unit
    # still runs): the digest sees it, bring-up runs again and enables it; the run after that skips again.
    node_sh(BRINGUP_CLUSTER, "systemctl disable nvidia-dcgm.service >/dev/null 2>&1")
    assert (
        node_sh(BRINGUP_CLUSTER, "systemctl is-enabled nvidia-dcgm.service || true", answer=True).strip() == "disabled"
    )
    reenabled = bringup(BRINGUP_CLUSTER)
    assert reenabled.returncode == 0, output(reenabled)[-4000:]
    assert "bring-up unchanged" not in output(reenabled)
    assert node_sh(BRINGUP_CLUSTER, "systemctl is-enabled nvidia-dcgm.service", answer=True).strip() == "enabled"
    assert "node1] bring-up unchanged since the checks passed at" in output(bringup(BRINGUP_CLUSTER))
    # recheck=true runs every role and gate again: all of them find nothing to change.
    rechecked = bringup(BRINGUP_CLUSTER, "recheck=true")
    assert rechecked.returncode == 0, output(rechecked)[-4000:]
    assert "bring-up unchanged" not in output(rechecked)
    ops, changed, errors, unchanged = totals(rechecked)
    assert (changed, errors) == (0, 0) and unchanged == ops > 10

    # A fabric manager at another version than the driver (the classic split-source mistake).
    node_sh(
        BRINGUP_CLUSTER,
        "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --allow-downgrades --allow-change-held-packages "
        "nvidia-fabricmanager=580.95.05-1 libnvidia-nscq=580.95.05-1 >/dev/null 2>&1; "
        "systemctl restart nvidia-fabricmanager || true",
    )
    refused = bringup(BRINGUP_CLUSTER, "nvidia_fabricmanager_mismatch=refuse")
    assert refused.returncode != 0
    assert "fabric manager 580.95.05 does not match driver 580.105.08" in output(refused)
    assert "580.95.05" in node_sh(BRINGUP_CLUSTER, "dpkg-query -W -f='${Version}' nvidia-fabricmanager", answer=True)

    repaired = bringup(BRINGUP_CLUSTER)
    assert repaired.returncode == 0, output(repaired)[-4000:]
    assert "Reboot:" not in output(repaired)  # only the fabric manager changed: restarted, no reboot
    after = node_sh(
        BRINGUP_CLUSTER,
        "dpkg-query -W -f='${Version}\\n' nvidia-fabricmanager; systemctl is-active nvidia-fabricmanager",
        answer=True,
    )
    assert after.split() == ["580.105.08-1", "active"]


def test_seven_of_eight_gpus_fails_preflight_before_any_change(sim_nodes) -> None:
    sim_nodes(1, gpus=7, cluster=BRINGUP7_CLUSTER)
    result = bringup(BRINGUP7_CLUSTER, "expected_gpu_count=8")
    assert result.returncode != 0
    assert "preflight failed on node1; nothing was changed" in output(result)
    assert "[gpu-count] 7 NVIDIA GPUs on PCI, the inventory expects 8" in output(result)
    untouched = node_sh(BRINGUP7_CLUSTER, "ls /etc/apt/sources.list.d/ /etc/apt/keyrings/ 2>/dev/null", answer=True)
    assert "hgxkit" not in untouched


def test_dry_bringup_on_a_fresh_node_changes_nothing(sim_nodes) -> None:
    """The README's `deploys/bringup.py --dry` on a node never brought up: it shows the plan (the driver install
    among it) and leaves packages, apt sources, systemd units, /etc/hgxkit, Docker and models_dir as they were."""
    sim_nodes(1, cluster=DRY_CLUSTER)
    before = node_sh(DRY_CLUSTER, FRESH_STATE, answer=True)
    assert "/etc/systemd/system" in before and "/data/models" in before and "/etc/hgxkit" in before
    env = {**os.environ, "HGXKIT_SIM_CLUSTER": DRY_CLUSTER, "PYINFRA_PROGRESS": "off"}
    dry = subprocess.run(
        [PYINFRA, "--dry", "inventories/sim.py", "deploys/bringup.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert dry.returncode == 0, output(dry)[-4000:]
    assert re.search(r"nvidia-open|580\.105\.08", output(dry)), output(dry)[-4000:]  # it plans the driver install
    assert node_sh(DRY_CLUSTER, FRESH_STATE, answer=True) == before
