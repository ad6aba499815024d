"""Read the JSONL that SGLang's benchmark client (`python -m sglang.benchmark.serving`) writes.

One line per client run (the client appends). The keys are the client's own; `EXPECTED_FIELDS` lists the
ones every line has (sglang 0.5.23 and the dev-dspark image, per the reference notes).

Example:
    >>> records = parse_bench_jsonl(open("tests/fixtures/sglang_bench/dspark_isl5000_c5_c10.jsonl").read())
    >>> records[0].max_concurrency, records[0].completed
    (5, 10)
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

EXPECTED_FIELDS = (
    "tag", "backend", "dataset_name", "request_rate", "max_concurrency", "sharegpt_output_len",
    "random_input_len", "random_output_len", "random_range_ratio", "server_info", "duration", "completed",
    "total_input_tokens", "total_input_text_tokens", "total_input_vision_tokens", "total_output_tokens",
    "total_output_tokens_retokenized", "request_throughput", "input_throughput", "output_throughput",
    "total_throughput", "mean_e2e_latency_ms", "median_e2e_latency_ms", "std_e2e_latency_ms",
    "p90_e2e_latency_ms", "p95_e2e_latency_ms", "p99_e2e_latency_ms", "mean_ttft_ms", "median_ttft_ms",
    "std_ttft_ms", "p90_ttft_ms", "p95_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "median_tpot_ms", "std_tpot_ms",
    "p90_tpot_ms", "p95_tpot_ms", "p99_tpot_ms", "mean_itl_ms", "median_itl_ms", "std_itl_ms", "p90_itl_ms",
    "p95_itl_ms", "p99_itl_ms", "concurrency", "accept_length", "max_output_tokens_per_s",
    "max_concurrent_requests",
)  # fmt: skip


@dataclass(frozen=True)
class BenchRecord:
    """One client run: its load shape and the metrics hgxkit reports (milliseconds, tokens/s)."""

    input_len: int
    output_len: int
    max_concurrency: int | None
    completed: int
    duration_s: float
    ttft_mean_ms: float
    ttft_median_ms: float
    ttft_p90_ms: float
    ttft_p99_ms: float
    tpot_mean_ms: float
    itl_mean_ms: float
    e2e_mean_ms: float
    output_throughput: float
    request_throughput: float
    accept_length: float | None
    max_concurrent_requests: int | None
    tag: str | None = None
    ttfts_ms: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    server_version: str | None = None
    missing_fields: list[str] = field(default_factory=list)

    @property
    def failed(self) -> int:
        """Requests that failed (from --output-details errors; 0 when no details were written)."""
        return sum(1 for error in self.errors if error)


def _number(value: Any) -> float:
    if value is None:
        return math.nan
    return float(value)


def record_from_json(doc: dict[str, Any]) -> BenchRecord:
    """A `BenchRecord` from one parsed JSONL line (unknown extra keys are ignored)."""
    server_info = doc.get("server_info") or {}
    accept = doc.get("accept_length")
    return BenchRecord(
        input_len=int(doc.get("random_input_len") or 0),
        output_len=int(doc.get("random_output_len") or 0),
        max_concurrency=doc.get("max_concurrency"),
        completed=int(doc.get("completed") or 0),
        duration_s=_number(doc.get("duration")),
        ttft_mean_ms=_number(doc.get("mean_ttft_ms")),
        ttft_median_ms=_number(doc.get("median_ttft_ms")),
        ttft_p90_ms=_number(doc.get("p90_ttft_ms")),
        ttft_p99_ms=_number(doc.get("p99_ttft_ms")),
        tpot_mean_ms=_number(doc.get("mean_tpot_ms")),
        itl_mean_ms=_number(doc.get("mean_itl_ms")),
        e2e_mean_ms=_number(doc.get("mean_e2e_latency_ms")),
        output_throughput=_number(doc.get("output_throughput")),
        request_throughput=_number(doc.get("request_throughput")),
        accept_length=float(accept) if accept is not None else None,
        max_concurrent_requests=doc.get("max_concurrent_requests"),
        tag=doc.get("tag"),
        ttfts_ms=[float(t) * 1000.0 for t in doc.get("ttfts") or [] if t is not None],
        errors=[str(e) for e in doc.get("errors") or []],
        server_version=server_info.get("version"),
        missing_fields=[name for name in EXPECTED_FIELDS if name not in doc],
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
        records.append(record_from_json(doc))
    return records
