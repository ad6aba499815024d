"""Orchestration overhead of the verify role per benchmark cell: wall time minus the client's own duration.

    python bench/verify_overhead.py [--keep] [--output-len 16] [--modes per_cell per_container]

Starts one simulated node (cluster `benchv`, 3 TiB RAM), serves the marlin recipe with deploys/dspark.py
(verify off, not timed), then times `deploys/verify.py --data bench=full` (the post's 12 cells on each of the
two groups; a short output length keeps the stand-in's decode time small), once for each
`verify_client_process` (a client process per cell, then one per container), side by side on the same node,
and prints the ratio of their per-cell overheads. The client's own `duration` of
each cell comes from the archived summary. Overhead = pyinfra + SSH + health checks + the detached unit +
start-up of the client (it imports torch and transformers, about 14 s on two cores: once per cell with
per_cell, once per container with per_container) + warmups and
--flush-cache, which the client does not count in its duration. SIMULATED node: the stand-in answers quickly,
so the client's durations are short and the overhead share is larger than on a real node.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYINFRA = str(Path(sys.executable).parent / "pyinfra")
CLUSTER = "benchv"


def pyinfra(deploy: str, *data: str) -> float:
    argv = [PYINFRA, "-y", "inventories/sim.py", deploy]
    for item in data:
        argv += ["--data", item]
    env = {**os.environ, "HGXKIT_SIM_CLUSTER": CLUSTER, "PYINFRA_PROGRESS": "off"}
    start = time.perf_counter()
    result = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        sys.exit(f"{deploy} failed:\n{(result.stdout + result.stderr)[-3000:]}")
    return time.perf_counter() - start


def timed_verify(mode: str, output_len: int) -> tuple[float, float, int]:
    """Wall time of `deploys/verify.py --data bench=full`, the client's own time summed over cells, cells."""
    with tempfile.TemporaryDirectory() as results:
        wall = pyinfra("deploys/verify.py", "bench=full", f"bench_output_len={output_len}",
                       f"verify_client_process={mode}", f"results_dir={results}")  # fmt: skip
        (summary_file,) = Path(results).glob("*/*/summary.json")
        cells = json.loads(summary_file.read_text())["cells"]
    return wall, sum(cell["duration_s"] or 0.0 for cell in cells), len(cells)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", action="store_true", help="leave the simulated node running")
    parser.add_argument("--output-len", type=int, default=16, help="output tokens per request")
    parser.add_argument("--modes", nargs="+", default=["per_cell", "per_container"],
                        choices=["per_cell", "per_container"], help="verify_client_process values to time")  # fmt: skip
    args = parser.parse_args()
    print("simulated: true (hgxkit sim node; the stand-in's latencies, this machine's overheads)")
    sim = [sys.executable, "-m", "hgxkit", "sim"]
    subprocess.run([*sim, "up", "--nodes", "1", "--memory-gib", "3072", "--cluster", CLUSTER], check=True,
                   capture_output=True)  # fmt: skip
    try:
        pyinfra("deploys/dspark.py", "verify=false")
        overheads = {}
        for mode in args.modes:
            wall, client, cells = timed_verify(mode, args.output_len)
            overheads[mode] = (wall - client) / cells
            print(f"verify bench=full, verify_client_process={mode}: {cells} cells, wall {wall:.1f} s, "
                  f"client benchmark time {client:.1f} s", flush=True)  # fmt: skip
            print(f"  orchestration overhead: {wall - client:.1f} s in all, {overheads[mode]:.1f} s per cell "
                  f"({(wall - client) / wall * 100:.0f}% of the wall time)", flush=True)  # fmt: skip
        if {"per_cell", "per_container"} <= overheads.keys():
            print(f"overhead per cell, per_container / per_cell: "
                  f"{overheads['per_container'] / overheads['per_cell']:.2f}")  # fmt: skip
    finally:
        if not args.keep:
            subprocess.run([*sim, "down", "--cluster", CLUSTER], capture_output=True, check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
