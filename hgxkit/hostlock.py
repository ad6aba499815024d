"""One hgxkit run per node at a time: a `flock` on /var/lib/hgxkit/run.lock, held for the whole run.

The lock is held by a process on the node whose stdin is a channel of this run's SSH connection: when the
run ends — normally, by an error, or because the controller was killed — the connection closes, the holder
reads end-of-file and the lock is released. Nothing is written to the lock file (flock does not change
it), and `--dry` on a node without one (fresh: no hgxkit run yet) holds nothing rather than create it, so
`--dry` leaves the node as it was. A second run on the same node waits up to `host_lock_wait_s`
(shared knob) and then refuses, naming the holder's PID and start time.

Example (at the top of a deploy file, before any role):
    from pyinfra import host
    from hgxkit.hostlock import hold_host_lock
    hold_host_lock(host)
"""

from __future__ import annotations

import atexit
import contextlib
import sys
import time
from typing import Any

from pyinfra import logger
from pyinfra.api.exceptions import DeployError

from hgxkit.hostcmd import HostRunner, script
from hgxkit.knobs import knob

LOCK_FILE = "/var/lib/hgxkit/run.lock"
BUSY = 75  # flock -E: the exit status when another process holds the lock
_held: dict[tuple[int, str], Any] = {}  # `_key(host)` -> the open SSH channel that holds its lock


def _key(host: Any) -> tuple[int, str]:
    """The host a lock is held for, by its run and name: roles pass pyinfra's `host`, one proxy object for every
    host of the run, so the object's own identity would take the first node's lock for all of them."""
    return id(host.state), str(host.name)


@atexit.register
def _release_all() -> None:
    """Close the holders' stdin before the interpreter tears down gevent (their finalizers would need it)."""
    for channel in _held.values():
        with contextlib.suppress(Exception):
            if channel is not None:
                channel.close()
    _held.clear()


def dry_run() -> bool:
    """Whether this is `pyinfra --dry`: pyinfra decides that after the plan and tells the deploy nothing, so its
    command line is the only sign."""
    return "--dry" in sys.argv[1:]


PREFETCH_END = "##hgxkit-prefetch-end"


def _hold(then: Any = None) -> Any:
    """Say so, then wait for stdin to close: the shell's own `read`, no process of its own. The lock is the open
    file description on fd 9 (`exec 9>>`), which flock(1) locked and the shell keeps: 2 processes fewer than
    `flock FILE sh -c '...; exec cat'` (~2 ms of the node's CPU each run). `then` (the run's batched plan-time
    reads, `planfacts.prefetch_command`) runs in between, with no stdin and without fd 9, its output ended by
    `PREFETCH_END`: the reads ride on this channel instead of a round trip of their own."""
    if then is None:
        return script("echo hgxkit-locked; while read -r line; do :; done")
    return script(
        "echo hgxkit-locked; {{ {then}; }} </dev/null 9>&- 2>/dev/null; echo {end}; while read -r line; do :; done",
        then=then,
        end=PREFETCH_END,
    )


def holder_command(*, dry: bool = False, lock: str = LOCK_FILE, then: Any = None) -> Any:
    """Take the lock without waiting, say so, then hold it until stdin closes (running `then` once it holds it).
    With `dry`, a node without the lock file (no hgxkit run yet) gets none made: the dry run holds nothing there
    (it changes nothing)."""
    if dry:
        return script(
            "[ -e {lock} ] || {{ {hold}; exit 0; }}; exec 9>>{lock} && flock -n -E {busy} 9 && {{ {hold}; }}",
            busy=BUSY,
            lock=lock,
            hold=_hold(then),
        )
    return script(
        # `[ -d ]` is the shell's own: a mkdir process (~3 ms of the node's CPU) only on the node's first run.
        "{{ [ -d {dir} ] || mkdir -p {dir}; }} && exec 9>>{lock} && flock -n -E {busy} 9 && {{ {hold}; }}",
        dir=lock.rsplit("/", 1)[0],
        busy=BUSY,
        lock=lock,
        hold=_hold(then),
    )


