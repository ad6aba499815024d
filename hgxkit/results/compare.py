"""Compare two runs, or a run and the recipe's reference (the post's numbers), cell by cell.

Between two runs the repeat is the unit (`hgxkit.results.stats`): throughput and accept length by Welch's t
test over the repeats, TTFT/TPOT rows by a hierarchical bootstrap (repeats, then requests) of the difference
of the row's own statistic (mean, P90, P99). A difference is real when the 95% interval of B - A excludes 0
(alpha 0.05); a quantile row also needs both quantiles bounded by their order statistics. Otherwise it is a
tie, or "too small to judge" (one repeat, the 3-prompt smoke cell, a P99 over fewer than 368 requests).
`slos` (`--slo ttft_p99<=2000,tpot_p99<=50`) adds each cell's goodput as the engines' clients define it
(`hgxkit.results.goodput`). Telemetry flags (server vs client disagreement, throttled GPUs) are listed too.

Example:
    >>> cmp = compare_runs(run_a, run_b)                  # doctest: +SKIP
    >>> cmp.ttft_mean[0].verdict                           # doctest: +SKIP
    'marlin -19%'
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, NamedTuple, Protocol

from hgxkit.results.goodput import Slo, cell_goodput
from hgxkit.results.metrics import METRIC_BY_NAME
from hgxkit.results.stats import (
    ALPHA,
    QUANTILES,
    Interval,
    Test,
    bootstrap_difference_test,
    judge,
    quantile_interval,
    welch_test,
)
from hgxkit.results.summary import CellResult, RunSummary
from hgxkit.results.telemetry import telemetry_flags

DEFAULT_SLO_P99_MS = 5000.0
COMPARISON_SCHEMA_VERSION = 2

# Tables in the post's order: (key in Comparison, metric).
TABLES = (
    ("ttft_mean", "ttft_mean_ms"),
    ("ttft_p90", "ttft_p90_ms"),
    ("ttft_p99", "ttft_p99_ms"),
    ("tpot_mean", "tpot_mean_ms"),
    ("accept_length", "accept_length"),
    ("output_throughput", "output_throughput"),
)


Outcome = Literal["better", "worse", "tie", "too-small", "n/a"]
ReferenceVerdict = Literal["within", "outside", "not-measured"]
# `--fail-on`: which answers make `results compare` exit 1 (documented in its --help and README).
FAIL_ON = ("outside", "regression", "any")


@dataclass(frozen=True)
class Row:
    """One line of a comparison table: the cell's shape, both values, their intervals, and the verdict."""

    input_len: int
    concurrency: int
    a: float | None
    b: float | None
    verdict: str
    kind: str = "n/a"
    p: float | None = None
    interval_a: Interval | None = None
    interval_b: Interval | None = None
    slo: str | None = None
    # B against A, for a CI to branch on: better / worse (a real difference), tie, too-small, n/a.
    outcome: Outcome = "n/a"
    delta: float | None = None  # b - a
    delta_pct: float | None = None  # (b - a) / a * 100
    test: str | None = None  # which test gave p: "Welch t over repeats", "hierarchical bootstrap of the p99 …"
    diff_low: float | None = None  # 95% interval of b - a from that test
    diff_high: float | None = None
    repeats_a: int = 0
    repeats_b: int = 0


