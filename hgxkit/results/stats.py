"""Uncertainty of a cell's metrics and whether two runs' cells differ, with the run as the unit of analysis.

Intervals of one cell (`summary.json`, `results show`):
* per-run metrics (output throughput, accept length: one value per repeat): a Student t interval of the mean
  over the repeats (`t_interval`, from 2 repeats);
* per-request means (TTFT, TPOT): a bootstrap over the requests of one run (`bootstrap_interval`, BCa), or,
  with several repeats, a hierarchical bootstrap (`hierarchical_interval`: resample runs, then requests within
  each run), so requests of one run are not taken for independent draws;
* per-request quantiles (P90, P99): distribution-free order-statistic intervals (`quantile_interval`: the
  binomial ranks that hold the quantile with >= 95% probability). Over too few requests a quantile has no
  upper bound, and the interval says so ("no upper bound at n=30") instead of stopping at the sample maximum.

Run-vs-run tests (`results compare RUN_A RUN_B`), each testing the row's own statistic:
* per-run metrics: Welch's t test on the repeats' values (`welch_test`), with the 95% interval of B - A;
* per-request metrics: a hierarchical bootstrap of the difference of the row's statistic (mean, P90 or P99)
  (`bootstrap_difference_test`); quantile rows also need both quantiles bounded by their order statistics.
A difference is real when the 95% interval of B - A excludes 0 (p < ALPHA).

Example:
    >>> a = bootstrap_interval([250.0 + i for i in range(20)], "mean", over="request")
    >>> round(a.low), round(a.high)
    (257, 262)
    >>> quantile_interval([float(i) for i in range(30)], "p99").text()
    '[27, no upper bound at n=30]'
    >>> welch_test([100.0, 101.0, 99.0], [110.0, 111.0, 109.0]).significant
    True
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
# The hierarchical bootstrap draws runs x requests values per resample; 4,000 resamples put the p-value's
# resolution at 0.00025 and keep a full comparison (12 cells x 4 per-request rows) to a few seconds.
N_HIERARCHICAL_RESAMPLES = 4000
# BCa's jackknife costs n evaluations of the statistic on n-1 values (~1 s at n = 2000 for P99); past this many
# samples the plain percentile interval is used instead (at that n the two agree to well under the run-to-run noise).
BCA_MAX_SAMPLES = 2000
# scipy holds batch x n resampled values at once; this bounds it to ~16 MB whatever n is.
MAX_VALUES_PER_BATCH = 2_000_000
# The bootstrap needs enough distinct resamples to mean anything: n values give C(2n-1, n) of them, which
# passes 1,000 at n = 7 (6 values: 462). Fewer samples get no interval, and say so.
MIN_DISTINCT_RESAMPLES = 1000
# A run-vs-run test of a per-run metric needs a spread on each side: at least 2 repeats per run.
MIN_RUNS_PER_SIDE = 2

Statistic = Literal["mean", "median", "p90", "p99"]
QUANTILES: dict[str, float] = {"median": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99}
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
    """A confidence interval of one statistic of one cell, or why there is none (`reason`).

    A quantile over too few requests has a lower bound but no upper one: `low` set, `high` None, `reason`
    "no upper bound at n=30"."""

    statistic: str
    over: SampleUnit
    n: int
    low: float | None = None
    high: float | None = None
    level: float = CONFIDENCE_LEVEL
    method: str = "BCa"
    seed: int = BOOTSTRAP_SEED
    reason: str | None = None
    runs: int | None = None  # repeats the values came from, when more than one run was pooled

    @property
    def known(self) -> bool:
        return self.low is not None and self.high is not None

    def overlaps(self, other: Interval) -> bool:
        assert self.known and other.known
        return not (self.high < other.low or other.high < self.low)  # type: ignore[operator]

    @property
    def over_text(self) -> str:
        """`30 requests`, `3 repeats`, `90 requests of 3 repeats`: what the interval was computed over."""
        unit = "request" if self.over == "request" else "repeat"
        text = f"{self.n} {unit}{'' if self.n == 1 else 's'}"
        if self.over == "request" and self.runs and self.runs > 1:
            text += f" of {self.runs} repeats"
        return text

    def text(self, digits: int = 0) -> str:
        if self.low is not None and self.high is None and self.reason:
            return f"[{self.low:.{digits}f}, {self.reason}]"
        if not self.known:
            return f"no interval ({self.reason})"
        return f"[{self.low:.{digits}f}, {self.high:.{digits}f}]"


def _finite(values: Sequence[float | None]) -> np.ndarray:
    return np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)


def _too_few(statistic: str, over: SampleUnit, n: int) -> Interval | None:
    need = min_interval_samples()
    if n == 0 and over == "request":
        return Interval(
            statistic, over, 0, reason="no per-request values (run the client with --output-details or --save-detailed)"
        )
    if n < need:
        unit = ("request" if over == "request" else "repeat") + ("" if n == 1 else "s")
        return Interval(statistic, over, n, reason=f"{n} {unit}; a bootstrap interval needs at least {need}")
    return None


def bootstrap_interval(values: Sequence[float], statistic: Statistic, *, over: SampleUnit) -> Interval:
    """95% bootstrap interval of `statistic` over `values` (the per-request values of one run)."""
    data = _finite(values)
    n = len(data)
    if (few := _too_few(statistic, over, n)) is not None:
        return few
    if np.all(data == data[0]):
        # Every resample is the same: the interval is the value itself (BCa would divide by zero).
        return Interval(statistic, over, n, float(data[0]), float(data[0]), method="degenerate: all values equal")
    method = "BCa" if n <= BCA_MAX_SAMPLES else "percentile"
    from scipy import stats  # here, not at the top: importing scipy.stats costs ~2 s of CPU on every deploy

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # BCa's own degenerate-data warning: handled below
        result = stats.bootstrap(
            (data,),
            _STATISTICS[statistic],
            n_resamples=N_RESAMPLES,
            confidence_level=CONFIDENCE_LEVEL,
            method=method,
            vectorized=True,
            rng=np.random.default_rng(BOOTSTRAP_SEED),
            batch=max(1, MAX_VALUES_PER_BATCH // n),
        )
    low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    if not (math.isfinite(low) and math.isfinite(high)):
        return Interval(statistic, over, n, reason=f"the {method} bootstrap gave no finite interval")
    return Interval(statistic, over, n, low, high, method=method)


# -- order statistics ------------------------------------------------------------------------------------


def order_statistic_ranks(n: int, q: float, level: float = CONFIDENCE_LEVEL) -> tuple[int | None, int | None]:
    """1-based ranks (l, u) with P(X_(l) <= quantile q <= X_(u)) >= level for any continuous distribution.

    K, the number of n draws below the q-quantile, is Binomial(n, q): X_(l) is below the quantile unless
    K < l, X_(u) above it unless K >= u. l is the largest rank with P(K < l) <= (1-level)/2, u the smallest
    with P(K >= u) <= (1-level)/2; None where no rank qualifies (no lower / no upper bound at this n).

    >>> order_statistic_ranks(30, 0.5)
    (10, 21)
    >>> order_statistic_ranks(30, 0.99)
    (28, None)
    """
    from scipy import stats

    tail = (1.0 - level) / 2.0
    cdf = stats.binom.cdf(np.arange(n + 1), n, q)  # cdf[k] = P(K <= k)
    # P(K < l) = cdf[l-1]; largest l in 1..n with cdf[l-1] <= tail
    lows = [r for r in range(1, n + 1) if cdf[r - 1] <= tail + 1e-12]
    # P(K >= u) = 1 - cdf[u-1]; smallest u in 1..n with 1 - cdf[u-1] <= tail
    highs = [r for r in range(1, n + 1) if 1.0 - cdf[r - 1] <= tail + 1e-12]
    return (max(lows) if lows else None), (min(highs) if highs else None)


def min_bounded_samples(q: float, level: float = CONFIDENCE_LEVEL) -> int:
    """The fewest requests whose order statistics bound the q-quantile from above: q^n <= (1-level)/2.

    >>> min_bounded_samples(0.99), min_bounded_samples(0.9), min_bounded_samples(0.5)
    (368, 36, 6)
    """
    return math.ceil(math.log((1.0 - level) / 2.0) / math.log(q) - 1e-9)


def quantile_interval(values: Sequence[float], statistic: Statistic, *, runs: int | None = None) -> Interval:
    """Distribution-free 95% interval of a quantile (`median`, `p90`, `p99`) from order statistics."""
    q = QUANTILES[statistic]
    data = np.sort(_finite(values))
    n = len(data)
    method = "order statistics (binomial, distribution-free)"
    if n == 0:
        return Interval(
            statistic,
            "request",
            0,
            method=method,
            seed=0,
            runs=runs,
            reason="no per-request values (run the client with --output-details or --save-detailed)",
        )
    lo, hi = order_statistic_ranks(n, q)
    low = float(data[lo - 1]) if lo is not None else None
    high = float(data[hi - 1]) if hi is not None else None
    reason = None
    if high is None:
        reason = f"no upper bound at n={n}"
        if low is None:
            reason = f"no interval at n={n}"
    elif low is None:
        reason = f"no lower bound at n={n}"
    return Interval(statistic, "request", n, low, high, method=method, seed=0, reason=reason, runs=runs)


# -- runs as the unit ------------------------------------------------------------------------------------


def t_interval(values: Sequence[float], statistic: str = "mean") -> Interval:
    """95% Student t interval of the mean of one value per repeat (needs 2 repeats)."""
    data = _finite(values)
    n = len(data)
    method = "Student t over repeats"
    if n < MIN_RUNS_PER_SIDE:
        return Interval(
            statistic,
            "run",
            n,
            method=method,
            seed=0,
            reason=f"{n} repeat{'' if n == 1 else 's'}; an interval over repeats needs at least "
            f"{MIN_RUNS_PER_SIDE} (bench_repeats)",
        )
    from scipy import stats

    mean, sd = float(np.mean(data)), float(np.std(data, ddof=1))
    half = float(stats.t.ppf(0.5 + CONFIDENCE_LEVEL / 2, n - 1)) * sd / math.sqrt(n)
    return Interval(statistic, "run", n, mean - half, mean + half, method=method, seed=0)


def _padded(runs: Sequence[Sequence[float]]) -> list[np.ndarray]:
    return [a for a in (_finite(r) for r in runs) if len(a)]


def _hierarchical(runs: list[np.ndarray], statistic: str, rng: np.random.Generator, n: int) -> np.ndarray:
    """`n` resampled values of `statistic`: draw as many runs as there are (with replacement), then in each
    drawn run as many requests as the largest run holds (with replacement), so every run weighs the same."""
    m, width = len(runs), max(len(r) for r in runs)
    table = np.zeros((m, width))
    sizes = np.array([len(r) for r in runs])
    for i, r in enumerate(runs):
        table[i, : len(r)] = r
    out = np.empty(n)
    chunk = max(1, MAX_VALUES_PER_BATCH // (m * width))
    for start in range(0, n, chunk):
        b = min(chunk, n - start)
        picked = rng.integers(0, m, size=(b, m))
        pos = (rng.random((b, m, width)) * sizes[picked][:, :, None]).astype(int)
        values = table[picked[:, :, None], pos].reshape(b, m * width)
        out[start : start + b] = _STATISTICS[statistic](values, axis=1)
    return out


def hierarchical_interval(runs: Sequence[Sequence[float]], statistic: Statistic) -> Interval:
    """95% percentile interval of `statistic` from a hierarchical bootstrap (runs, then requests in each)."""
    data = _padded(runs)
    n = sum(len(r) for r in data)
    if (few := _too_few(statistic, "request", n)) is not None:
        return few
    draws = _hierarchical(data, statistic, np.random.default_rng(BOOTSTRAP_SEED), N_HIERARCHICAL_RESAMPLES)
    low, high = np.percentile(draws, [50 * (1 - CONFIDENCE_LEVEL), 50 * (1 + CONFIDENCE_LEVEL)])
    return Interval(
        statistic,
        "request",
        n,
        float(low),
        float(high),
        runs=len(data),
        method="hierarchical bootstrap (repeats, then requests), percentile",
    )


@dataclass(frozen=True)
class Test:
    """A run-vs-run test of one statistic: p, the 95% interval of B - A, or why it cannot judge (`reason`)."""

    name: str
    n_a: int
    n_b: int
    p: float | None = None
    low: float | None = None
    high: float | None = None
    alpha: float = ALPHA
    reason: str | None = None

    @property
    def judgeable(self) -> bool:
        return self.p is not None

    @property
    def significant(self) -> bool:
        return self.p is not None and self.p < self.alpha


def welch_test(a: Sequence[float], b: Sequence[float]) -> Test:
    """Welch's two-sided t test on one value per repeat, with the 95% interval of mean(B) - mean(A).

    The repeats are the unit: with 3-10 of them a bootstrap cannot reach its nominal level (it under-covers by
    about sqrt((n-1)/n) and uses normal quantiles), while t with Welch's degrees of freedom is exact for
    normal run-to-run noise (bench/stats_power.py measures its error rate and power)."""
    xa, xb = _finite(a), _finite(b)
    name = "Welch t over repeats"
    if min(len(xa), len(xb)) < MIN_RUNS_PER_SIDE:
        return Test(
            name,
            len(xa),
            len(xb),
            reason=f"too small to judge: {len(xa)} vs {len(xb)} repeats; a "
            f"run-vs-run test needs at least {MIN_RUNS_PER_SIDE} per run (bench_repeats)",
        )
    from scipy import stats

    diff = float(np.mean(xb) - np.mean(xa))
    va, vb = float(np.var(xa, ddof=1)) / len(xa), float(np.var(xb, ddof=1)) / len(xb)
    se = math.sqrt(va + vb)
    if se == 0.0:  # no run-to-run spread on either side: any difference is exact
        return Test(name, len(xa), len(xb), 1.0 if diff == 0 else 0.0, diff, diff)
    df = (va + vb) ** 2 / ((va**2 / (len(xa) - 1) if va else 0.0) + (vb**2 / (len(xb) - 1) if vb else 0.0))
    p = float(2 * stats.t.sf(abs(diff) / se, df))
    half = float(stats.t.ppf(0.5 + CONFIDENCE_LEVEL / 2, df)) * se
    return Test(name, len(xa), len(xb), p, diff - half, diff + half)


def bootstrap_difference_test(
    runs_a: Sequence[Sequence[float]], runs_b: Sequence[Sequence[float]], statistic: Statistic
) -> Test:
    """Hierarchical bootstrap of statistic(B) - statistic(A): repeats, then requests within each repeat.

    p is two-sided: twice the smaller share of resampled differences on either side of 0."""
    da, db = _padded(runs_a), _padded(runs_b)
    na, nb = sum(len(r) for r in da), sum(len(r) for r in db)
    name = f"hierarchical bootstrap of the {statistic} difference"
    need = min_interval_samples()
    if min(na, nb) < need:
        return Test(
            name, na, nb, reason=f"too small to judge: {na} vs {nb} requests; a bootstrap needs at least {need} per run"
        )
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    diffs = _hierarchical(db, statistic, rng, N_HIERARCHICAL_RESAMPLES) - _hierarchical(
        da, statistic, rng, N_HIERARCHICAL_RESAMPLES
    )
    low, high = np.percentile(diffs, [50 * (1 - CONFIDENCE_LEVEL), 50 * (1 + CONFIDENCE_LEVEL)])
    count = len(diffs)
    below, above = (np.sum(diffs <= 0) + 1) / (count + 1), (np.sum(diffs >= 0) + 1) / (count + 1)
    return Test(name, na, nb, float(min(1.0, 2 * min(below, above))), float(low), float(high))


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
    test: Test | None = None


def judge(
    a: float | None,
    b: float | None,
    label_a: str,
    label_b: str,
    *,
    better: Literal["lower", "higher"],
    test: Test,
    interval_a: Interval | None = None,
    interval_b: Interval | None = None,
) -> Judgement:
    """Real when the test's 95% interval of B - A excludes 0; a quantile row also needs both quantiles bounded.

    `text` is the post's wording: `marlin -19%` (the better side and its change), `tie`, or why it cannot tell.
    """
    if a is None or b is None or not math.isfinite(a) or not math.isfinite(b) or a == 0:
        return Judgement("n/a", "n/a", interval_a=interval_a, interval_b=interval_b, test=test)
    change = (b - a) / a
    unbounded = [
        (label, i)
        for label, i in ((label_a, interval_a), (label_b, interval_b))
        if i is not None and i.statistic in QUANTILES and not i.known
    ]
    if unbounded:
        label, i = unbounded[0]
        q = QUANTILES[i.statistic]
        text = (
            f"too small to judge: {i.statistic.upper()} of {label} has {i.reason or 'no interval'} "
            f"(a bound needs {min_bounded_samples(q)} requests)"
        )
        return Judgement("too small to judge", text, change, test.p, interval_a, interval_b, test)
    if not test.judgeable:
        return Judgement(
            "too small to judge", test.reason or "too small to judge", change, None, interval_a, interval_b, test
        )
    if not test.significant:
        return Judgement("tie", "tie", change, test.p, interval_a, interval_b, test)
    b_better = (change < 0) if better == "lower" else (change > 0)
    text = f"{label_b} {change * 100:+.0f}%" if b_better else f"{label_a} {(a - b) / b * 100:+.0f}%"
    return Judgement("real", text, change, test.p, interval_a, interval_b, test)
