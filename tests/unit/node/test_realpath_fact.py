"""hgxkit.node.facts_files.RealPath run for real with sh: the same answer as `realpath -m` for every kind of path."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from hgxkit.node.facts_files import RealPath


def resolved(path: str, **env: str) -> str | None:
    command = RealPath().command(path=path).get_raw_value()
    out = subprocess.run(
        ["sh", "-c", command], capture_output=True, text=True, check=True, env={**os.environ, **env}
    ).stdout
    return RealPath().process(out.splitlines())


def test_every_kind_of_path_resolves_as_realpath_m_resolves_it(tmp_path: Path) -> None:
    (tmp_path / "real" / "models").mkdir(parents=True)
    (tmp_path / "real" / "file").write_text("x")
    (tmp_path / "data").symlink_to(tmp_path / "real")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere" / "deeper")
    (tmp_path / "-dash").mkdir()
    (tmp_path / "sp ace").symlink_to(tmp_path / "real" / "models")
    cases = [
        "data/models",
        "data/models/../file",
        "data/file",
        "data/missing/x",
        "dangling",
        "dangling/y",
        "loop",
        "-dash",
        "sp ace",
        "real/models/",
        "data/models/..",
        ".",
        "data/./models//",
    ]
    for case in cases:
        path = str(tmp_path / case)
        want = subprocess.run(["realpath", "-m", "--", path], capture_output=True, text=True, check=False).stdout
        assert resolved(path) == (want.strip() or None), case
    # Not absolute: realpath's answer, run from tmp_path (an empty path is none; dash's `cd ''` would be the cwd).
    for case in ("", "data/models", "-dash"):
        want = subprocess.run(
            ["realpath", "-m", "--", case], cwd=tmp_path, capture_output=True, text=True, check=False
        ).stdout
        command = RealPath().command(path=case).get_raw_value()
        out = subprocess.run(["sh", "-c", command], cwd=tmp_path, capture_output=True, text=True, check=True).stdout
        assert RealPath().process(out.splitlines()) == (want.strip() or None), repr(case)
    assert resolved("") is None
    # CDPATH never makes cd print a second line or pick another folder
    assert resolved(str(tmp_path / "data" / "models"), CDPATH=str(tmp_path)) == str(tmp_path / "real" / "models")