@dataclass(frozen=True)
class Comparison:
    """All tables of a comparison, in the post's layout, plus the notes and telemetry flags."""

    label_a: str
    label_b: str
    ttft_mean: list[Row]
    ttft_p90: list[Row]
    ttft_p99: list[Row]
    tpot_mean: list[Row]
    accept_length: list[Row]
    output_throughput: list[Row]
    slo_p99_ms: float
    notes: list[str]
    flags: list[str] = field(default_factory=list)
    alpha: float = ALPHA
    slos: list[Slo] = field(default_factory=list)
    goodput: list[dict[str, Any]] = field(default_factory=list)

    def tables(self) -> dict[str, list[Row]]:
        return {key: getattr(self, key) for key, _ in TABLES}

    def fails(self, fail_on: str) -> list[str]:
        """What makes `--fail-on` hold: `regression` a real difference where B is worse, `any` a real
        difference either way (`outside` is for `--reference`)."""
        wanted = {"regression": ("worse",), "any": ("worse", "better")}[fail_on]
        return [
            f"{key} {r.input_len}x{r.concurrency}: {r.verdict}"
            for key, rows in self.tables().items()
            for r in rows
            if r.outcome in wanted
        ]

    def to_json(self, differences: list[str]) -> dict[str, Any]:
        """The `results compare --json` document (schema: hgxkit/results/schemas/compare.schema.json)."""
        return {
            "schema_version": COMPARISON_SCHEMA_VERSION,
            "kind": "runs",
            "label_a": self.label_a,
            "label_b": self.label_b,
            "alpha": self.alpha,
            "slo_p99_ms": self.slo_p99_ms,
            "differences": differences,
            "notes": self.notes,
            "flags": self.flags,
            "slos": [slo.to_json() for slo in self.slos],
            "goodput": self.goodput,
            "tables": {
                key: {
                    "metric": metric,
                    "unit": METRIC_BY_NAME[metric].unit,
                    "rows": [asdict(r) for r in getattr(self, key)],
                }
                for key, metric in TABLES
            },
        }


def _shapes(a: RunSummary, b: RunSummary | None) -> list[tuple[int, int]]:
    shapes = {(c.input_len, c.concurrency) for c in a.cells if c.group == 0}
    if b is not None:
        shapes &= {(c.input_len, c.concurrency) for c in b.cells if c.group == 0}
    return sorted(shapes)


def compare_metric(ca: CellResult, cb: CellResult, metric: str, la: str, lb: str) -> Row:
    """One metric of one cell pair: both values, their intervals, the row's own test and the verdict."""
    better = METRIC_BY_NAME[metric].better
    assert better is not None
    j = judge(
        ca.value(metric),
        cb.value(metric),
        la,
        lb,
        better=better,
        test=_test(ca, cb, metric),
        interval_a=_interval(ca, metric),
        interval_b=_interval(cb, metric),
    )
    a, b = ca.value(metric), cb.value(metric)
    outcome: Outcome = {"tie": "tie", "too small to judge": "too-small"}.get(j.kind, "n/a")  # type: ignore[assignment]
    if j.kind == "real" and j.change is not None:
        outcome = "better" if (j.change < 0) == (better == "lower") else "worse"
    delta = b - a if a is not None and b is not None else None
    return Row(
        ca.input_len,
        ca.concurrency,
        a,
        b,
        j.text,
        j.kind,
        j.p,
        j.interval_a,
        j.interval_b,
        outcome=outcome,
        delta=delta,
        delta_pct=j.change * 100 if j.change is not None else None,
        test=j.test.name if j.test else None,
        diff_low=j.test.low if j.test else None,
        diff_high=j.test.high if j.test else None,
        repeats_a=len(ca.repeats),
        repeats_b=len(cb.repeats),
    )


def _interval(cell: CellResult, metric: str) -> Interval | None:
    """The cell's interval of a metric; a quantile's from its order statistics, recomputed (cheap), so an
    archive written before they were used cannot claim a P99 bounded by its sample maximum."""
    statistic = cell.statistic_of(metric)
    if statistic in QUANTILES and METRIC_BY_NAME[metric].sample_unit == "request" and cell.value(metric) is not None:
        return quantile_interval(cell.samples(metric), statistic, runs=len(cell.repeats))
    return cell.intervals.get(metric)


def _test(ca: CellResult, cb: CellResult, metric: str) -> Test:
    """The row's own test: Welch t over the repeats for per-run metrics, else a hierarchical bootstrap of the
    difference of the row's statistic over the per-request values split by repeat."""
    if METRIC_BY_NAME[metric].sample_unit != "request":
        return welch_test(ca.samples(metric), cb.samples(metric))
    runs_a, runs_b = ca.samples_by_run(metric), cb.samples_by_run(metric)
    if not runs_a or not runs_b:
        side = "A" if not runs_a else "B"
        return Test(
            "hierarchical bootstrap",
            len(ca.samples(metric)),
            len(cb.samples(metric)),
            reason=f"too small to judge: no per-request values for {side} (run the client with "
            "--output-details or --save-detailed)",
        )
    return bootstrap_difference_test(runs_a, runs_b, ca.statistic_of(metric))


