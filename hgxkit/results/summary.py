"""The normalized summary of a run (`summary.json`): tool, metric definitions and per-cell metrics.

A cell (one input length x concurrency of one serving group) holds every client metric (`ClientMetrics`), each
repeat's own metrics, the pooled per-request samples, a 95% interval of each headline metric
(`hgxkit.results.stats`), and the cell's telemetry summary when there is one. Schema 2; schema-1 summaries load
(migrated), newer ones are refused.

Example:
    >>> from hgxkit.results.bench import parse_bench_jsonl
    >>> records = parse_bench_jsonl(open("tests/fixtures/sglang_bench/dspark_isl5000_c5_details.jsonl").read())
    >>> cell = CellResult.from_record(records[0], num_prompts=10, group=0, raw_file="c5.jsonl")
    >>> cell.meets_slo(5000.0), cell.intervals["ttft_mean_ms"].known
    (True, True)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

from hgxkit.results.bench import BenchRecord, RequestSamples, stats_from_samples
from hgxkit.results.metrics import (
    HEADLINE_METRICS,
    METRICS,
    ClientMetrics,
    metric_definitions,
    metric_values,
)
from hgxkit.results.stats import (
    ALPHA,
    BCA_MAX_SAMPLES,
    BOOTSTRAP_SEED,
    CONFIDENCE_LEVEL,
    N_HIERARCHICAL_RESAMPLES,
    N_RESAMPLES,
    QUANTILES,
    Interval,
    Statistic,
    bootstrap_interval,
    hierarchical_interval,
    min_interval_samples,
    quantile_interval,
    t_interval,
)
from hgxkit.results.telemetry import CellTelemetry
from hgxkit.results.versions import check_schema_version

SUMMARY_SCHEMA_VERSION = 2
READABLE_SUMMARY_VERSIONS = (1, 2)

# How N repeats of a cell become the cell's value: per-request metrics are recomputed over the pooled requests
# of all repeats (when every repeat wrote per-request values; else the mean of the repeats' values), token and
# time totals add up, the peak concurrency is the largest, every other per-run metric is the mean of repeats.
_SUMMED = {"duration_s", "total_input_tokens", "total_output_tokens"}
_MAXED = {"max_concurrent_requests"}
# The headline metric -> (which per-request sample list, which statistic); per-run metrics use the repeats.
_INTERVAL_SOURCES: dict[str, tuple[str | None, Statistic]] = {
    "ttft_mean_ms": ("ttfts_ms", "mean"),
    "ttft_p90_ms": ("ttfts_ms", "p90"),
    "ttft_p99_ms": ("ttfts_ms", "p99"),
    "tpot_mean_ms": ("tpots_ms", "mean"),
    "output_throughput": (None, "mean"),
    "accept_length": (None, "mean"),
}
assert set(_INTERVAL_SOURCES) == set(HEADLINE_METRICS)


def statistics_note() -> dict[str, Any]:
    """How intervals and verdicts are computed (stored with every summary)."""
    return {
        "confidence_level": CONFIDENCE_LEVEL,
        "interval": f"means of one run: scipy.stats.bootstrap, BCa (percentile above {BCA_MAX_SAMPLES} samples), "
        f"{N_RESAMPLES} resamples, seed {BOOTSTRAP_SEED}; means over several repeats: hierarchical bootstrap "
        f"(repeats, then requests within each), {N_HIERARCHICAL_RESAMPLES} resamples; quantiles (P90, P99): "
        "order statistics (distribution-free binomial ranks; no upper bound when too few requests); per-run "
        "metrics: Student t over the repeats",
        "interval_min_samples": min_interval_samples(),
        "per_request_metrics": "TTFT/TPOT intervals over the per-request values; with several repeats the mean's "
        "bootstrap resamples repeats first, so requests of one run are not taken for independent draws; the "
        "quantile intervals pool the repeats' requests (order statistics assume independent draws), while the "
        "run-vs-run test of a quantile resamples repeats first",
        "per_run_metrics": "output throughput and accept length are ratios over a whole client run, so their "
        "intervals are over repeats (one value per repeat)",
        "test": "per-run metrics: Welch t over the repeats; per-request metrics: hierarchical bootstrap of the "
        "difference of the row's own statistic (mean, P90, P99)",
        "alpha": ALPHA,
        "real_difference": "the 95% interval of B - A excludes 0 (p < alpha); a quantile row also needs both "
        "quantiles bounded by their order statistics",
    }


@dataclass(frozen=True, kw_only=True)
class RepeatResult(ClientMetrics):
    """One client run of a cell, with every metric it reported."""

    index: int
    raw_file: str | None = None
    completed: int = 0
    failed: int = 0
    requests_with_samples: int = 0
    derived_fields: list[str] = field(default_factory=list)


def _round(values: list[float]) -> list[float]:
    # Three decimals of a millisecond are below any clock's resolution here and keep summary.json small.
    return [round(v, 3) for v in values]


@dataclass(frozen=True, kw_only=True)
class CellResult(ClientMetrics):
    """One benchmark cell (input length x concurrency) of one serving group, over all its repeats."""

    input_len: int
    concurrency: int
    num_prompts: int
    completed: int
    failed: int
    group: int = 0
    raw_file: str | None = None
    tool: str | None = None
    tool_version: str | None = None
    request_rate: float | None = None
    aggregation: str = "single run"
    lengths: str | None = None  # how the post's random lengths were given to this client, where translated
    ttfts_ms: list[float] = field(default_factory=list)
    tpots_ms: list[float] = field(default_factory=list)
    e2es_ms: list[float] = field(default_factory=list)
    repeats: list[RepeatResult] = field(default_factory=list)
    intervals: dict[str, Interval] = field(default_factory=dict)
    telemetry: CellTelemetry | None = None

    def meets_slo(self, p99_limit_ms: float) -> bool:
        return self.ttft_p99_ms is not None and self.ttft_p99_ms < p99_limit_ms

    def samples(self, metric: str) -> list[float]:
        """The values a metric's interval and test use: pooled per-request values, or one value per repeat."""
        source, _ = _INTERVAL_SOURCES.get(metric, (None, "mean"))
        if source is not None:
            return list(getattr(self, source))
        return [v for r in self.repeats if (v := r.value(metric)) is not None]

    def samples_by_run(self, metric: str) -> list[list[float]]:
        """The per-request values of a metric split by repeat (the run is the unit of the hierarchical
        bootstrap); one list when the split is not recorded (TPOTs skip 1-token requests, so their count can
        differ from the TTFTs' that `requests_with_samples` records)."""
        values = self.samples(metric)
        sizes = [r.requests_with_samples for r in self.repeats]
        if len(sizes) < 2 or sum(sizes) != len(values):
            return [values] if values else []
        out, start = [], 0
        for size in sizes:
            out.append(values[start : start + size])
            start += size
        return [run for run in out if run]

    def statistic_of(self, metric: str) -> Statistic:
        """Which statistic a headline metric is (`mean`, `p90`, `p99`)."""
        return _INTERVAL_SOURCES.get(metric, (None, "mean"))[1]

    @classmethod
    def from_record(
        cls,
        record: BenchRecord,
        *,
        num_prompts: int,
        group: int,
        raw_file: str | None,
        telemetry: CellTelemetry | None = None,
    ) -> CellResult:
        """A cell from one client run (see `from_repeats` for several)."""
        return cls.from_repeats(
            [record], num_prompts=num_prompts, group=group, raw_files=[raw_file], telemetry=telemetry
        )

    @classmethod
    def from_repeats(
        cls,
        records: list[BenchRecord],
        *,
        num_prompts: int,
        group: int,
        raw_files: list[str | None] | None = None,
        telemetry: CellTelemetry | None = None,
    ) -> CellResult:
        """A cell from N client runs of the same shape (N >= 1), with intervals of the headline metrics.

        Example: `CellResult.from_repeats(parse_bench_jsonl(text), num_prompts=80, group=0, raw_files=[...])`.
        """
        if not records:
            raise ValueError("a cell needs at least one client run")
        files = list(raw_files or [None] * len(records))
        files += [None] * (len(records) - len(files))
        repeats = [
            RepeatResult(
                **r.metrics_json(),
                index=i,
                raw_file=files[i],
                completed=r.completed,
                failed=max(num_prompts - r.completed, r.failed),
                requests_with_samples=len(r.ttfts_ms),
                derived_fields=list(r.derived_fields),
            )
            for i, r in enumerate(records)
        ]
        pooled = all(r.has_request_samples for r in records)
        samples = RequestSamples(
            [v for r in records for v in r.ttfts_ms],
            [v for r in records for v in r.tpots_ms],
            [v for r in records for v in r.e2es_ms],
            [gaps for r in records for gaps in r.itls_ms],
        )
        values = _combine(repeats, samples if pooled and len(records) > 1 else None)
        if len(records) == 1:
            aggregation = "single run: the client's own numbers"
        elif pooled:
            aggregation = f"{len(records)} repeats: per-request metrics over the pooled requests, others combined"
        else:
            aggregation = f"{len(records)} repeats: mean of the repeats' values (no per-request output in each)"
        first = records[0]
        cell = cls(
            **values,
            input_len=first.input_len,
            concurrency=first.max_concurrency or 1,
            num_prompts=num_prompts,
            completed=sum(r.completed for r in repeats),
            failed=sum(r.failed for r in repeats),
            group=group,
            raw_file=files[0],
            tool=first.tool,
            tool_version=first.tool_version,
            request_rate=first.request_rate,
            aggregation=aggregation,
            ttfts_ms=_round(samples.ttfts_ms),
            tpots_ms=_round(samples.tpots_ms),
            e2es_ms=_round(samples.e2es_ms),
            repeats=repeats,
            telemetry=telemetry,
        )
        return _with_intervals(cell)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CellResult:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["repeats"] = [
            RepeatResult(**{k: v for k, v in r.items() if k in {f.name for f in fields(RepeatResult)}})
            for r in data.get("repeats") or []
        ]
        values["intervals"] = {name: Interval(**i) for name, i in (data.get("intervals") or {}).items()}
        values["telemetry"] = CellTelemetry.from_json(data["telemetry"]) if data.get("telemetry") else None
        return cls(**values)


