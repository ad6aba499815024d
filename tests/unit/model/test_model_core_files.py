"""hgxkit.model.core's file operations under local_dir, called directly: each walks with no link followed, makes
only what it is asked to make, removes whole trees by name, and writes files with the mode it names; and the names,
manifest text and progress line the sync shows."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from hgxkit.model import core
from hgxkit.model.core import Manifest, Progress, VerifiedFile


@pytest.fixture
def no_umask() -> Iterator[None]:
    """Modes as the code asks for them, whatever the test runner's umask."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def _dir_fd(path: Path) -> int:
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY)


def test_open_root_makes_nothing_unless_asked_and_then_every_missing_part(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        core.open_root(str(tmp_path / "a" / "b"))
    assert not (tmp_path / "a").exists()
    os.close(core.open_root(str(tmp_path / "a" / "b"), create=True))
    assert (tmp_path / "a" / "b").is_dir()


def test_open_root_refuses_a_link_on_the_path_even_when_it_may_create(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(core.LinkOnPath):
        core.open_root(str(tmp_path / "link" / "m"), create=True)
    assert (tmp_path / "link").is_symlink() and not (tmp_path / "real" / "m").exists()


def test_a_directory_another_worker_made_meanwhile_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    made = os.mkdir

    def raced(path: str, mode: int = 0o777, *, dir_fd: int | None = None) -> None:
        made(path, mode, dir_fd=dir_fd)  # the other worker's
        raise FileExistsError(errno.EEXIST, "made meanwhile", path)

    monkeypatch.setattr(core.os, "mkdir", raced)
    os.close(core.open_root(str(tmp_path / "m"), create=True))
    assert (tmp_path / "m").is_dir()


def test_open_dir_at_names_the_missing_part_and_makes_it_only_when_asked(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    root = _dir_fd(tmp_path)
    try:
        with pytest.raises(FileNotFoundError) as missing:
            core.open_dir_at(root, "a/b")
        assert (missing.value.errno, missing.value.strerror) == (errno.ENOENT, "b is missing or not a directory")
        assert not (tmp_path / "a" / "b").exists()
        os.close(core.open_dir_at(root, "a/b", create=True))
        assert (tmp_path / "a" / "b").is_dir()
    finally:
        os.close(root)


def test_open_regular_opens_with_the_flags_asked_and_closes_on_exec(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    root = _dir_fd(tmp_path)
    try:
        fd = core.open_regular(root, "f", os.O_WRONLY)
    finally:
        os.close(root)
    try:
        assert os.write(fd, b"written") == 7
        assert fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC
    finally:
        os.close(fd)
    assert (tmp_path / "f").read_text() == "written"


def test_regular_stat_is_none_for_a_directory_a_link_or_nothing(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "f").write_text("12345")
    (tmp_path / "l").symlink_to(tmp_path / "f")
    assert [core.regular_stat(str(tmp_path), name) for name in ("d", "l", "none")] == [None, None, None]
    found = core.regular_stat(str(tmp_path), "f")
    assert found is not None and found.st_size == 5


def test_remove_at_removes_a_whole_tree_and_no_link_target(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("x")
    tree = tmp_path / "in" / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "f").write_text("x")
    (tree / "g").write_text("x")
    (tree / "link").symlink_to(outside)
    root = _dir_fd(tmp_path / "in")
    try:
        core.remove_at(root, "tree")
    finally:
        os.close(root)
    assert os.listdir(tmp_path / "in") == [] and (outside / "keep").read_text() == "x"


def test_files_are_written_with_the_mode_asked_for_0644_by_default(tmp_path: Path, no_umask: None) -> None:
    core.write_under(str(tmp_path), "a/f", "text")
    core.write_under(str(tmp_path), "a/g", "text", mode=0o600)
    core.atomic_write(str(tmp_path / "i"), "text")
    root = _dir_fd(tmp_path)
    try:
        core.write_at(root, "h", "text")
        os.close(core.create_new(root, "j"))
    finally:
        os.close(root)
    modes = [stat.S_IMODE((tmp_path / rel).stat().st_mode) for rel in ("a/f", "a/g", "h", "i", "j")]
    assert modes == [0o644, 0o600, 0o644, 0o644, 0o644]


def test_atomic_write_refuses_a_directory_that_is_not_one_without_opening_it(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")  # opened as a file, a FIFO would wait for a writer for ever
    with pytest.raises(NotADirectoryError):
        core.atomic_write(str(tmp_path / "fifo" / "state.json"), "text")


def test_moving_onto_a_directory_replaces_it(tmp_path: Path) -> None:
    (tmp_path / "src").write_text("moved")
    (tmp_path / "dst" / "inside").mkdir(parents=True)
    landed = core.move_under(str(tmp_path), "src", "dst")
    assert landed is not None and stat.S_ISREG(landed.st_mode) and (tmp_path / "dst").read_text() == "moved"


def test_dir_bytes_adds_the_files_sizes_below_a_directory(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "f").write_bytes(b"x" * 3)
    (tmp_path / "a" / "b" / "g").write_bytes(b"x" * 5)
    assert core.dir_bytes(str(tmp_path / "a")) == 8 and core.dir_bytes(str(tmp_path / "none")) == 0


def test_a_manifest_without_files_has_nothing_to_stamp() -> None:
    empty = Manifest("o/r", "main", "c" * 40, [], "hub", "", [])
    assert core.stamp_paths("/m", empty, "/s/r.json") is None


def test_writing_over_a_directory_replaces_it_with_the_file(tmp_path: Path) -> None:
    (tmp_path / "x" / "inside").mkdir(parents=True)
    core.write_under(str(tmp_path), "x", "now a file")
    assert (tmp_path / "x").read_text() == "now a file"


def test_a_model_name_is_the_directorys_name_with_only_dashes_and_dots_trimmed() -> None:
    assert core.model_name("/data/models/Xmodel-X") == "Xmodel-X"
    assert core.model_name("/data/models/-.DeepSeek V4.-/") == "DeepSeek-V4"
    assert core.model_name("/data/models/..") == "model"


def test_a_manifest_is_one_space_indented_sorted_json_and_only_schema_1_is_read() -> None:
    manifest = Manifest("org/m", "main", "c" * 40, [], "hub", "https://hub", [VerifiedFile("f", 3, None, "g", 1)])
    text = manifest.to_json()
    assert text.startswith('{\n "allow_patterns": [],\n "commit": "') and text.endswith("}\n")
    assert Manifest.from_json(text) == manifest
    with pytest.raises(ValueError, match=r"^not an hgxkit manifest of schema 1$"):
        Manifest.from_json(json.dumps({"schema": 2}))


def test_a_progress_line_shows_any_positive_rate() -> None:
    line = core.format_progress(Progress("fetch", done_bytes=10**9, total_bytes=2 * 10**9, rate_bps=0.5))
    assert line == "fetch 1.00/2.00 GB (50%) at 0.0 MB/s, ETA 555555:33:20"  # 10^9 bytes at 0.5 B/s


def test_a_name_with_a_dot_dot_dot_or_nul_part_is_refused_before_anything_is_made(tmp_path: Path) -> None:
    for rel in ("a/./f", "a/../f", "a/b\0c/f"):
        with pytest.raises(ValueError, match=r"has a '\.\.' or '\.' part"):
            core.write_under(str(tmp_path), rel, "text")
    assert list(tmp_path.iterdir()) == []


def test_a_write_that_fails_leaves_no_temporary_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(*_args: object, **_kwargs: object) -> None:
        raise PermissionError(errno.EACCES, "refused")

    monkeypatch.setattr(core.os, "replace", refused)
    root = _dir_fd(tmp_path)
    try:
        with pytest.raises(PermissionError):
            core.write_at(root, "f", "text")
    finally:
        os.close(root)
    assert list(tmp_path.iterdir()) == []


def test_make_dir_under_makes_local_dir_itself_too(tmp_path: Path) -> None:
    core.make_dir_under(str(tmp_path / "models" / "m"), "a/b")
    assert (tmp_path / "models" / "m" / "a" / "b").is_dir()


def test_anything_but_a_regular_file_is_refused_as_not_regular(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    root = _dir_fd(tmp_path)
    try:
        with pytest.raises(core.NotRegular) as refused:
            core.open_regular(root, "d")
    finally:
        os.close(root)
    assert (refused.value.errno, refused.value.strerror) == (errno.EINVAL, "d is not a regular file")


def test_a_stamp_is_valid_for_one_full_rehash_setting_only() -> None:
    spec = core.Spec(repo_id="o/r", local_dir="/m")
    assert core.stamp_key(spec) != core.stamp_key(core.Spec(repo_id="o/r", local_dir="/m", full_rehash=True))


def test_without_xet_the_hub_client_is_told_so() -> None:
    assert core.Spec(repo_id="o/r", local_dir="/m", xet=False).xet_env()["HF_HUB_DISABLE_XET"] == "1"
    assert "HF_HUB_DISABLE_XET" not in core.Spec(repo_id="o/r", local_dir="/m").xet_env()


def test_a_credit_counts_only_for_the_path_it_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(core.shutil, "disk_usage", lambda _path: SimpleNamespace(total=1000, used=900, free=100))
    need = core.DiskNeed(str(tmp_path), 101, "files")  # one byte more than is free
    assert core.disk_shortfalls([need], {"/elsewhere": 10**12}) != []  # another path's credit adds nothing
    assert core.disk_shortfalls([need], {str(tmp_path): 1}) == []


def test_the_stamp_needs_stat_to_show_each_file_a_regular_file_of_its_verified_size_and_mtime() -> None:
    manifest = Manifest("o/r", "main", "c" * 40, [], "hub", "", [VerifiedFile("f", 3, None, "0" * 40, 5 * 10**9 + 7)])
    paths = ["/m", "/m/f", "/m/.hgxkit-manifest.json", "/s/r.json"]

    def out(kind_of_f: str) -> str:
        kinds = ["directory", kind_of_f, "regular file", "regular file"]
        sizes = ["4096", "3", "10", "10"]
        mtime = ["1.000000000", "5.000000007", "1.000000000", "1.000000000"]
        return "".join(
            f"{p}|{k}|{s}|{m}|1.000000000|2049:{i}\n"
            for i, (p, k, s, m) in enumerate(zip(paths, kinds, sizes, mtime, strict=True))
        )

    assert core._stat_matches(out("regular file"), paths, 1, manifest)
    assert not core._stat_matches(out("directory"), paths, 1, manifest)


def test_directories_made_under_local_dir_are_0755(tmp_path: Path, no_umask: None) -> None:
    """Writable by their owner (root) only, whatever the umask: no other user adds files the next sync reads."""
    core.make_dir_under(str(tmp_path / "m"), "a/b")
    modes = [stat.S_IMODE((tmp_path / rel).stat().st_mode) for rel in ("m", "m/a", "m/a/b")]
    assert modes == [0o755, 0o755, 0o755]


def test_atomic_write_of_a_bare_name_writes_in_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    core.atomic_write("state.json", "text")
    assert (tmp_path / "state.json").read_text() == "text"


def test_a_file_removed_while_dir_bytes_counts_adds_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "kept").write_bytes(b"x" * 3)
    (tmp_path / "a" / "gone").write_bytes(b"x" * 5)
    real = os.lstat

    def gone_meanwhile(path: str, *args: object, **kwargs: object) -> os.stat_result:
        if os.path.basename(path) == "gone":  # hf_xet evicted it between the listing and the stat
            raise FileNotFoundError(errno.ENOENT, "gone", path)
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(core.os, "lstat", gone_meanwhile)
    assert core.dir_bytes(str(tmp_path / "a")) == 3


def test_list_under_lists_the_directory_it_names(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f").write_text("")
    assert core.list_under(str(tmp_path), "d") == ["f"]
    assert core.list_under(str(tmp_path), "d/f") == [] and core.list_under(str(tmp_path / "none"), "d") == []


def test_read_under_reads_no_more_than_its_limit(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("0123456789")  # a planted huge file must not fill memory
    assert core.read_under(str(tmp_path), "f", limit=4) == "0123"


def test_an_entry_another_worker_removed_meanwhile_is_no_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    unlink, rmdir = os.unlink, os.rmdir

    def raced(real):  # type: ignore[no-untyped-def]
        def remove(name: str, *, dir_fd: int) -> None:
            real(name, dir_fd=dir_fd)  # the other worker's
            raise FileNotFoundError(errno.ENOENT, "removed meanwhile", name)

        return remove

    (tmp_path / "f").write_text("x")
    (tmp_path / "tree" / "sub").mkdir(parents=True)
    monkeypatch.setattr(core.os, "unlink", raced(unlink))
    monkeypatch.setattr(core.os, "rmdir", raced(rmdir))
    root = _dir_fd(tmp_path)
    try:
        core.remove_at(root, "f")
        core.remove_at(root, "tree")
    finally:
        os.close(root)
    assert list(tmp_path.iterdir()) == []


def test_a_failed_write_raises_its_own_error_when_its_temporary_file_cannot_be_removed_either(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(*_args: object, **_kwargs: object) -> None:
        raise PermissionError(errno.EROFS, "read-only now")

    monkeypatch.setattr(core.os, "replace", refused)
    monkeypatch.setattr(core.os, "unlink", refused)
    root = _dir_fd(tmp_path)
    try:
        with pytest.raises(PermissionError, match="read-only now"):
            core.write_at(root, "f", "text")
    finally:
        os.close(root)


def test_a_stamp_covers_absolute_paths_only() -> None:
    """The shell check compares the stamp's root with `pwd -P`, and `stat` prints each path as it was given."""
    manifest = Manifest("o/r", "main", "c" * 40, [], "hub", "", [VerifiedFile("f", 3, None, "0" * 40, 5)])
    assert core.stamp_paths("m", manifest, "/s/r.json") is None
    assert core.stamp_paths("/m", manifest, "s/r.json") is None
    assert core.stamp_paths("/m", manifest, "/s/r.json") == ["/m", "/m/f", "/m/.hgxkit-manifest.json", "/s/r.json"]


def test_the_stamp_needs_one_stat_line_per_path_naming_it_with_each_mtime_to_the_nanosecond() -> None:
    manifest = Manifest("o/r", "main", "c" * 40, [], "hub", "", [VerifiedFile("f", 3, None, "0" * 40, 5 * 10**9 + 7)])
    paths = ["/m", "/m/f", "/m/.hgxkit-manifest.json", "/s/r.json"]
    lines = [
        "/m|directory|4096|1.000000000|1.000000000|2049:1",
        "/m/f|regular file|3|5.000000007|1.000000000|2049:2",
        "/m/.hgxkit-manifest.json|regular file|10|1.000000000|1.000000000|2049:3",
        "/s/r.json|regular file|10|1.000000000|1.000000000|2049:4",
    ]
    assert core._stat_matches("".join(f"{line}\n" for line in lines), paths, 1, manifest)
    extra = [*lines, "/m/g|regular file|3|5.000000007|1.000000000|2049:5"]
    other_name = [lines[0].replace("/m|", "/n|"), *lines[1:]]
    to_ten_ns = [lines[0], lines[1].replace("5.000000007", "5.00000007"), *lines[2:]]  # 70 ns, not 7
    for wrong in (extra, other_name, to_ten_ns):
        assert not core._stat_matches("".join(f"{line}\n" for line in wrong), paths, 1, manifest)


def test_a_stamp_key_is_the_sha256_of_its_fields_as_compact_json() -> None:
    """The key the node writes and the controller expects: pinned, so that a change to it comes with a new
    STAMP_SCHEMA."""
    spec = core.Spec(repo_id="o/r", local_dir="/m", allow_patterns=["*.json", "*.safetensors"])
    text = b'["hgxkit-model-stamp-1","o/r","main",["*.json","*.safetensors"],"/m","","hub","","/var/lib/hgxkit/model",'
    text += b'"",false]'
    assert core.stamp_key(spec) == hashlib.sha256(text).hexdigest()


def test_a_manifest_without_total_bytes_is_read() -> None:
    """total_bytes is written for readers of the file only: it is the files' sum, never read back."""
    manifest = Manifest("o/r", "main", "c" * 40, [], "hub", "", [VerifiedFile("f", 3, None, "g", 1)])
    doc = json.loads(manifest.to_json())
    del doc["total_bytes"]
    assert Manifest.from_json(json.dumps(doc)) == manifest


def test_a_spec_is_sorted_json_and_loads_from_its_text_with_whitespace_before_it() -> None:
    spec = core.Spec(repo_id="o/r", local_dir="/m")
    text = spec.to_json()
    assert list(json.loads(text)) == sorted(json.loads(text))
    assert core.Spec.load("\n  " + text) == spec


def test_atomic_write_of_what_a_file_already_holds_changes_nothing(tmp_path: Path, no_umask: None) -> None:
    core.atomic_write(str(tmp_path / "stamp"), "same\n")
    before = [os.stat(tmp_path / "stamp"), os.stat(tmp_path)]
    os.utime(tmp_path / "stamp", ns=(1, 1))
    os.utime(tmp_path, ns=(1, 1))
    core.atomic_write(str(tmp_path / "stamp"), "same\n")
    kept, folder = os.stat(tmp_path / "stamp"), os.stat(tmp_path)
    assert (kept.st_ino, kept.st_mtime_ns, folder.st_mtime_ns) == (before[0].st_ino, 1, 1)


@pytest.mark.parametrize(
    "other",
    ["changed\n", "same", "same\n\n", "same\r\n", "mode", "link", "bytes", "fifo"],
)
def test_atomic_write_replaces_a_file_that_differs_in_anything(tmp_path: Path, no_umask: None, other: str) -> None:
    target = tmp_path / "stamp"
    if other == "link":
        (tmp_path / "elsewhere").write_text("same\n")
        target.symlink_to(tmp_path / "elsewhere")
    elif other == "mode":
        target.write_text("same\n")
        target.chmod(0o600)
    elif other == "bytes":
        target.write_bytes(b"\xff\xfe")
    elif other == "fifo":  # opened to be read, a FIFO would wait for a writer for ever
        os.mkfifo(target)
    else:
        target.write_bytes(other.encode())
    core.atomic_write(str(target), "same\n")
    assert not target.is_symlink() and target.read_bytes() == b"same\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert other != "link" or (tmp_path / "elsewhere").read_text() == "same\n"
