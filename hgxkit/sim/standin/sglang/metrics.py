"""Prometheus text for ``GET /metrics`` of the SGLang stand-in, with SGLang's ``sglang:`` names (simulated).

Labels are SGLang's: ``model_name`` (the served model name), ``engine_type``, ``tp_rank``, ``pp_rank``.

Example:
    >>> from hgxkit.sim.standin.common.engine import Engine, LatencyModel
    >>> text = render(Engine(LatencyModel(), max_running=8), "m", max_total_num_tokens=1000, hicache_tokens=0)
    >>> "sglang:num_running_reqs{" in text and "sglang:time_to_first_token_seconds_bucket{" in text
    True
"""

from __future__ import annotations

from hgxkit.sim.standin.common.engine import Engine, Histogram


def _labels(model_name: str, extra: str = "") -> str:
    base = f'engine_type="unified",model_name="{model_name}",pp_rank="0",tp_rank="0"'
    return "{" + base + (("," + extra) if extra else "") + "}"


def _gauge(out: list[str], name: str, help_text: str, value: float, labels: str) -> None:
    out += [
        f"# HELP sglang:{name} {help_text}",
        f"# TYPE sglang:{name} gauge",
        f"sglang:{name}{labels} {value}",
    ]


def _counter(out: list[str], name: str, help_text: str, value: float, labels: str) -> None:
    out += [
        f"# HELP sglang:{name} {help_text}",
        f"# TYPE sglang:{name} counter",
        f"sglang:{name}{labels} {value}",
    ]


def _histogram(out: list[str], name: str, help_text: str, hist: Histogram, model_name: str) -> None:
    out += [f"# HELP sglang:{name} {help_text}", f"# TYPE sglang:{name} histogram"]
    running = 0
    for bound, count in zip(hist.buckets, hist.counts, strict=True):
        running += count
        le = _labels(model_name, f'le="{bound}"')
        out.append(f"sglang:{name}_bucket{le} {running}")
    inf = _labels(model_name, 'le="+Inf"')
    out.append(f"sglang:{name}_bucket{inf} {hist.n}")
    out.append(f"sglang:{name}_sum{_labels(model_name)} {hist.total}")
    out.append(f"sglang:{name}_count{_labels(model_name)} {hist.n}")


def render(engine: Engine, model_name: str, max_total_num_tokens: int, hicache_tokens: int) -> str:
    """The whole exposition text."""
    lbl = _labels(model_name)
    state = engine.snapshot()
    accept = engine.avg_spec_accept_length
    k = engine.model.num_draft_tokens
    out: list[str] = ["# hgxkit SGLang stand-in: SIMULATED metrics"]
    _gauge(out, "num_running_reqs", "The number of running requests.", state["running"], lbl)
    _gauge(out, "num_queue_reqs", "The number of requests in the waiting queue.", state["queued"], lbl)
    _gauge(out, "num_used_tokens", "The number of used tokens.", 0, lbl)
    _gauge(out, "token_usage", "The token usage.", 0.0, lbl)
    _gauge(
        out,
        "max_total_num_tokens",
        "Maximum total number of tokens in the KV cache pool.",
        max_total_num_tokens,
        lbl,
    )
    _gauge(out, "gen_throughput", "The generation throughput (token/s).", engine.last_gen_throughput, lbl)
    _gauge(out, "cache_hit_rate", "The prefix cache hit rate.", 0.0, lbl)
    _gauge(out, "spec_accept_length", "The average acceptance length of speculative decoding.", accept, lbl)
    rate = (accept - 1.0) / (k - 1) if k > 1 else 0.0
    _gauge(out, "spec_accept_rate", "The average acceptance rate of speculative decoding.", rate, lbl)
    _gauge(out, "spec_num_draft_tokens", "Draft tokens per verify step.", k, lbl)
    _gauge(out, "hicache_host_total_tokens", "Host KV pool capacity in tokens.", hicache_tokens, lbl)
    _gauge(out, "hicache_host_used_tokens", "Host KV pool tokens in use.", 0, lbl)
    _counter(out, "spec_verify_calls_total", "Speculative verify calls.", engine.verify_calls_total, lbl)
    _counter(out, "prompt_tokens_total", "Number of prefill tokens processed.", engine.prompt_tokens_total, lbl)
    _counter(
        out,
        "generation_tokens_total",
        "Number of generation tokens processed.",
        engine.generation_tokens_total,
        lbl,
    )
    _counter(out, "num_requests_total", "Number of requests processed.", engine.requests_total, lbl)
    _counter(out, "num_aborted_requests_total", "Number of requests aborted.", 0, lbl)
    _histogram(
        out,
        "time_to_first_token_seconds",
        "Histogram of time to first token in seconds.",
        engine.ttft_hist,
        model_name,
    )
    _histogram(
        out,
        "inter_token_latency_seconds",
        "Histogram of inter-token latency in seconds.",
        engine.itl_hist,
        model_name,
    )
    _histogram(
        out,
        "e2e_request_latency_seconds",
        "Histogram of End-to-end request latency in seconds",
        engine.e2e_hist,
        model_name,
    )
    _histogram(out, "queue_time_seconds", "Histogram of queueing time in seconds.", engine.queue_hist, model_name)
    return "\n".join(out) + "\n"
