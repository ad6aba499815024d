"""Fault injection for the fault matrix (tests/e2e/test_fault_matrix.py): test-tree code only, none in the product.

- A docker shim on the node (/usr/local/bin/docker, before /usr/bin in every PATH) holds a group replace unit
  at a phase while `/run/hgxkit-fault/at-<phase>` exists: it touches `reached-<phase>` and waits. The phases are
  the unit's own docker calls (hgxkit/serving/replace.py): `set aside` after `docker rename OLD NAME-hgxkit-
  previous`, `start` before `docker run`, `health wait` before its first `docker inspect -f '{{.State.Running}}
  {{.RestartCount}}'`, `put back` before `docker rename NAME-hgxkit-previous NAME`. `gate-group-1` holds group
  1's replace at its first call, so a run that goes on after the fault cannot start it inside the window in
  which group 1 is judged.
- The controller's SSH connection is cut by closing its own TCP sockets on this host (`ss -K`, selected by the
  controller's PID and local ports): the connection drops, the process lives, other SSH sessions stay.
"""

from __future__ import annotations

import re
import subprocess
import time

SHIM = r"""#!/bin/sh
# hgxkit fault shim (tests/faults/fault_inject.py): holds a replace unit's docker call at a phase.
dir=/run/hgxkit-fault
hold() { [ -e "$dir/at-$1" ] || return 0; touch "$dir/reached-$1"; while [ -e "$dir/at-$1" ]; do sleep 0.1; done; }
case "$*" in
  "rename "*"-hgxkit-previous "*) hold replace-put-back ;;
  "run "*) hold replace-start ;;
  "inspect -f {{.State.Running}} {{.RestartCount}} "*) hold replace-health-wait ;;
  "inspect "*"-1-hgxkit-previous") hold gate-group-1 ;;
esac
/usr/bin/docker "$@"; rc=$?
case "$*" in
  "rename "*"-hgxkit-previous") hold replace-set-aside ;;
esac
exit $rc
"""


def install_shim(node_sh, cluster: str, node: str = "node1") -> None:
    """Put the docker shim on the node (idempotent; it passes every call through unless a phase is armed)."""
    node_sh(
        cluster,
        "mkdir -p /run/hgxkit-fault && cat > /usr/local/bin/docker <<'HGXKIT_EOF'\n"
        + SHIM
        + "HGXKIT_EOF\nchmod 755 /usr/local/bin/docker && command -v docker",
        node=node,
        answer=True,
        check=True,
    )


def arm(node_sh, cluster: str, *phases: str, node: str = "node1") -> None:
    """Hold the unit at each of `phases` (and nothing else) from now on."""
    marks = " ".join(f"/run/hgxkit-fault/at-{p}" for p in phases)
    node_sh(cluster, f"mkdir -p /run/hgxkit-fault && rm -f /run/hgxkit-fault/* && touch {marks}", node=node, check=True)


def wait_reached(
    node_sh, cluster: str, phase: str, controller: subprocess.Popen, node: str = "node1", timeout: float = 600
) -> None:
    """Wait until the unit holds at `phase`; fail (with the controller's output) if the run ends first."""
    deadline = time.monotonic() + timeout
    while node_sh(cluster, f"test -e /run/hgxkit-fault/reached-{phase} && echo yes", node=node).strip() != "yes":
        if controller.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"the replace never reached {phase} (controller exit {controller.poll()})")
        time.sleep(0.5)


def release(node_sh, cluster: str, phase: str = "*", node: str = "node1") -> None:
    """Let the unit go on past `phase` (every phase by default)."""
    node_sh(cluster, f"rm -f /run/hgxkit-fault/at-{phase}", node=node, check=True)


def cut_ssh(pid: int) -> list[str]:
    """Close every TCP socket the process `pid` holds (its SSH connections) on this host; the closed ones."""
    listing = subprocess.run(["ss", "-tnpH", "state", "established"], capture_output=True, text=True, check=True).stdout
    ports = sorted(
        {
            m.group(1)
            for line in listing.splitlines()
            if f"pid={pid}," in line
            for m in [re.match(r"\S+\s+\S+\s+\S+:(\d+)\s", line)]
            if m
        }
    )
    assert ports, f"the controller (pid {pid}) holds no TCP connection:\n{listing}"
    for port in ports:
        subprocess.run(
            ["ss", "-K", "-tn", "state", "established", f"( sport = :{port} )"], capture_output=True, check=True
        )
    return ports
