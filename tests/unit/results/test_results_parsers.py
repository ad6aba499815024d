"""Both clients' files read into one record: every metric of SGLang's JSONL and of vLLM's --save-result JSON."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hgxkit.results.bench import SGLANG_KEYS, parse_bench_jsonl
from hgxkit.results.metrics import COUNT_DEFINITIONS, METRIC_FIELDS, METRICS, metric_definitions
from hgxkit.results.summary import CellResult
from hgxkit.results.vllm_bench import VLLM_KEYS, VLLM_TOOL, parse_vllm_result

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
SGLANG = FIXTURES / "sglang_bench"
VLLM = FIXTURES / "vllm_bench"


def test_metric_table_and_dataclass_name_the_same_metrics() -> None:
    assert [m.name for m in METRICS] == list(METRIC_FIELDS)
    assert set(metric_definitions()) == set(METRIC_FIELDS) | {m.name for m in COUNT_DEFINITIONS}
    assert all(d["unit"] and d["description"] for d in metric_definitions().values())
    # Every metric has a source key in SGLang's file; vLLM's lacks only what hgxkit computes from its arrays.
    assert set(SGLANG_KEYS) == set(METRIC_FIELDS)
    assert set(METRIC_FIELDS) - set(VLLM_KEYS) == {"input_throughput", "mean_concurrency"}


def test_every_sglang_metric_is_the_clients_own_number() -> None:
    text = (SGLANG / "dspark_isl5000_c5_details.jsonl").read_text()
    doc = json.loads(text.splitlines()[0])
    (record,) = parse_bench_jsonl(text)
    for name, key in SGLANG_KEYS.items():
        assert record.value(name) == doc[key], name
    assert record.derived_fields == []
    # Per-request samples: successful requests, in milliseconds; TPOT by the client's own formula.
    assert record.ttfts_ms == pytest.approx([t * 1000 for t in doc["ttfts"]])
    assert np.mean(record.ttfts_ms) == pytest.approx(doc["mean_ttft_ms"])
    assert np.mean([g for gaps in record.itls_ms for g in gaps]) == pytest.approx(doc["mean_itl_ms"])
    assert np.mean(record.tpots_ms) == pytest.approx(doc["mean_tpot_ms"], rel=2e-3)  # e2e = ttft + sum(itl)


def test_vllm_detailed_result_keeps_every_reported_number() -> None:
    text = (VLLM / "dspark_isl5000_c5_detailed.json").read_text()
    doc = json.loads(text)
    (record,) = parse_vllm_result(text, source="run.json", tool_version="0.11.0")
    assert (record.tool, record.tool_version) == (VLLM_TOOL, "0.11.0")
    for name, key in VLLM_KEYS.items():
        assert record.value(name) == doc[key], name
    assert (record.input_len, record.output_len, record.max_concurrency, record.num_prompts) == (5000, 64, 5, 10)
    assert record.request_rate is None  # vLLM writes "inf" for unlimited
    assert record.completed == 10 and record.failed == 0
    assert record.accept_length == doc["spec_decode_acceptance_length"]
    # What vLLM does not write is computed, and said so.
    assert record.derived_fields == ["input_throughput", "mean_concurrency"]
    assert record.input_throughput == pytest.approx(doc["total_input_tokens"] / doc["duration"])
    assert record.mean_concurrency == pytest.approx(sum(doc["latencies"]) / doc["duration"])
    assert record.e2es_ms == pytest.approx([lat * 1000 for lat in doc["latencies"]])


def test_vllm_plain_result_derives_what_defaults_leave_out() -> None:
    text = (VLLM / "nospec_isl5000_c5_plain.json").read_text()
    doc = json.loads(text)
    (record,) = parse_vllm_result(text)
    assert "p90_ttft_ms" not in doc and "mean_e2el_ms" not in doc and "ttfts" not in doc
    assert record.ttft_p90_ms is None  # no per-request TTFTs: nothing to derive it from
    assert record.ttfts_ms == [] and record.accept_length is None
    latencies_ms = np.asarray(doc["latencies"]) * 1000
    assert record.e2e_mean_ms == pytest.approx(float(np.mean(latencies_ms)))
    assert record.e2e_p99_ms == pytest.approx(float(np.percentile(latencies_ms, 99)))
    assert {"e2e_mean_ms", "e2e_median_ms", "e2e_p99_ms"} <= set(record.derived_fields)
    assert record.input_len == 5000 and record.output_len == 64  # from the totals / completed


def test_vllm_append_result_with_failed_requests() -> None:
    text = (VLLM / "append_two_runs.json").read_text()
    first, second = parse_vllm_result(text)
    assert (first.max_concurrency, second.max_concurrency) == (5, 10)
    second_doc = json.loads(text.splitlines()[1])
    assert second.failed == 2 == second_doc["failed"] and second.completed == 8
    ok = [t * 1000 for t, e in zip(second_doc["ttfts"], second_doc["errors"], strict=True) if not e]
    assert second.ttfts_ms == pytest.approx(ok)  # failed requests are no latency samples
    assert len(second.errors) == 10 and sum(1 for e in second.errors if e) == 2
    cell = CellResult.from_record(second, num_prompts=10, group=0, raw_file="append.json")
    assert cell.failed == 2 and cell.tool == VLLM_TOOL


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{oops", r"run.json: line 1 is not JSON"),
        ('{"completed": 3}', r"run.json: object 1 is not a `vllm bench serve --save-result` result"),
        ("[1, 2]", r"run.json: object 1 is not a `vllm bench serve --save-result` result"),
    ],
)
def test_bad_vllm_file_names_the_file(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_vllm_result(text, source="run.json")


def test_sglang_line_that_is_not_an_object() -> None:
    with pytest.raises(ValueError, match=r"out.jsonl: line 1 is not a JSON object"):
        parse_bench_jsonl("[1, 2]\n", source="out.jsonl")
