"""The Prometheus metric names one server kind exposes: each kind in hgxkit/kinds/ names its own, verify and
monitoring read them (hgxkit.results.telemetry). A module of its own so that loading the kinds loads no
telemetry code."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KindMetrics:
    """The Prometheus metric names one server kind exposes (each kind in hgxkit/kinds/ names its own)."""

    running: str
    waiting: str
    generation_tokens: str
    prompt_tokens: str
    kv_usage: tuple[str, ...]
    accept_length_gauge: str | None = None
    accepted_tokens: str | None = None
    drafts: str | None = None
    gen_throughput_gauge: str | None = None
    cache_hit_rate_gauge: str | None = None
    prefix_cache_hits: str | None = None
    prefix_cache_queries: str | None = None
    ttft_histogram: str | None = None  # the TTFT histogram (seconds; `_bucket` series), monitoring's TTFT alert
    e2e_histogram: str | None = None  # the end-to-end request latency histogram (seconds)
    itl_histograms: tuple[str, ...] = ()  # inter-token latency (seconds): the current name first, older releases' after
    tpot_histogram: str | None = None  # per-request time per output token (seconds), where the engine has one
    # The KV transfer time histogram of a prefill/decode split's side that pulls the KV (seconds; `_sum`, `_count`)
    kv_transfer_histogram: str | None = None
