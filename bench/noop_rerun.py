"""Time no-op re-runs of deploys/bringup.py and deploys/dspark.py (verify off) on 1, 4 and 8 simulated nodes,
against a minimal pyinfra deploy, and say what a simulated node costs in memory.

    python bench/noop_rerun.py [--nodes 1,4,8] [--repeat 3] [--keep] [--bringup-only] [--recheck]

For each node count N it starts cluster `benchN` (3 TiB simulated RAM per node so the post's HiCache fits),
converges it once with deploys/dspark.py --data verify=false (not timed: bring-up, model, two serving
containers per node), then times, side by side in the same run, re-runs of deploys/bringup.py and
deploys/dspark.py (each must report no change) and of bench/minimal_deploy.py (one fact, one no-op
operation) on the same nodes. Prints the median wall times, their ratios to the minimal deploy, the ratio of
N nodes to 1 node, and the memory the node containers use (read from each node's memory cgroup as docker stats
counts it: the node's systemd, sshd, dockerd and its serving stand-ins). `--recheck` times the re-runs with
`--data recheck=true` too (every bring-up check, whatever hgxkit/node/converged.py remembers). Nodes are simulated
(`simulated: true`): absolute times are this machine's; the ratios are the figures to compare.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYINFRA = str(Path(sys.executable).parent / "pyinfra")


def pyinfra(cluster: str, deploy: str, *data: str) -> tuple[float, str]:
    env = {**os.environ, "HGXKIT_SIM_CLUSTER": cluster, "PYINFRA_PROGRESS": "off"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # a user's environment, as in bench/per_host_cost.py
    argv = [PYINFRA, "-y", "inventories/sim.py", deploy]
    for item in data:
        argv += ["--data", item]
    start = time.perf_counter()
    result = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"{deploy} failed on cluster {cluster}:\n{(result.stdout + result.stderr)[-3000:]}")
    return elapsed, result.stdout + result.stderr


def changed_ops(log: str) -> int:
    match = re.search(r"Grand total\s+\S+\s+(\S+)\s+(\S+)", log)
    if not match:
        sys.exit("no Grand total line in pyinfra's output")
    return sum(0 if v == "-" else int(v) for v in match.groups())


def sim(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "hgxkit", "sim", *args], cwd=ROOT, check=True, capture_output=True)


def node_memory_mib(cluster: str) -> list[float]:
    """Memory each node container of `cluster` uses now (MiB): its cgroup's usage less inactive page cache, as
    `docker stats` counts it. Read from the cgroup files because some engines' `docker stats` shows 0B (a
    dockerd whose memory accounting is off under cgroup v1 did here)."""
    out = subprocess.run(
        ["docker", "ps", "-q", "--no-trunc", "--filter", f"name=hgxkit-sim-{cluster}-node"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    return [used for cid in out.split() if (used := _cgroup_memory_mib(cid)) is not None]


def _cgroup_memory_mib(container_id: str) -> float | None:
    root = Path("/sys/fs/cgroup")
    for group, usage_file, inactive_key in (
        (root / "memory" / "docker" / container_id, "memory.usage_in_bytes", "total_inactive_file"),  # v1
        (root / "system.slice" / f"docker-{container_id}.scope", "memory.current", "inactive_file"),  # v2, systemd
        (root / "docker" / container_id, "memory.current", "inactive_file"),  # v2, cgroupfs
    ):
        if (group / usage_file).is_file():
            stat = dict(line.split() for line in (group / "memory.stat").read_text().splitlines())
            return (int((group / usage_file).read_text()) - int(stat.get(inactive_key, 0))) / 2**20
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", default="1,4,8", help="node counts to time, comma-separated (default 1,4,8)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each deploy (median is printed)")
    parser.add_argument("--keep", action="store_true", help="leave the bench clusters running")
    parser.add_argument("--bringup-only", action="store_true", help="converge and time deploys/bringup.py only")
    parser.add_argument("--recheck", action="store_true", help="also time re-runs with --data recheck=true")
    args = parser.parse_args()
    counts = [int(n) for n in args.nodes.split(",") if n.strip()]
    print("simulated: true (hgxkit sim nodes; times are this machine's)")
    medians: dict[tuple[str, int], float] = {}
    full = ("deploys/bringup.py",) if args.bringup_only else ("deploys/bringup.py", "deploys/dspark.py")
    variants = [(d, ()) for d in full] + ([(d, ("recheck=true",)) for d in full] if args.recheck else [])
    try:
        for nodes in counts:
            cluster = f"bench{nodes}"
            sim("up", "--nodes", str(nodes), "--memory-gib", "3072", "--cluster", cluster)
            converge, _ = pyinfra(cluster, full[-1], "verify=false")
            timings: dict[str, list[float]] = {}
            for _ in range(args.repeat):
                for deploy, extra in variants:
                    elapsed, log = pyinfra(cluster, deploy, "verify=false", *extra)
                    if changed_ops(log):
                        sys.exit(f"{deploy} {extra} re-run changed something on {cluster}:\n{log[-3000:]}")
                    timings.setdefault(" ".join((deploy, *extra)), []).append(elapsed)
                timings.setdefault("bench/minimal_deploy.py", []).append(pyinfra(cluster, "bench/minimal_deploy.py")[0])
            minimal = statistics.median(timings["bench/minimal_deploy.py"])
            for label, values in timings.items():
                medians[(label, nodes)] = statistics.median(values)
                if label == "bench/minimal_deploy.py":
                    continue
                median = medians[(label, nodes)]
                print(
                    f"{label} no-op re-run, {nodes} node(s): {median:.2f} s (median of {args.repeat}); "
                    f"minimal deploy {minimal:.2f} s; ratio {median / minimal:.2f}x  "
                    f"(first converge {converge:.0f} s)"
                )
            memory = node_memory_mib(cluster)
            if memory:
                print(
                    f"memory per simulated node, {nodes} node(s): {statistics.mean(memory):.0f} MiB mean, "
                    f"{max(memory):.0f} MiB max (memory cgroup: systemd, sshd, dockerd, "
                    "two serving stand-ins)"
                )
            if not args.keep and nodes != counts[0]:
                sim("down", "--cluster", cluster)
        base = counts[0]
        for label, nodes in sorted(medians):
            if nodes != base and (label, base) in medians:
                ratio = medians[(label, nodes)] / medians[(label, base)]
                print(f"{label}: {nodes} nodes vs {base}: {ratio:.2f}x")
        if not args.bringup_only and (f"{full[-1]}", base) in medians:
            print(
                f"ratio: dspark.py no-op re-run vs minimal deploy, {base} node: "
                f"{medians[(full[-1], base)] / medians[('bench/minimal_deploy.py', base)]:.2f}x"
            )
    finally:
        if not args.keep:
            for nodes in counts:
                subprocess.run(
                    [sys.executable, "-m", "hgxkit", "sim", "down", "--cluster", f"bench{nodes}"],
                    cwd=ROOT,
                    capture_output=True,
                    check=False,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
