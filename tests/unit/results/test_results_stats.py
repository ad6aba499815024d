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
    N_HIERARCHICAL_RESAMPLES,
    Interval,
    Judgement,
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
from hgxkit.results.stats import Test as StatsTest  # as Test, pytest would try to collect it
from hgxkit.results.summary import CellResult, RunSummary

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sglang_bench"
NO_VALUES = "no per-request values (run the client with --output-details or --save-detailed)"


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


def test_an_interval_says_what_it_was_computed_over_and_prints_its_bounds_or_why_it_has_none() -> None:
    assert [Interval("mean", "request", n, runs=runs).over_text for n, runs in ((1, None), (30, 1), (90, 3))] == [
        "1 request",
        "30 requests",
        "90 requests of 3 repeats",
    ]
    assert [Interval("mean", "run", n).over_text for n in (1, 3)] == ["1 repeat", "3 repeats"]
    assert Interval("p99", "request", 30, 27.0, None, reason="no upper bound at n=30").text() == (
        "[27, no upper bound at n=30]"
    )
    assert Interval("mean", "request", 3, reason="3 requests").text() == "no interval (3 requests)"
    assert Interval("mean", "request", 9, 1.25, 2.5).text(1) == "[1.2, 2.5]"


def test_intervals_overlap_when_they_share_a_point() -> None:
    one = Interval("mean", "run", 3, 1.0, 2.0)
    assert one.overlaps(Interval("mean", "run", 3, 2.0, 3.0)) and Interval("mean", "run", 3, 2.0, 3.0).overlaps(one)
    assert not one.overlaps(Interval("mean", "run", 3, 2.5, 3.0))
    assert not Interval("mean", "run", 3, 2.5, 3.0).overlaps(one)


def test_equal_values_give_the_value_as_their_interval_and_missing_ones_are_not_counted() -> None:
    interval = bootstrap_interval([5.0] * 10 + [None, float("inf"), float("nan")], "mean", over="request")  # type: ignore[list-item]
    assert (interval.n, interval.low, interval.high, interval.method) == (10, 5.0, 5.0, "degenerate: all values equal")


def test_repeats_without_spread_differ_exactly_by_their_difference() -> None:
    same = welch_test([100.0, 100.0], [100.0, 100.0])
    assert (same.p, same.low, same.high, same.significant) == (1.0, 0.0, 0.0, False)
    apart = welch_test([100.0, 100.0], [110.0, 110.0, 110.0])
    assert (apart.n_a, apart.n_b, apart.p, apart.low, apart.high, apart.significant) == (2, 3, 0.0, 10.0, 10.0, True)


def test_a_quantile_over_no_or_too_few_requests_says_which_bound_it_lacks() -> None:
    none = quantile_interval([], "p90", runs=2)
    assert (none.n, none.runs, none.known, none.reason) == (
        0,
        2,
        False,
        "no per-request values (run the client with --output-details or --save-detailed)",
    )
    one = quantile_interval([300.0], "median")
    assert (one.low, one.high, one.text()) == (None, None, "no interval (no interval at n=1)")
    bounded = quantile_interval([float(i) for i in range(1, 31)], "median")
    assert (bounded.low, bounded.high, bounded.reason) == (10.0, 21.0, None)


@pytest.mark.parametrize(
    ("a", "b"), [(None, 100.0), (100.0, None), (float("nan"), 100.0), (100.0, float("inf")), (0.0, 5.0)]
)
def test_a_metric_missing_infinite_or_zero_on_the_first_side_gets_no_verdict(a: float | None, b: float | None) -> None:
    test = welch_test([1.0, 2.0], [5.0, 6.0])
    verdict = judge(a, b, "A", "B", better="lower", test=test)
    assert (verdict.kind, verdict.text, verdict.change) == ("n/a", "n/a", None)


def test_a_real_difference_names_the_better_side_by_its_change_against_the_other() -> None:
    real = welch_test([100.0, 101.0, 99.0], [120.0, 121.0, 119.0])
    assert judge(100.0, 120.0, "A", "B", better="higher", test=real).text == "B +20%"
    assert judge(100.0, 120.0, "A", "B", better="lower", test=real).text == "A -17%"  # (100 - 120) / 120
    verdict = judge(120.0, 100.0, "A", "B", better="lower", test=real)
    assert (verdict.kind, verdict.text, verdict.change, verdict.p) == ("real", "B -17%", pytest.approx(-1 / 6), real.p)
    tie = welch_test([100.0, 110.0, 90.0], [101.0, 111.0, 91.0])
    assert (judge(100.0, 101.0, "A", "B", better="lower", test=tie).kind, tie.significant) == ("tie", False)


