"""docs/faults.md's "What survives what" table is generated from the fault matrix's cases and cannot drift from it
(tools/faults_table.py, tests/faults/fault_matrix.py, tests/e2e/test_fault_matrix.py)."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("faults_table_under_test", ROOT / "tools" / "faults_table.py")
assert _spec and _spec.loader
faults_table = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(faults_table)
matrix = faults_table._matrix()


def test_the_faults_page_table_is_the_generated_one(capsys) -> None:
    assert faults_table.PAGE == ROOT / "docs" / "faults.md"
    assert faults_table.main(["--check"]) == 0, capsys.readouterr().err


def test_the_page_rows_are_the_matrix_test_ids_in_order() -> None:
    page = faults_table.PAGE.read_text()
    body = page[page.index(faults_table.BEGIN) : page.index(faults_table.END)]
    ids = re.findall(r"\| `([a-z-]+@[a-z-]+)` \|", body)
    assert ids == [c.id for c in matrix.CASES]
    assert len(ids) == len(set(ids)) == 43


def test_a_changed_case_makes_the_check_fail(monkeypatch, capsys) -> None:
    first = matrix.CASES[0]
    monkeypatch.setattr(matrix, "CASES", [matrix.Case(first.fault, first.phase, "something else"), *matrix.CASES[1:]])
    monkeypatch.setattr(faults_table, "_matrix", lambda: matrix)
    assert faults_table.main(["--check"]) == 1
    assert "run `python tools/faults_table.py`" in capsys.readouterr().err


def test_every_case_names_a_known_fault_and_phase_and_the_ci_subset_is_small() -> None:
    assert all(c.fault in matrix.FAULTS and c.phase in matrix.PHASES for c in matrix.CASES)
    assert [c.id for c in matrix.selected("ci", matrix.MAIN_MODULE)] == ["controller-kill@replace-health-wait"]
    assert [c.id for c in matrix.selected("ci", "tests/e2e/test_fault_matrix_model.py")] == ["hub-drop@model-mid-file"]
    assert matrix.selected("all") == matrix.CASES
    assert [c.id for c in matrix.selected("ssh-cut@replace-start")] == ["ssh-cut@replace-start"]
    with pytest.raises(ValueError, match=r"unknown case\(s\) nope@x; see tests/faults/fault_matrix.py"):
        matrix.selected("nope@x")


def test_the_matrix_modules_are_parametrized_by_these_cases() -> None:
    modules = sorted({c.module for c in matrix.CASES})
    assert modules == ["tests/e2e/test_fault_matrix.py", "tests/e2e/test_fault_matrix_model.py"]
    for module in modules:
        source = (ROOT / module).read_text()
        assert f'MODULE = "{module}"' in source
        assert (
            '@pytest.mark.parametrize("case", selected(os.environ.get("HGXKIT_FAULTS", "ci"), MODULE), '
            "ids=lambda c: c.id)" in source
        )
    assert str(ROOT / "tests" / "faults") not in sys.path  # the tool leaves the path as it found it
