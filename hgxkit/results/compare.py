"""Compare two runs, or a run and the recipe's reference (the post's numbers), cell by cell.

A difference counts only when it is larger than the noise threshold (default 6%: the post itself calls
257 vs 260 ms and 442 vs 468 ms ties but 369 vs 398 ms a difference) and, where both cells carry
per-request TTFTs, a Mann-Whitney U test rejects "same distribution" at p < 0.05. Otherwise it is a tie.

Example:
    >>> verdict(257.0, 260.0, "flashinfer", "marlin")
    'tie'
    >>> verdict(380.0, 307.0, "flashinfer", "marlin")
    'marlin -19%'
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hgxkit.recipe.model import Reference
from hgxkit.results.summary import CellResult, RunSummary

DEFAULT_TIE = 0.06
DEFAULT_SLO_P99_MS = 5000.0


def mann_whitney_p(a: list[float], b: list[float]) -> float | None:
    """Two-sided p-value of the Mann-Whitney U test (normal approximation); None with < 5 samples a side."""
    if len(a) < 5 or len(b) < 5:
        return None
    ranked = sorted([(v, 0) for v in a] + [(v, 1) for v in b])
    ranks = [0.0] * len(ranked)
    i = 0
    while i < len(ranked):
        j = i
        while j + 1 < len(ranked) and ranked[j + 1][0] == ranked[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks[k] = (i + j) / 2 + 1
        i = j + 1
    rank_a = sum(r for r, (_, side) in zip(ranks, ranked, strict=True) if side == 0)
    n1, n2 = len(a), len(b)
    u = rank_a - n1 * (n1 + 1) / 2
    mean = n1 * n2 / 2
    sd = math.sqrt(n1 * n2 * (n1 + n2 + 1) / 12)
    if sd == 0:
        return 1.0
    z = abs(u - mean) / sd
    return math.erfc(z / math.sqrt(2))


def verdict(
    a: float | None,
    b: float | None,
    label_a: str,
    label_b: str,
    *,
    tie: float = DEFAULT_TIE,
    samples: tuple[list[float], list[float]] | None = None,
    lower_is_better: bool = True,
) -> str:
    """`tie`, or which side is better and by how much (`marlin -19%`), as the post writes it."""
    if a is None or b is None or math.isnan(a) or math.isnan(b) or a == 0:
        return "n/a"
    change = (b - a) / a
    if abs(change) <= tie:
        return "tie"
    if samples is not None:
        p = mann_whitney_p(*samples)
        if p is not None and p >= 0.05:
            return "tie"
    b_better = (change < 0) if lower_is_better else (change > 0)
    if b_better:
        return f"{label_b} {change * 100:+.0f}%"
    back = (a - b) / b
    return f"{label_a} {back * 100:+.0f}%"


@dataclass(frozen=True)
class Row:
    """One line of a comparison table: the cell's shape, both values, and the verdict."""

    input_len: int
    concurrency: int
    a: float | None
    b: float | None
    verdict: str


@dataclass(frozen=True)
class Comparison:
    """All tables of a comparison, in the post's layout."""

    label_a: str
    label_b: str
    ttft_mean: list[Row]
    ttft_p90: list[Row]
    ttft_p99: list[Row]
    accept_length: list[Row]
    output_throughput: list[Row]
    slo_p99_ms: float
    notes: list[str]


def _shapes(a: RunSummary, b: RunSummary | None) -> list[tuple[int, int]]:
    shapes = {(c.input_len, c.concurrency) for c in a.cells if c.group == 0}
    if b is not None:
        shapes &= {(c.input_len, c.concurrency) for c in b.cells if c.group == 0}
    return sorted(shapes)


