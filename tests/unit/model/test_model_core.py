"""hgxkit.model.core: file selection, disk check, progress lines, manifests and the metadata-only check."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from hgxkit.model import core
from hgxkit.model.core import GB, FileMeta, Manifest, Progress, VerifiedFile


def test_select_files_like_huggingface_hub() -> None:
    files = [
        FileMeta(p, 1, None, "x") for p in ("config.json", "a/b.safetensors", "x.bin", "sub/tok.model", "README.md")
    ]
    assert [f.path for f in core.select_files(files, ["*.json", "*.safetensors", "sub/"])] == [
        "a/b.safetensors",
        "config.json",
        "sub/tok.model",
    ]
    assert len(core.select_files(files, [])) == 5


@pytest.mark.parametrize(
    ("need", "free", "message"),
    [
        (170 * GB, 120 * GB, "need 170.0 GB, 120.0 GB free at /data/models/x"),
        (73_900_000, 67_108_864, "need 0.0739 GB, 0.0671 GB free at /data/models/x"),
        (GB, GB // 2, "need 1.0 GB, 0.5 GB free at /data/models/x"),  # one decimal from 1 GB on
        (5 * GB, 5 * GB, None),
    ],
)
def test_disk_shortfall(need: int, free: int, message: str | None) -> None:
    assert core.disk_shortfall(need, free, "/data/models/x") == message


def test_disk_need_adds_percentage_and_floor() -> None:
    assert core.disk_need(160 * GB, margin_pct=2, margin_gb=5) == int(160 * GB * 1.02 + 5 * GB)
    assert core.disk_need(0, margin_pct=2, margin_gb=0.5) == GB // 2


@pytest.mark.parametrize(
    ("progress", "line"),
    [
        (
            Progress("downloading", 40 * GB, 160 * GB, 500e6),
            "downloading 40.00/160.00 GB (25%) at 500.0 MB/s, ETA 4:00",
        ),
        (Progress("downloading", 0, 160 * GB, 0.0), "downloading 0.00/160.00 GB (0%)"),
        (Progress("verifying", 160 * GB, 160 * GB, 2e9), "verifying 160.00/160.00 GB (100%) at 2000.0 MB/s"),
        (Progress("resolving", detail="org/x@main"), "resolving org/x@main"),
        (Progress("checking", 1, 1), "checking 0.00/0.00 GB (100%)"),  # any total above zero is shown
        (Progress("fetching", 0, 10**12, 1e11), "fetching 0.00/1000.00 GB (0%) at 100000.0 MB/s, ETA 0:10"),  # 10^6 B
    ],
)
def test_format_progress(progress: Progress, line: str) -> None:
    assert core.format_progress(progress) == line


def test_unit_and_model_names() -> None:
    assert core.unit_name("/data/models/deepseek-v4-flash-dspark/") == "hgxkit-model-deepseek-v4-flash-dspark"
    assert core.model_name("/") == "model"
    assert core.model_name("/m/a b;c") == "a-b-c"


def _file(tmp: Path, name: str, data: bytes) -> tuple[VerifiedFile, FileMeta]:
    path = tmp / name
    path.write_bytes(data)
    sha = hashlib.sha256(data).hexdigest()
    meta = FileMeta(name, len(data), sha, None)
    return VerifiedFile(name, len(data), sha, None, os.stat(path).st_mtime_ns), meta


def test_verify_file_sizes_sha256_and_git_oid(tmp_path: Path) -> None:
    _, meta = _file(tmp_path, "w.safetensors", b"weights" * 100)
    assert core.verify_file(str(tmp_path), "w.safetensors", meta) is None
    (tmp_path / "w.safetensors").write_bytes(b"Weights" * 100)
    assert core.verify_file(str(tmp_path), "w.safetensors", meta).startswith("sha256 ")
    assert core.verify_file(str(tmp_path), "gone", meta) == "missing"
    (tmp_path / "c.json").write_text("{}\n")
    oid = hashlib.sha1(b"blob 3\0{}\n").hexdigest()
    assert core.verify_file(str(tmp_path), "c.json", FileMeta("c.json", 3, None, oid)) is None
    assert core.verify_file(str(tmp_path), "c.json", FileMeta("c.json", 4, None, oid)) == "size 3 != 4"
    os.mkfifo(tmp_path / "fifo.json")  # would block a plain open: refused without opening it for reading
    assert core.verify_file(str(tmp_path), "fifo.json", FileMeta("fifo.json", 3, None, oid)) == "not a regular file"
    (tmp_path / "link.json").symlink_to(tmp_path / "c.json")
    assert core.verify_file(str(tmp_path), "link.json", FileMeta("link.json", 3, None, oid)) == "not a regular file"


def test_manifest_round_trip_and_check(tmp_path: Path) -> None:
    entry, meta = _file(tmp_path, "w.safetensors", b"x" * 1000)
    commit = "a" * 40
    m = Manifest("org/m", "main", commit, ["*.safetensors"], "hub", "http://hub", [entry], "2026-01-01T00:00:00Z")
    again = Manifest.from_json(m.to_json())
    assert again == m and '"total_bytes": 1000' in m.to_json()

    def check(**kw: object) -> core.ManifestCheck:
        args = {"manifest": again, "local_dir": str(tmp_path), "repo_id": "org/m", "allow_patterns": ["*.safetensors"]}
        args.update(commit=commit, hub_files=[meta])
        args.update(kw)
        return core.check_manifest(**args)  # type: ignore[arg-type]

    assert check() == core.ManifestCheck(True, "verified 1 files at aaaaaaaaaaaa")
    no = core.ManifestCheck
    assert check(commit="b" * 40) == no(False, "revision moved: synced aaaaaaaaaaaa, wanted bbbbbbbbbbbb")
    assert check(allow_patterns=["*"]) == no(False, "allow_patterns changed since the last sync")
    assert check(repo_id="org/other") == no(False, "manifest is for org/m, not org/other")
    other = [FileMeta("w.safetensors", 1000, "f" * 64, None)]
    assert check(hub_files=other) == no(False, "the Hub's file list differs from the manifest")
    assert check(manifest=None) == no(False, "no manifest: never synced, or a sync did not finish")
    os.utime(tmp_path / "w.safetensors", ns=(1, 1))  # touched: the check re-hashes it, and only it
    assert check() == no(False, "1 file(s) changed since verify: w.safetensors", ("w.safetensors",))


def test_the_manifest_check_names_the_first_three_changed_files(tmp_path: Path) -> None:
    entries = [_file(tmp_path, f"w{i}.safetensors", b"x")[0] for i in range(4)]
    m = Manifest("org/m", "main", "a" * 40, ["*"], "hub", "http://hub", entries)
    for i in range(4):
        os.utime(tmp_path / f"w{i}.safetensors", ns=(1, 1))
    names = tuple(f"w{i}.safetensors" for i in range(4))
    assert core.check_manifest(m, str(tmp_path), "org/m", ["*"], None, None) == core.ManifestCheck(
        False, "4 file(s) changed since verify: w0.safetensors, w1.safetensors, w2.safetensors", names
    )


def test_hash_into_reads_exactly_the_first_limit_bytes(tmp_path: Path) -> None:
    data = bytes(range(256)) * (core.BUFFER // 256) + b"tail-bytes"  # one whole buffer and 10 bytes more
    (tmp_path / "f").write_bytes(data)
    fd = os.open(tmp_path / "f", os.O_RDONLY)
    try:
        for limit, want in [(None, data), (core.BUFFER + 4, data[: core.BUFFER + 4]), (5, data[:5]), (0, b"")]:
            h = core.ContentHash(FileMeta("f", len(want), hashlib.sha256(want).hexdigest(), None))
            assert core.hash_into(fd, h, limit) == len(want)
            assert (h.size, h.problem()) == (len(want), None)
        h = core.ContentHash(FileMeta("f", len(data), None, None))
        assert core.hash_into(fd, h, len(data) + 100) == len(data)  # a limit past the end stops at the end
    finally:
        os.close(fd)


def test_a_content_hash_names_the_kind_and_both_ids_when_they_differ() -> None:
    bad = core.ContentHash(FileMeta("w", 2, "b" * 64, None))
    bad.update(b"hi")
    got = hashlib.sha256(b"hi").hexdigest()
    assert bad.problem() == f"sha256 {got[:12]}… != bbbbbbbbbbbb…"
    unhashed = core.ContentHash(FileMeta("w", 2, None, None))  # the Hub gave no id: only the size is checked
    unhashed.update(b"hi")
    assert (unhashed.kind, unhashed.want, unhashed.problem()) == ("", "", None)


@pytest.mark.parametrize(
    ("sha256", "git_oid", "key"),
    [
        ("ab" * 32, "cd" * 20, "ab" * 32),
        (None, "cd" * 20, "cd" * 20),
        ("AB" * 32, None, "path-" + hashlib.sha256(b"a/b.json").hexdigest()),  # not a lower-case hex id
        (None, None, "path-" + hashlib.sha256(b"a/b.json").hexdigest()),
    ],
)
def test_content_key_is_the_id_or_a_hash_of_the_path(sha256: str | None, git_oid: str | None, key: str) -> None:
    assert core.content_key(FileMeta("a/b.json", 3, sha256, git_oid)) == key


def test_manifest_from_json_refuses_other_documents() -> None:
    with pytest.raises(ValueError):
        Manifest.from_json('{"schema": 2}')


def test_is_commit() -> None:
    assert core.is_commit("0" * 40) and not core.is_commit("main") and not core.is_commit("A" * 40)


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("model-00001-of-00002.safetensors", None),
        ("sub/dir/tokenizer.json", None),
        ("../x", "has a '..', '.' or empty part"),
        ("a/../../x", "has a '..', '.' or empty part"),
        ("./x", "has a '..', '.' or empty part"),
        ("a/", "has a '..', '.' or empty part"),
        ("/etc/passwd", "is absolute"),
        ("", "is empty or holds a NUL"),
        ("a\0b", "is empty or holds a NUL"),
        (".hgxkit-manifest.json", "is hgxkit state"),
        (".cache/huggingface/download/x.metadata", "is hgxkit state"),
        (".cache/hgxkit/partial/" + "ab" * 20, "is hgxkit state"),
    ],
)
def test_names_from_a_listing_stay_inside_local_dir(name: str, why: str | None) -> None:
    assert core.name_problem(name) == why


def test_a_symlink_cannot_lead_a_write_out_of_local_dir(tmp_path: Path) -> None:
    """Writes below local_dir walk each directory with no link followed: a planted link is replaced by name."""
    (tmp_path / "m").mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "m" / "sub").symlink_to(tmp_path / "outside")
    core.write_under(str(tmp_path / "m"), "a/b.json", "{}")
    assert (tmp_path / "m" / "a" / "b.json").read_text() == "{}"
    core.write_under(str(tmp_path / "m"), "sub/x.json", "{}")
    assert not (tmp_path / "m" / "sub").is_symlink() and (tmp_path / "m" / "sub" / "x.json").is_file()
    assert list((tmp_path / "outside").iterdir()) == []
    (tmp_path / "m" / "sub2").symlink_to(tmp_path / "outside")
    assert core.regular_stat(str(tmp_path / "m"), "sub2/x.json") is None  # reads do not pass a link either
    with pytest.raises(ValueError, match=r"has a '\.\.'"):
        core.write_under(str(tmp_path / "m"), "../outside/x.json", "{}")
    assert list((tmp_path / "outside").iterdir()) == []


def test_content_hash_streams_sha256_and_git_oids() -> None:
    data = b"x" * 3_000_000
    h = core.ContentHash(FileMeta("w", len(data), hashlib.sha256(data).hexdigest(), None))
    for i in range(0, len(data), 1 << 20):
        h.update(memoryview(data)[i : i + (1 << 20)])
    assert h.problem() is None
    short = core.ContentHash(FileMeta("w", len(data) + 1, hashlib.sha256(data).hexdigest(), None))
    short.update(data)
    assert short.problem() == f"size {len(data)} != {len(data) + 1}"
    oid = hashlib.sha1(b"blob 2\0{}").hexdigest()
    bad = core.ContentHash(FileMeta("c.json", 2, None, oid))
    bad.update(b"[]")
    assert bad.problem().startswith("git oid ")


def test_disk_needs_on_one_file_system_add_up(tmp_path: Path) -> None:
    free = core.shutil.disk_usage(tmp_path).free
    needs = [
        core.DiskNeed(str(tmp_path / "m"), free // 2, "files"),
        core.DiskNeed(str(tmp_path / "m" / "not-yet" / "xet"), free // 2 + GB, "caches"),
    ]
    (short,) = core.disk_shortfalls(needs)
    assert short.startswith(f"need {core._gb(free + GB)} GB, ") and short.endswith(
        f"free at {tmp_path / 'm'} (files; caches)"
    )
    assert core.disk_shortfalls(needs[:1]) == []
