"""The verify role's node-side wait (hgxkit/verify/script.py wait_for_progress), run here by `sh`: it returns as
soon as the progress file changes or the status appears, and otherwise waits its full time (no busy loop). The
wait is 2 s and "at once" is under 1.5 s, so a loaded machine starting `sh` slowly does not fail it."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from hgxkit.hostcmd import text
from hgxkit.verify.script import parse_progress, wait_for_progress


def wait(workdir: Path, seen: str, wait_s: float = 2.0) -> tuple[float, tuple[str, list[str], str]]:
    start = time.monotonic()
    out = subprocess.run(
        ["sh", "-c", text(wait_for_progress(str(workdir), seen, wait_s))], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    return time.monotonic() - start, parse_progress(out)


def test_waits_while_nothing_changes_and_returns_at_once_on_a_change(tmp_path: Path) -> None:
    elapsed, (seen, status, progress) = wait(tmp_path, "")
    assert (seen, status, progress) == ("none", [], "") and elapsed < 1.5  # first look: at once
    elapsed, (seen, status, progress) = wait(tmp_path, seen)
    assert seen == "none" and elapsed >= 1.9  # no progress file yet: waits, no busy loop
    (tmp_path / "progress").write_text("cell 1 of 24: group 0\n")
    elapsed, (seen, status, progress) = wait(tmp_path, seen)
    assert progress == "cell 1 of 24: group 0" and status == [] and elapsed < 1.5
    elapsed, (again, _, _) = wait(tmp_path, seen)
    assert again == seen and elapsed >= 1.9
    (tmp_path / "status").write_text("ok\n")
    elapsed, (_, status, _) = wait(tmp_path, seen)
    assert status == ["ok"] and elapsed < 1.5


def test_a_workdir_with_shell_characters_is_quoted(tmp_path: Path) -> None:
    odd = tmp_path / "run $(touch pwned); x"
    odd.mkdir()
    (odd / "progress").write_text("cell 2 of 2\n")
    _, (_, _, progress) = wait(odd, "")
    assert progress == "cell 2 of 2" and not (Path.cwd() / "pwned").exists()