def test_every_verdict_carries_its_change_p_intervals_and_test() -> None:
    real, tie = welch_test([100.0, 101.0, 99.0], [200.0, 201.0, 199.0]), welch_test([1.0, 3.0], [1.5, 2.5])
    few = StatsTest("t", 1, 1)  # not judgeable, and no reason of its own
    ia, ib = Interval("mean", "run", 3, 99.0, 101.0), Interval("mean", "run", 3, 199.0, 201.0)
    unknown = Interval("p90", "request", 3)  # unbounded, with no reason
    assert judge(100.0, 200.0, "A", "B", better="higher", test=real, interval_a=ia, interval_b=ib) == Judgement(
        "real", "B +100%", 1.0, real.p, ia, ib, real
    )
    assert judge(200.0, 100.0, "A", "B", better="higher", test=real, interval_a=ia, interval_b=ib).text == "A +100%"
    assert judge(2.0, 2.0, "A", "B", better="lower", test=tie, interval_a=ia, interval_b=ib) == Judgement(
        "tie", "tie", 0.0, tie.p, ia, ib, tie
    )
    assert judge(2.0, 3.0, "A", "B", better="lower", test=few, interval_a=ia, interval_b=ib) == Judgement(
        "too small to judge", "too small to judge", 0.5, None, ia, ib, few
    )
    assert judge(2.0, 3.0, "A", "B", better="lower", test=real, interval_a=ia, interval_b=unknown) == Judgement(
        "too small to judge",
        "too small to judge: P90 of B has no interval (a bound needs 36 requests)",
        0.5,
        real.p,
        ia,
        unknown,
        real,
    )
    assert judge(None, 3.0, "A", "B", better="lower", test=real, interval_a=ia, interval_b=ib) == Judgement(
        "n/a", "n/a", None, None, ia, ib, real
    )


@pytest.mark.parametrize(("over", "unit"), [("request", "request"), ("run", "repeat")])
def test_too_few_values_for_a_bootstrap_say_how_many_of_what(over: str, unit: str) -> None:
    assert bootstrap_interval([1.0], "p90", over=over) == Interval(  # type: ignore[arg-type]
        "p90",
        over,
        1,
        reason=f"1 {unit}; a bootstrap interval needs at least 7",  # type: ignore[arg-type]
    )
    six = bootstrap_interval([float(i) for i in range(6)], "mean", over=over)  # type: ignore[arg-type]
    assert (six.n, six.reason) == (6, f"6 {unit}s; a bootstrap interval needs at least 7")
    assert bootstrap_interval([float(i) for i in range(7)], "mean", over=over).known  # type: ignore[arg-type]
    assert hierarchical_interval([[1.0, 2.0], [3.0]], "mean") == Interval(
        "mean", "request", 3, reason="3 requests; a bootstrap interval needs at least 7"
    )
    assert hierarchical_interval([], "p99") == Interval(
        "p99", "request", 0, reason="no per-request values (run the client with --output-details or --save-detailed)"
    )


def test_two_thousand_values_still_get_the_bca_interval() -> None:
    values = list(np.random.default_rng(4).gamma(2.0, 150.0, size=2000))
    assert bootstrap_interval(values, "mean", over="request").method == "BCa"


def test_a_difference_test_needs_seven_requests_a_side_and_says_so() -> None:
    seven, six = [[float(i) for i in range(7)]], [[float(i) for i in range(6)]]
    assert bootstrap_difference_test(seven, six, "mean") == StatsTest(
        "hierarchical bootstrap of the mean difference",
        7,
        6,
        reason="too small to judge: 7 vs 6 requests; a bootstrap needs at least 7 per run",
    )
    assert bootstrap_difference_test(seven, seven, "mean").judgeable


