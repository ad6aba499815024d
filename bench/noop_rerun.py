"""Time the no-op re-run of deploys/bringup.py on 1 and 4 simulated nodes, against a minimal pyinfra deploy.

    python bench/noop_rerun.py [--repeat 3] [--keep]

Starts clusters `bench1` (1 node) and `bench4` (4 nodes), converges them once with deploys/bringup.py (not
timed), then times, side by side in the same run, re-runs of deploys/bringup.py (which must report no change)
and of bench/minimal_deploy.py (one fact, one no-op operation) on the same nodes. Prints the median wall
times and their ratio. Nodes are simulated (`simulated: true`): absolute times are this machine's, the
ratio is the figure to compare.
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


def pyinfra(cluster: str, deploy: str) -> tuple[float, str]:
    env = {**os.environ, "HGXKIT_SIM_CLUSTER": cluster, "PYINFRA_PROGRESS": "off"}
    start = time.perf_counter()
    result = subprocess.run(
        [PYINFRA, "-y", "inventories/sim.py", deploy], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
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
    args = parser.parse_args()
    print("simulated: true (hgxkit sim nodes; times are this machine's)")
    try:
        for nodes in (1, 4):
            cluster = f"bench{nodes}"
            sim("up", "--nodes", str(nodes), "--cluster", cluster)
            converge, _ = pyinfra(cluster, "deploys/bringup.py")
            noop, minimal = [], []
            for _ in range(args.repeat):
                elapsed, log = pyinfra(cluster, "deploys/bringup.py")
                if changed_ops(log):
                    sys.exit(f"deploys/bringup.py re-run changed something on {cluster}:\n{log[-3000:]}")
                noop.append(elapsed)
                minimal.append(pyinfra(cluster, "bench/minimal_deploy.py")[0])
            a, b = statistics.median(noop), statistics.median(minimal)
            print(
                f"bringup no-op re-run, {nodes} node(s): {a:.2f} s (median of {args.repeat}; first converge "
                f"{converge:.1f} s); minimal deploy {b:.2f} s; ratio {a / b:.1f}x"
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
