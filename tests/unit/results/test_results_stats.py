"""Intervals and verdicts: bootstraps (reproducible), order statistics, Welch t, and what compare calls real."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as scipy_stats
from test_results import make_run, scaled

from hgxkit.results.archive import load_run
from hgxkit.results.bench import parse_bench_jsonl
from hgxkit.results.compare import compare_runs
from hgxkit.results.stats import (
    Interval,
    bootstrap_difference_test,
    bootstrap_interval,
    hierarchical_interval,
    judge,
    min_bounded_samples,
    min_interval_samples,
    order_statistic_ranks,
    quantile_interval,
    t_interval,
    welch_test,
)
from hgxkit.results.summary import CellResult, RunSummary

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sglang_bench"


def test_bootstrap_interval_is_reproducible_and_covers_the_truth() -> None:
    rng = np.random.default_rng(7)
    values = list(rng.normal(300.0, 40.0, size=400))
    first = bootstrap_interval(values, "mean", over="request")
    again = bootstrap_interval(values, "mean", over="request")
    assert (first.low, first.high) == (again.low, again.high)  # fixed seed: archives are reproducible
    assert first.low < float(np.mean(values)) < first.high
    assert first.high - first.low == pytest.approx(2 * 1.96 * 40 / np.sqrt(400), rel=0.15)  # normal theory width
    p99 = bootstrap_interval(values, "p99", over="request")
    assert p99.low < float(np.percentile(values, 99)) <= p99.high and p99.method == "BCa"


def test_bootstrap_interval_covers_the_true_mean_about_95_percent_of_the_time() -> None:
    rng = np.random.default_rng(11)
    draws = [list(rng.gamma(2.0, 150.0, size=80)) for _ in range(40)]  # skewed like TTFTs; true mean 300
    covered = sum(i.low < 300.0 < i.high for i in (bootstrap_interval(d, "mean", over="request") for d in draws))
    assert 34 <= covered <= 40  # binomial(40, 0.95): below 34 happens with p < 0.01


def test_large_samples_use_the_percentile_interval() -> None:
    values = list(np.random.default_rng(3).gamma(2.0, 150.0, size=2500))
    interval = bootstrap_interval(values, "p99", over="request")
    assert interval.method == "percentile" and interval.low < float(np.percentile(values, 99)) < interval.high


def test_too_few_samples_get_no_interval_and_say_why() -> None:
    assert min_interval_samples() == 7
    few = bootstrap_interval([1.0, 2.0, 3.0], "mean", over="request")
    assert not few.known and few.reason == "3 requests; a bootstrap interval needs at least 7"
    none = bootstrap_interval([], "mean", over="request")
    assert "no per-request values" in (none.reason or "")
    same = bootstrap_interval([5.3] * 9, "mean", over="run")
    assert (same.low, same.high) == (5.3, 5.3)


def test_order_statistic_ranks_are_the_binomial_ones() -> None:
    # Textbook values: the median of 30 lies between X(10) and X(21) with 95.7% probability.
    assert order_statistic_ranks(30, 0.5) == (10, 21)
    assert order_statistic_ranks(100, 0.9) == (84, 96)
    assert order_statistic_ranks(400, 0.99) == (392, 400)
    # P90 and P99 of 30 requests have no upper bound; the median of 5 has none at all (0.5^5 > 0.025).
    assert order_statistic_ranks(30, 0.9) == (23, None)
    assert order_statistic_ranks(30, 0.99) == (28, None)
    assert order_statistic_ranks(5, 0.5) == (None, None)
    assert (min_bounded_samples(0.99), min_bounded_samples(0.9), min_bounded_samples(0.5)) == (368, 36, 6)


def test_order_statistic_ranks_cover_at_least_95_percent() -> None:
    for n, q in ((30, 0.5), (100, 0.9), (400, 0.99), (60, 0.9)):
        low, high = order_statistic_ranks(n, q)
        assert low is not None and high is not None
        coverage = scipy_stats.binom.cdf(high - 1, n, q) - scipy_stats.binom.cdf(low - 1, n, q)
        assert coverage >= 0.95
        # and no narrower pair on the same tails would do: one rank closer on either side drops below 97.5%
        assert scipy_stats.binom.cdf(low, n, q) > 0.025 and 1 - scipy_stats.binom.cdf(high - 2, n, q) > 0.025


def test_quantile_intervals_say_when_there_is_no_upper_bound() -> None:
    values = [float(i) for i in range(1, 31)]
    p99 = quantile_interval(values, "p99")
    assert (p99.low, p99.high, p99.reason) == (28.0, None, "no upper bound at n=30") and not p99.known
    assert p99.text() == "[28, no upper bound at n=30]"
    assert quantile_interval(values, "median").text() == "[10, 21]"
    big = quantile_interval([float(i) for i in range(1, 401)], "p99")
    assert (big.low, big.high, big.method) == (392.0, 400.0, "order statistics (binomial, distribution-free)")


def test_t_interval_over_repeats_is_students() -> None:
    interval = t_interval([100.0, 102.0, 98.0])
    half = scipy_stats.t.ppf(0.975, 2) * 2.0 / np.sqrt(3)
    assert (interval.low, interval.high) == (pytest.approx(100 - half), pytest.approx(100 + half))
    assert interval.over == "run" and interval.n == 3
    one = t_interval([100.0])
    assert not one.known and one.reason == "1 repeat; an interval over repeats needs at least 2 (bench_repeats)"


def test_welch_test_is_scipys_and_needs_two_repeats_a_side() -> None:
    a, b = [100.0, 102.0, 98.0], [110.0, 112.0, 108.0]
    test = welch_test(a, b)
    assert test.p == pytest.approx(scipy_stats.ttest_ind(a, b, equal_var=False).pvalue)
    assert test.p == pytest.approx(0.0036022, abs=1e-6)
    half = scipy_stats.t.ppf(0.975, 4) * np.sqrt(8 / 3)
    assert (test.low, test.high) == (pytest.approx(10 - half), pytest.approx(10 + half)) and test.significant
    few = welch_test([100.0], [110.0, 111.0])
    assert not few.judgeable
    assert (
        few.reason == "too small to judge: 1 vs 2 repeats; a run-vs-run test needs at least 2 per run (bench_repeats)"
    )


def test_hierarchical_bootstrap_resamples_runs_first() -> None:
    rng = np.random.default_rng(1)
    # Three runs whose levels differ (run-to-run noise 20 ms) with 5 ms request noise: pooling the 90 requests
    # as independent would give a +-1 ms interval; resampling the runs first keeps the runs' spread in it.
    runs = [list(rng.normal(level, 5.0, size=30)) for level in (280.0, 300.0, 320.0)]
    hier = hierarchical_interval(runs, "mean")
    pooled = bootstrap_interval([v for r in runs for v in r], "mean", over="request")
    assert hier.runs == 3 and hier.over_text == "90 requests of 3 repeats"
    assert hier.high - hier.low > 5 * (pooled.high - pooled.low)
    again = hierarchical_interval(runs, "mean")
    assert (hier.low, hier.high) == (again.low, again.high)  # fixed seed


def test_quantile_rows_test_the_quantile_not_the_distribution() -> None:
    rng = np.random.default_rng(5)
    a = [list(rng.normal(300, 20, size=200)) for _ in range(2)]
    # Same P90, shifted mean: B's slow half is faster, the tail is the same.
    b = [[v - 30 if v < 300 else v for v in run] for run in a]
    mean, p90 = bootstrap_difference_test(a, b, "mean"), bootstrap_difference_test(a, b, "p90")
    assert mean.significant and not p90.significant and mean.p != p90.p


def _judge(a: list[float], b: list[float]) -> str:
    test = bootstrap_difference_test([a], [b], "mean")
    return judge(float(np.mean(a)), float(np.mean(b)), "A", "B", better="lower", test=test).text


def test_real_needs_the_difference_interval_to_exclude_zero() -> None:
    rng = np.random.default_rng(1)
    base = list(rng.normal(300, 30, size=60))
    assert _judge(base, [v * 0.8 for v in base]) == "B -20%"
    assert _judge(base, [v * 1.25 for v in base]) == "A -20%"
    assert _judge(base, list(rng.normal(302, 30, size=60))) == "tie"  # 2 ms apart in 30 ms noise
    assert _judge([300.0, 310.0, 320.0], [900.0, 910.0, 920.0]).startswith("too small to judge: 3 vs 3 requests")
    # A P99 over 60 requests has no upper bound: no verdict, whatever the test says.
    unbounded = quantile_interval(base, "p99")
    verdict = judge(
        300.0,
        200.0,
        "A",
        "B",
        better="lower",
        test=bootstrap_difference_test([base], [base], "p99"),
        interval_a=unbounded,
        interval_b=unbounded,
    )
    assert verdict.text == "too small to judge: P99 of A has no upper bound at n=60 (a bound needs 368 requests)"


def test_compare_calls_the_slower_run_and_the_smoke_cell_honestly(tmp_path: Path) -> None:
    fast = load_run(str(make_run(tmp_path, "n1", "20261130T120000Z", "marlin", details=True)), tmp_path)
    slow = load_run(str(make_run(tmp_path, "n2", "20261130T130000Z", "flashinfer", details=True, scale=1.3)), tmp_path)
    same = load_run(str(make_run(tmp_path, "n3", "20261130T140000Z", "again", details=True, scale=1.01)), tmp_path)
    (row,) = compare_runs(fast.summary, slow.summary).ttft_mean
    assert row.kind == "real" and row.verdict == "marlin -23%" and row.p is not None and row.p < 0.05
    assert row.test == "hierarchical bootstrap of the mean difference" and row.diff_low is not None
    assert row.diff_low > 0 and row.repeats_a == row.repeats_b == 1
    (tie,) = compare_runs(fast.summary, same.summary).ttft_mean
    assert tie.kind == "tie"
    # The smoke cell: 3 prompts a side cannot reach p < 0.05 whatever the numbers are.
    (record,) = parse_bench_jsonl((FIXTURES / "dspark_isl5000_c5_details.jsonl").read_text())
    three = replace(record, ttfts_ms=record.ttfts_ms[:3], tpots_ms=record.tpots_ms[:3], e2es_ms=record.e2es_ms[:3])
    smoke_a = CellResult.from_record(three, num_prompts=3, group=0, raw_file=None)
    smoke_b = CellResult.from_record(scaled(three, 3.0), num_prompts=3, group=0, raw_file=None)
    runs = [
        RunSummary(f"h/{x}", "h", x, "20261130T120000Z", True, "t", None, [c])
        for x, c in (("a", smoke_a), ("b", smoke_b))
    ]
    (smoke,) = compare_runs(*runs).ttft_mean
    assert smoke.kind == "too small to judge"
    assert smoke.verdict.startswith("too small to judge: 3 vs 3 requests")


def test_compare_recomputes_quantile_bounds_of_older_archives(tmp_path: Path) -> None:
    fast = load_run(str(make_run(tmp_path, "n1", "20261130T120000Z", "marlin", details=True)), tmp_path)
    slow = load_run(str(make_run(tmp_path, "n2", "20261130T130000Z", "flashinfer", details=True, scale=1.3)), tmp_path)
    # An archive from before order statistics: a BCa P99 interval that stops at the sample maximum.
    (cell,) = fast.summary.cells
    stale = Interval("p99", "request", 10, 100.0, max(cell.ttfts_ms), method="BCa")
    old = replace(fast.summary, cells=[replace(cell, intervals={**cell.intervals, "ttft_p99_ms": stale})])
    (row,) = compare_runs(old, slow.summary).ttft_p99
    assert row.kind == "too small to judge" and row.interval_a is not None and row.interval_a.high is None
    assert row.verdict == "too small to judge: P99 of marlin has no upper bound at n=10 (a bound needs 368 requests)"
