"""Following a replace unit (hgxkit/serving/replace.py poll_command): a unit that ends between the controller's
reads is seen with its status, never as one that stopped without a result (a race the fault matrix hit)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from hgxkit.hostcmd import text
from hgxkit.serving.replace import poll_command

# A systemctl whose `is-active` is the moment the unit ends: it writes the status first, as the unit does.
FAKE_SYSTEMCTL = """#!/bin/sh
printf 'ok\\n' > "$WORKDIR/status"
echo inactive
"""


def test_a_unit_that_ends_between_the_reads_is_seen_with_its_status(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text(FAKE_SYSTEMCTL)
    (bin_dir / "systemctl").chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    (work / "progress").write_text("waiting for health, 2 s\n")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "WORKDIR": str(work)}
    done = subprocess.run(
        ["sh", "-c", text(poll_command("hgxkit-serve-m-0", str(work)))],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    status, progress, active = (part.strip() for part in done.stdout.split("#\n"))
    assert (status, progress, active) == ("ok", "waiting for health, 2 s", "inactive")


def test_a_running_unit_has_no_status_yet(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text("#!/bin/sh\necho active\n")
    (bin_dir / "systemctl").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    done = subprocess.run(
        ["sh", "-c", text(poll_command("hgxkit-serve-m-0", str(tmp_path)))],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout == "#\n#\nactive\n"
