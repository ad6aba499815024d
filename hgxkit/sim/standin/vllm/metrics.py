"""Prometheus text for ``GET /metrics`` of the vLLM stand-in: vLLM 0.33's ``vllm:`` names, SIMULATED values.

Rendered as prometheus_client renders vLLM's metrics: labels sorted (``engine``, ``model_name``), counters with
``_total`` and a ``_created`` gauge, float values. Engine metrics are absent with ``--disable-log-stats``, as
in vLLM; spec-decode counters (``vllm:spec_decode_num_drafts_total`` …, per ``position``) appear only with
``--speculative-config`` — `vllm bench serve` reads their difference over a run; ``vllm:nixl_xfer_time_seconds``
only with NixlConnector (``--kv-transfer-config``).

Example:
    >>> import io
    >>> from hgxkit.sim.standin.common.engine import LatencyModel
    >>> from hgxkit.sim.standin.vllm.stats import VllmEngine
    >>> text = render(VllmEngine(LatencyModel(), 8, io.StringIO()), "m", spec=False)
    >>> 'vllm:num_requests_running{engine="0",model_name="m"} 0.0' in text
    True
"""

from __future__ import annotations

from hgxkit.sim.standin.common.engine import Histogram
from hgxkit.sim.standin.vllm import nixl
from hgxkit.sim.standin.vllm.stats import HISTOGRAMS, TOKEN_HISTOGRAMS, VllmEngine


def _esc(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class _Out:
    def __init__(self, model_name: str, created: float) -> None:
        self.lines: list[str] = ["# hgxkit vLLM stand-in: SIMULATED metrics (no GPU, no model)"]
        self.model = model_name
        self.created = created

    def labels(self, **extra: str) -> str:
        pairs = {"engine": "0", "model_name": self.model, **extra}
        return "{" + ",".join(f'{k}="{_esc(v)}"' for k, v in sorted(pairs.items())) + "}"

    def gauge(self, name: str, doc: str, value: float, **extra: str) -> None:
        self.lines += [
            f"# HELP vllm:{name} {doc}",
            f"# TYPE vllm:{name} gauge",
            f"vllm:{name}{self.labels(**extra)} {float(value)!r}",
        ]

    def counter(self, name: str, doc: str, values: list[tuple[dict[str, str], float]]) -> None:
        self.lines += [f"# HELP vllm:{name}_total {doc}", f"# TYPE vllm:{name}_total counter"]
        self.lines += [f"vllm:{name}_total{self.labels(**lbl)} {float(v)!r}" for lbl, v in values]
        self.lines += [f"# HELP vllm:{name}_created {doc}", f"# TYPE vllm:{name}_created gauge"]
        self.lines += [f"vllm:{name}_created{self.labels(**lbl)} {self.created!r}" for lbl, _ in values]

    def histogram(self, name: str, doc: str, hist: Histogram) -> None:
        self.lines += [f"# HELP vllm:{name} {doc}", f"# TYPE vllm:{name} histogram"]
        running = 0
        for bound, count in zip(hist.buckets, hist.counts, strict=True):
            running += count
            self.lines.append(f"vllm:{name}_bucket{self.labels(le=repr(float(bound)))} {float(running)!r}")
        self.lines.append(f"vllm:{name}_bucket{self.labels(le='+Inf')} {float(hist.n)!r}")
        self.lines.append(f"vllm:{name}_count{self.labels()} {float(hist.n)!r}")
        self.lines.append(f"vllm:{name}_sum{self.labels()} {float(hist.total)!r}")
        self.lines += [f"# HELP vllm:{name}_created {doc}", f"# TYPE vllm:{name}_created gauge"]
        self.lines.append(f"vllm:{name}_created{self.labels()} {self.created!r}")


def render(
    engine: VllmEngine, model_name: str, spec: bool, log_stats: bool = True, xfer_time: Histogram | None = None
) -> str:
    """The whole exposition text (see the module doc); `xfer_time`: NixlConnector's transfer times, for a server
    with one (hgxkit/sim/standin/vllm/nixl.py)."""
    out = _Out(model_name, engine.created)
    if log_stats and xfer_time is not None:
        out.histogram(nixl.XFER_METRIC, nixl.XFER_DOC, xfer_time)
    if log_stats:
        state = engine.snapshot()
        out.gauge("num_requests_running", "Number of requests in model execution batches.", state["running"])
        out.gauge("num_requests_waiting", "Number of requests waiting to be processed.", state["queued"])
        doc = "Number of waiting requests by reason."
        out.gauge("num_requests_waiting_by_reason", doc, state["queued"], reason="capacity")
        out.gauge("num_requests_waiting_by_reason", doc, 0, reason="deferred")
        out.gauge("kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", engine.kv_cache_usage)
        out.counter(
            "prefix_cache_queries",
            "Prefix cache queries, in terms of number of queried tokens.",
            [({}, engine.prompt_tokens_total)],
        )
        out.counter("prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.", [({}, 0)])
        out.counter("num_preemptions", "Cumulative number of preemption from the engine.", [({}, 0)])
        out.counter("prompt_tokens", "Number of prefill tokens processed.", [({}, engine.prompt_tokens_total)])
        out.counter(
            "generation_tokens", "Number of generation tokens processed.", [({}, engine.generation_tokens_total)]
        )
        out.counter(
            "request_success",
            "Count of successfully processed requests.",
            [({"finished_reason": r}, n) for r, n in engine.finished.items()],
        )
        for name, doc in TOKEN_HISTOGRAMS.items():
            out.histogram(name, doc, engine.token_hist[name])
        for name, (doc, _) in HISTOGRAMS.items():
            out.histogram(name, doc, engine.hist[name])
        if spec:
            out.counter("spec_decode_num_drafts", "Number of spec decoding drafts.", [({}, engine.verify_calls_total)])
            out.counter(
                "spec_decode_num_draft_tokens", "Number of draft tokens.", [({}, engine.spec_draft_tokens_total)]
            )
            out.counter(
                "spec_decode_num_accepted_tokens",
                "Number of accepted tokens.",
                [({}, engine.spec_accepted_tokens_total)],
            )
            out.counter(
                "spec_decode_num_accepted_tokens_per_pos",
                "Accepted tokens per draft position.",
                [({"position": str(pos)}, n) for pos, n in enumerate(engine.spec_accepted_per_pos)],
            )
    return "\n".join(out.lines) + "\n"
