"""A damaged run is skipped with one line naming it and the remedy; it never breaks `results ls` for the rest."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from test_results import make_run

from hgxkit.cli import main
from hgxkit.errors import InputError
from hgxkit.recipe.read import load_recipe
from hgxkit.results.archive import _safe_name, list_runs, load_run, scan_runs, scrub, scrub_json, write_report_html


def _bad_json(run: Path) -> None:
    (run / "summary.json").write_text('{"schema_version": 2, "cells": [')


def _no_fingerprint(run: Path) -> None:
    (run / "fingerprint.json").unlink()


def _partial(run: Path) -> None:
    run.rename(run.with_name(run.name + ".partial"))


def _too_new(run: Path) -> None:
    data = json.loads((run / "summary.json").read_text())
    (run / "summary.json").write_text(json.dumps(data | {"schema_version": 9}))


def _wrong_type(run: Path) -> None:
    data = json.loads((run / "summary.json").read_text())
    data["cells"][0]["completed"] = "ten"
    (run / "summary.json").write_text(json.dumps(data))


def _not_an_object(run: Path) -> None:
    (run / "fingerprint.json").write_text("[]")


DAMAGE: list[tuple[Callable[[Path], None], str]] = [
    (_bad_json, r"damaged run \(summary.json is not JSON: .*\); move it out of the archive or delete it$"),
    (_no_fingerprint, r"not a complete run \(fingerprint.json is missing\); move it out of the archive or delete it$"),
    (_partial, r"\.partial: an interrupted write \(.partial\); delete it, or rename it when it is complete$"),
    (_too_new, r"schema_version 9 is newer than this hgxkit reads \(up to 2\); upgrade hgxkit to read it$"),
    (_wrong_type, r"damaged run \(cells/0/completed: 'ten' is not of type 'integer'\); move it out"),
    (_not_an_object, r"fingerprint.json: not a JSON object; the archive file is damaged$"),
]


@pytest.mark.parametrize(("damage", "message"), DAMAGE, ids=[d.__name__.strip("_") for d, _ in DAMAGE])
def test_damaged_run_is_skipped_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: Callable[[Path], None], message: str
) -> None:
    make_run(tmp_path, "node1", "20261130T120000Z", "good")
    bad = make_run(tmp_path, "node2", "20261130T130000Z", "bad")
    damage(bad)
    runs, skipped = scan_runs(tmp_path)
    assert [r.run_id for r in runs] == ["node1/20261130T120000Z_good"]
    ((path, reason),) = skipped
    assert "node2/20261130T130000Z_bad" in path and reason.startswith(path) and "\n" not in reason
    assert re.search(message, reason), reason
    assert main(["results", "--root", str(tmp_path), "ls"]) == 0
    captured = capsys.readouterr()
    assert "node1/20261130T120000Z_good" in captured.out
    (warning,) = captured.err.splitlines()
    assert warning.startswith("warning: skipped ") and "Traceback" not in captured.err
    assert main(["results", "--root", str(tmp_path), "ls", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert [s["reason"] for s in listing["skipped"]] == [reason]


def test_loading_a_damaged_run_by_name_says_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = make_run(tmp_path, "node2", "20261130T130000Z", "bad")
    _too_new(bad)
    assert main(["results", "--root", str(tmp_path), "show", "bad"]) == 2
    err = capsys.readouterr().err.strip()
    assert "schema_version 9 is newer than this hgxkit reads" in err and len(err.splitlines()) == 1
    with pytest.raises(Exception, match="newer than this hgxkit reads"):
        load_run(str(bad), tmp_path)
    assert list_runs(tmp_path, warn=False) == []


def test_report_html_is_written_into_the_run_with_the_reference(tmp_path: Path) -> None:
    path = make_run(tmp_path, "node1", "20261130T120000Z", "deepseek-v4-flash-dspark-marlin")
    plain = write_report_html(path)  # no secrets given: nothing to mask, and no error
    assert plain == path / "report.html"
    without = plain.read_text()
    reference = load_recipe("recipes/deepseek-v4-flash-dspark-marlin.yaml").reference
    with_reference = write_report_html(path, reference=reference).read_text()
    assert "330.12" in with_reference and "330.12" not in without  # the post's marlin TTFT at 5K x 5


@pytest.mark.parametrize(("name", "safe"), [("../a/b.", "_a_b."), ("u@h:22", "u_h_22"), ("...", "host")])
def test_a_host_name_becomes_one_file_name(name: str, safe: str) -> None:
    assert _safe_name(name) == safe


def test_a_run_is_found_by_its_path_its_id_or_a_unique_part(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "results"
    make_run(root, "node1", "20261130T120000Z", "alpha")
    make_run(root, "node2", "20261130T130000Z", "beta")
    make_run(root, "node2", "20261130T130000Z", "beta2")
    _too_new(make_run(root, "node3", "20261130T140000Z", "bad"))
    # A path relative to the working directory, not to the root.
    assert load_run("results/node1/20261130T120000Z_alpha", root).run_id == "node1/20261130T120000Z_alpha"
    # A whole id is that run, even where it is also a part of another's id.
    assert load_run("node2/20261130T130000Z_beta", root).run_id == "node2/20261130T130000Z_beta"
    assert load_run("alpha", root).run_id == "node1/20261130T120000Z_alpha"
    with pytest.raises(InputError) as missing:
        load_run("gamma", root)
    assert str(missing.value) == f"gamma: no such run under {root}; list runs with `hgxkit results ls`"
    with pytest.raises(InputError) as many:
        load_run("2026", root)
    assert str(many.value) == (
        "2026: matches 3 runs (node1/20261130T120000Z_alpha, node2/20261130T130000Z_beta, "
        "node2/20261130T130000Z_beta2); give more of the id"
    )
    capsys.readouterr()
    assert len(list_runs(root)) == 3
    ((_, reason),) = scan_runs(root)[1]
    assert capsys.readouterr().err == f"warning: skipped {reason}\n"


def test_archived_text_and_json_mask_a_known_value_no_pattern_would_find() -> None:
    assert scrub("run by plainword42 ok", ["plainword42"]) == "run by *** ok"
    assert scrub_json({"a": ["plainword42", 1]}, ["plainword42"]) == '{\n  "a": [\n    "***",\n    1\n  ]\n}\n'