def holders_command() -> Any:
    """PID, start time and command line of every process that has the lock file open (oldest first)."""
    return script(
        'for p in /proc/[0-9]*; do for f in $p/fd/*; do [ "$(readlink $f 2>/dev/null)" = {lock} ] && '
        "ps -o pid=,lstart=,args= -p ${{p#/proc/}} && break; done; done 2>/dev/null | sort -n",
        lock=LOCK_FILE,
    )


def _open_holder(host: Any, batch: tuple[Any, Any] | None = None) -> tuple[Any | None, str]:
    """Start the holder on an SSH connection; (channel, "") when it holds the lock, else (None, why). With `batch`
    (`planfacts.prefetch_command`'s command and keeper), the holder runs the reads once it holds the lock, and
    their answers are kept."""
    import inspect

    from pyinfra.connectors.util import make_unix_command, make_unix_command_for_host

    # How the host's commands are wrapped (sudo, su, env): the connector arguments make_unix_command takes.
    wanted = inspect.signature(make_unix_command).parameters
    arguments = {k: v for k, v in HostRunner(host).connector_arguments().items() if k in wanted}
    holder = holder_command(dry=dry_run(), then=batch[0] if batch else None)
    command = make_unix_command_for_host(host.state, host, holder, **arguments)
    stdin, stdout, _ = host.connector.client.exec_command(command.get_raw_value())
    first = stdout.readline().strip()
    if first == "hgxkit-locked":
        if batch:
            _keep_reads(host, stdout, batch[1])
        return stdin, ""
    status = stdout.channel.recv_exit_status()
    return None, "busy" if status == BUSY else f"exit status {status} from flock: {first[:200]}"


def _keep_reads(host: Any, stdout: Any, keep: Any) -> None:
    """Read the batched reads' output up to `PREFETCH_END` and keep their answers. Anything amiss (the channel
    closed first, output that is not UTF-8) keeps nothing: `planfacts.prefetch` then reads them itself."""
    lines: list[str] = []
    try:
        for raw in iter(stdout.readline, ""):
            line = raw.rstrip("\n")
            if line == PREFETCH_END:
                keep(lines)
                return
            lines.append(line)
    except (UnicodeDecodeError, OSError, EOFError) as err:
        logger.debug(
            "%s: the reads on the lock's channel gave no answer (%s); reading them on their own", host.name, err
        )


def hold_host_lock(host: Any, reads: list[tuple[type, dict[str, Any]]] | None = None) -> None:
    """Hold this node's run lock until the run ends (once per run; no-op for connectors without SSH). `reads`: the
    plan-time facts to read on the lock's channel once it is held (`planfacts.prefetch` takes the same list)."""
    if _key(host) in _held:
        return
    if not host.connected:
        host.connect(raise_exceptions=True)
    if getattr(host.connector, "client", None) is None:
        logger.debug("%s: no SSH connection, so no host lock (%s)", host.name, type(host.connector).__name__)
        _held[_key(host)] = None
        return
    deadline = time.monotonic() + float(knob(host, "host_lock_wait_s"))
    from hgxkit.planfacts import prefetch_command

    batch = prefetch_command(host, reads or [])  # None: nothing to read (or not planning)
    while True:
        channel, why = _open_holder(host, batch)
        if channel is not None:
            _held[_key(host)] = channel
            return
        if why != "busy":
            raise DeployError(f"{host.name}: could not take the hgxkit run lock {LOCK_FILE}: {why}")
        if time.monotonic() >= deadline:
            holders = HostRunner(host)(holders_command())
            who = holders[0].strip() if holders else "a process that has exited by now"
            # The holder's command line carries the run's batched reads (kilobytes): its start names it well enough.
            who = who if len(who) <= 200 else who[:200] + "…"
            raise DeployError(
                f"{host.name}: another hgxkit run holds {LOCK_FILE} (pid, start, command: {who}); "
                "wait for it to finish, or stop it, then run again (host_lock_wait_s sets how long to wait)"
            )
        time.sleep(2)