def run_flags(summary: RunSummary, label: str) -> list[str]:
    """Telemetry flags of every cell of a run, each naming the run and the cell."""
    out = []
    for cell in summary.cells:
        for flag in telemetry_flags(
            cell.telemetry, client_accept_length=cell.accept_length, client_output_throughput=cell.output_throughput
        ):
            out.append(f"{label} group {cell.group} {cell.input_len}x{cell.concurrency}: {flag}")
    return out


def compare_runs(
    a: RunSummary,
    b: RunSummary,
    *,
    label_a: str | None = None,
    label_b: str | None = None,
    slo_p99_ms: float = DEFAULT_SLO_P99_MS,
    slos: list[Slo] | None = None,
) -> Comparison:
    """Cell-by-cell comparison of two runs' group-0 cells (the shapes both ran); `slos` adds goodput."""
    la = label_a or a.recipe
    lb = label_b or b.recipe
    if la == lb:
        la, lb = f"A:{la}", f"B:{lb}"
    rows: dict[str, list[Row]] = {key: [] for key, _ in TABLES}
    goodput = []
    for input_len, conc in _shapes(a, b):
        ca, cb = a.cell(input_len, conc, 0), b.cell(input_len, conc, 0)
        assert ca is not None and cb is not None
        if slos:
            goodput.append(
                {
                    "input_len": input_len,
                    "concurrency": conc,
                    "a": cell_goodput(ca, slos).to_json(),
                    "b": cell_goodput(cb, slos).to_json(),
                }
            )
        for key, metric in TABLES:
            row = compare_metric(ca, cb, metric, la, lb)
            if key == "ttft_p99":
                row = Row(**{**row.__dict__, "slo": _slo(ca, cb, slo_p99_ms)})
            rows[key].append(row)
    notes = []
    if a.simulated or b.simulated:
        notes.append("SIMULATED: at least one run is from a simulated node; its numbers say nothing about H200s")
    notes.append(
        f"The repeat is the unit: a difference is real when the 95% interval of B - A excludes 0 (p < {ALPHA:g}); "
        "throughput and accept length by Welch t over the repeats, TTFT/TPOT by a hierarchical bootstrap "
        "(repeats, then requests) of the row's own statistic; P90/P99 also need both quantiles bounded by "
        "their order statistics."
    )
    flags = run_flags(a, la) + run_flags(b, lb)
    return Comparison(
        la,
        lb,
        *(rows[key] for key, _ in TABLES),
        slo_p99_ms,
        notes,
        flags,  # type: ignore[arg-type]
        slos=list(slos or []),
        goodput=goodput,
    )


def _slo(a: CellResult, b: CellResult, limit: float) -> str:
    mark = lambda c: "✅" if c.meets_slo(limit) else "❌"  # noqa: E731
    return f"{mark(a)} {mark(b)}"


class ReferenceCellLike(Protocol):
    input_len: int
    concurrency: int
    ttft_mean_ms: float | None
    ttft_p90_ms: float | None
    ttft_p99_ms: float | None
    accept_length: float | None


class ReferenceLike(Protocol):
    """What compare_reference reads of a recipe's `Reference` (hgxkit.recipe.spec), by duck typing."""

    tool: str
    cells: tuple[ReferenceCellLike, ...] | list[ReferenceCellLike]


class ReferenceRow(NamedTuple):
    """One metric of one reference cell: the post's value, the run's, and the verdict with its numbers."""

    metric: str
    input_len: int
    concurrency: int
    reference: float | None
    run: float | None
    status: str  # for people: `+12% ok`, `-0.40 OUTSIDE`, `not measured`
    verdict: ReferenceVerdict
    direction: Literal["better", "worse"] | None = None  # the run against the post (lower TTFT is better)
    delta: float | None = None  # run - reference
    delta_pct: float | None = None
    tolerance: float | None = None  # relative (TTFT) or absolute (accept length), as in `tolerances`


