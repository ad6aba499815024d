"""Intervals and verdicts: scipy's bootstrap (reproducible), Mann-Whitney, and what compare calls real."""

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
    bootstrap_interval,
    judge,
    mann_whitney,
    min_interval_samples,
    smallest_two_sided_p,
)
from hgxkit.results.summary import CellResult, RunSummary

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sglang_bench"


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


def test_mann_whitney_is_scipys_and_knows_when_it_cannot_judge() -> None:
    assert smallest_two_sided_p(3, 3) == pytest.approx(0.1)
    assert smallest_two_sided_p(4, 4) == pytest.approx(2 / 70)
    smoke = mann_whitney([250.0, 260.0, 270.0], [900.0, 910.0, 920.0])
    assert not smoke.judgeable and "smallest possible p is 0.1" in (smoke.reason or "")
    a, b = [100.0 + i for i in range(20)], [150.0 + i for i in range(20)]
    test = mann_whitney(a, b)
    assert test.p == pytest.approx(scipy_stats.mannwhitneyu(a, b, alternative="two-sided").pvalue)
    assert test.significant


def _judge(a: list[float], b: list[float]) -> str:
    ia, ib = bootstrap_interval(a, "mean", over="request"), bootstrap_interval(b, "mean", over="request")
    return judge(float(np.mean(a)), float(np.mean(b)), "A", "B", better="lower", interval_a=ia, interval_b=ib,
                 samples_a=a, samples_b=b).text  # fmt: skip


def test_real_needs_separate_intervals_and_a_significant_test() -> None:
    rng = np.random.default_rng(1)
    base = list(rng.normal(300, 30, size=60))
    assert _judge(base, [v * 0.8 for v in base]) == "B -20%"
    assert _judge(base, [v * 1.25 for v in base]) == "A -20%"
    assert _judge(base, list(rng.normal(302, 30, size=60))) == "tie"  # 2 ms apart in 30 ms noise
    assert _judge([300.0, 310.0, 320.0], [900.0, 910.0, 920.0]).startswith("too small to judge: 3 vs 3 requests")


def test_compare_calls_the_slower_run_and_the_smoke_cell_honestly(tmp_path: Path) -> None:
    fast = load_run(str(make_run(tmp_path, "n1", "20261130T120000Z", "marlin", details=True)), tmp_path)
    slow = load_run(str(make_run(tmp_path, "n2", "20261130T130000Z", "flashinfer", details=True, scale=1.3)), tmp_path)
    same = load_run(str(make_run(tmp_path, "n3", "20261130T140000Z", "again", details=True, scale=1.01)), tmp_path)
    (row,) = compare_runs(fast.summary, slow.summary).ttft_mean
    assert row.kind == "real" and row.verdict == "marlin -23%" and row.p is not None and row.p < 0.05
    assert row.interval_a is not None and row.interval_b is not None and row.interval_a.high < row.interval_b.low
    (tie,) = compare_runs(fast.summary, same.summary).ttft_mean
    assert tie.kind == "tie"
    # The smoke cell: 3 prompts a side cannot reach p < 0.05 whatever the numbers are.
    (record,) = parse_bench_jsonl((FIXTURES / "dspark_isl5000_c5_details.jsonl").read_text())
    three = replace(record, ttfts_ms=record.ttfts_ms[:3], tpots_ms=record.tpots_ms[:3], e2es_ms=record.e2es_ms[:3])
    smoke_a = CellResult.from_record(three, num_prompts=3, group=0, raw_file=None)
    smoke_b = CellResult.from_record(scaled(three, 3.0), num_prompts=3, group=0, raw_file=None)
    runs = [RunSummary(f"h/{x}", "h", x, "20261130T120000Z", True, "t", None, [c]) for x, c in
            (("a", smoke_a), ("b", smoke_b))]  # fmt: skip
    (smoke,) = compare_runs(*runs).ttft_mean
    assert smoke.kind == "too small to judge"
    assert smoke.verdict.startswith("too small to judge: 3 vs 3 requests")
