"""Goodput of a cell against latency SLOs (`--slo ttft_p99<=2000,tpot_p99<=50`), as the engines' clients define it.

SGLang's `bench_serving --goodput ttft:2000 tpot:50` and vLLM's `vllm bench serve --goodput …` count a request
as good only when every listed per-request latency is at or under its limit (TPOT per request:
(latency - TTFT) / (output tokens - 1)); `request_goodput` is good requests per second of the benchmark,
`slo_attainment` good requests over requests sent (sglang/benchmark/goodput.py; vllm/benchmarks/serve.py,
the DistServe definition). A term may name a statistic (`ttft_p99<=2000`): the request-level goodput uses
the per-request limit as the clients do, and the term is also checked on the cell's P99, with the P99's
order-statistic upper bound saying whether it is met with 95% confidence (None when P99 has no upper bound
at this many requests).

Example:
    >>> [s.text for s in parse_slos("ttft_p99<=2000,tpot<=50")]
    ['ttft_p99<=2000', 'tpot<=50']
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import numpy as np

from hgxkit.errors import InputError
from hgxkit.results.stats import QUANTILES, quantile_interval

# The clients' SLO names -> the per-request sample list of a cell.
_METRICS = {"ttft": "ttfts_ms", "tpot": "tpots_ms", "e2el": "e2es_ms", "e2e": "e2es_ms"}
_STATISTICS = {"mean": None, "median": 50.0, "p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0}
_TERM = re.compile(r"^(?P<metric>[a-z0-9]+?)(?:_(?P<stat>mean|median|p\d+))?\s*<=\s*(?P<limit>[0-9.]+)$")


@dataclass(frozen=True)
class Slo:
    """One term of `--slo`: a per-request latency limit in ms, optionally naming the statistic to check."""

    metric: str  # ttft, tpot, e2el
    limit_ms: float
    statistic: str | None = None  # mean, median, p50, p90, p95, p99; None: per request only

    @property
    def text(self) -> str:
        return f"{self.metric}{'_' + self.statistic if self.statistic else ''}<={self.limit_ms:g}"

    def to_json(self) -> dict[str, Any]:
        return {"term": self.text, "metric": self.metric, "statistic": self.statistic, "limit_ms": self.limit_ms}


def parse_slos(text: str) -> list[Slo]:
    """`ttft_p99<=2000,tpot_p99<=50` -> SLO terms; a bad term raises InputError naming it and the form."""
    out = []
    for term in (t.strip() for t in text.split(",")):
        match = _TERM.match(term.lower())
        metric = match["metric"] if match else None
        if match is None or metric not in _METRICS or (match["stat"] and match["stat"] not in _STATISTICS):
            raise InputError(
                f"--slo: {term!r} is not an SLO term; write METRIC[_STAT]<=MS with METRIC ttft, "
                "tpot or e2el and STAT mean, median, p90, p95 or p99, e.g. ttft_p99<=2000,tpot_p99<=50"
            )
        out.append(Slo("e2el" if metric == "e2e" else metric, float(match["limit"]), match["stat"]))
    return out


class CellLike(Protocol):
    completed: int
    failed: int
    duration_s: float | None
    ttfts_ms: list[float]
    tpots_ms: list[float]
    e2es_ms: list[float]


@dataclass(frozen=True)
class TermCheck:
    """One SLO term on the cell's statistic: its value, met or not, and met with 95% confidence."""

    term: str
    value: float | None
    met: bool | None
    upper_bound: float | None = None
    met_with_95pct_confidence: bool | None = None
    reason: str | None = None


@dataclass(frozen=True)
class Goodput:
    """A cell's goodput: good requests (every per-request SLO met), per second and as a share of requests."""

    slos_ms: dict[str, float]
    requests: int
    good: int | None
    request_goodput: float | None
    slo_attainment: float | None
    slo_attainment_by_metric: dict[str, float | None]
    terms: list[TermCheck] = field(default_factory=list)
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _per_request(cell: CellLike, metric: str) -> list[float] | None:
    """The metric's per-request values aligned with the TTFTs (None when they are not: TPOTs skip requests
    with one output token, which the clients count as TPOT 0)."""
    values = list(getattr(cell, _METRICS[metric]))
    return values if len(values) == len(cell.ttfts_ms) else None


def cell_goodput(cell: CellLike, slos: list[Slo]) -> Goodput:
    """The cell's goodput under `slos` (see the module doc); failed requests are never good."""
    sent = cell.completed + cell.failed
    limits: dict[str, float] = {}
    for slo in slos:  # two terms on one metric (ttft_p90<=1000,ttft_p99<=2000): a request must meet the lower
        limits[slo.metric] = min(limits.get(slo.metric, slo.limit_ms), slo.limit_ms)
    terms = [_term(cell, s) for s in slos]
    columns = {m: _per_request(cell, m) for m in limits}
    missing = [m for m, v in columns.items() if v is None]
    if not cell.ttfts_ms or missing:
        why = (
            "no per-request values (run the client with --output-details or --save-detailed)"
            if not cell.ttfts_ms
            else f"the per-request {missing[0]} values do not line up with the requests"
        )
        return Goodput(limits, sent, None, None, None, dict.fromkeys(limits), terms, reason=why)
    met = {m: np.asarray(v) <= limits[m] for m, v in columns.items() if v is not None}
    good = int(np.sum(np.logical_and.reduce(list(met.values()))))
    by_metric: dict[str, float | None] = {m: float(np.sum(ok)) / sent if sent else None for m, ok in met.items()}
    rate = good / cell.duration_s if cell.duration_s else None
    return Goodput(limits, sent, good, rate, good / sent if sent else None, by_metric, terms)


def _term(cell: CellLike, slo: Slo) -> TermCheck:
    values = list(getattr(cell, _METRICS[slo.metric]))
    if slo.statistic is None:
        return TermCheck(slo.text, None, None, reason="per-request limit: see slo_attainment_by_metric")
    if not values:
        return TermCheck(slo.text, None, None, reason="no per-request values")
    pct = _STATISTICS[slo.statistic]
    value = float(np.mean(values)) if pct is None else float(np.percentile(values, pct))
    met = value <= slo.limit_ms
    quantile = {50.0: "median", 90.0: "p90", 95.0: "p95", 99.0: "p99"}.get(pct) if pct is not None else None
    if quantile is None or quantile not in QUANTILES:
        return TermCheck(slo.text, value, met, reason="no order-statistic bound for this statistic")
    interval = quantile_interval(values, quantile)  # type: ignore[arg-type]
    if interval.high is None:
        return TermCheck(slo.text, value, met, None, None, reason=interval.reason)
    return TermCheck(slo.text, value, met, interval.high, interval.high <= slo.limit_ms)
