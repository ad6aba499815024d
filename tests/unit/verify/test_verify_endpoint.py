"""`hgxkit verify --endpoint URL --recipe R`: the recipe's cells against a server hgxkit did not deploy, archived
with where they ran (the client and the server are stand-ins here: a recorded SGLang client output)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pytest

from hgxkit.errors import InputError
from hgxkit.recipe.judge import judge
from hgxkit.recipe.read import load_recipe
from hgxkit.results.archive import load_run
from hgxkit.results.compare import compare_runs
from hgxkit.results.fingerprint import Fingerprint, fingerprint_differences
from hgxkit.verify.endpoint import client_command, endpoint_cells, parse_endpoint, verify_endpoint

ROOT = Path(__file__).resolve().parents[3]
RECIPE = ROOT / "recipes" / "deepseek-v4-flash-dspark-marlin.yaml"
RECORDED = (ROOT / "tests" / "fixtures" / "sglang_bench" / "dspark_isl5000_c5_details.jsonl").read_text()
NOW = datetime(2026, 12, 1, 12, 0, 0, tzinfo=timezone.utc)


def test_an_endpoint_is_a_base_url() -> None:
    assert parse_endpoint("https://serve.example:8443").port == 8443
    assert parse_endpoint("http://[::1]:5000/").host == "::1"
    for bad in ("10.0.0.5:5000", "http://10.0.0.5:5000/v1", "ftp://x", "http://h:99999"):
        with pytest.raises(InputError, match="--endpoint"):
            parse_endpoint(bad)


def test_the_kinds_client_is_aimed_at_the_endpoint() -> None:
    recipe = load_recipe(str(RECIPE))
    endpoint = parse_endpoint("http://10.0.0.5:5001")
    (cell,) = endpoint_cells(recipe, endpoint, "smoke")
    argv = client_command(cell, endpoint, "/tmp/out", ["python3", "-m", "sglang.benchmark.serving"])
    assert argv[:9] == [
        "python3",
        "-m",
        "sglang.benchmark.serving",
        "--backend",
        "sglang",
        "--host",
        "10.0.0.5",
        "--port",
        "5001",
    ]
    assert argv[argv.index("--output-file") + 1] == "/tmp/out/g0_smoke.jsonl"
    assert "--tokenizer" not in argv  # none given: the client asks the server (a path in its container)
    given = client_command(cell, endpoint, "/tmp/out", ["c"], tokenizer="/srv/tok")
    assert given[-2:] == ["--tokenizer", "/srv/tok"] and given.count("--tokenizer") == 1


def test_the_clients_tokenizer_is_this_machines_never_a_path_in_the_servers_container() -> None:
    """vLLM's cells name the model's path in the container as the tokenizer; against an endpoint it is replaced."""
    cell = replace(
        endpoint_cells(load_recipe(str(RECIPE)), parse_endpoint("http://h:1"), "smoke")[0],
        kind="vllm",
        tokenizer="/models/m",
    )
    argv = client_command(cell, parse_endpoint("http://h:1"), "/o", ["vllm", "bench", "serve"], tokenizer="org/m")
    assert [argv[i + 1] for i, w in enumerate(argv) if w == "--tokenizer"] == ["org/m"]
    assert argv[argv.index("--base-url") + 1] == "http://h:1"  # vLLM's client is aimed by URL


def test_the_vllm_client_is_aimed_at_the_endpoint_by_its_base_url() -> None:
    recipe = load_recipe(str(ROOT / "tests" / "fixtures" / "export" / "vllm-two-node.yaml"))
    endpoint = parse_endpoint("http://10.0.0.5:8000")
    (cell,) = endpoint_cells(recipe, endpoint, "smoke")
    argv = client_command(cell, endpoint, "/tmp/out", ["vllm", "bench", "serve"])
    assert argv[3:7] == ["--backend", "vllm", "--base-url", "http://10.0.0.5:8000"]
    assert "--host" not in argv
    assert "--tokenizer" not in argv  # the model's path in the container is not on this machine
    aimed = client_command(cell, endpoint, "/tmp/out", ["vllm", "bench", "serve"], tokenizer="/tmp/tok")
    assert aimed[aimed.index("--tokenizer") + 1] == "/tmp/tok" and aimed.count("--tokenizer") == 1
    (local,) = endpoint_cells(recipe, endpoint, "smoke", tokenizer="/tmp/tok")
    assert local.tokenizer == "/tmp/tok"


def test_a_run_against_an_endpoint_is_archived_with_where_it_ran(tmp_path: Path, tokenizer: str) -> None:
    recipe = load_recipe(str(RECIPE))
    asked: list[str] = []
    ran: list[list[str]] = []

    def fetch(url: str) -> tuple[int, str]:
        asked.append(url)
        return (200, '{"version": "0.5.23"}') if url.endswith("/server_info") else (200, "")

    def run_client(argv: list[str]) -> int:
        ran.append(argv)
        Path(argv[argv.index("--output-file") + 1]).write_text(RECORDED)
        return 0

    path, summary = verify_endpoint(
        judge(recipe),
        parse_endpoint("http://10.0.0.5:5000"),
        mode="smoke",
        results_dir=tmp_path / "results",
        client=["sglang-client"],
        workdir=tmp_path / "work",
        run_client=run_client,
        fetch=fetch,
        now=NOW,
        tokenizer=tokenizer,
    )
    assert asked == ["http://10.0.0.5:5000/health", "http://10.0.0.5:5000/server_info"]
    assert len(ran) == 1 and ran[0][0] == "sglang-client"
    # the client reads hgxkit's code-free copy, never the directory given
    assert ran[0][ran[0].index("--tokenizer") + 1] == str(tmp_path / "work" / "tokenizer")
    assert summary.run_id == "endpoint-10.0.0.5/20261201T120000Z_deepseek-v4-flash-dspark-marlin"
    assert path == tmp_path / "results" / summary.run_id
    run = load_run(summary.run_id, tmp_path / "results")
    assert run.fingerprint.serving["endpoint"] == "http://10.0.0.5:5000"
    assert run.fingerprint.serving["server_version"] == "0.5.23"
    assert run.fingerprint.recipe["hash"].startswith("sha256:")
    assert [(c.raw_file, c.completed, c.concurrency) for c in run.summary.cells] == [
        ("g0_smoke.jsonl", 10, 5)
    ]  # as recorded
    assert (path / "recipe.yaml").is_file()
    later = datetime(2026, 12, 1, 13, 0, 0, tzinfo=timezone.utc)
    _, again = verify_endpoint(
        judge(recipe),
        parse_endpoint("http://10.0.0.5:5000"),
        mode="smoke",
        results_dir=tmp_path / "results",
        client=["sglang-client"],
        workdir=tmp_path / "w2",
        run_client=run_client,
        fetch=fetch,
        now=later,
        tokenizer=tokenizer,
    )
    comparison = compare_runs(run.summary, load_run(again.run_id, tmp_path / "results").summary)
    assert [(r.input_len, r.concurrency) for r in comparison.ttft_mean] == [(5000, 5)]  # set side by side


def test_an_endpoint_that_does_not_answer_is_refused_before_any_client_runs(tmp_path: Path, tokenizer: str) -> None:
    recipe = load_recipe(str(RECIPE))
    out = tmp_path / "out"
    with pytest.raises(InputError, match=r"http://10\.0\.0\.5:5000: /health answered nothing"):
        verify_endpoint(
            judge(recipe),
            parse_endpoint("http://10.0.0.5:5000"),
            mode="smoke",
            results_dir=out,
            client=["c"],
            workdir=out / "w",
            run_client=lambda argv: pytest.fail("ran"),
            fetch=lambda url: (0, ""),
            tokenizer=tokenizer,
        )
    assert not out.exists()


def test_without_a_local_tokenizer_nothing_is_asked_or_run(tmp_path: Path) -> None:
    """No tokenizer the recipe (its Hub repository) or the endpoint (its model path) names is ever used."""
    with pytest.raises(InputError, match=r"^verify --endpoint needs --tokenizer DIR: a local copy"):
        verify_endpoint(
            judge(load_recipe(str(RECIPE))),
            parse_endpoint("http://10.0.0.5:5000"),
            mode="smoke",
            results_dir=tmp_path,
            client=["c"],
            workdir=tmp_path / "w",
            run_client=lambda argv: pytest.fail("ran"),
            fetch=lambda url: pytest.fail(f"asked {url}"),
        )


def test_a_comparison_says_where_each_run_ran() -> None:
    node = Fingerprint("node1", True, serving={"kind": "vllm"})
    endpoint = Fingerprint("endpoint-10.0.0.5", True, serving={"kind": "vllm", "endpoint": "http://10.0.0.5:8000"})
    assert fingerprint_differences(node, endpoint)[:2] == [
        "simulated: both runs ran on simulated nodes (no real GPU)",
        "ran at node1 (deployed by hgxkit) vs http://10.0.0.5:8000",
    ]
    assert fingerprint_differences(node, node) == ["simulated: both runs ran on simulated nodes (no real GPU)"]
