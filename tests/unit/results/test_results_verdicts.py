"""Verdicts a CI can act on: `results compare --fail-on outside|regression|any` exits 1 when
the answer holds, the JSON carries structured verdicts that validate, and `recipe diff --exit-code` is git's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from test_results import ROOT, make_run

from hgxkit.cli import main
from hgxkit.results.schemas import schema_errors

MARLIN = ROOT / "recipes/deepseek-v4-flash-dspark-marlin.yaml"


def _reference_from(tmp_path: Path, run_dir: Path) -> Path:
    """The marlin recipe with its reference cells replaced by what the run at scale 1 measured (5000x5, 5000x10):
    a post this run matches exactly."""
    summary = json.loads((run_dir / "summary.json").read_text())
    recipe = yaml.safe_load(MARLIN.read_text())
    cells = []
    for cell in summary["cells"]:
        values = {k: cell[k] for k in ("ttft_mean_ms", "ttft_p90_ms", "ttft_p99_ms", "accept_length")}
        cells.append({"cell": f"{cell['input_len']}x{cell['concurrency']}", "sources": ["post.txt:1"], **values})
    recipe["reference"]["cells"] = cells
    path = tmp_path / "matching.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    return path


def _compare(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict, str]:
    code = main(["results", *args, "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


def test_fail_on_outside_exits_1_on_a_run_twice_as_slow_and_0_on_a_matching_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    same = make_run(tmp_path, "node1", "20261130T120000Z", "deepseek-v4-flash-dspark-marlin")
    recipe = _reference_from(tmp_path, same)
    make_run(tmp_path, "node2", "20261130T130000Z", "deepseek-v4-flash-dspark-marlin", scale=2.0)
    root = ["--root", str(tmp_path)]
    code, doc, err = _compare(
        capsys, *root, "compare", "node1/", "--reference", "--recipe", str(recipe), "--fail-on", "outside"
    )
    assert (code, doc["outside"], doc["missing"], err) == (0, 0, 0, "")
    assert schema_errors(doc, "compare") == [] and doc["schema_version"] == 2
    assert {r["verdict"] for r in doc["rows"]} == {"within"} and all(r["delta"] == 0 for r in doc["rows"])
    code, doc, err = _compare(
        capsys, *root, "compare", "node2/", "--reference", "--recipe", str(recipe), "--fail-on", "outside"
    )
    assert code == 1 and schema_errors(doc, "compare") == []
    ttft = [r for r in doc["rows"] if r["metric"].startswith("TTFT")]
    assert len(ttft) == 6 and all(r["verdict"] == "outside" and r["direction"] == "worse" for r in ttft)
    assert all(r["delta_pct"] == pytest.approx(100, abs=0.5) and r["tolerance"] == 0.25 for r in ttft)
    assert {r["verdict"] for r in doc["rows"] if r["metric"] == "accept length"} == {"within"}
    assert err.count("fail-on outside: TTFT") == 6
    # regression: outside AND worse; a run twice as fast is outside but better.
    make_run(tmp_path, "node3", "20261130T140000Z", "deepseek-v4-flash-dspark-marlin", scale=0.5)
    code, doc, _ = _compare(
        capsys, *root, "compare", "node3/", "--reference", "--recipe", str(recipe), "--fail-on", "regression"
    )
    assert (
        code == 0
        and doc["outside"] == 6
        and {r["direction"] for r in doc["rows"] if r["verdict"] == "outside"} == {"better"}
    )
    assert (
        main(["results", *root, "compare", "node3/", "--reference", "--recipe", str(recipe), "--fail-on", "outside"])
        == 1
    )


def test_fail_on_any_counts_what_was_not_measured(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_run(tmp_path, "node1", "20261130T120000Z", "deepseek-v4-flash-dspark-marlin")
    root = ["--root", str(tmp_path)]
    # The shipped recipe's post has 12 cells; the run measured 2: outside may be 0, missing is not.
    code, doc, _ = _compare(
        capsys, *root, "compare", "node1/", "--reference", "--recipe", str(MARLIN), "--fail-on", "any"
    )
    assert doc["missing"] > 0 and code == 1


def test_two_runs_regression_and_any(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_run(tmp_path, "node1", "20261130T120000Z", "deepseek-v4-flash-dspark-marlin", details=True)
    make_run(tmp_path, "node2", "20261130T130000Z", "deepseek-v4-flash-dspark-marlin", details=True, scale=1.5)
    root = ["--root", str(tmp_path)]
    code, doc, err = _compare(capsys, *root, "compare", "node1/", "node2/", "--fail-on", "regression")
    assert schema_errors(doc, "compare") == []
    (row,) = doc["tables"]["ttft_mean"]["rows"]
    assert (row["outcome"], round(row["delta_pct"])) == ("worse", 50) and row["delta"] == pytest.approx(
        row["b"] - row["a"]
    )
    assert code == 1 and "fail-on regression: ttft_mean 5000x5" in err
    # The other way round node1 is the improvement: no regression, but `any` still sees a real difference.
    code, doc, _ = _compare(capsys, *root, "compare", "node2/", "node1/", "--fail-on", "regression")
    assert code == 0 and doc["tables"]["ttft_mean"]["rows"][0]["outcome"] == "better"
    assert main(["results", *root, "compare", "node2/", "node1/", "--fail-on", "any"]) == 1
    # Without --fail-on the exit code says nothing about the answer.
    assert main(["results", *root, "compare", "node1/", "node2/"]) == 0


def test_fail_on_outside_needs_a_reference(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_run(tmp_path, "node1", "20261130T120000Z", "r")
    make_run(tmp_path, "node2", "20261130T130000Z", "r")
    assert main(["results", "--root", str(tmp_path), "compare", "node1/", "node2/", "--fail-on", "outside"]) == 2
    assert "--fail-on outside needs --reference" in capsys.readouterr().err


def test_recipe_diff_exit_code_is_gits(capsys: pytest.CaptureFixture[str]) -> None:
    flashinfer = str(ROOT / "recipes/deepseek-v4-flash-dspark-flashinfer.yaml")
    assert main(["recipe", "diff", str(MARLIN), flashinfer]) == 0  # without the flag: 0 either way
    assert main(["recipe", "diff", "--exit-code", str(MARLIN), flashinfer]) == 1
    assert "--moe-runner-backend" in capsys.readouterr().out
    assert main(["recipe", "diff", "--exit-code", str(MARLIN), str(MARLIN)]) == 0
    assert main(["recipe", "diff", "--exit-code", "--json", str(MARLIN), flashinfer]) == 1
    assert json.loads(capsys.readouterr().out)
