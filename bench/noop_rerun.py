"""Time no-op re-runs of deploys/bringup.py and deploys/dspark.py (verify off) on 1 and 4 simulated nodes,
against a minimal pyinfra deploy.

    python bench/noop_rerun.py [--repeat 3] [--keep] [--bringup-only]

Starts clusters `bench1` (1 node) and `bench4` (4 nodes, 3 TiB RAM each so the post's HiCache fits),
converges them once with deploys/dspark.py --data verify=false (not timed: bring-up, model, two serving
containers per node), then times, side by side in the same run, re-runs of deploys/bringup.py and
deploys/dspark.py (each must report no change) and of bench/minimal_deploy.py (one fact, one no-op
operation) on the same nodes. Prints the median wall times and their ratios. Nodes are simulated
(`simulated: true`): absolute times are this machine's, the ratios are the figures to compare.
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each deploy (median is printed)")
    parser.add_argument("--keep", action="store_true", help="leave the bench clusters running")
    parser.add_argument("--bringup-only", action="store_true", help="converge and time deploys/bringup.py only")
    args = parser.parse_args()
    print("simulated: true (hgxkit sim nodes; times are this machine's)")
    try:
        for nodes in (1, 4):
            cluster = f"bench{nodes}"
            sim("up", "--nodes", str(nodes), "--memory-gib", "3072", "--cluster", cluster)
            full = ("deploys/bringup.py",) if args.bringup_only else ("deploys/bringup.py", "deploys/dspark.py")
            converge, _ = pyinfra(cluster, full[-1], "verify=false")
            timings: dict[str, list[float]] = {name: [] for name in (*full, "bench/minimal_deploy.py")}
            for _ in range(args.repeat):
                for deploy in full:
                    elapsed, log = pyinfra(cluster, deploy, "verify=false")
                    if changed_ops(log):
                        sys.exit(f"{deploy} re-run changed something on {cluster}:\n{log[-3000:]}")
                    timings[deploy].append(elapsed)
                timings["bench/minimal_deploy.py"].append(pyinfra(cluster, "bench/minimal_deploy.py")[0])
            minimal = statistics.median(timings["bench/minimal_deploy.py"])
            for deploy in full:
                median = statistics.median(timings[deploy])
                print(
                    f"{deploy} no-op re-run, {nodes} node(s): {median:.2f} s (median of {args.repeat}); "
                    f"minimal deploy {minimal:.2f} s; ratio {median / minimal:.1f}x  (first converge {converge:.0f} s)"
                )
    finally:
        if not args.keep:
            for nodes in (1, 4):
                subprocess.run(
                    [sys.executable, "-m", "hgxkit", "sim", "down", "--cluster", f"bench{nodes}"],
                    cwd=ROOT,
                    capture_output=True,
                    check=False,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