@dataclass(frozen=True)
class ReferenceCheck:
    """A run against the recipe's reference numbers: per metric and cell, within tolerance or not."""

    rows: list[ReferenceRow]
    tolerances: dict[str, float]
    within: int
    outside: int
    missing: int

    def fails(self, fail_on: str) -> list[str]:
        """What makes `--fail-on` hold: `outside` any metric outside its tolerance, `regression` outside and
        worse than the post, `any` outside or not measured."""

        def holds(row: ReferenceRow) -> bool:
            if fail_on == "regression":
                return row.verdict == "outside" and row.direction == "worse"
            return row.verdict == "outside" or (fail_on == "any" and row.verdict == "not-measured")

        return [f"{r.metric} {r.input_len}x{r.concurrency}: {r.status}" for r in self.rows if holds(r)]

    def to_json(self, run_id: str, source: str) -> dict[str, Any]:
        """The `results compare RUN --reference --json` document."""
        return {
            "schema_version": COMPARISON_SCHEMA_VERSION,
            "kind": "reference",
            "run": run_id,
            "reference": source,
            "tolerances": self.tolerances,
            "within": self.within,
            "outside": self.outside,
            "missing": self.missing,
            "rows": [row._asdict() for row in self.rows],
        }


# Reference metrics compared, in table order: (row name, metric key, tolerance kind). TTFT and TPOT are relative
# and lower is better; output throughput is relative and higher is better; accept length is absolute.
_REFERENCE_CHECKS = (
    ("TTFT mean", "ttft_mean_ms", "ttft"),
    ("TTFT median", "ttft_median_ms", "ttft"),
    ("TTFT P90", "ttft_p90_ms", "ttft"),
    ("TTFT P99", "ttft_p99_ms", "ttft"),
    ("TPOT mean", "tpot_mean_ms", "tpot"),
    ("TPOT median", "tpot_median_ms", "tpot"),
    ("TPOT P99", "tpot_p99_ms", "tpot"),
    ("output throughput", "output_throughput", "throughput"),
    ("accept length", "accept_length", "accept"),
)


def compare_reference(
    run: RunSummary,
    reference: ReferenceLike,
    *,
    ttft_tolerance: float = 0.25,
    accept_tolerance: float = 0.3,
    tpot_tolerance: float = 0.25,
    throughput_tolerance: float = 0.25,
) -> ReferenceCheck:
    """Each reference cell the run also measured: TTFT within ±ttft_tolerance, TPOT within ±tpot_tolerance,
    output throughput within ±throughput_tolerance (all relative), accept length within ±accept_tolerance
    (absolute). A metric the reference does not give is not checked; cells the run did not measure are missing.

    The reference is a table of the post's numbers without per-request values, so no interval or test applies:
    this is a tolerance check, and says so."""
    tolerances = {"ttft": ttft_tolerance, "tpot": tpot_tolerance, "throughput": throughput_tolerance}
    rows = []
    within = outside = missing = 0
    for ref in reference.cells:
        mine = run.cell(ref.input_len, ref.concurrency, 0)
        for metric, key, kind in _REFERENCE_CHECKS:
            expected = getattr(ref, key, None)
            if expected is None:
                continue
            where = (metric, ref.input_len, ref.concurrency, expected)
            got = getattr(mine, key, None) if mine else None
            if got is None or (isinstance(got, float) and math.isnan(got)):
                missing += 1
                rows.append(ReferenceRow(*where, None, "not measured", "not-measured"))
                continue
            delta = got - expected
            if kind == "accept":
                tolerance, ok = accept_tolerance, abs(delta) <= accept_tolerance
                status = f"{delta:+.2f}"
            else:
                tolerance = tolerances[kind]
                ok = abs(delta) <= tolerance * expected
                status = f"{delta / expected * 100:+.0f}%" if expected else f"{delta:+.2f}"
            within += ok
            outside += not ok
            # Lower latency is better; more throughput and a longer accept length are better.
            higher_better = kind in ("accept", "throughput")
            direction = None if delta == 0 else ("better" if (delta > 0) == higher_better else "worse")
            rows.append(
                ReferenceRow(
                    *where,
                    got,
                    f"{status} {'ok' if ok else 'OUTSIDE'}",
                    "within" if ok else "outside",
                    direction,
                    delta,
                    delta / expected * 100 if expected else None,
                    tolerance,
                )
            )
    used = {
        "ttft_relative": ttft_tolerance,
        "accept_length_absolute": accept_tolerance,
        "tpot_relative": tpot_tolerance,
        "output_throughput_relative": throughput_tolerance,
    }
    return ReferenceCheck(rows, used, within, outside, missing)
