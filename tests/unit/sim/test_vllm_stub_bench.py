"""vLLM's REAL benchmark client (`vllm bench serve`, vllm 0.33.0 from the client store) against the in-process
vLLM stand-in, and the recorded result files in tests/fixtures/vllm_bench/.

The live tests need the client store (`hgxkit sim client install`): they are skipped without it, and fail
under CI=true, where .ci/run installs it. The fixture tests always run.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
from pathlib import Path
from typing import Any

import pytest

from hgxkit.sim.hub.makerepo import RepoSpec, make_repo
from hgxkit.sim.standin import client_store
from hgxkit.sim.standin.vllm.inprocess import start

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "vllm_bench"
PERCENTILES = ("50", "90", "99")
METRICS = ("ttft", "tpot", "itl", "e2el")
# The saved JSON's keys (vLLM 0.33 main_async + benchmark; shared/reference/vllm.md §4).
HEADER_KEYS = ["date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts"]
RESULT_KEYS = [
    "request_rate",
    "burstiness",
    "max_concurrency",
    "duration",
    "completed",
    "failed",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "request_goodput",
    "output_throughput",
    "total_token_throughput",
    "max_output_tokens_per_s",
    "max_concurrent_requests",
]
SPEC_KEYS = [
    "spec_decode_acceptance_rate",
    "spec_decode_acceptance_length",
    "spec_decode_num_drafts",
    "spec_decode_draft_tokens",
    "spec_decode_accepted_tokens",
    "spec_decode_per_position_acceptance_rates",
]
# TTFT dominates and is well above loopback/client overhead (see the ground-truth bound below).
LATENCY = {
    "HGXKIT_SIM_TTFT_BASE_MS": "120",
    "HGXKIT_SIM_PREFILL_US_PER_TOKEN": "20",
    "HGXKIT_SIM_DECODE_STEP_MS": "4",
    "HGXKIT_SIM_DECODE_MS_PER_RUNNING": "0.5",
    "HGXKIT_SIM_SEED": "11",
}


def metric_keys(metrics: tuple[str, ...], percentiles: tuple[str, ...]) -> list[str]:
    keys = []
    for m in metrics:
        keys += [f"mean_{m}_ms", f"median_{m}_ms", f"std_{m}_ms"] + [f"p{p}_{m}_ms" for p in percentiles]
    return keys


@pytest.fixture()
def vllm_cli() -> list[str]:
    """vLLM's real CLI from the client store (HGXKIT_VLLM_CLIENT_VENV, else HGXKIT_SGLANG_CLIENT_VENV)."""
    venv = os.environ.get("HGXKIT_VLLM_CLIENT_VENV") or os.environ.get("HGXKIT_SGLANG_CLIENT_VENV")
    cmd = client_store.vllm_command(Path(venv)) if venv else None
    if cmd is None:
        if os.environ.get("CI") == "true":
            pytest.fail(
                f"CI=true but no vLLM client in the client store ({venv or 'unset'}): `hgxkit sim client install`"
            )
        pytest.skip("needs the client store with vLLM's client (HGXKIT_VLLM_CLIENT_VENV or HGXKIT_SGLANG_CLIENT_VENV)")
    return cmd


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    spec = RepoSpec(repo_id="org/llama-8b", total_bytes=64 << 10, shards=1, vocab_size=4096, shape="generic")
    return make_repo(tmp_path_factory.mktemp("models"), spec) / "refs/main"


def _bench(cli: list[str], out: Path, *flags: str, env: dict[str, str] | None = None) -> tuple[dict[str, Any], str]:
    res = subprocess.run(
        [*cli, "bench", "serve", *flags, "--save-result", "--result-dir", str(out), "--disable-tqdm"],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})},
    )
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    [path] = list(out.glob("*.json"))
    return json.loads(path.read_text()), res.stdout