def _combine(repeats: list[RepeatResult], pooled: RequestSamples | None) -> dict[str, float | None]:
    """The cell's value of every metric from its repeats (see the rules above `_SUMMED`)."""
    if len(repeats) == 1:
        return repeats[0].metrics_json()
    recomputed = stats_from_samples(pooled) if pooled is not None else {}
    out: dict[str, float | None] = {}
    for metric in METRICS:
        values = [v for r in repeats if (v := r.value(metric.name)) is not None]
        if metric.sample_unit == "request" and metric.name in recomputed:
            out[metric.name] = recomputed[metric.name]
        elif not values:
            out[metric.name] = None
        elif metric.name in _SUMMED:
            out[metric.name] = float(sum(values))
        elif metric.name in _MAXED:
            out[metric.name] = float(max(values))
        else:
            out[metric.name] = float(np.mean(values))
    return out


def _with_intervals(cell: CellResult) -> CellResult:
    intervals = {}
    for metric, (source, statistic) in _INTERVAL_SOURCES.items():
        if cell.value(metric) is None:
            continue
        if source is None:
            intervals[metric] = t_interval(cell.samples(metric), statistic)
        elif statistic in QUANTILES:
            intervals[metric] = quantile_interval(cell.samples(metric), statistic, runs=len(cell.repeats))
        elif len(runs := cell.samples_by_run(metric)) > 1:
            intervals[metric] = hierarchical_interval(runs, statistic)
        else:
            intervals[metric] = bootstrap_interval(cell.samples(metric), statistic, over="request")
    return CellResult(**{**{f.name: getattr(cell, f.name) for f in fields(cell)}, "intervals": intervals})


