"""Orchestration overhead of the verify role per benchmark cell: wall time minus the client's own duration.

    python bench/verify_overhead.py [--keep] [--output-len 16] [--modes per_cell per_container]

Starts one simulated node (cluster `benchv`, 3 TiB RAM), serves the marlin recipe with deploys/dspark.py
(verify off, not timed), then times `deploys/verify.py --data bench=full` (the post's 12 cells on each of the
two groups; a short output length keeps the stand-in's decode time small), once for each
`verify_client_process` (a client process per cell, then one per container), side by side on the same node,
and prints where the wall time went, per cell:

- inside the client runs: each cell's window (the host script's mark before the cell's first client run and
  after its last; all repeats, and the post's warm-up runs), from the archived telemetry, plus each client
  process's start (Python and the client's imports, before its first cell; the role's "verify took" line);
- of which the client's measured time (`duration_s` of the archived summary), the rest being the client's own
  unmeasured work (its start — torch and transformers, about 14 s on two cores, once per cell with per_cell,
  once per container with per_container — tokenizer, prompt generation, warm-up requests, --flush-cache and
  the fixed 1 s pause SGLang's client takes after them);
- orchestration: the wall time less the client runs (pyinfra, SSH, probes, the detached unit, docker exec,
  fetching the results, fingerprint, statistics and archive). The issue's target (<= 1.5 s per cell) is for
  this figure; the old figure (wall less the measured time, per cell) is printed too.

Each timed verify is the first of its containers: the engine's environment report a verify keeps on the host
(hgxkit/verify/envreport.py) is deleted before it, so it is made again (overlapped with the controller's
statistics), as after a rollout. A re-run of verify on the same containers reads it back and is faster;
`--again` times one such re-run after each mode's first verify.

SIMULATED node: the stand-in answers quickly, so the client's durations are short and the overhead share is
larger than on a real node.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hgxkit.verify.envreport import report_folder  # noqa: E402  (after the path above)
from roles.verify.defaults import DEFAULTS as VERIFY_DEFAULTS  # noqa: E402

PYINFRA = str(Path(sys.executable).parent / "pyinfra")
CLUSTER = "benchv"


def pyinfra(deploy: str, *data: str) -> tuple[float, str]:
    argv = [PYINFRA, "-y", "inventories/sim.py", deploy]
    for item in data:
        argv += ["--data", item]
    env = {**os.environ, "HGXKIT_SIM_CLUSTER": CLUSTER, "PYINFRA_PROGRESS": "off"}
    start = time.perf_counter()
    result = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        sys.exit(f"{deploy} failed:\n{(result.stdout + result.stderr)[-3000:]}")
    return time.perf_counter() - start, result.stdout + result.stderr


def timed_verify(mode: str, output_len: int, *, first: bool = True) -> dict[str, float]:
    """`deploys/verify.py --data bench=full`: its wall time, the time inside the client runs (each cell's window,
    from its first run's start to its last run's end, the post's warm-up runs included, and each client
    process's start-up), the client's own
    measured time, the recorded cells and the client runs."""
    forget = [
        sys.executable,
        "-m",
        "hgxkit",
        "sim",
        "ssh",
        "node1",
        "--cluster",
        CLUSTER,
        "--",
        "rm -rf " + shlex.quote(report_folder(VERIFY_DEFAULTS["verify_workdir"])),
    ]
    if first:  # the first verify of these containers: the environment report is made again
        subprocess.run(forget, cwd=ROOT, capture_output=True, check=True)
    with tempfile.TemporaryDirectory() as results:
        wall, output = pyinfra(
            "deploys/verify.py",
            "bench=full",
            f"bench_output_len={output_len}",
            f"verify_client_process={mode}",
            f"results_dir={results}",
        )
        (summary_file,) = Path(results).glob("*/*/summary.json")
        cells = json.loads(summary_file.read_text())["cells"]
        windows = 0.0
        for window in summary_file.parent.glob("telemetry/*.window"):
            stamps = [float(t) for t in window.read_text().split()]
            windows += stamps[-1] - stamps[0] if len(stamps) > 1 else 0.0
    steps = [line.split("] ", 1)[-1] for line in output.splitlines() if "] verify took " in line]
    print(f"  the role's own account: {steps[-1] if steps else 'none printed'}", flush=True)
    startup = re.search(r"the clients' start-up ([\d.]+) s", steps[-1] if steps else "")
    return {
        "wall": wall,
        "in_client": windows + (float(startup.group(1)) if startup else 0.0),
        "measured": sum(cell["duration_s"] or 0.0 for cell in cells),
        "cells": len(cells),
        "runs": sum(len(cell.get("repeats") or [None]) for cell in cells),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", action="store_true", help="leave the simulated node running")
    parser.add_argument("--output-len", type=int, default=16, help="output tokens per request")
    parser.add_argument(
        "--modes",
        nargs="+",
        default=["per_cell", "per_container"],
        choices=["per_cell", "per_container"],
        help="verify_client_process values to time",
    )
    parser.add_argument(
        "--again",
        action="store_true",
        help="also time a re-verify of the same containers (the kept environment report)",
    )
    args = parser.parse_args()
    print("simulated: true (hgxkit sim node; the stand-in's latencies, this machine's overheads)")
    sim = [sys.executable, "-m", "hgxkit", "sim"]
    subprocess.run(
        [*sim, "up", "--nodes", "1", "--memory-gib", "3072", "--cluster", CLUSTER], check=True, capture_output=True
    )
    try:
        pyinfra("deploys/dspark.py", "verify=false")
        overheads = {}
        runs_to_time = [(mode, first) for mode in args.modes for first in ((True, False) if args.again else (True,))]
        for mode, first in runs_to_time:
            t = timed_verify(mode, args.output_len, first=first)
            cells, runs = int(t["cells"]), int(t["runs"])
            outside, setup = t["wall"] - t["in_client"], t["in_client"] - t["measured"]
            label = mode if first else f"{mode}, re-verify"
            overheads[label] = outside / cells
            print(
                f"verify bench=full, verify_client_process={label}: {cells} cells, {runs} client runs, wall "
                f"{t['wall']:.1f} s, inside the client runs {t['in_client']:.1f} s, the client's measured time "
                f"{t['measured']:.1f} s",
                flush=True,
            )
            print(
                f"  orchestration (wall less the client runs: pyinfra, SSH, probes, the unit, docker exec, "
                f"results, fingerprint, archive): {outside:.1f} s in all, {outside / cells:.2f} s per cell",
                flush=True,
            )
            print(
                f"  the client's own unmeasured time (its start, tokenizer, prompts, warm-ups, cache flush, its "
                f"1 s pause; the post's warm-up runs): {setup:.1f} s, {setup / runs:.2f} s per client run",
                flush=True,
            )
            print(
                f"  wall less the client's measured time, per cell (the old figure): "
                f"{(t['wall'] - t['measured']) / cells:.1f} s",
                flush=True,
            )
        if {"per_cell", "per_container"} <= overheads.keys():
            print(
                f"orchestration per cell, per_container / per_cell: "
                f"{overheads['per_container'] / overheads['per_cell']:.2f}"
            )
        for mode, seconds in overheads.items():
            print(f"orchestration seconds per cell, {mode} (target <= 1.5): {seconds:.2f}")
    finally:
        if not args.keep:
            subprocess.run([*sim, "down", "--cluster", CLUSTER], capture_output=True, check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
