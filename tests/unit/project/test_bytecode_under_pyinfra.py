"""pyinfra's CLI switches bytecode writing off for its process; hgxkit, once a deploy imports it, puts back the
interpreter's own setting (hgxkit/__init__.py), so roles/ and an editable hgxkit are not compiled on every run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PYINFRA = str(Path(sys.executable).parent / "pyinfra")


def _kept_bytecode(folder: Path, first_line: str, owner: int | None = None, **env: str) -> bool:
    """Run `pyinfra @local` on a deploy in `folder` (a fresh one per call, given to `owner` if named) whose
    second line imports a package of that folder; whether the package kept its bytecode."""
    folder.mkdir()
    (folder / "probe").mkdir()
    (folder / "probe" / "__init__.py").write_text("VALUE = 1\n")
    (folder / "deploy.py").write_text(f"{first_line}\nimport probe\n")
    if owner is not None:
        for path in (folder, folder / "probe"):
            os.chown(path, owner, owner)
            path.chmod(0o777)  # writable by anyone: only the owner check can keep root's __pycache__ out
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    done = subprocess.run(
        [PYINFRA, "-y", "@local", "deploy.py"],
        cwd=folder,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return (folder / "probe" / "__pycache__").is_dir()


def test_a_deploy_that_imports_hgxkit_keeps_its_modules_bytecode(tmp_path: Path) -> None:
    assert _kept_bytecode(tmp_path / "with", "import hgxkit")
    # pyinfra's own switch, without hgxkit: nothing kept (what every run paid for roles/ before)
    assert not _kept_bytecode(tmp_path / "without", "import os")


def test_pythondontwritebytecode_still_holds(tmp_path: Path) -> None:
    assert not _kept_bytecode(tmp_path / "env", "import hgxkit", PYTHONDONTWRITEBYTECODE="1")


@pytest.mark.skipif(os.geteuid() != 0 and os.environ.get("CI") != "true", reason="needs root to own another's folder")
def test_root_leaves_no_bytecode_in_a_deploy_folder_another_user_owns(tmp_path: Path) -> None:
    assert not _kept_bytecode(tmp_path / "theirs", "import hgxkit", owner=65534)
    assert _kept_bytecode(tmp_path / "ours", "import hgxkit")
