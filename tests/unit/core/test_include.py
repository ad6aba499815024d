"""Deploy files include their siblings by absolute path: pyinfra's loader can lose track of the running file."""

from __future__ import annotations

import re
from pathlib import Path

from pyinfra.api.state import State
from pyinfra.api.util import get_file_path

from hgxkit.include import sibling_path

ROOT = Path(__file__).resolve().parents[3]


def _state_as_another_host_left_it(cwd: Path) -> State:
    """The loader's global after another host's greenlet finished its deploy file and restored ``None``."""
    state = State()
    state.cwd = str(cwd)
    state.current_exec_filename = None
    return state


def test_a_relative_include_goes_wrong_when_the_loader_lost_the_running_file() -> None:
    state = _state_as_another_host_left_it(ROOT)
    assert get_file_path(state, "./bringup.py") == str(ROOT / "bringup.py")  # the CI failure: not deploys/
    assert not (ROOT / "bringup.py").exists()


def test_the_sibling_path_survives_it(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    state = _state_as_another_host_left_it(tmp_path)  # even with pyinfra --chdir somewhere else
    resolved = get_file_path(state, sibling_path("deploys/reproduce.py", "bringup.py"))
    assert resolved == str(ROOT / "deploys" / "bringup.py")
    assert Path(resolved).is_file()


def test_no_deploy_file_includes_by_a_relative_path() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted((ROOT / "deploys").glob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"local\.include\(", line)
    ]
    assert offenders == []
