"""`--dry` on a fresh node creates nothing, not even the run lock (hgxkit/hostlock.py); a real run makes it."""

from __future__ import annotations

import subprocess
from pathlib import Path

from hgxkit.hostcmd import text
from hgxkit.hostlock import BUSY, dry_run, holder_command


def take(command: object) -> subprocess.Popen[str]:
    proc = subprocess.Popen(["sh", "-c", text(command)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "hgxkit-locked"
    return proc


def test_a_dry_run_on_a_fresh_node_holds_nothing_and_creates_nothing(tmp_path: Path) -> None:
    lock = tmp_path / "var-lib-hgxkit" / "run.lock"
    holder = take(holder_command(dry=True, lock=str(lock)))
    holder.communicate("", timeout=30)
    assert holder.returncode == 0 and not lock.parent.exists()


def test_a_real_run_makes_the_lock_and_a_dry_run_then_takes_it_too(tmp_path: Path) -> None:
    lock = tmp_path / "var-lib-hgxkit" / "run.lock"
    real = take(holder_command(lock=str(lock)))
    assert lock.is_file() and lock.stat().st_size == 0
    busy = subprocess.run(
        ["sh", "-c", text(holder_command(dry=True, lock=str(lock)))],
        input="",
        text=True,
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert busy.returncode == BUSY and busy.stdout == ""  # the file is there: the dry run waits its turn
    real.communicate("", timeout=30)
    dry = take(holder_command(dry=True, lock=str(lock)))
    dry.communicate("", timeout=30)
    assert dry.returncode == 0


def test_dry_run_is_read_from_pyinfras_command_line(monkeypatch) -> None:
    monkeypatch.setattr("sys.argv", ["pyinfra", "--dry", "inventories/sim.py", "deploys/bringup.py"])
    assert dry_run() is True
    monkeypatch.setattr("sys.argv", ["pyinfra", "-y", "inventories/sim.py", "deploys/dry.py"])
    assert dry_run() is False
