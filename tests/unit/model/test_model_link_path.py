"""The model sync as root when local_dir's own path is no longer what the plan saw: a container with the models
root (or any directory above local_dir) mounted read-write swaps local_dir, or a directory above it, for a link
to a system directory. The sync walks local_dir from `/` with no link followed at every use, so it stops with
one line and writes nothing through the link, whether the swap came before the run or while it ran."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
import test_model_fetch
from test_model_fetch import fetch, spec_file
from test_model_untrusted import snapshot, sync

from hgxkit.model import core

hub, hub_root = test_model_fetch.hub, test_model_fetch.hub_root  # fixtures
PARTS = ("a", "b", "tiny")  # local_dir is <tmp>/a/b/tiny


@pytest.fixture()
def url(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue("hub")[1])


@pytest.fixture()
def outside(tmp_path: Path) -> Path:
    """A stand-in for /etc/cron.d: nothing may land in it."""
    cron = tmp_path / "outside" / "cron.d"
    cron.mkdir(parents=True)
    (cron / "e2scrub_all").write_text("30 3 * * 0 root test -e /run/systemd/system || true\n")
    return cron


def local_dir(tmp_path: Path) -> Path:
    return tmp_path.joinpath(*PARTS)


def swap(path: Path, target: Path) -> None:
    """What the container does: the real directory moved away, a link in its place."""
    if path.exists():
        path.rename(path.with_name(path.name + ".moved"))
    path.symlink_to(target)


@pytest.mark.parametrize("depth", range(1, len(PARTS) + 1))
def test_a_link_anywhere_on_local_dirs_path_stops_the_sync_before_it_writes(
    url: str, tmp_path: Path, outside: Path, depth: int
) -> None:
    spec = spec_file(tmp_path, url, local_dir=str(local_dir(tmp_path)))
    local_dir(tmp_path).mkdir(parents=True)
    swapped = tmp_path.joinpath(*PARTS[:depth])
    swap(swapped, outside if depth == len(PARTS) else outside.parent)
    before = snapshot(outside.parent)
    code, result = sync(spec)
    assert code == 1 and not result["ok"]
    assert result["error"].startswith(f"refusing {local_dir(tmp_path)}: {swapped} is a symbolic link or no directory")
    assert "nothing was written through it" in result["error"] and "\n" not in result["error"]
    assert snapshot(outside.parent) == before


def test_local_dir_swapped_while_the_sync_runs_gets_nothing_written_through_it(
    url: str, tmp_path: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = spec_file(tmp_path, url, local_dir=str(local_dir(tmp_path)))
    real_metadata = fetch.Syncer.metadata

    def swapped_after_the_check(self: fetch.Syncer):  # the directory passed prepare_dir, then is swapped
        swap(local_dir(tmp_path), outside)
        return real_metadata(self)

    monkeypatch.setattr(fetch.Syncer, "metadata", swapped_after_the_check)
    before = snapshot(outside.parent)
    code, result = sync(spec)
    assert code == 1 and result["error"].startswith(f"refusing {local_dir(tmp_path)}: ")
    assert snapshot(outside.parent) == before


def test_open_root_walks_from_the_root_makes_what_is_missing_and_refuses_links(tmp_path: Path) -> None:
    fd = core.open_root(str(tmp_path / "new" / "dir" / "."), create=True)
    try:
        assert os.path.samestat(os.fstat(fd), os.stat(tmp_path / "new" / "dir"))
    finally:
        os.close(fd)
    with pytest.raises(FileNotFoundError):
        core.open_root(str(tmp_path / "missing"))
    (tmp_path / "file").write_text("")
    (tmp_path / "link").symlink_to(tmp_path / "new")
    for bad, at in [("link/dir", "link"), ("file/x", "file"), ("link", "link")]:
        with pytest.raises(core.LinkOnPath) as refused:
            core.open_root(str(tmp_path / bad), create=True)
        assert refused.value.errno == errno.ELOOP and refused.value.filename == str(tmp_path / at)
    assert not (tmp_path / "new" / "dir" / "x").exists()  # nothing made through the link
