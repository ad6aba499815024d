"""Read the JSON that `vllm bench serve --save-result [--save-detailed]` writes, into a `BenchRecord`.

vLLM writes one JSON object per run (`--append-result` puts several in one file, one per line). Keys, from
`vllm/benchmarks/serve.py`: the setup (`date`, `backend`, `model_id`, `num_prompts`, `request_rate` ("inf" when
unlimited), `burstiness`, `max_concurrency`, any `--metadata KEY=VALUE`), the results (`duration`, `completed`,
`failed`, `total_input_tokens`, `total_output_tokens`, `request_throughput`, `output_throughput`,
`total_token_throughput`, `max_output_tokens_per_s`, `max_concurrent_requests`, `latencies` (s, always kept)),
`mean_/median_/std_<m>_ms` and `p<P>_<m>_ms` for m in `--percentile-metrics` (default ttft,tpot,itl; add e2el)
and P in `--metric-percentiles` (default 99), and `spec_decode_acceptance_length` with speculative decoding.
`--save-detailed` keeps the per-request arrays `input_lens`, `output_lens`, `ttfts`, `itls`, `start_times`,
`errors`. Metrics the file lacks (P90 by default, E2E without `e2el`) are computed from the per-request arrays
when they are there, and named in `derived_fields`.

Example:
    >>> text = open("tests/fixtures/vllm_bench/dspark_isl5000_c5_detailed.json").read()
    >>> (record,) = parse_vllm_result(text, tool_version="0.11.0")
    >>> record.tool, record.max_concurrency, record.completed
    ('vllm bench serve', 5, 10)
"""

from __future__ import annotations

import json
from typing import Any

from hgxkit.results.bench import BenchRecord, RequestSamples, _number, request_samples, stats_from_samples

VLLM_TOOL = "vllm bench serve"

# hgxkit metric name -> vLLM's key.
VLLM_KEYS = {
    "duration_s": "duration",
    "ttft_mean_ms": "mean_ttft_ms",
    "ttft_median_ms": "median_ttft_ms",
    "ttft_p90_ms": "p90_ttft_ms",
    "ttft_p99_ms": "p99_ttft_ms",
    "tpot_mean_ms": "mean_tpot_ms",
    "tpot_median_ms": "median_tpot_ms",
    "tpot_p99_ms": "p99_tpot_ms",
    "itl_mean_ms": "mean_itl_ms",
    "itl_median_ms": "median_itl_ms",
    "itl_p99_ms": "p99_itl_ms",
    "e2e_mean_ms": "mean_e2el_ms",
    "e2e_median_ms": "median_e2el_ms",
    "e2e_p99_ms": "p99_e2el_ms",
    "request_throughput": "request_throughput",
    "output_throughput": "output_throughput",
    "total_throughput": "total_token_throughput",
    "accept_length": "spec_decode_acceptance_length",
    "max_concurrent_requests": "max_concurrent_requests",
    "total_input_tokens": "total_input_tokens",
    "total_output_tokens": "total_output_tokens",
}
# Keys every `--save-result` file has (generation task); a missing one is listed in `missing_fields`.
VLLM_EXPECTED_FIELDS = (
    "date",
    "backend",
    "model_id",
    "num_prompts",
    "request_rate",
    "burstiness",
    "max_concurrency",
    "duration",
    "completed",
    "failed",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
    "max_output_tokens_per_s",
    "max_concurrent_requests",
)


def _int(value: Any) -> int | None:
    number = _number(value)
    return int(number) if number is not None else None


def _typical_length(doc: dict[str, Any], per_request: str, total: str, completed: int) -> int | None:
    """The cell's length when the file does not say it: the most common per-request length, else the average."""
    lengths = [n for n in doc.get(per_request) or [] if isinstance(n, int) and n > 0]
    if lengths:
        return max(set(lengths), key=lengths.count)
    if completed and doc.get(total):
        return round(float(doc[total]) / completed)
    return None


