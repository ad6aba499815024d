"""The fault matrix soak in parts (tests/faults/fault_matrix.py parts, `part:K`) and its figures added up over
the parts (tests/faults/soak_figures.py)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"{name}_under_test", ROOT / "tests" / "faults" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


matrix = _load("fault_matrix")
figures = _load("soak_figures")


def test_the_parts_cover_every_case_once_each_from_one_module_and_small() -> None:
    chunks = matrix.parts()
    assert sorted(c.id for chunk in chunks for c in chunk) == sorted(c.id for c in matrix.CASES)
    assert len([c for chunk in chunks for c in chunk]) == len(matrix.CASES)
    assert all(len({c.module for c in chunk}) == 1 for chunk in chunks)
    assert max(len(chunk) for chunk in chunks) == matrix.PART_SIZE
    sizes = [len(chunk) for chunk in matrix.parts(3)]
    assert max(sizes) == 3 and all(s >= 2 for s in sizes)  # even within a module: no part of one left over


def test_part_k_selects_that_part_of_each_module() -> None:
    first = matrix.parts()[0]
    assert matrix.selected("part:1", matrix.MAIN_MODULE) == first
    assert matrix.selected("part:1", "tests/e2e/test_fault_matrix_model.py") == []
    last = matrix.parts()[-1]
    assert matrix.selected(f"part:{len(matrix.parts())}", last[0].module) == last
    for bad in ("part:0", f"part:{len(matrix.parts()) + 1}", "part:x"):
        with pytest.raises(
            ValueError, match=rf"HGXKIT_FAULTS: {bad}: the parts are part:1 to part:{len(matrix.parts())}"
        ):
            matrix.selected(bad)


def _row(module: str, selected: int, cases: int, faults: int, requests: int, failed: int, load: list) -> dict:
    return {
        "module": module,
        "selected": selected,
        "cases": cases,
        "faults": faults,
        "requests": requests,
        "failed": failed,
        "load": load,
    }


def test_the_figures_are_added_up_over_the_parts(tmp_path: Path, capsys, monkeypatch) -> None:
    path = tmp_path / "figures.jsonl"
    monkeypatch.setenv("HGXKIT_FAULT_FIGURES", str(path))
    counts = figures.new_counts()
    counts.update(cases=3, faults=3, requests=120, load=[2.5, 3.5])
    figures.record(counts, "a.py", 3)
    path.write_text(path.read_text() + json.dumps(_row("b.py", 4, 4, 4, 0, 0, [6.0])) + "\n")
    assert figures.main([str(path), "--stress", "--cpu 2"]) == 0
    assert capsys.readouterr().out == (
        "fault matrix soak: cases 7, faults injected 7, requests to the untouched groups 120, requests failed: 0; "
        "7 of 7 selected cases passed, in 2 sessions; stress-ng --cpu 2; load average (1 min, after each case) "
        "min 2.5 mean 4.00 max 6.0\n"
    )


def test_a_failed_case_or_request_fails_the_figures(tmp_path: Path, capsys) -> None:
    path = tmp_path / "figures.jsonl"
    path.write_text(json.dumps(_row("a.py", 4, 3, 4, 10, 0, [1.0])) + "\n")
    assert figures.main([str(path)]) == 1
    path.write_text(json.dumps(_row("a.py", 4, 4, 4, 10, 1, [1.0])) + "\n")
    assert figures.main([str(path)]) == 1
    assert "requests failed: 1;" in capsys.readouterr().out


def test_bad_figures_files_are_one_line(tmp_path: Path, capsys) -> None:
    assert figures.main([str(tmp_path / "none")]) == 1
    assert (
        capsys.readouterr().err
        == f"soak figures: {tmp_path / 'none'}: no such file; run `make soak-part PART=1` first\n"
    )
    (tmp_path / "f").write_text("{}\nnot json\n")
    assert figures.main([str(tmp_path / "f")]) == 1
    assert capsys.readouterr().err == f"soak figures: {tmp_path / 'f'} line 2: not JSON; remove the line or the file\n"
