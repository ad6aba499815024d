"""Every metric a benchmark client reports, with its name, unit and meaning, stated once.

`ClientMetrics` holds the values (one client run, one repeat, or a whole cell); `METRICS` says what each field
means. Both clients (SGLang's `sglang.benchmark.serving` and `vllm bench serve`) are read into these names, so
everything downstream (summary.json, `results show`, compare, the HTML report) uses one vocabulary.

Example:
    >>> METRIC_BY_NAME["ttft_p99_ms"].unit
    'ms'
    >>> ClientMetrics(ttft_mean_ms=257.0).value("ttft_mean_ms")
    257.0
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Literal

Better = Literal["lower", "higher"]
# Where a metric's uncertainty comes from: each request gives one value ("request"), or only the whole run does
# ("run": throughput and accept length are ratios over the run, so one client run is one sample).
SampleUnit = Literal["request", "run"]


@dataclass(frozen=True)
class MetricDef:
    """What one metric is: its field name, unit, meaning, which direction is better, and its sample unit."""

    name: str
    unit: str
    description: str
    better: Better | None
    sample_unit: SampleUnit


METRICS: tuple[MetricDef, ...] = (
    MetricDef("duration_s", "s", "wall time of the client's benchmark phase (warmup excluded)", None, "run"),
    MetricDef(
        "ttft_mean_ms",
        "ms",
        "time to first token (request sent -> first streamed token), mean over successful requests, client side",
        "lower",
        "request",
    ),
    MetricDef("ttft_median_ms", "ms", "TTFT, median over successful requests", "lower", "request"),
    MetricDef("ttft_p90_ms", "ms", "TTFT, 90th percentile (numpy linear interpolation)", "lower", "request"),
    MetricDef("ttft_p99_ms", "ms", "TTFT, 99th percentile (numpy linear interpolation)", "lower", "request"),
    MetricDef(
        "tpot_mean_ms",
        "ms",
        "time per output token after the first: (latency - TTFT) / (output tokens - 1) per request, mean",
        "lower",
        "request",
    ),
    MetricDef("tpot_median_ms", "ms", "TPOT, median over requests", "lower", "request"),
    MetricDef("tpot_p99_ms", "ms", "TPOT, 99th percentile over requests", "lower", "request"),
    MetricDef(
        "itl_mean_ms",
        "ms",
        "inter-token latency: gap between streamed chunks, mean over all gaps of all "
        "requests (with speculative decoding one chunk can carry several tokens)",
        "lower",
        "request",
    ),
    MetricDef("itl_median_ms", "ms", "ITL, median over all gaps", "lower", "request"),
    MetricDef("itl_p99_ms", "ms", "ITL, 99th percentile over all gaps", "lower", "request"),
    MetricDef("e2e_mean_ms", "ms", "end-to-end latency (request sent -> last token), mean", "lower", "request"),
    MetricDef("e2e_median_ms", "ms", "end-to-end latency, median", "lower", "request"),
    MetricDef("e2e_p99_ms", "ms", "end-to-end latency, 99th percentile", "lower", "request"),
    MetricDef("request_throughput", "req/s", "completed requests / duration", "higher", "run"),
    MetricDef("input_throughput", "tok/s", "prompt tokens of completed requests / duration", "higher", "run"),
    MetricDef("output_throughput", "tok/s", "generated tokens / duration", "higher", "run"),
    MetricDef("total_throughput", "tok/s", "(prompt + generated tokens) / duration", "higher", "run"),
    MetricDef(
        "accept_length",
        "tok/step",
        "speculative decoding: tokens produced per target-model forward "
        "(accepted drafts + 1); SGLang: the server's avg_spec_accept_length after --flush-cache reset it; "
        "vLLM: 1 + accepted / drafts from the server's spec_decode counters over the run; "
        "absent without speculative decoding",
        "higher",
        "run",
    ),
    MetricDef(
        "mean_concurrency",
        "requests",
        "requests in flight, time-averaged over the run (SGLang's "
        "`concurrency`: sum of latencies / duration; vLLM: the same, computed from `latencies`)",
        None,
        "run",
    ),
    MetricDef(
        "max_concurrent_requests",
        "requests",
        "most requests in flight at once (the clients' `max_concurrent_requests`)",
        None,
        "run",
    ),
    MetricDef("total_input_tokens", "tokens", "prompt tokens sent by completed requests", None, "run"),
    MetricDef("total_output_tokens", "tokens", "tokens generated for completed requests", None, "run"),
)
METRIC_BY_NAME = {m.name: m for m in METRICS}

# The metrics that get a 95% interval and a verdict in `compare`.
HEADLINE_METRICS = ("ttft_mean_ms", "ttft_p90_ms", "ttft_p99_ms", "tpot_mean_ms", "output_throughput", "accept_length")


@dataclass(frozen=True, kw_only=True)
class ClientMetrics:
    """Every metric of `METRICS` (None where the client did not report it). Units: see `METRICS`."""

    duration_s: float | None = None
    ttft_mean_ms: float | None = None
    ttft_median_ms: float | None = None
    ttft_p90_ms: float | None = None
    ttft_p99_ms: float | None = None
    tpot_mean_ms: float | None = None
    tpot_median_ms: float | None = None
    tpot_p99_ms: float | None = None
    itl_mean_ms: float | None = None
    itl_median_ms: float | None = None
    itl_p99_ms: float | None = None
    e2e_mean_ms: float | None = None
    e2e_median_ms: float | None = None
    e2e_p99_ms: float | None = None
    request_throughput: float | None = None
    input_throughput: float | None = None
    output_throughput: float | None = None
    total_throughput: float | None = None
    accept_length: float | None = None
    mean_concurrency: float | None = None
    max_concurrent_requests: float | None = None
    total_input_tokens: float | None = None
    total_output_tokens: float | None = None

    def value(self, name: str) -> float | None:
        """One metric by name (KeyError for a name that is not in `METRICS`)."""
        if name not in METRIC_BY_NAME:
            raise KeyError(name)
        return getattr(self, name)

    def metrics_json(self) -> dict[str, float | None]:
        """Only the metric fields, by name."""
        return {m.name: getattr(self, m.name) for m in METRICS}


METRIC_FIELDS = tuple(f.name for f in fields(ClientMetrics))


def metric_values(source: dict[str, Any]) -> dict[str, float | None]:
    """The metric fields present in a JSON object (for `ClientMetrics` subclasses' `from_json`)."""
    return {name: source.get(name) for name in METRIC_FIELDS if name in source}


# Counts every cell has besides the metrics (defined here so the summary's definitions cover every number).
COUNT_DEFINITIONS = (
    MetricDef("completed", "requests", "requests that completed, over all repeats of the cell", "higher", "run"),
    MetricDef(
        "failed",
        "requests",
        "requests that failed (the client's errors, or prompts sent - completed), over all repeats",
        "lower",
        "run",
    ),
)


def metric_definitions() -> dict[str, dict[str, Any]]:
    """The definitions stored with every summary: name -> unit, meaning, better direction, sample unit."""
    return {m.name: {k: v for k, v in asdict(m).items() if k != "name"} for m in (*METRICS, *COUNT_DEFINITIONS)}
