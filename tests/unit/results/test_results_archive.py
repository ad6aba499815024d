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
from hgxkit.results.archive import (
    _safe_name,
    list_runs,
    load_run,
    scan_runs,
    scrub,
    scrub_json,
    write_report_html,
    write_run,
)
from hgxkit.results.fingerprint import Fingerprint
from hgxkit.results.summary import RunSummary


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
    assert err.startswith(f"error: {bad}/summary.json: schema_version 9") or f" {bad}/summary.json: " in err
    with pytest.raises(InputError, match=f"^{re.escape(str(bad))}/summary.json: schema_version 9 is newer"):
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


def _member(name: str, **changes: object) -> Fingerprint:
    return Fingerprint(system_name=name, simulated=True, packages={"driver": "580.105.08"}, **changes)  # type: ignore[arg-type]


def test_a_multi_node_runs_members_come_back_by_the_host_each_records(tmp_path: Path) -> None:
    members = {"Xeon.A/1": _member("Xeon.A/1"), "node2": _member("node2")}
    path = make_run(tmp_path, "node1", "20261130T120000Z", "r", members=members)
    assert sorted(p.name for p in (path / "members").iterdir()) == ["Xeon.A_1.json", "node2.json"]
    assert load_run(str(path), tmp_path).members == members


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("{", r"members/node2.json: Expecting property name enclosed in double quotes: .*"),
        (None, r"members/node2.json: .* is not of type 'boolean'"),
    ],
    ids=["not-json", "schema"],
)
def test_a_damaged_member_is_named_with_its_file(tmp_path: Path, text: str | None, why: str) -> None:
    path = make_run(tmp_path, "node1", "20261130T120000Z", "r", members={"node2": _member("node2")})
    member = path / "members" / "node2.json"
    data = json.loads(member.read_text())
    member.write_text(text if text is not None else json.dumps(data | {"simulated": "yes"}))
    with pytest.raises(InputError, match=f"^{re.escape(str(path))}: damaged run \\({why}\\); move it out"):
        load_run(str(path), tmp_path)
    data["schema_version"] = 9
    member.write_text(json.dumps(data))
    with pytest.raises(InputError, match=f"^{re.escape(str(member))}: schema_version 9 is newer"):
        load_run(str(path), tmp_path)


def test_a_summary_that_breaks_its_reader_is_named_with_the_error(tmp_path: Path) -> None:
    path = make_run(tmp_path, "node1", "20261130T120000Z", "r")
    data = json.loads((path / "summary.json").read_text())
    del data["run_id"]
    (path / "summary.json").write_text(json.dumps(data))
    with pytest.raises(InputError) as damaged:
        load_run(str(path), tmp_path)
    assert str(damaged.value) == (
        f"{path}: damaged run (TypeError: RunSummary.__init__() missing 1 required positional argument: "
        "'run_id'); move it out of the archive or delete it"
    )


def test_a_run_outside_the_root_keeps_the_id_it_records(tmp_path: Path) -> None:
    path = make_run(tmp_path / "elsewhere", "node1", "20261130T120000Z", "r")
    assert load_run(str(path), tmp_path / "results").run_id == "node1/20261130T120000Z_r"


def test_an_ambiguous_part_lists_five_of_the_runs_it_matches(tmp_path: Path) -> None:
    for minute in range(6):
        make_run(tmp_path, "node1", f"20261130T12{minute:02d}00Z", "r")
    with pytest.raises(InputError) as many:
        load_run("node1", tmp_path)
    ids = ", ".join(f"node1/20261130T12{minute:02d}00Z_r" for minute in range(5))
    assert str(many.value) == f"node1: matches 6 runs ({ids}); give more of the id"


def test_what_is_not_a_run_directory_is_passed_over_not_reported(tmp_path: Path) -> None:
    (tmp_path / "aaa").mkdir()
    (tmp_path / "aaa" / "notes.txt").write_text("sorted before every host")
    (tmp_path / "node0").mkdir()
    (tmp_path / "node0" / "20261130T110000Z_file").write_text("named like a run, not a directory")
    make_run(tmp_path, "node1", "20261130T120000Z", "r")
    runs, skipped = scan_runs(tmp_path)
    assert [run.run_id for run in runs] == ["node1/20261130T120000Z_r"] and skipped == []


def test_an_archived_run_has_an_html_report_only_when_asked_and_then_with_the_reference(tmp_path: Path) -> None:
    assert not (make_run(tmp_path, "node1", "20261130T120000Z", "a") / "report.html").exists()
    reference = load_recipe("recipes/deepseek-v4-flash-dspark-marlin.yaml").reference
    path = make_run(tmp_path, "node1", "20261130T130000Z", "b", html=True, reference=reference)
    html = (path / "report.html").read_text()
    assert "330.12" in html and "Results of node1/20261130T130000Z_b" in html


def test_a_run_id_is_written_once_and_an_interrupted_write_of_it_leaves_nothing_behind(tmp_path: Path) -> None:
    root = tmp_path / "new" / "results"  # made on first use
    stale = root / "node1" / "20261130T120000Z_r.partial"
    (stale / "raw").mkdir(parents=True)
    (stale / "raw" / "left-over.jsonl").write_text("{}")
    path = make_run(root, "node1", "20261130T120000Z", "r")
    assert not (path / "raw" / "left-over.jsonl").exists() and not stale.exists()
    with pytest.raises(InputError) as again:
        make_run(root, "node1", "20261130T120000Z", "r")
    assert str(again.value) == f"{path}: a run with this id exists already; nothing was overwritten"


def test_write_run_writes_no_html_report_unless_asked(tmp_path: Path) -> None:
    summary = RunSummary("node1/20261130T120000Z_r", "node1", "r", "20261130T120000Z", True, "sglang", "0.5.23", [])
    path = write_run(tmp_path, summary, _member("node1"), {}, "# report", [])
    assert sorted(p.name for p in path.iterdir()) == ["fingerprint.json", "raw", "report.md", "summary.json"]
