"""The node commands of a multi-node group's preflight and rollout, each an argv or a fixed script with quoted
slots (hgxkit/hostcmd.py): a short-lived listener on the head, a reachability probe from a member, and the
steps that replace one rank's container as part of the whole group (set aside, start, finish, put back).

Every container is touched only when it carries hgxkit's `hgxkit.serve` label, never by name alone.

Example:
    >>> str(reach_command("10.0.0.1", 20000, 5))
    'timeout 5 bash -c \\'exec 3<>"/dev/tcp/$0/$1"\\' 10.0.0.1 20000'
    >>> "docker rename" in str(set_aside_command("m"))
    True
"""

from __future__ import annotations

from pyinfra.api import StringCommand

from hgxkit.hostcmd import argv, script
from hgxkit.serving.containers import MANAGED_LABEL
from hgxkit.serving.replace import PREVIOUS_SUFFIX

_OURS_FORMAT = '{{index .Config.Labels "' + MANAGED_LABEL + '"}}'

# A TCP listener that binds, says so, and goes on in the background, accepting and closing connections (so
# members can connect while nothing else listens on the port yet), until argv[3] connections came or argv[2]
# seconds passed: it is gone before the rollout needs the port.
LISTENER = """\
import os, socket, sys, time
port, seconds, expected = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
if socket.has_dualstack_ipv6():
    s = socket.create_server(("", port), family=socket.AF_INET6, dualstack_ipv6=True)
else:
    s = socket.create_server(("", port))
if os.fork():
    print("listening")
    sys.exit(0)
os.setsid()
null = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(null, fd)
s.settimeout(1)
end = time.monotonic() + seconds
while expected > 0 and time.monotonic() < end:
    try:
        conn, _ = s.accept()
        conn.close()
        expected -= 1
    except OSError:
        pass
s.close()
"""


def listener_command(port: int, seconds: float, connections: int) -> StringCommand:
    """Listen on TCP `port` in the background until `connections` came or `seconds` passed; prints
    `listening` once bound (fails when the port cannot be bound)."""
    return argv("python3", "-c", LISTENER, str(port), str(int(seconds)), str(connections))


def reach_command(address: str, port: int, timeout_s: int) -> StringCommand:
    """Open a TCP connection to `address:port` (bash's /dev/tcp) within `timeout_s`; exit 0 when it opened."""
    return argv("timeout", str(timeout_s), "bash", "-c", 'exec 3<>"/dev/tcp/$0/$1"', address.strip("[]"), str(port))


def set_aside_command(name: str) -> StringCommand:
    """Rename the rank's running container (ours) to `<name>-hgxkit-previous` and stop it, so the group can be
    put back; prints `none` when there is no container, `aside` when it was set aside (fails otherwise)."""
    return script(
        "if ! docker inspect {name} >/dev/null 2>&1; then echo none; exit 0; fi; "
        '[ "$(docker inspect -f {fmt} {name})" = 1 ] || {{ echo "not a container hgxkit made"; exit 1; }}; '
        "if docker inspect {prev} >/dev/null 2>&1; then "
        '[ "$(docker inspect -f {fmt} {prev})" = 1 ] && docker rm -f {prev} >/dev/null; fi; '
        "docker rename {name} {prev} && docker stop -t 30 {prev} >/dev/null && echo aside",
        name=name,
        prev=name + PREVIOUS_SUFFIX,
        fmt=_OURS_FORMAT,
    )


def start_command(workdir: str) -> StringCommand:
    """Run the rank's `docker run` (root-only `docker-run.sh` in `workdir`, deleted once run); its output goes
    to `start.log` there."""
    return script(
        "cd {dir} && sh ./docker-run.sh > start.log 2>&1; s=$?; rm -f docker-run.sh secrets.env; exit $s", dir=workdir
    )


def finish_command(name: str) -> StringCommand:
    """Remove the rank's set-aside copy (ours) once the new group serves."""
    return script(
        'if docker inspect {prev} >/dev/null 2>&1 && [ "$(docker inspect -f {fmt} {prev})" = 1 ]; then '
        "docker rm -f {prev} >/dev/null; fi; true",
        prev=name + PREVIOUS_SUFFIX,
        fmt=_OURS_FORMAT,
    )


def restore_command(name: str) -> StringCommand:
    """Put the rank back as it was: remove the new container (ours), and rename the set-aside copy back and
    start it when there is one. Prints what it did."""
    return script(
        "if docker inspect {name} >/dev/null 2>&1; then "
        '[ "$(docker inspect -f {fmt} {name})" = 1 ] || {{ echo "not a container hgxkit made"; exit 1; }}; '
        "docker rm -f {name} >/dev/null; fi; "
        'if docker inspect {prev} >/dev/null 2>&1 && [ "$(docker inspect -f {fmt} {prev})" = 1 ]; then '
        "docker rename {prev} {name} && docker start {name} >/dev/null && echo restored; else echo removed; fi",
        name=name,
        prev=name + PREVIOUS_SUFFIX,
        fmt=_OURS_FORMAT,
    )


def rank_status_command(name: str) -> StringCommand:
    """The rank's container state and restart count (`missing` when there is none), then its last log line."""
    return script(
        "docker inspect -f {fmt} {name} 2>/dev/null || echo missing; "
        "docker logs --tail 1 {name} 2>&1 | tail -c 300 || true",
        fmt="{{.State.Status}} {{.RestartCount}}",
        name=name,
    )


def logs_command(name: str, lines: int = 20) -> StringCommand:
    """The rank's last log lines (for the error when the group fails)."""
    return script("docker logs --tail {n} {name} 2>&1 || true", n=lines, name=name)
