"""The statistics against values worked out by hand: Student t and Welch intervals from closed-form quantiles
(one degree of freedom is Cauchy's, tan(pi(p - 1/2)); two have t = (2p - 1) / sqrt(2p(1 - p))), order-statistic
ranks from binomial probabilities small enough to add up, bootstraps over data whose every resample can be listed,
and the verdict each comparison prints. Where a value is a seeded draw, it is pinned."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from hgxkit.results import stats
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

T_975_DF1 = math.tan(math.pi * 0.475)  # 12.7062...
T_975_DF2 = 0.95 / math.sqrt(2 * 0.975 * 0.025)  # 4.3027...
HIERARCHICAL = "hierarchical bootstrap (repeats, then requests), percentile"
ORDER = "order statistics (binomial, distribution-free)"


def test_a_t_interval_over_two_repeats_is_the_mean_plus_or_minus_cauchys_quantile() -> None:
    # mean 2, sd sqrt(2), sd / sqrt(n) = 1: the half-width is t(0.975, 1) itself
    assert t_interval([1.0, 3.0]) == Interval(
        "mean",
        "run",
        2,
        pytest.approx(2 - T_975_DF1),  # type: ignore[arg-type]
        pytest.approx(2 + T_975_DF1),  # type: ignore[arg-type]
        method="Student t over repeats",
        seed=0,
    )
    # three repeats: sd 2, sd / sqrt(3), t(0.975, 2)
    three = t_interval([98.0, 100.0, 102.0])
    half = T_975_DF2 * 2 / math.sqrt(3)
    assert (three.low, three.high) == (pytest.approx(100 - half), pytest.approx(100 + half))


def test_values_of_any_real_type_are_taken_at_their_full_float_value() -> None:
    # numpy's float32 values (a parsed array) are widened first: averaged in float32 they would give 100.033325
    single = [np.float32(100.1), np.float32(100.3), np.float32(99.7)]
    assert t_interval(single) == t_interval([float(v) for v in single])  # type: ignore[arg-type]
    assert welch_test(single, [1.0, 2.0]) == welch_test([float(v) for v in single], [1.0, 2.0])  # type: ignore[arg-type]
    # fractions (exact arithmetic) too: numpy cannot take the square root of an array of them
    assert t_interval([Fraction(1), Fraction(3)]) == t_interval([1.0, 3.0])  # type: ignore[list-item]


def test_welch_over_two_repeats_a_side_has_two_degrees_of_freedom_and_a_closed_form_p() -> None:
    # variances 2/2 = 1 a side: se sqrt(2), df (1 + 1)^2 / (1 + 1) = 2; for df 2, p = 1 - t / sqrt(2 + t^2)
    near = welch_test([1.0, 3.0], [5.0, 7.0])  # t = 4 / sqrt(2): p = 1 - 2 / sqrt(5)
    assert near == StatsTest(
        "Welch t over repeats",
        2,
        2,
        pytest.approx(1 - 2 / math.sqrt(5)),  # type: ignore[arg-type]
        pytest.approx(4 - T_975_DF2 * math.sqrt(2)),  # type: ignore[arg-type]
        pytest.approx(4 + T_975_DF2 * math.sqrt(2)),  # type: ignore[arg-type]
    )
    assert not near.significant and near.judgeable
    far = welch_test([1.0, 3.0], [11.0, 13.0])  # t = 10 / sqrt(2): p = 1 - sqrt(50 / 52) = 0.0194
    assert far.p == pytest.approx(1 - math.sqrt(50 / 52)) and far.significant
    assert (far.low, far.high) == (pytest.approx(10 - T_975_DF2 * math.sqrt(2)), pytest.approx(10 + T_975_DF2 * 2**0.5))


def test_welch_with_one_flat_side_takes_the_other_sides_degrees_of_freedom() -> None:
    # B has no spread: se = 1 from A alone and df = 1, so p = 1 - 2 atan(t) / pi at t = 7
    test = welch_test([1.0, 3.0], [9.0, 9.0, 9.0])
    assert test == StatsTest(
        "Welch t over repeats",
        2,
        3,
        pytest.approx(1 - 2 * math.atan(7) / math.pi),  # type: ignore[arg-type]
        pytest.approx(7 - T_975_DF1),  # type: ignore[arg-type]
        pytest.approx(7 + T_975_DF1),  # type: ignore[arg-type]
    )


def test_order_statistic_ranks_small_enough_to_add_by_hand() -> None:
    # Binomial(6, 1/2): P(K = 0) = 1/64 <= 2.5% < P(K <= 1) = 7/64, so X(1) and X(6) bound the median
    assert order_statistic_ranks(6, 0.5) == (1, 6)
    # two draws, P99: both below it with 0.99^2 = 0.9801, so P(K < 2) = 0.0199 <= 2.5%: X(2) is a lower bound,
    # and nothing is above it with 2.5% certainty
    assert order_statistic_ranks(2, 0.99) == (2, None)
    # one draw, P1: above it with 0.99, so X(1) bounds it from above alone
    assert order_statistic_ranks(1, 0.01) == (None, 1)
    # at level 50% each tail may hold 25%: Binomial(2, 1/2) puts exactly 1/4 on K = 0 and on K = 2, and a tail
    # exactly at its bound qualifies
    assert order_statistic_ranks(2, 0.5, level=0.5) == (1, 2)


def test_the_quantile_interval_sorts_the_values_and_takes_the_ranked_ones() -> None:
    assert quantile_interval([3.0, 1.0, 2.0, 6.0, 5.0, 4.0], "median") == Interval(
        "median", "request", 6, 1.0, 6.0, method=ORDER, seed=0
    )


def test_a_low_quantile_says_when_it_has_no_lower_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    # QUANTILES is the table a new row's quantile joins: a low one is bounded from above first
    monkeypatch.setitem(stats.QUANTILES, "p1", 0.01)
    assert quantile_interval([5.0], "p1") == Interval(  # type: ignore[arg-type]
        "p1", "request", 1, None, 5.0, method=ORDER, seed=0, reason="no lower bound at n=1"
    )


def test_a_quantiles_bound_needs_q_to_the_n_at_most_the_tail_counting_equality() -> None:
    # 0.5^2 = 0.25 is exactly the tail at level 50%: two requests suffice
    assert min_bounded_samples(0.5, level=0.5) == 2
    assert min_bounded_samples(0.5, level=0.6) == 3  # 0.25 > 0.2 >= 0.125


@pytest.mark.parametrize(("bound", "fewest"), [(1, 1), (3, 2), (10, 3), (11, 4), (1000, 7)])
def test_the_fewest_samples_for_a_bootstrap_is_the_first_n_whose_resamples_reach_the_bound(
    bound: int, fewest: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # n values have C(2n - 1, n) distinct resamples: 1, 3, 10, 35, 126, 462, 1716 for n = 1..7
    monkeypatch.setattr(stats, "MIN_DISTINCT_RESAMPLES", bound)
    assert min_interval_samples() == fewest


def test_equal_values_give_their_own_value_as_the_interval_of_the_statistic_asked() -> None:
    assert bootstrap_interval([7.5] * 8, "p90", over="run") == Interval(
        "p90", "run", 8, 7.5, 7.5, method="degenerate: all values equal"
    )


def test_a_bca_interval_that_cannot_be_computed_says_so() -> None:
    # Ten 1s and one 2: every leave-one-out median is 1, so BCa's acceleration is 0/0 and both bounds NaN
    assert bootstrap_interval([1.0] * 10 + [2.0], "median", over="request") == Interval(
        "median", "request", 11, reason="the BCa bootstrap gave no finite interval"
    )


# What the code gave when written (numpy's PCG64 streams are stable across numpy versions): the percentile
# interval of 2,500 values' P99 (BCa over the same draws gives another)
PERCENTILE_P99 = (932.736323015741, 1059.630601588959)


def test_past_the_bca_limit_the_interval_is_the_plain_percentile_one() -> None:
    values = list(np.random.default_rng(3).gamma(2.0, 150.0, size=2500))
    interval = bootstrap_interval(values, "p99", over="request")
    assert (interval.method, interval.n) == ("percentile", 2500)
    assert (interval.low, interval.high) == tuple(pytest.approx(v, abs=1e-9) for v in PERCENTILE_P99)


def test_a_hierarchical_bootstrap_over_two_flat_runs_lists_its_resamples() -> None:
    # Runs at 1 and 3 with no spread inside: a resample draws {1, 1}, {1, 3} or {3, 3} (1/4, 1/2, 1/4), so its
    # mean is 1, 2 or 3 and its P90 1, 3 or 3; each end holds far more than 2.5% of the 4,000 draws
    runs = [[1.0] * 7, [3.0] * 7]
    for statistic in ("mean", "p90"):
        assert hierarchical_interval(runs, statistic) == Interval(  # type: ignore[arg-type]
            statistic, "request", 14, 1.0, 3.0, runs=2, method=HIERARCHICAL
        )
    # B is A plus 10: every resampled difference is 8 to 12, none at or below 0
    test = bootstrap_difference_test(runs, [[11.0] * 7, [13.0] * 7], "mean")
    least = 2 / (N_HIERARCHICAL_RESAMPLES + 1)
    assert test == StatsTest(
        "hierarchical bootstrap of the mean difference",
        14,
        14,
        pytest.approx(least),  # type: ignore[arg-type]
        8.0,
        12.0,
    )
    assert judge(2.0, 12.0, "A", "B", better="lower", test=test).text == "A -83%"  # (2 - 12) / 12


class _Draws:
    """A numpy Generator that records the shape of each batch of runs drawn."""

    def __init__(self) -> None:
        self.rng = np.random.default_rng(stats.BOOTSTRAP_SEED)
        self.batches: list[tuple[int, int]] = []

    def integers(self, low: int, high: int, size: tuple[int, int]) -> np.ndarray:
        self.batches.append(size)
        return self.rng.integers(low, high, size=size)

    def random(self, size: tuple[int, int, int]) -> np.ndarray:
        return self.rng.random(size)


def test_the_hierarchical_bootstrap_draws_in_batches_of_bounded_size_with_the_remainder_last() -> None:
    # 600 values a resample: 2,000,000 // 600 = 3,333 resamples a batch, then the 667 left
    draws = _Draws()
    out = stats._hierarchical([np.arange(600.0)], "mean", draws, 4000)  # type: ignore[arg-type]
    assert draws.batches == [(3333, 1), (667, 1)] and len(out) == 4000


def test_a_resample_larger_than_the_batch_bound_is_drawn_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stats, "MAX_VALUES_PER_BATCH", 10)
    draws = _Draws()
    stats._hierarchical([np.arange(7.0), np.arange(7.0)], "mean", draws, 3)  # type: ignore[arg-type]
    assert draws.batches == [(1, 2)] * 3


def test_the_verdict_on_a_real_difference_says_who_is_better_by_how_much() -> None:
    real = welch_test([1.0, 3.0], [11.0, 13.0])
    assert judge(200.0, 150.0, "A", "B", better="lower", test=real).text == "B -25%"
    assert judge(200.0, 150.0, "A", "B", better="higher", test=real).text == "A +33%"  # 50 / 150
    assert judge(150.0, 200.0, "A", "B", better="higher", test=real).text == "B +33%"
    # A test can find a difference its point values do not show (equal P90s, shifted tails): the first run is
    # named, with +0%
    for better in ("lower", "higher"):
        verdict = judge(100.0, 100.0, "A", "B", better=better, test=real)  # type: ignore[arg-type]
        assert verdict == Judgement("real", "A +0%", 0.0, real.p, None, None, real)


def test_only_two_bounded_intervals_can_be_asked_whether_they_overlap() -> None:
    bounded, open_ended = Interval("p99", "request", 400, 1.0, 2.0), Interval("p99", "request", 30, 3.0, None)
    with pytest.raises(AssertionError):
        bounded.overlaps(open_ended)
    with pytest.raises(AssertionError):
        open_ended.overlaps(bounded)
