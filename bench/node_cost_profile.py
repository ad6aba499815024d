"""What each command of a no-op deploys/dspark.py costs a simulated node: CPU from the node's cgroup, per command.

    python bench/node_cost_profile.py --cluster NAME [--repeat 10] [--data KEY=VALUE ...]

Runs the no-op once on the cluster's first node (it must already be converged: `bench/per_host_cost.py --keep`
leaves such a cluster, `cost1-<suffix>`), recording every command pyinfra sends it and the batched reads the run
lock's holder runs. Then, on that node, runs each part of the batched plan-time read (hgxkit/planfacts.py) on its
own `--repeat` times in one `docker exec`, and prints its CPU per run: the container's cgroup (cpuacct.usage, or
cpu.stat on cgroup v2) over the loop, less the node's idle rate measured just before and less the same loop around
`true`. Also the host lock's holder (hgxkit/hostlock.py) and one SSH connection (what the node's sshd spends per
connection, from the host's ssh; the least precise figure: its wall time is long, so the idle rate taken off weighs
most, and on a busy node it can come out near zero or below).
Nodes are simulated (`simulated: true`): the stand-ins (nvidia-smi, the Hub on the node) cost what they cost here.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))
from per_host_cost import cgroup_cpu_s, node_containers  # noqa: E402

BATCH_PART = re.compile(r"echo '##hgxkit-batch-(\d+):'; \( (.*?) \) 2>/dev/null; echo '##hgxkit-batch-\1:'\$\?", re.S)


def record(out: str, argv: list[str]) -> None:
    """Inside the child: run pyinfra, writing every command sent to the first host to `out` (JSON list)."""
    from pyinfra.connectors.ssh import SSHConnector

    commands: list[str] = []
    original = SSHConnector.run_shell_command

    def wrapper(self, command, *args, **kwargs):
        if not commands or commands[0][0] == self.host.name:
            text = command.get_raw_value() if hasattr(command, "get_raw_value") else str(command)
            commands.append((self.host.name, text))
        return original(self, command, *args, **kwargs)

    SSHConnector.run_shell_command = wrapper
    import hgxkit.hostlock as hostlock

    open_holder = hostlock._open_holder

    def holder(host, batch=None):
        # The batched plan reads ride on the lock's channel (paramiko's exec_command, not pyinfra's): recorded
        # here, or the profile would leave out the no-op's largest command.
        if batch and (not commands or commands[0][0] == host.name):
            commands.append((host.name, batch[0].get_raw_value()))
        return open_holder(host, batch)

    hostlock._open_holder = holder
    from pyinfra_cli.main import main as pyinfra_main

    sys.argv = ["pyinfra", *argv]
    try:
        pyinfra_main()
    except SystemExit:
        pass
    finally:
        Path(out).write_text(json.dumps([text for _, text in commands]))


def loop_cpu(container: str, command: str, repeat: int) -> float:
    """CPU seconds per run of `command` on the node, less its idle rate (the loop's own cost is the caller's)."""
    first = cgroup_cpu_s(container)
    time.sleep(2.0)
    idle = max(0.0, cgroup_cpu_s(container) - first) / 2.0
    loop = f"for i in $(seq {repeat}); do ( {command} ) >/dev/null 2>&1 </dev/null; done"
    before, start = cgroup_cpu_s(container), time.perf_counter()
    subprocess.run(["docker", "exec", container, "bash", "-c", loop], check=False)
    wall = time.perf_counter() - start
    return (cgroup_cpu_s(container) - before - idle * wall) / repeat


def ssh_cpu(cluster: str, container: str, repeat: int) -> float:
    """CPU seconds the node spends per SSH connection that runs `true`."""
    shown = subprocess.run(
        [sys.executable, "-m", "hgxkit", "sim", "status", "--json", "--cluster", cluster],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    status = json.loads(shown.stdout)
    node = status["nodes"][0]
    argv = [
        "ssh",
        "-o",
        "StrictHostKeyChecking=no",
        "-o",
        "UserKnownHostsFile=/dev/null",
        "-o",
        "LogLevel=ERROR",
        "-i",
        node["key"],
        "-p",
        str(node["port"]),
        f"{node['user']}@{node['host']}",
        "true",
    ]
    first = cgroup_cpu_s(container)
    time.sleep(2.0)
    idle = max(0.0, cgroup_cpu_s(container) - first) / 2.0
    before, start = cgroup_cpu_s(container), time.perf_counter()
    for _ in range(repeat):
        if subprocess.run(argv, capture_output=True, check=False).returncode != 0:
            sys.exit(f"ssh to {node['host']}:{node['port']} failed")
    return (cgroup_cpu_s(container) - before - idle * (time.perf_counter() - start)) / repeat


def main() -> int:
    if sys.argv[1:2] == ["--record"]:
        record(sys.argv[2], sys.argv[3:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cluster", required=True, help="a converged simulated cluster (hgxkit sim up)")
    parser.add_argument("--repeat", type=int, default=10, help="runs of each command (default 10)")
    parser.add_argument("--data", action="append", default=[], help="pyinfra --data for the no-op (repeatable)")
    args = parser.parse_args()
    (container, *_) = node_containers(args.cluster) or sys.exit(f"no running nodes in cluster {args.cluster}")
    env = {**os.environ, "HGXKIT_SIM_CLUSTER": args.cluster, "PYINFRA_PROGRESS": "off"}
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        argv = [
            sys.executable,
            __file__,
            "--record",
            out.name,
            "-y",
            "inventories/sim.py",
            "deploys/dspark.py",
            "--data",
            "verify=false",
            *[w for item in args.data for w in ("--data", item)],
        ]
        ran = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
        if "Grand total" not in ran.stdout + ran.stderr:
            sys.exit(f"the no-op did not finish:\n{(ran.stdout + ran.stderr)[-3000:]}")
        commands = json.loads(Path(out.name).read_text())
    print(
        f"simulated: true; {len(commands)} command(s) sent to the first node; CPU per run on the node, "
        f"mean of {args.repeat} runs (load {os.getloadavg()[0]:.1f})"
    )
    base = loop_cpu(container, "true", args.repeat)
    from hgxkit.hostlock import holder_command  # the checkout's own (ROOT is first on the path)

    rows = [("host lock holder", holder_command().get_raw_value())]
    for text in commands:
        parts = BATCH_PART.findall(text)
        rows += [(f"batch part {i}", part) for i, part in parts] if parts else [("command", text)]
    total = 0.0
    for label, command in rows:
        cost = loop_cpu(container, command, args.repeat) - base
        total += cost
        print(f"  {cost * 1000:7.1f} ms  {label:<14} {' '.join(command.split())[:110]}")
    ssh = ssh_cpu(args.cluster, container, args.repeat)
    print(f"  {ssh * 1000:7.1f} ms  {'ssh connection':<14} (sshd: key exchange, session, `true`)")
    print(f"  {(total + ssh) * 1000:7.1f} ms  total (commands + one connection)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
