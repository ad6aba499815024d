"""Read the JSONL that SGLang's benchmark client (`python -m sglang.benchmark.serving`) writes.

One line per client run (the client appends). The keys are the client's own; `EXPECTED_FIELDS` lists the
ones every line has (sglang 0.5.23 and the dev-dspark image, per the reference notes). With `--output-details`
a line also carries per-request arrays (`ttfts`, `itls`, `input_lens`, `output_lens`, `errors`), which become
the record's per-request samples. `hgxkit/results/vllm_bench.py` reads vLLM's client into the same record.

Example:
    >>> records = parse_bench_jsonl(open("tests/fixtures/sglang_bench/dspark_isl5000_c5_c10.jsonl").read())
    >>> records[0].max_concurrency, records[0].completed, records[0].tool
    (5, 10, 'sglang.benchmark.serving')
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from hgxkit.results.metrics import ClientMetrics

SGLANG_TOOL = "sglang.benchmark.serving"

EXPECTED_FIELDS = (
    "tag",
    "backend",
    "dataset_name",
    "request_rate",
    "max_concurrency",
    "sharegpt_output_len",
    "random_input_len",
    "random_output_len",
    "random_range_ratio",
    "server_info",
    "duration",
    "completed",
    "total_input_tokens",
    "total_input_text_tokens",
    "total_input_vision_tokens",
    "total_output_tokens",
    "total_output_tokens_retokenized",
    "request_throughput",
    "input_throughput",
    "output_throughput",
    "total_throughput",
    "mean_e2e_latency_ms",
    "median_e2e_latency_ms",
    "std_e2e_latency_ms",
    "p90_e2e_latency_ms",
    "p95_e2e_latency_ms",
    "p99_e2e_latency_ms",
    "mean_ttft_ms",
    "median_ttft_ms",
    "std_ttft_ms",
    "p90_ttft_ms",
    "p95_ttft_ms",
    "p99_ttft_ms",
    "mean_tpot_ms",
    "median_tpot_ms",
    "std_tpot_ms",
    "p90_tpot_ms",
    "p95_tpot_ms",
    "p99_tpot_ms",
    "mean_itl_ms",
    "median_itl_ms",
    "std_itl_ms",
    "p90_itl_ms",
    "p95_itl_ms",
    "p99_itl_ms",
    "concurrency",
    "accept_length",
    "max_output_tokens_per_s",
    "max_concurrent_requests",
)

# hgxkit metric name -> SGLang's key (the same numbers, SGLang's names).
SGLANG_KEYS = {
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
    "e2e_mean_ms": "mean_e2e_latency_ms",
    "e2e_median_ms": "median_e2e_latency_ms",
    "e2e_p99_ms": "p99_e2e_latency_ms",
    "request_throughput": "request_throughput",
    "input_throughput": "input_throughput",
    "output_throughput": "output_throughput",
    "total_throughput": "total_throughput",
    "accept_length": "accept_length",
    "mean_concurrency": "concurrency",
    "max_concurrent_requests": "max_concurrent_requests",
    "total_input_tokens": "total_input_tokens",
    "total_output_tokens": "total_output_tokens",
}


@dataclass(frozen=True, kw_only=True)
class BenchRecord(ClientMetrics):
    """One client run, normalised: its load shape, every metric (`ClientMetrics`) and per-request samples.

    `tool` names the client that wrote it; per-request lists hold successful requests only (milliseconds).
    `derived_fields` names metrics hgxkit computed from per-request values because the client's file lacked them.
    """

    tool: str = SGLANG_TOOL
    tool_version: str | None = None
    input_len: int = 0
    output_len: int = 0
    max_concurrency: int | None = None
    request_rate: float | None = None  # None: unlimited (the clients' inf)
    num_prompts: int | None = None
    completed: int = 0
    reported_failed: int | None = None
    tag: str | None = None
    ttfts_ms: list[float] = field(default_factory=list)
    tpots_ms: list[float] = field(default_factory=list)
    e2es_ms: list[float] = field(default_factory=list)
    itls_ms: list[list[float]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    server_version: str | None = None
    server_simulated: bool = False
    missing_fields: list[str] = field(default_factory=list)
    derived_fields: list[str] = field(default_factory=list)

    @property
    def failed(self) -> int:
        """Requests that failed: the client's own count, else the non-empty per-request errors (0 without)."""
        if self.reported_failed is not None:
            return self.reported_failed
        return sum(1 for error in self.errors if error)

    @property
    def has_request_samples(self) -> bool:
        return bool(self.ttfts_ms)


def _number(value: Any) -> float | None:
    """A finite float, or None (JSON null, NaN and the clients' Infinity all mean 'no value')."""
    if value is None or isinstance(value, bool):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


