"""The verify role's node-side wait (hgxkit/verify/script.py wait_for_progress), run here by `sh`: it returns as
soon as the progress file changes or the status appears, and otherwise waits its full time without a busy loop.
Neither depends on how busy the machine is: "at once" is well under a wait of two minutes, and "no busy loop" is
the CPU time the wait used, not its wall time."""

from __future__ import annotations

import resource
import subprocess
import time
from pathlib import Path

from hgxkit.hostcmd import text
from hgxkit.verify.script import parse_progress, wait_for_progress

LONG_S = 120.0  # a wait that returns well before this returned on the change, not at the end of its time
AT_ONCE_S = 60.0


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def wait(workdir: Path, seen: str, wait_s: float = LONG_S) -> tuple[float, float, tuple[str, list[str], str]]:
    """(wall time, CPU time of the wait's processes, what it printed, parsed)."""
    start, cpu = time.monotonic(), children_cpu_s()
    out = subprocess.run(
        ["sh", "-c", text(wait_for_progress(str(workdir), seen, wait_s))], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    return time.monotonic() - start, children_cpu_s() - cpu, parse_progress(out)


def test_waits_while_nothing_changes_and_returns_at_once_on_a_change(tmp_path: Path) -> None:
    elapsed, _, (seen, status, progress) = wait(tmp_path, "")
    assert (seen, status, progress) == ("none", [], "") and elapsed < AT_ONCE_S  # first look: at once
    elapsed, cpu, (seen, status, progress) = wait(tmp_path, seen, 2.0)
    assert seen == "none" and elapsed >= 1.9  # no progress file yet: waits its full time
    assert cpu < 0.5  # sleeping between looks: a busy loop would burn about the 2 s it waited
    (tmp_path / "progress").write_text("cell 1 of 24: group 0\n")
    elapsed, _, (seen, status, progress) = wait(tmp_path, seen)
    assert progress == "cell 1 of 24: group 0" and status == [] and elapsed < AT_ONCE_S
    elapsed, cpu, (again, _, _) = wait(tmp_path, seen, 2.0)
    assert again == seen and elapsed >= 1.9 and cpu < 0.5
    (tmp_path / "status").write_text("ok\n")
    elapsed, _, (_, status, _) = wait(tmp_path, seen)
    assert status == ["ok"] and elapsed < AT_ONCE_S


def test_a_workdir_with_shell_characters_is_quoted(tmp_path: Path) -> None:
    odd = tmp_path / "run $(touch pwned); x"
    odd.mkdir()
    (odd / "progress").write_text("cell 2 of 2\n")
    _, _, (_, _, progress) = wait(odd, "")
    assert progress == "cell 2 of 2" and not (Path.cwd() / "pwned").exists()
