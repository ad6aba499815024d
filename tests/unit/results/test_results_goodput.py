"""Goodput under `--slo`: the engines' clients' definition (every per-request limit met), exact counts."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from test_results import make_run

from hgxkit.cli import main
from hgxkit.errors import InputError
from hgxkit.results.goodput import Slo, cell_goodput, parse_slos
from hgxkit.results.schemas import schema_errors


def _cell(**kw: object) -> SimpleNamespace:
    base = dict(
        completed=10,
        failed=0,
        duration_s=5.0,
        ttfts_ms=[100.0 * (i + 1) for i in range(10)],
        tpots_ms=[10.0 * (i + 1) for i in range(10)],
        e2es_ms=[1000.0] * 10,
    )
    return SimpleNamespace(**{**base, **kw})


def test_parse_slos_reads_terms_and_names_a_bad_one() -> None:
    assert parse_slos("ttft_p99<=2000, tpot<=50,e2e_mean<=9000") == [
        Slo("ttft", 2000.0, "p99"),
        Slo("tpot", 50.0, None),
        Slo("e2el", 9000.0, "mean"),
    ]
    with pytest.raises(InputError, match=r"'itl<=5' is not an SLO term; write METRIC\[_STAT\]<=MS"):
        parse_slos("ttft<=1,itl<=5")


def test_a_request_is_good_only_when_it_meets_every_limit() -> None:
    # TTFT <= 500 holds for requests 1-5, TPOT <= 70 for 1-7: 5 good of 10 (+2 failed: of 12 sent).
    g = cell_goodput(_cell(failed=2), parse_slos("ttft<=500,tpot<=70"))
    assert (g.requests, g.good, g.request_goodput) == (12, 5, 1.0)
    assert g.slo_attainment == pytest.approx(5 / 12)
    assert g.slo_attainment_by_metric == {"ttft": pytest.approx(5 / 12), "tpot": pytest.approx(7 / 12)}


def test_a_quantile_term_is_checked_on_the_cell_with_its_upper_bound() -> None:
    g = cell_goodput(_cell(), parse_slos("ttft_p90<=950,ttft_median<=800"))
    p90, median = g.terms
    # numpy's linear P90 of 100..1000 is 910; 10 requests cannot bound a P90 from above.
    assert (p90.value, p90.met, p90.upper_bound, p90.reason) == (
        pytest.approx(910.0),
        True,
        None,
        "no upper bound at n=10",
    )
    # the median of 10 is bounded by X(2)..X(9) (binomial ranks): upper bound 900 > 800, so not with confidence
    assert (median.value, median.met, median.upper_bound, median.met_with_95pct_confidence) == (
        550.0,
        True,
        900.0,
        False,
    )
    assert g.slos_ms == {"ttft": 800.0} and g.good == 8  # two terms on TTFT: a request must meet the lower


def test_no_per_request_values_say_why() -> None:
    g = cell_goodput(_cell(ttfts_ms=[], tpots_ms=[], e2es_ms=[]), parse_slos("ttft<=500"))
    assert g.good is None and g.reason and g.reason.startswith("no per-request values")
    skipped = cell_goodput(_cell(tpots_ms=[10.0] * 9), parse_slos("tpot<=50"))
    assert skipped.reason == "the per-request tpot values do not line up with the requests"


def test_compare_slo_json_validates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_run(tmp_path, "node1", "20261130T120000Z", "marlin", details=True)
    make_run(tmp_path, "node2", "20261130T130000Z", "flashinfer", details=True, scale=1.3)
    root = ["results", "--root", str(tmp_path)]
    assert main([*root, "compare", "marlin", "flashinfer", "--json", "--slo", "ttft_p99<=2000,tpot_p99<=50"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert schema_errors(document, "compare") == []
    assert [s["term"] for s in document["slos"]] == ["ttft_p99<=2000", "tpot_p99<=50"]
    (cell,) = document["goodput"]
    assert cell["a"]["requests"] == 10 and cell["a"]["good"] is not None
    with pytest.raises(SystemExit) as exit_:
        main([*root, "compare", "marlin", "flashinfer", "--slo", "ttft>2"])
    assert exit_.value.code == 2 and "'ttft>2' is not an SLO term" in capsys.readouterr().err