@dataclass(frozen=True)
class RunSummary:
    """Everything `results show/compare/report` needs, normalized from the clients' output."""

    run_id: str
    host: str
    recipe: str
    time: str
    simulated: bool
    tool: str
    tool_version: str | None
    cells: list[CellResult]
    schema_version: int = SUMMARY_SCHEMA_VERSION
    metric_definitions: dict[str, Any] = field(default_factory=metric_definitions)
    statistics: dict[str, Any] = field(default_factory=statistics_note)
    gates: list[str] = field(default_factory=list)
    bench: str = "smoke"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any], *, source: str = "summary.json") -> RunSummary:
        """A summary from its JSON; schema 1 is migrated, an unknown or newer schema raises InputError."""
        version = check_schema_version(data, READABLE_SUMMARY_VERSIONS, source)
        values = dict(data)
        if version == 1:
            values = _migrate_v1(values)
        values["cells"] = [CellResult.from_json(cell) for cell in values.get("cells", [])]
        if version == 1:
            values["cells"] = [_with_intervals(cell) for cell in values["cells"]]
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in known})

    def cell(self, input_len: int, concurrency: int, group: int | None = None) -> CellResult | None:
        """The cell for this shape (the first group's, unless `group` is given)."""
        for cell in self.cells:
            if (cell.input_len, cell.concurrency) == (input_len, concurrency) and group in (None, cell.group):
                return cell
        return None


def _migrate_v1(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 1 -> 2: the same cell fields (a subset of today's metrics); the one client run becomes the cell's
    only repeat, and intervals are computed from the per-request TTFTs it kept. Definitions are today's."""
    out = dict(
        data,
        schema_version=SUMMARY_SCHEMA_VERSION,
        metric_definitions=metric_definitions(),
        statistics=statistics_note(),
    )
    cells = []
    for cell in data.get("cells", []):
        repeat = {
            **metric_values(cell),
            "index": 0,
            "raw_file": cell.get("raw_file"),
            "completed": cell.get("completed", 0),
            "failed": cell.get("failed", 0),
            "requests_with_samples": len(cell.get("ttfts_ms") or []),
        }
        cells.append(
            {**cell, "repeats": [repeat], "aggregation": "single run: the client's own numbers (schema 1 archive)"}
        )
    out["cells"] = cells
    return out