@dataclass(frozen=True)
class RequestSamples:
    """Per-request values of successful requests (ms), derived from a client's detailed arrays."""

    ttfts_ms: list[float]
    tpots_ms: list[float]
    e2es_ms: list[float]
    itls_ms: list[list[float]]


def request_samples(doc: dict[str, Any], latencies_s: list[float] | None = None) -> RequestSamples:
    """Per-request TTFT, TPOT, end-to-end latency and ITLs from the arrays both clients write with details.

    A request counts when its `errors` entry is empty. End-to-end latency is the client's `latencies` where it
    writes them (vLLM), else TTFT + the sum of its ITLs (SGLang writes no per-request latency; the sum differs
    from its own latency by the final, token-less chunk only). TPOT is (latency - TTFT) / (output tokens - 1),
    the clients' own formula, for requests with more than one output token.
    """
    ttfts = doc.get("ttfts") or []
    itls = doc.get("itls") or []
    output_lens = doc.get("output_lens") or []
    errors = doc.get("errors") or [""] * len(ttfts)
    out = RequestSamples([], [], [], [])
    for i, ttft in enumerate(ttfts):
        if ttft is None or (i < len(errors) and errors[i]):
            continue
        gaps = [float(g) for g in (itls[i] if i < len(itls) and itls[i] else [])]
        latency = latencies_s[i] if latencies_s and i < len(latencies_s) else float(ttft) + sum(gaps)
        out.ttfts_ms.append(float(ttft) * 1000.0)
        out.e2es_ms.append(float(latency) * 1000.0)
        out.itls_ms.append([g * 1000.0 for g in gaps])
        tokens = output_lens[i] if i < len(output_lens) and isinstance(output_lens[i], int) else None
        if tokens and tokens > 1:
            out.tpots_ms.append((float(latency) - float(ttft)) * 1000.0 / (tokens - 1))
    return out


def stats_from_samples(samples: RequestSamples) -> dict[str, float]:
    """Mean/median/percentiles of per-request samples, computed as the clients do (numpy, linear)."""
    import numpy as np  # here, not at the top: every deploy imports this module, few compute these

    out: dict[str, float] = {}
    groups = {
        "ttft": samples.ttfts_ms,
        "tpot": samples.tpots_ms,
        "e2e": samples.e2es_ms,
        "itl": [gap for gaps in samples.itls_ms for gap in gaps],
    }
    for prefix, values in groups.items():
        if not values:
            continue
        array = np.asarray(values, dtype=float)
        out[f"{prefix}_mean_ms"] = float(np.mean(array))
        out[f"{prefix}_median_ms"] = float(np.median(array))
        out[f"{prefix}_p99_ms"] = float(np.percentile(array, 99))
        if prefix == "ttft":
            out["ttft_p90_ms"] = float(np.percentile(array, 90))
    return out


def record_from_json(doc: dict[str, Any]) -> BenchRecord:
    """A `BenchRecord` from one parsed SGLang JSONL line (unknown extra keys are ignored)."""
    server_info = doc.get("server_info") or {}
    samples = request_samples(doc)
    metrics = {name: _number(doc.get(key)) for name, key in SGLANG_KEYS.items()}
    derived = []
    for name, value in stats_from_samples(samples).items():
        if metrics.get(name) is None:
            metrics[name] = value
            derived.append(name)
    return BenchRecord(
        **metrics,
        tool=SGLANG_TOOL,
        tool_version=server_info.get("version"),  # the client ships in the server's image/package version
        input_len=int(doc.get("random_input_len") or 0),
        output_len=int(doc.get("random_output_len") or 0),
        max_concurrency=doc.get("max_concurrency"),
        request_rate=_number(doc.get("request_rate")),
        completed=int(doc.get("completed") or 0),
        tag=doc.get("tag"),
        ttfts_ms=samples.ttfts_ms,
        tpots_ms=samples.tpots_ms,
        e2es_ms=samples.e2es_ms,
        itls_ms=samples.itls_ms,
        errors=[str(e) for e in doc.get("errors") or [] if e is not None],
        server_version=server_info.get("version"),
        server_simulated=bool(server_info.get("simulated")),
        missing_fields=[name for name in EXPECTED_FIELDS if name not in doc],
        derived_fields=derived,
    )


def parse_bench_jsonl(text: str, *, source: str = "<jsonl>") -> list[BenchRecord]:
    """Every run in a client JSONL file; a line that is not JSON raises ValueError naming the line."""
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"{source}: line {number} is not JSON ({err.msg})") from None
        if not isinstance(doc, dict):
            raise ValueError(f"{source}: line {number} is not a JSON object; is this the client's --output-file?")
        records.append(record_from_json(doc))
    return records