def test_the_bootstrap_p_is_twice_the_smaller_share_of_differences_on_either_side_of_zero() -> None:
    a, same, above = [[100.0] * 7, [100.0] * 8], [[100.0] * 9], [[100.5] * 9]
    # Every resampled difference is 0: neither side is smaller, p = 1.
    assert bootstrap_difference_test(a, same, "mean") == StatsTest(
        "hierarchical bootstrap of the mean difference", 15, 9, 1.0, 0.0, 0.0
    )
    # Every one is +0.5 (or -0.5): only the +1 of the p-value's own correction is on the other side.
    least = 2 / (N_HIERARCHICAL_RESAMPLES + 1)
    assert bootstrap_difference_test(a, above, "p90") == StatsTest(
        "hierarchical bootstrap of the p90 difference", 15, 9, pytest.approx(least), 0.5, 0.5
    )
    assert bootstrap_difference_test(above, a, "mean").p == pytest.approx(least)


# What the code below gave when written (numpy's PCG64 streams are stable across numpy versions).
HIER = (288.8371618101562, 301.28475761610355)
DIFF = (0.03299175206198451, 0.4054929165163822, 20.327094869792482)


def test_the_hierarchical_interval_and_difference_are_the_same_in_every_run_of_hgxkit() -> None:
    # Archives compare across hgxkit versions: the seeded resampling, and the 2.5/97.5 percentiles, are pinned.
    rng = np.random.default_rng(2)
    a = [list(rng.normal(level, 5.0, size=20)) for level in (290.0, 300.0)]
    b = [list(rng.normal(level, 5.0, size=20)) for level in (300.0, 310.0)]
    hier = hierarchical_interval(a, "mean")
    assert (hier.statistic, hier.n, hier.runs, hier.method) == (
        "mean",
        40,
        2,
        "hierarchical bootstrap (repeats, then requests), percentile",
    )
    assert (hier.low, hier.high) == (pytest.approx(HIER[0], abs=1e-9), pytest.approx(HIER[1], abs=1e-9))
    diff = bootstrap_difference_test(a, b, "mean")
    assert (diff.p, diff.low, diff.high) == tuple(pytest.approx(v, abs=1e-9) for v in DIFF)


def test_each_interval_and_test_says_its_statistic_method_seed_and_counts() -> None:
    two = t_interval([100.0, 102.0])
    assert two.known and replace(two, low=None, high=None) == Interval(
        "mean", "run", 2, method="Student t over repeats", seed=0
    )
    assert t_interval([5.0, 7.0], "median").statistic == "median"
    assert t_interval([]) == Interval(
        "mean",
        "run",
        0,
        method="Student t over repeats",
        seed=0,
        reason="0 repeats; an interval over repeats needs at least 2 (bench_repeats)",
    )
    order = "order statistics (binomial, distribution-free)"
    p90 = quantile_interval([float(i) for i in range(1, 101)], "p90", runs=2)
    assert p90 == Interval("p90", "request", 100, 84.0, 96.0, method=order, seed=0, runs=2)
    assert quantile_interval([], "p99", runs=3) == Interval(
        "p99", "request", 0, method=order, seed=0, runs=3, reason=NO_VALUES
    )
    few = welch_test([1.0], [2.0, 3.0])
    assert (few.name, few.n_a, few.n_b) == ("Welch t over repeats", 1, 2)
    flat = welch_test([100.0, 100.0], [110.0, 110.0])
    assert (flat.name, flat.n_a, flat.n_b) == ("Welch t over repeats", 2, 2)
    spread = welch_test([100.0, 102.0, 98.0], [110.0, 111.0])
    assert (spread.name, spread.n_a, spread.n_b) == ("Welch t over repeats", 3, 2)


@pytest.mark.parametrize("flat_side", ["a", "b"])
def test_welch_with_no_spread_on_one_side_has_the_other_sides_degrees_of_freedom(flat_side: str) -> None:
    flat, spread = [100.0, 100.0, 100.0], [110.0, 112.0, 108.0]
    a, b = (flat, spread) if flat_side == "a" else (spread, flat)
    test = welch_test(a, b)
    se = np.sqrt(np.var(spread, ddof=1) / 3)
    # All the variance is the spread side's: df = its n - 1 = 2.
    assert test.p == pytest.approx(2 * scipy_stats.t.sf(10 / se, 2))
    assert test.high - test.low == pytest.approx(2 * scipy_stats.t.ppf(0.975, 2) * se)
