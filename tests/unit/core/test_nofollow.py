"""The no-follow walk root runs on a host path just before it hands Docker that path (hgxkit/nofollow.py): a
link at any component position is refused, naming the component; what is missing ends the walk; the program
form reads paths from its arguments or from stdin and exits REFUSED with one line per refused path."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from hgxkit import nofollow

PARTS = ("models", "m", "sub", "config.json")


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    """<tmp>/models/m/sub/config.json, all real."""
    leaf = tmp_path.joinpath(*PARTS)
    leaf.parent.mkdir(parents=True)
    leaf.write_text("{}")
    return tmp_path


def test_a_real_path_passes_whatever_its_last_component_is(tree: Path) -> None:
    assert nofollow.symlink_in(str(tree.joinpath(*PARTS))) is None  # a file at the end (a key file mount)
    assert nofollow.symlink_in(str(tree / "models" / "m") + "/") is None
    assert nofollow.symlink_in(str(tree / "models" / "m" / "." / "sub")) is None
    assert nofollow.symlink_in("/") is None


@pytest.mark.parametrize("depth", range(1, len(PARTS) + 1))
def test_a_link_at_any_component_is_refused_by_name(tree: Path, depth: int) -> None:
    swapped = tree.joinpath(*PARTS[:depth])
    swapped.rename(swapped.with_name(swapped.name + ".moved"))
    swapped.symlink_to("/")  # what a container with a directory above it mounted read-write can do
    assert nofollow.symlink_in(str(tree.joinpath(*PARTS))) == f"{swapped} is a symbolic link"


def test_a_link_to_a_directory_inside_the_same_tree_is_still_a_link(tree: Path) -> None:
    (tree / "alias").symlink_to(tree / "models")
    assert nofollow.symlink_in(str(tree / "alias" / "m")) == f"{tree}/alias is a symbolic link"


def test_dot_dot_is_walked_as_the_kernel_walks_it(tree: Path) -> None:
    (tree / "models" / "link").symlink_to("/etc")
    # the kernel resolves `link/..` through the link (to /): the walk sees the link first
    assert nofollow.symlink_in(f"{tree}/models/link/../m") == f"{tree}/models/link is a symbolic link"
    assert nofollow.symlink_in(f"{tree}/models/m/../m/sub") is None


def test_missing_components_end_the_walk_and_a_file_on_the_way_is_refused(tree: Path) -> None:
    assert nofollow.symlink_in(str(tree / "models" / "new" / "deeper")) is None  # Docker makes it
    leaf = tree.joinpath(*PARTS)
    assert nofollow.symlink_in(f"{leaf}/x") == f"{leaf} is not a directory"
    assert nofollow.symlink_in("relative/path") == "relative/path is not an absolute path"


def test_the_program_refuses_with_one_line_per_path_and_its_exit_status(
    tree: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    link = tree / "models" / "swapped"
    link.symlink_to("/")
    assert nofollow.main([str(tree / "models"), str(tree / "nope")]) == 0
    monkeypatch.setattr("sys.stdin", io.StringIO(f"{tree}/models/m\n\n{link}/etc\n"))
    assert nofollow.main(["--stdin"]) == nofollow.REFUSED
    [line] = capsys.readouterr().out.splitlines()
    assert line.startswith(f"refused: the host path {link}/etc cannot be used: {link} is a symbolic link")


def test_the_walk_holds_no_descriptor_afterwards(tree: Path) -> None:
    before = len(os.listdir("/proc/self/fd"))
    for depth in range(len(PARTS) + 1):
        nofollow.symlink_in(str(tree.joinpath(*PARTS[:depth])))
    nofollow.symlink_in(f"{tree}/x/y")
    assert len(os.listdir("/proc/self/fd")) == before


def test_the_distributions_own_links_are_followed_only_where_they_lead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real, other = tmp_path / "run", tmp_path / "elsewhere"
    real.mkdir()
    other.mkdir()
    (tmp_path / "var-run").symlink_to(real)
    monkeypatch.setitem(nofollow.SYSTEM_LINKS, f"{tmp_path}/var-run", (str(real),))
    assert nofollow.symlink_in(f"{tmp_path}/var-run/topologyd") is None  # as /var/run -> /run
    (tmp_path / "var-run").unlink()
    (tmp_path / "var-run").symlink_to(other)  # the same link, pointed elsewhere: refused
    assert nofollow.symlink_in(f"{tmp_path}/var-run/topologyd") == f"{tmp_path}/var-run is a symbolic link"
    (tmp_path / "not-listed").symlink_to(real)
    assert nofollow.symlink_in(f"{tmp_path}/not-listed/x") == f"{tmp_path}/not-listed is a symbolic link"