def vllm_record_from_json(
    doc: dict[str, Any],
    *,
    tool_version: str | None = None,
    input_len: int | None = None,
    output_len: int | None = None,
) -> BenchRecord:
    """A `BenchRecord` from one parsed `--save-result` object.

    vLLM records neither its own version nor the requested lengths unless `--metadata` adds them
    (`vllm_version=`, `input_len=`, `output_len=`); pass them here when the caller knows them better.
    """
    completed = int(doc.get("completed") or 0)
    errors = doc.get("errors") or []
    # `latencies` stay in the file without --save-detailed; failed requests have latency 0, and without
    # `errors` we cannot tell them apart, so they are used only when every request succeeded.
    latencies = [float(x) for x in doc.get("latencies") or [] if x is not None]
    all_ok = (_int(doc.get("failed")) or 0) == 0 or len(errors) == len(latencies)
    samples = request_samples(doc, latencies if all_ok else None)
    metrics = {name: _number(doc.get(key)) for name, key in VLLM_KEYS.items()}
    derived = []
    computed = stats_from_samples(samples)
    if not samples.e2es_ms and latencies and all_ok:
        ok = [lat * 1000.0 for i, lat in enumerate(latencies) if not (i < len(errors) and errors[i])]
        computed.update(stats_from_samples(RequestSamples([], [], ok, [])))
    duration = metrics["duration_s"]
    if duration:
        if doc.get("total_input_tokens") is not None:
            computed["input_throughput"] = float(doc["total_input_tokens"]) / duration
        if latencies and all_ok:
            # SGLang's `concurrency` is sum(latency) / duration; vLLM writes none, the same formula applies.
            computed["mean_concurrency"] = sum(latencies) / duration
    for name, value in computed.items():
        if metrics.get(name) is None:
            metrics[name] = value
            derived.append(name)
    guessed_input = _typical_length(doc, "input_lens", "total_input_tokens", completed)
    guessed_output = _typical_length(doc, "output_lens", "total_output_tokens", completed)
    return BenchRecord(
        **metrics,
        tool=VLLM_TOOL,
        tool_version=tool_version or doc.get("vllm_version"),
        input_len=input_len or _int(doc.get("input_len")) or _int(doc.get("random_input_len")) or guessed_input or 0,
        output_len=output_len
        or _int(doc.get("output_len"))
        or _int(doc.get("random_output_len"))
        or guessed_output
        or 0,
        max_concurrency=_int(doc.get("max_concurrency")),
        request_rate=_number(doc.get("request_rate")) if doc.get("request_rate") != "inf" else None,
        num_prompts=_int(doc.get("num_prompts")),
        completed=completed,
        reported_failed=_int(doc.get("failed")),
        tag=doc.get("label"),
        ttfts_ms=samples.ttfts_ms,
        tpots_ms=samples.tpots_ms,
        e2es_ms=samples.e2es_ms,
        itls_ms=samples.itls_ms,
        errors=[str(e) for e in errors if e is not None],
        server_version=tool_version or doc.get("vllm_version"),
        missing_fields=[name for name in VLLM_EXPECTED_FIELDS if name not in doc],
        derived_fields=derived,
    )


def parse_vllm_result(
    text: str,
    *,
    source: str = "<vllm json>",
    tool_version: str | None = None,
    input_len: int | None = None,
    output_len: int | None = None,
) -> list[BenchRecord]:
    """Every run in a `vllm bench serve --save-result` file (one object, or one per line with --append-result).

    Bad input raises ValueError naming the file and line.
    """
    stripped = text.strip()
    if not stripped:
        return []
    try:
        docs = [json.loads(stripped)]
    except json.JSONDecodeError:
        docs = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                docs.append(json.loads(line))
            except json.JSONDecodeError as err:
                raise ValueError(f"{source}: line {number} is not JSON ({err.msg})") from None
    records = []
    for index, doc in enumerate(docs, start=1):
        if not isinstance(doc, dict) or "duration" not in doc:
            raise ValueError(f"{source}: object {index} is not a `vllm bench serve --save-result` result")
        records.append(
            vllm_record_from_json(doc, tool_version=tool_version, input_len=input_len, output_len=output_len)
        )
    return records
