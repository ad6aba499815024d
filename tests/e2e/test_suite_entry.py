"""End-to-end: a SemiAnalysis InferenceX entry reproduced on a simulated node (docs/inferencex.md).

The entry dsr1-fp8-h200-sglang of the suite's snapshot (tests/fixtures/inferencex) is imported with
`hgxkit recipe import CHECKOUT --entry`, its published rows (tests/fixtures/results/inferencex-handwritten) are
read into the recipe with `hgxkit results import-reference`, the recipe is deployed unedited with
`deploys/reproduce.py --data bench=full`, and verify archives every cell of the suite's sweep; `results compare
--reference` then shows each cell against the suite's numbers. To keep CI short the cells run once with 16 output
tokens (`bench_repeats=1 bench_output_len=16`); the prompts, concurrencies, input lengths and the suite's length
distribution are the entry's. The stand-in is built for an image of another SGLang (`--other-versions`): it takes
the flag 0.5.23 cannot read, as 0.5.12 does. Needs the client store and Debian's docker-registry (skips without them, fails
under CI=true).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sim_steps import cluster_name, out, require, run_deploy

from hgxkit.sim.standin import client_store

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
CHECKOUT = ROOT / "tests" / "fixtures" / "inferencex"
ROWS = ROOT / "tests" / "fixtures" / "results" / "inferencex-handwritten" / "api-benchmarks-dsr1.json"
ENTRY = "dsr1-fp8-h200-sglang"
CLUSTER = cluster_name("suite")
CELLS = [f"8192x1024-c{c}" for c in (4, 8, 16, 32, 64)]


def hgxkit(*args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "hgxkit", *args]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)


@pytest.fixture(scope="module")
def recipe(sim_nodes, tmp_path_factory) -> Path:
    """The entry's recipe with the suite's published rows as its reference, and one simulated node."""
    require(shutil.which("docker-registry") is not None, "docker-registry is not installed")
    require(client_store.is_installed(), f"no benchmark clients in {client_store.store_path()}")
    path = tmp_path_factory.mktemp("suite") / f"{ENTRY}.yaml"
    imported = hgxkit("recipe", "import", str(CHECKOUT), "--entry", ENTRY, "-o", str(path))
    assert imported.returncode == 0, out(imported)
    rows = ["--entry", ENTRY]
    referenced = hgxkit("results", "import-reference", str(ROWS), "--recipe", str(path), *rows, "--in-place")
    assert referenced.returncode == 0, out(referenced)
    sim_nodes(1, cluster=CLUSTER)
    image = hgxkit("recipe", "show", str(path), "--json")
    assert image.returncode == 0, out(image)
    # The entry's image runs SGLang 0.5.12, whose --cuda-graph-max-bs 0.5.23's table finds ambiguous.
    reference = json.loads(image.stdout)["image"]["reference"]
    built = hgxkit("sim", "image", "build", "--tag", reference, "--other-versions")
    assert built.returncode == 0, out(built)[-3000:]
    return path


def test_an_entry_deploys_and_verify_archives_every_cell_of_its_sweep(recipe: Path, tmp_path: Path) -> None:
    results = tmp_path / "results"
    data = ("bench=full", "bench_repeats=1", "bench_output_len=16", f"results_dir={results}")
    done = run_deploy(CLUSTER, "deploys/reproduce.py", f"recipe={recipe}", *data)
    assert done.returncode == 0, out(done)[-6000:]
    (run,) = [p for p in (results / "node1").iterdir() if p.is_dir()]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["simulated"] is True and summary["tool"].startswith("sglang")
    cells = {(c["input_len"], c["concurrency"]): c for c in summary["cells"]}
    assert sorted(cells) == [(8192, c) for c in (4, 8, 16, 32, 64)]
    assert [cells[(8192, c)]["num_prompts"] for c in (4, 8, 16, 32, 64)] == [40, 80, 160, 320, 640]
    assert all(c["failed"] == 0 and c["completed"] == c["num_prompts"] for c in summary["cells"])
    assert all(c["lengths"] is None for c in summary["cells"])  # SGLang's client draws [0.8L, L] as the suite's
    (first,) = run.rglob("g0_8192x1024-c4.jsonl")  # the client's own output, archived raw
    args = json.loads(first.read_text().splitlines()[0])
    assert (args["random_input_len"], args["random_range_ratio"]) == (8192, 0.8)

    compared = hgxkit("results", "--root", str(results), "compare", run.name, "--reference", "--recipe", str(recipe))
    assert compared.returncode == 0, out(compared)
    text = compared.stdout
    # The published rows name their run; the fixture's rows cover the sweep's first two cells.
    assert "InferenceX h200 sglang fp8" in text and "/actions/runs/22000000001" in text, text
    for concurrency in (4, 8):
        assert f"| TTFT mean | 8192 | {concurrency} |" in text and f"| TPOT mean | 8192 | {concurrency} |" in text, text
