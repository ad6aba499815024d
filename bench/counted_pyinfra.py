"""Run pyinfra's CLI in this process, counting SSH round trips per host and writing the process's CPU time.

    python bench/counted_pyinfra.py OUT.json [--profile OUT.prof] -y INVENTORY DEPLOY [pyinfra args…]

Used by bench/per_host_cost.py. A round trip is one SSH exec channel (pyinfra's commands and facts, and
hgxkit's run-lock holder, counted where paramiko opens them) or one SFTP transfer (`_put_file`/`_get_file`),
counted per host by patching paramiko's client and pyinfra's @ssh connector before pyinfra runs. OUT.json
gets {"round_trips": {host: n}, "cpu_s": user+sys of this process (not its children), "children_cpu_s": that
of its children (the inventory's `hgxkit sim status`), "exit": pyinfra's status,
"commands": the first host's round trips, shortened}.
"""

from __future__ import annotations

import cProfile
import json
import resource
import sys
import time
from collections import Counter

from pyinfra.connectors.ssh import SSHConnector

COUNTS: Counter[str] = Counter()
COMMANDS: list[str] = []  # the first host's commands, shortened: what the round trips are


def _counting(method_name: str) -> None:
    original = getattr(SSHConnector, method_name)

    def wrapper(self, *args, **kwargs):
        COUNTS[self.host.name] += 1
        if not COMMANDS or COMMANDS[0].split(" ", 1)[0] == self.host.name:
            command = args[0] if args else kwargs.get("command", "")
            text = command.get_raw_value() if hasattr(command, "get_raw_value") else str(command)
            COMMANDS.append(f"{self.host.name} {method_name}: {text[:160]}")
        return original(self, *args, **kwargs)

    setattr(SSHConnector, method_name, wrapper)


CLIENTS: dict[int, str] = {}  # id of a host's paramiko client -> the host's name


def _counting_channels() -> None:
    """Every SSH exec channel a host's client opens is a round trip: pyinfra's commands and facts, and hgxkit's
    run-lock holder (hgxkit/hostlock.py), which opens its own on the same connection (and, since it carries the
    run's batched reads, is most of a no-op's traffic). Counted where paramiko opens them."""
    import paramiko

    connect = SSHConnector.connect

    def connect_wrapper(self, *args, **kwargs):
        result = connect(self, *args, **kwargs)
        if getattr(self, "client", None) is not None:
            CLIENTS[id(self.client)] = self.host.name
        return result

    exec_command = paramiko.SSHClient.exec_command

    def exec_wrapper(self, command, *args, **kwargs):
        name = CLIENTS.get(id(self))
        if name is not None:
            COUNTS[name] += 1
            if not COMMANDS or COMMANDS[0].split(" ", 1)[0] == name:
                COMMANDS.append(f"{name} exec: {str(command)[:160]}")
        return exec_command(self, command, *args, **kwargs)

    SSHConnector.connect = connect_wrapper
    paramiko.SSHClient.exec_command = exec_wrapper


def main() -> int:
    out, argv = sys.argv[1], sys.argv[2:]
    profile_out = None
    if argv[:1] == ["--profile"]:
        profile_out, argv = argv[1], argv[2:]
    _counting_channels()
    for name in ("_put_file", "_get_file"):
        _counting(name)
    from pyinfra_cli.main import main as pyinfra_main

    sys.argv = ["pyinfra", *argv]
    profiler = cProfile.Profile(time.process_time) if profile_out else None  # CPU, not waits
    status = 0
    try:
        if profiler:
            profiler.enable()
        pyinfra_main()
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        if profiler:
            profiler.disable()
            profiler.dump_stats(profile_out)
        own = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        with open(out, "w") as fh:
            json.dump(
                {
                    "round_trips": dict(COUNTS),
                    "cpu_s": own.ru_utime + own.ru_stime,
                    "children_cpu_s": kids.ru_utime + kids.ru_stime,
                    "exit": status,
                    "commands": COMMANDS,
                },
                fh,
            )
    return status


if __name__ == "__main__":
    sys.exit(main())
