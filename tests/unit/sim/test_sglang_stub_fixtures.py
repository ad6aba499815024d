"""JSONL written by SGLang's real benchmark client against the stand-in (recorded by record.sh).

The client venv (about 6.3 GB) is not in CI, so these tests read the recorded files; the test that runs the
client live is skipped unless ``HGXKIT_SGLANG_CLIENT_VENV`` points at a venv made by
``hgxkit/sim/standin/sglang/install_client.sh``.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hgxkit.results.bench import EXPECTED_FIELDS

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sglang_bench"
# The keys, in order, that sglang.benchmark.serving writes (shared/reference/sglang.md §4).
DOCUMENTED_KEYS = list(EXPECTED_FIELDS)  # the one list, hgxkit/results/bench.py


def _rows(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (FIXTURES / name).read_text().splitlines() if line.strip()]


def _truths(name: str) -> list[dict[str, Any]]:
    return [json.loads(line)["hgxkit_sim_request"] for line in (FIXTURES / name).read_text().splitlines()]


def test_jsonl_has_the_documented_keys_in_order() -> None:
    for name in ("dspark_isl5000_c5_c10.jsonl", "nospec_isl5000_c5.jsonl"):
        for row in _rows(name):
            assert list(row)[: len(DOCUMENTED_KEYS)] == DOCUMENTED_KEYS


def test_dspark_runs_values() -> None:
    first, second = _rows("dspark_isl5000_c5_c10.jsonl")  # appended, one line per run
    assert (first["tag"], first["max_concurrency"], first["completed"]) == (None, 5, 10)
    assert (second["tag"], second["max_concurrency"], second["completed"]) == ("second-run", 10, 20)
    for row in (first, second):
        assert row["backend"] == "sglang" and row["dataset_name"] == "random-ids"
        assert row["random_input_len"] == 5000 and row["random_output_len"] == 64
        # the client subtracts the BOS it expects the server to add: 4999 ids per prompt
        assert row["total_input_tokens"] == 4999 * row["completed"]
        assert row["total_output_tokens"] == row["total_output_tokens_retokenized"] == 64 * row["completed"]
        assert 5.0 <= row["accept_length"] <= 5.6
        assert 0 < row["mean_ttft_ms"] <= row["p99_ttft_ms"]
        info = row["server_info"]
        assert info["simulated"] is True and info["speculative_algorithm"] == "DSPARK"
        assert info["tp_size"] == 4 and info["moe_runner_backend"] == "marlin"


def test_nospec_run_has_no_accept_length() -> None:
    [row] = _rows("nospec_isl5000_c5.jsonl")
    assert row["accept_length"] is None
    assert row["server_info"]["speculative_algorithm"] is None
    assert "avg_spec_accept_length" not in row["server_info"]["internal_states"][0]


def test_client_ttft_matches_server_ground_truth() -> None:
    [row] = _rows("dspark_isl5000_c5_details.jsonl")
    client_ttfts_ms = [t * 1000 for t in row["ttfts"]]
    # truth-dspark.jsonl holds every request of record.sh's DSPARK server in order; the details run came last
    truth_ms = [t["ttft_ms"] for t in _truths("truth-dspark.jsonl")[-len(client_ttfts_ms) :]]
    assert len(truth_ms) == len(client_ttfts_ms) == 10
    ratio = statistics.mean(client_ttfts_ms) / statistics.mean(truth_ms)
    # client TTFT = server TTFT + HTTP and client overhead: a few ms on loopback (documented error: ≤ 10 %)
    assert 1.0 <= ratio <= 1.10
    assert statistics.mean(client_ttfts_ms) == pytest.approx(row["mean_ttft_ms"], rel=1e-6)


def test_live_client_against_stub(tmp_path: Path, client_venv: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(Path(__file__).resolve().parents[3] / "bench" / "stub_fidelity.py"),
            "--client-venv",
            str(client_venv),
            "--concurrency",
            "2",
            "--json",
            str(tmp_path / "fidelity.json"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [line] = json.loads((tmp_path / "fidelity.json").read_text())
    assert line["concurrency"] == 2 and 0.95 <= line["mean_ratio"] <= 1.2