def compare_runs(
    a: RunSummary, b: RunSummary, *, label_a: str | None = None, label_b: str | None = None,
    tie: float = DEFAULT_TIE, slo_p99_ms: float = DEFAULT_SLO_P99_MS,
) -> Comparison:  # fmt: skip
    """Cell-by-cell comparison of two runs' group-0 cells (the shapes both ran)."""
    la = label_a or a.recipe
    lb = label_b or b.recipe
    if la == lb:
        la, lb = f"A:{la}", f"B:{lb}"
    rows: dict[str, list[Row]] = {k: [] for k in ("mean", "p90", "p99", "accept", "tput")}
    for input_len, conc in _shapes(a, b):
        ca, cb = a.cell(input_len, conc, 0), b.cell(input_len, conc, 0)
        assert ca is not None and cb is not None
        samples = (ca.ttfts_ms, cb.ttfts_ms) if ca.ttfts_ms and cb.ttfts_ms else None
        v = lambda x, y, **kw: verdict(x, y, la, lb, tie=tie, **kw)  # noqa: E731
        rows["mean"].append(
            Row(input_len, conc, ca.ttft_mean_ms, cb.ttft_mean_ms, v(ca.ttft_mean_ms, cb.ttft_mean_ms, samples=samples))
        )
        rows["p90"].append(Row(input_len, conc, ca.ttft_p90_ms, cb.ttft_p90_ms, v(ca.ttft_p90_ms, cb.ttft_p90_ms)))
        rows["p99"].append(Row(input_len, conc, ca.ttft_p99_ms, cb.ttft_p99_ms, _slo(ca, cb, slo_p99_ms)))
        rows["accept"].append(
            Row(
                input_len,
                conc,
                ca.accept_length,
                cb.accept_length,
                v(ca.accept_length, cb.accept_length, lower_is_better=False),
            )
        )
        rows["tput"].append(
            Row(
                input_len,
                conc,
                ca.output_throughput,
                cb.output_throughput,
                v(ca.output_throughput, cb.output_throughput, lower_is_better=False),
            )
        )
    notes = []
    if a.simulated or b.simulated:
        notes.append("SIMULATED: at least one run is from a simulated node; its numbers say nothing about H200s")
    return Comparison(la, lb, rows["mean"], rows["p90"], rows["p99"], rows["accept"], rows["tput"], slo_p99_ms, notes)


def _slo(a: CellResult, b: CellResult, limit: float) -> str:
    mark = lambda c: "✅" if c.meets_slo(limit) else "❌"  # noqa: E731
    return f"{mark(a)} {mark(b)}"


@dataclass(frozen=True)
class ReferenceCheck:
    """A run against the recipe's reference numbers: per metric and cell, within tolerance or not."""

    rows: list[tuple[str, int, int, float | None, float | None, str]]
    tolerances: dict[str, float]
    within: int
    outside: int
    missing: int


def compare_reference(
    run: RunSummary, reference: Reference, *, ttft_tolerance: float = 0.25, accept_tolerance: float = 0.3
) -> ReferenceCheck:
    """Each reference cell the run also measured: TTFT within ±ttft_tolerance (relative), accept length
    within ±accept_tolerance (absolute). Cells the run did not measure are counted as missing."""
    rows = []
    within = outside = missing = 0
    for ref in reference.cells:
        mine = run.cell(ref.input_len, ref.concurrency, 0)
        checks = [
            ("TTFT mean", ref.ttft_mean_ms, mine.ttft_mean_ms if mine else None, "rel"),
            ("TTFT P90", ref.ttft_p90_ms, mine.ttft_p90_ms if mine else None, "rel"),
            ("TTFT P99", ref.ttft_p99_ms, mine.ttft_p99_ms if mine else None, "rel"),
            ("accept length", ref.accept_length, mine.accept_length if mine else None, "abs"),
        ]
        for metric, expected, got, kind in checks:
            if expected is None:
                continue
            if got is None or mine is None:
                missing += 1
                rows.append((metric, ref.input_len, ref.concurrency, expected, None, "not measured"))
                continue
            if kind == "rel":
                ok = abs(got - expected) <= ttft_tolerance * expected
                status = f"{(got - expected) / expected * 100:+.0f}%"
            else:
                ok = abs(got - expected) <= accept_tolerance
                status = f"{got - expected:+.2f}"
            within += ok
            outside += not ok
            rows.append(
                (metric, ref.input_len, ref.concurrency, expected, got, f"{status} {'ok' if ok else 'OUTSIDE'}")
            )
    return ReferenceCheck(rows, {"ttft_relative": ttft_tolerance, "accept_length_absolute": accept_tolerance},
                          within, outside, missing)  # fmt: skip