def test_real_client_against_the_stand_in_completions_with_spec_decode(
    vllm_cli: list[str], model: Path, tmp_path: Path
) -> None:
    spec = '{"method": "mtp", "num_speculative_tokens": 3}'
    # A first token far slower than loopback and client overhead (hundreds of ms on a busy host), so the ratio
    # below holds on a loaded machine.
    slow_first = {**LATENCY, "HGXKIT_SIM_TTFT_BASE_MS": "2000"}
    with start(model, "--served-model-name", "llama", "-sc", spec, "--max-num-seqs", "8", env=slow_first) as sim:
        doc, stdout = _bench(
            vllm_cli,
            tmp_path,
            "--backend",
            "vllm",
            "--base-url",
            sim.url,
            "--model",
            "llama",
            "--tokenizer",
            str(model),
            "--dataset-name",
            "random",
            "--random-input-len",
            "256",
            "--random-output-len",
            "24",
            "--num-prompts",
            "16",
            "--max-concurrency",
            "4",
            "--percentile-metrics",
            ",".join(METRICS),
            "--metric-percentiles",
            ",".join(PERCENTILES),
            "--seed",
            "5",
        )
        truths = list(sim.app.engine.truths)
        server_drafts = sim.app.engine.verify_calls_total
    assert list(doc)[: len(HEADER_KEYS)] == HEADER_KEYS
    assert set(RESULT_KEYS + metric_keys(METRICS, PERCENTILES) + SPEC_KEYS) <= set(doc)
    assert (doc["backend"], doc["model_id"], doc["tokenizer_id"]) == ("vllm", "llama", str(model))
    assert doc["completed"] == doc["num_prompts"] == 16 and doc["failed"] == 0
    assert doc["total_output_tokens"] == 16 * 24 and doc["total_input_tokens"] == 16 * 256
    assert doc["max_concurrency"] == 4 and doc["request_rate"] == "inf"
    # the client's TTFT is the stand-in's ground truth plus loopback and client overhead
    bench = [t for t in truths if t.input_tokens == 256][-16:]  # the initial test prompt came first
    truth_ms = statistics.mean(t.ttft_ms for t in bench)
    assert truth_ms >= 2000 and 1.0 <= doc["mean_ttft_ms"] / truth_ms <= 1.3, (doc["mean_ttft_ms"], truth_ms)
    assert doc["p50_ttft_ms"] <= doc["p90_ttft_ms"] <= doc["p99_ttft_ms"]
    # spec decoding, read by the client from /metrics deltas: k = 3 drafts per step, accept mean 2.0 by default
    assert 1.4 <= doc["spec_decode_acceptance_length"] <= 2.6
    assert doc["spec_decode_draft_tokens"] == 3 * doc["spec_decode_num_drafts"] <= 3 * server_drafts
    assert len(doc["spec_decode_per_position_acceptance_rates"]) == 3
    assert "Serving Benchmark Result" in stdout and "Speculative Decoding" in stdout
    assert "tokenizer mismatch" not in stdout and "/tokenize unavailable" not in stdout  # prompts aligned


def test_real_client_chat_backend_with_api_key_and_model_from_v1_models(
    vllm_cli: list[str], model: Path, tmp_path: Path
) -> None:
    with start(model, "--api-key", "sk-sim", env=LATENCY) as sim:
        doc, stdout = _bench(
            vllm_cli,
            tmp_path,
            "--backend",
            "openai-chat",
            "--endpoint",
            "/v1/chat/completions",
            "--base-url",
            sim.url,
            "--header",
            "Authorization=Bearer sk-sim",  # 0.33 sends only --header to /v1/models
            "--dataset-name",
            "random",
            "--random-input-len",
            "64",
            "--random-output-len",
            "8",
            "--num-prompts",
            "6",
            "--max-concurrency",
            "2",
            "--ready-check-timeout-sec",
            "30",
            env={"OPENAI_API_KEY": "sk-sim"},
        )
    assert doc["model_id"] == str(model) and doc["tokenizer_id"] == str(model)  # /v1/models' root
    assert doc["completed"] == 6 and doc["failed"] == 0 and doc["total_output_tokens"] == 48
    assert "spec_decode_acceptance_length" not in doc  # no speculative decoding on this server
    assert "Initial test run completed." in stdout


# -- the recorded files (test data for the results parser) ----------------------------------------------------


def _fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name).read_text())


def test_recorded_results_have_vllms_keys() -> None:
    spec = _fixture("random_isl1024_osl128_c4_spec.json")
    assert list(spec)[: len(HEADER_KEYS)] == HEADER_KEYS
    assert set(RESULT_KEYS + metric_keys(METRICS, PERCENTILES) + SPEC_KEYS) <= set(spec)
    assert spec["completed"] == spec["num_prompts"] == 32 and spec["failed"] == 0
    assert spec["total_output_tokens"] == 32 * 128
    chat = _fixture("chat_isl256_osl32_c2.json")
    assert chat["backend"] == chat["endpoint_type"] == "openai-chat"
    assert set(metric_keys(("ttft", "tpot", "itl"), ("99",))) <= set(chat) and "mean_e2el_ms" not in chat
    assert not set(SPEC_KEYS) & set(chat)
    detailed = _fixture("random_isl512_osl64_c8_detailed.json")
    assert len(detailed["ttfts"]) == len(detailed["itls"]) == detailed["completed"] == 24
    rows = [json.loads(line) for line in (FIXTURES / "appended_c1_c4.jsonl").read_text().splitlines()]
    assert [r["max_concurrency"] for r in rows] == [1, 4]


def test_recorded_ttft_matches_the_stand_ins_ground_truth() -> None:
    detailed = _fixture("random_isl512_osl64_c8_detailed.json")
    truths = [
        json.loads(line)["hgxkit_sim_request"] for line in (FIXTURES / "truth-nospec.jsonl").read_text().splitlines()
    ]
    truth_ms = [t["ttft_ms"] for t in truths if t["input_tokens"] == 512][-24:]  # the detailed run came last
    client_ms = [t * 1000 for t in detailed["ttfts"]]
    assert len(truth_ms) == 24
    assert 1.0 <= statistics.mean(client_ms) / statistics.mean(truth_ms) <= 1.3
    assert statistics.mean(client_ms) == pytest.approx(detailed["mean_ttft_ms"], rel=1e-6)
