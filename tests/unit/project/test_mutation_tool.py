"""tools/mutation.py (`make mutation`): the score it prints and the equivalent-mutant list it reads."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("mutation_tool", ROOT / "tools" / "mutation.py")
assert _spec and _spec.loader
tool = importlib.util.module_from_spec(_spec)
sys.modules["mutation_tool"] = tool  # dataclasses look their module up there
_spec.loader.exec_module(tool)


def test_the_score_counts_timeouts_as_killed_and_explained_survivors_apart(tmp_path: Path) -> None:
    meta = tmp_path / "m.py.meta"
    codes = {"m.a_1": 1, "m.a_2": 0, "m.a_3": 0, "m.a_4": -24, "m.a_5": 33, "m.a_6": 3}
    meta.write_text(json.dumps({"exit_code_by_key": codes}))
    result = tool.score("m", [meta], {"m.a_3": "why"})
    assert (result.killed, result.timeouts, result.survived, result.explained, result.untested) == (
        3,
        1,
        ("m.a_2",),
        ("m.a_3",),
        ("m.a_5",),
    )
    assert result.line() == (
        "mutation score m: 66.7% (3 killed (1 by timeout), 1 equivalent, 1 survived, 1 untested of 6)"
    )


def test_a_sample_is_a_tenth_of_the_mutants_by_their_last_digit_and_scores_only_them(tmp_path: Path) -> None:
    meta = tmp_path / "m.py.meta"
    codes = {"m.x_a__mutmut_7": 1, "m.x_a__mutmut_17": 0, "m.x_a__mutmut_8": None, "m.x_a__mutmut_70": None}
    meta.write_text(json.dumps({"exit_code_by_key": codes}))
    result = tool.score("m", [meta], {}, tool.sample_pattern(7))
    assert (result.killed, result.survived, result.other) == (1, ("m.x_a__mutmut_17",), {})  # 8 and 70 not run


def test_every_explained_mutant_has_a_reason_and_names_a_mutated_module(tmp_path: Path) -> None:
    explained = tool.equivalents()
    modules = {Path(s).with_suffix("").as_posix().replace("/", ".") for m in tool.MODULES for s in m.sources}
    assert explained and all(name.rsplit(".", 1)[0] in modules for name in explained), sorted(explained)
    bad = tmp_path / "equivalent.txt"
    bad.write_text("# comment\n\nhgxkit.x.y__mutmut_1\n")
    with pytest.raises(SystemExit, match=r"equivalent.txt:3: hgxkit.x.y__mutmut_1 has no reason"):
        tool.equivalents(bad)


def test_a_guarded_timeout_signals_its_own_worker_and_nothing_once_it_is_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess

    (tmp_path / "src").mkdir()  # mutmut reads its configuration (where the code is) on import
    monkeypatch.chdir(tmp_path)
    tool.guard_mutmut_timeouts()
    from mutmut.workers import isolation, timeout

    assert isolation.register_timeout is timeout.register_timeout
    gone = subprocess.Popen(["true"])
    gone.wait()  # reaped: its pid may be anyone's now, so it is not signalled
    timeout.register_timeout(gone.pid, 0.0)
    worker = subprocess.Popen(["sleep", "30"])
    timeout.register_timeout(worker.pid, 0.2)
    assert worker.wait(timeout=10) == -24  # SIGXCPU


def test_a_modules_deselected_tests_reach_pytest_as_deselect_and_the_rest_of_its_files_run(tmp_path: Path) -> None:
    module = tool.Module("m", ("hgxkit/secrets.py",), ("tests/unit/core/test_secrets.py",), ("a.py::test_b",))
    tool.prepare(module, tmp_path / "m")
    config = (tmp_path / "m" / "pyproject.toml").read_text()
    assert 'pytest_add_cli_args_test_selection = ["tests/unit/core/test_secrets.py"]\n' in config
    assert (
        'pytest_add_cli_args = ["-p", "no:cacheprovider", "-p", "no:randomly", "-m", "not install", "--deselect", '
        '"a.py::test_b"]\n'
    ) in config
