"""Uncertainty of a cell's metrics and whether two cells differ, with scipy.

* `bootstrap_interval`: a 95% bootstrap confidence interval (`scipy.stats.bootstrap`, BCa, 9,999 resamples, a
  fixed seed so an archive rebuilt from the same raw files holds the same intervals).
* `mann_whitney`: `scipy.stats.mannwhitneyu`, two-sided, at ALPHA = 0.05, or "too small to judge" when the
  samples are so few that even completely separated samples could not reach ALPHA.
* `judge`: a difference is real only when the two intervals do not overlap AND Mann-Whitney is significant.

Example:
    >>> a = bootstrap_interval([250.0 + i for i in range(20)], "mean", over="request")
    >>> round(a.low), round(a.high)
    (257, 262)
    >>> mann_whitney([1.0, 2.0, 3.0], [7.0, 8.0, 9.0]).judgeable   # 3 vs 3: p can never go below 0.1
    False
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from hgxkit.results.metrics import SampleUnit

CONFIDENCE_LEVEL = 0.95
ALPHA = 0.05
BOOTSTRAP_SEED = 20251130
N_RESAMPLES = 9999
# BCa's jackknife costs n evaluations of the statistic on n-1 values (~1 s at n = 2000 for P99); past this many
# samples the plain percentile interval is used instead (at that n the two agree to well under the run-to-run noise).
BCA_MAX_SAMPLES = 2000
# scipy holds batch x n resampled values at once; this bounds it to ~16 MB whatever n is.
MAX_VALUES_PER_BATCH = 2_000_000
# The bootstrap needs enough distinct resamples to mean anything: n values give C(2n-1, n) of them, which
# passes 1,000 at n = 7 (6 values: 462). Fewer samples get no interval, and say so.
MIN_DISTINCT_RESAMPLES = 1000

Statistic = Literal["mean", "median", "p90", "p99"]
_STATISTICS: dict[str, Callable[..., np.ndarray]] = {
    "mean": lambda x, axis: np.mean(x, axis=axis),
    "median": lambda x, axis: np.median(x, axis=axis),
    "p90": lambda x, axis: np.percentile(x, 90, axis=axis),
    "p99": lambda x, axis: np.percentile(x, 99, axis=axis),
}


def min_interval_samples() -> int:
    """The fewest samples that get a bootstrap interval (see MIN_DISTINCT_RESAMPLES): 7."""
    n = 1
    while math.comb(2 * n - 1, n) < MIN_DISTINCT_RESAMPLES:
        n += 1
    return n


@dataclass(frozen=True)
class Interval:
    """A confidence interval of one statistic of one cell, or why there is none (`reason`)."""

    statistic: str
    over: SampleUnit
    n: int
    low: float | None = None
    high: float | None = None
    level: float = CONFIDENCE_LEVEL
    method: str = "BCa"
    seed: int = BOOTSTRAP_SEED
    reason: str | None = None

    @property
    def known(self) -> bool:
        return self.low is not None and self.high is not None

    def overlaps(self, other: Interval) -> bool:
        assert self.known and other.known
        return not (self.high < other.low or other.high < self.low)  # type: ignore[operator]

    @property
    def over_text(self) -> str:
        """`30 requests`, `3 repeats`: what the interval was computed over."""
        unit = "request" if self.over == "request" else "repeat"
        return f"{self.n} {unit}{'' if self.n == 1 else 's'}"

    def text(self, digits: int = 0) -> str:
        if not self.known:
            return f"no interval ({self.reason})"
        return f"[{self.low:.{digits}f}, {self.high:.{digits}f}]"


def bootstrap_interval(values: Sequence[float], statistic: Statistic, *, over: SampleUnit) -> Interval:
    """95% bootstrap interval of `statistic` over `values` (per-request values, or one value per repeat)."""
    data = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    n = len(data)
    need = min_interval_samples()
    if n == 0 and over == "request":
        return Interval(statistic, over, 0, reason="no per-request values (run the client with --output-details "
                        "or --save-detailed)")  # fmt: skip
    if n < need:
        unit = ("request" if over == "request" else "repeat") + ("" if n == 1 else "s")
        return Interval(statistic, over, n, reason=f"{n} {unit}; a bootstrap interval needs at least {need}")
    if np.all(data == data[0]):
        # Every resample is the same: the interval is the value itself (BCa would divide by zero).
        return Interval(statistic, over, n, float(data[0]), float(data[0]), method="degenerate: all values equal")
    method = "BCa" if n <= BCA_MAX_SAMPLES else "percentile"
    from scipy import stats  # here, not at the top: importing scipy.stats costs ~2 s of CPU on every deploy

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # BCa's own degenerate-data warning: handled below
        result = stats.bootstrap(
            (data,), _STATISTICS[statistic], n_resamples=N_RESAMPLES, confidence_level=CONFIDENCE_LEVEL,
            method=method, vectorized=True, rng=np.random.default_rng(BOOTSTRAP_SEED),
            batch=max(1, MAX_VALUES_PER_BATCH // n),
        )  # fmt: skip
    low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    if not (math.isfinite(low) and math.isfinite(high)):
        return Interval(statistic, over, n, reason=f"the {method} bootstrap gave no finite interval")
    return Interval(statistic, over, n, low, high, method=method)


@dataclass(frozen=True)
class MannWhitney:
    """`scipy.stats.mannwhitneyu` (two-sided) on two samples, or why it cannot judge them."""

    n_a: int
    n_b: int
    p: float | None
    alpha: float = ALPHA
    reason: str | None = None

    @property
    def judgeable(self) -> bool:
        return self.p is not None

    @property
    def significant(self) -> bool:
        return self.p is not None and self.p < self.alpha


def smallest_two_sided_p(n_a: int, n_b: int) -> float:
    """The smallest p the exact two-sided test can give (samples completely separated): 2 / C(n_a+n_b, n_a)."""
    return min(1.0, 2.0 / math.comb(n_a + n_b, n_a)) if n_a and n_b else 1.0


def mann_whitney(a: Sequence[float], b: Sequence[float], alpha: float = ALPHA, *, unit: str = "samples") -> MannWhitney:
    """Two-sided Mann-Whitney U test; "too small to judge" when even separated samples could not reach alpha.

    `unit` names what the samples are ("requests", "repeats") in the reason."""
    xa = [v for v in a if v is not None and math.isfinite(v)]
    xb = [v for v in b if v is not None and math.isfinite(v)]
    floor = smallest_two_sided_p(len(xa), len(xb))
    if floor >= alpha:
        return MannWhitney(len(xa), len(xb), None, alpha,
                           reason=f"too small to judge: {len(xa)} vs {len(xb)} {unit}, the test's smallest "
                           f"possible p is {floor:.2g} >= alpha {alpha:g}")  # fmt: skip
    from scipy import stats  # here, not at the top (see bootstrap_interval)

    result = stats.mannwhitneyu(xa, xb, alternative="two-sided", method="auto")
    return MannWhitney(len(xa), len(xb), float(result.pvalue), alpha)


Kind = Literal["real", "tie", "too small to judge", "n/a"]


@dataclass(frozen=True)
class Judgement:
    """The verdict on one metric of one cell pair, with the evidence behind it."""

    kind: Kind
    text: str
    change: float | None = None
    p: float | None = None
    interval_a: Interval | None = None
    interval_b: Interval | None = None


def judge(
    a: float | None, b: float | None, label_a: str, label_b: str, *, better: Literal["lower", "higher"],
    interval_a: Interval | None, interval_b: Interval | None, samples_a: Sequence[float],
    samples_b: Sequence[float],
) -> Judgement:  # fmt: skip
    """Real only when the intervals do not overlap AND Mann-Whitney on the samples is significant.

    `text` is the post's wording: `marlin -19%` (the better side and its change), `tie`, or why it cannot tell.
    """
    if a is None or b is None or not math.isfinite(a) or not math.isfinite(b) or a == 0:
        return Judgement("n/a", "n/a", interval_a=interval_a, interval_b=interval_b)
    change = (b - a) / a
    over = next((i.over for i in (interval_a, interval_b) if i is not None), "request")
    if over == "request" and (not samples_a or not samples_b):
        side = label_a if not samples_a else label_b
        return Judgement("too small to judge", f"too small to judge: no per-request values for {side} (run the "
                         "client with --output-details or --save-detailed)", change, None, interval_a, interval_b)
    test = mann_whitney(samples_a, samples_b, unit="requests" if over == "request" else "repeats")
    missing = [i for i in (interval_a, interval_b) if i is None or not i.known]
    if not test.judgeable or missing:
        if test.reason:
            reason = test.reason
        else:
            why = missing[0].reason if missing[0] is not None else None
            reason = f"too small to judge: {why or 'no interval'}"
        return Judgement("too small to judge", reason, change, test.p, interval_a, interval_b)
    assert interval_a is not None and interval_b is not None
    if interval_a.overlaps(interval_b) or not test.significant:
        return Judgement("tie", "tie", change, test.p, interval_a, interval_b)
    b_better = (change < 0) if better == "lower" else (change > 0)
    text = f"{label_b} {change * 100:+.0f}%" if b_better else f"{label_a} {(a - b) / b * 100:+.0f}%"
    return Judgement("real", text, change, test.p, interval_a, interval_b)
