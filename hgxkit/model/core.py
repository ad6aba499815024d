"""The model sync's core, stdlib only: shared by the model role (controller) and the host program
(`hgxkit_fetch.py`, built from fetch/, next to which the role uploads this file as `model_core.py`).

What a synced model is: the files of one commit of a Hub repo that match the recipe's allow patterns,
each checked against the Hub's metadata (size; sha256 for LFS files, the git blob id for the others),
and a manifest (`.hgxkit-manifest.json` in `local_dir`) written only after every file checked out. The
manifest records each file's size and mtime as verified, so a later check compares metadata only; and each time
the host program finds the copy complete it leaves a stamp (`write_stamp`) that the node's shell checks with
one `stat` before any Python starts (hgxkit.model.facts).

Examples:
    >>> files = [FileMeta("config.json", 10, None, "ab" * 20), FileMeta("a.safetensors", 5 << 30, "cd" * 32, None)]
    >>> [f.path for f in select_files(files, ["*.safetensors"])]
    ['a.safetensors']
    >>> disk_shortfall(need_bytes=12 * GB, free_bytes=5 * GB, path="/data/models")
    'need 12.0 GB, 5.0 GB free at /data/models'
    >>> format_progress(Progress("downloading", done_bytes=GB, total_bytes=4 * GB, rate_bps=100e6))
    'downloading 1.00/4.00 GB (25%) at 100.0 MB/s, ETA 0:30'
    >>> unit_name("/data/models/deepseek-v4-flash-dspark")
    'hgxkit-model-deepseek-v4-flash-dspark'
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import hashlib
import json
import os
import re
import secrets
import shutil
import stat
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import quote

GB = 10**9
MANIFEST_NAME = ".hgxkit-manifest.json"
JOURNAL_PATH = ".cache/hgxkit/verified.json"  # per-file verify results of an unfinished sync, under local_dir
PARTIAL_DIR = ".cache/hgxkit/partial"  # resumable partial downloads, named by content id, under local_dir
STAGE_DIR = ".cache/hgxkit/xet-stage"  # a fresh, randomly named directory per hf_xet download, under local_dir
XET_DIR = ".cache/huggingface/xet"  # hf_xet's chunk and shard caches, under local_dir unless the spec moves them
MANIFEST_SCHEMA = 1
BUFFER = 1 << 20  # bytes per read while streaming or hashing: large enough that the loop costs nothing
_COMMIT_RE = re.compile(r"[0-9a-f]{40}")


@dataclass(frozen=True)
class FileMeta:
    """One file as the Hub describes it: `sha256` for LFS files, `git_oid` (git blob sha1) for the others."""

    path: str
    size: int
    sha256: str | None
    git_oid: str | None


@dataclass(frozen=True)
class VerifiedFile:
    """A file as it was verified on disk: the Hub's ids plus the size and mtime it had then."""

    path: str
    size: int
    sha256: str | None
    git_oid: str | None
    mtime_ns: int


@dataclass
class Manifest:
    """`.hgxkit-manifest.json`: a verified sync of `repo_id` at `commit` (never holds a credential)."""

    repo_id: str
    revision: str
    commit: str
    allow_patterns: list[str]
    source: str
    endpoint: str
    files: list[VerifiedFile]
    verified_at: str = ""
    schema: int = MANIFEST_SCHEMA

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)

    def to_json(self) -> str:
        doc = asdict(self)
        doc["total_bytes"] = self.total_bytes
        return json.dumps(doc, indent=1, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        """Parse a manifest; ValueError when it is not one this code wrote."""
        doc = json.loads(text)
        if not isinstance(doc, dict) or doc.get("schema") != MANIFEST_SCHEMA:
            raise ValueError("not an hgxkit manifest of schema 1")
        doc.pop("total_bytes", None)
        doc["files"] = [VerifiedFile(**f) for f in doc["files"]]
        return cls(**doc)


@dataclass
class Progress:
    """What the downloader reports in its progress file while it runs."""

    phase: str
    done_bytes: int = 0
    total_bytes: int = 0
    rate_bps: float = 0.0
    files_done: int = 0
    files_total: int = 0
    run_id: str = ""
    detail: str = ""
    updated_at: float = field(default_factory=time.time)

    @property
    def eta_s(self) -> float | None:
        if self.rate_bps <= 0 or self.total_bytes <= self.done_bytes:
            return None
        return (self.total_bytes - self.done_bytes) / self.rate_bps


def is_commit(revision: str) -> bool:
    """True when `revision` is a full commit hash (a pin), not a branch or tag.

    >>> is_commit("main"), is_commit("0123456789abcdef0123456789abcdef01234567")
    (False, True)
    """
    return bool(_COMMIT_RE.fullmatch(revision))


def model_name(local_dir: str) -> str:
    """A short name for a model directory, usable in unit and file names.

    >>> model_name("/data/models/DeepSeek V4/")
    'DeepSeek-V4'
    """
    base = os.path.basename(local_dir.rstrip("/")) or "model"
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", base).strip("-.") or "model"


def unit_name(local_dir: str) -> str:
    """The systemd transient unit that syncs `local_dir`: `hgxkit-model-<name>`."""
    return f"hgxkit-model-{model_name(local_dir)}"


def _pattern_matches(path: str, pattern: str) -> bool:
    if pattern.endswith("/"):
        pattern += "*"
    return fnmatch.fnmatch(path, pattern)


def select_files(files: Iterable[FileMeta], allow_patterns: Sequence[str]) -> list[FileMeta]:
    """The files matching any allow pattern (all files when there are none), as huggingface_hub matches them."""
    chosen = [f for f in files if not allow_patterns or any(_pattern_matches(f.path, p) for p in allow_patterns)]
    return sorted(chosen, key=lambda f: f.path)


def format_bytes(n: float) -> str:
    """Decimal GB with two places (the unit disks are sold in).

    >>> format_bytes(1_234_000_000)
    '1.23 GB'
    """
    return f"{n / GB:.2f} GB"


def disk_need(remaining_bytes: int, margin_pct: float, margin_gb: float) -> int:
    """Bytes that must be free before fetching `remaining_bytes`: the files plus a percentage and a floor.

    >>> disk_need(100 * GB, margin_pct=5, margin_gb=1) // GB
    106
    """
    return int(remaining_bytes * (1 + margin_pct / 100) + margin_gb * GB)


def disk_shortfall(need_bytes: int, free_bytes: int, path: str) -> str | None:
    """The one-line error when `need_bytes` does not fit in `free_bytes` at `path`, else None."""
    if need_bytes <= free_bytes:
        return None
    return f"need {_gb(need_bytes)} GB, {_gb(free_bytes)} GB free at {path}"


@dataclass(frozen=True)
class DiskNeed:
    """Bytes that must fit under `path` (a directory, existing or not), and what they are for."""

    path: str
    nbytes: int
    what: str


def existing_ancestor(path: str) -> str:
    """`path`, or its nearest parent that exists (where a directory about to be made will live)."""
    path = os.path.abspath(path)
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def disk_shortfalls(needs: Sequence[DiskNeed], credit: dict[str, int] | None = None) -> list[str]:
    """One line per file system that cannot hold the needs placed on it; needs on the same file system add up
    (the models disk holding the xet caches too), and are named by the first need's path.

    `credit` adds bytes to a path's free space (files that will be replaced are freed first)."""
    groups: dict[int, list[DiskNeed]] = {}
    for need in needs:
        groups.setdefault(os.stat(existing_ancestor(need.path)).st_dev, []).append(need)
    out = []
    for group in groups.values():
        first = group[0]
        free = shutil.disk_usage(existing_ancestor(first.path)).free
        free += sum((credit or {}).get(n.path, 0) for n in group)
        short = disk_shortfall(sum(n.nbytes for n in group), free, first.path)
        if short:
            out.append(f"{short} ({'; '.join(n.what for n in group)})")
    return out


def dir_bytes(path: str) -> int:
    """Bytes held by the files under `path` (0 when it does not exist)."""
    total = 0
    for dirpath, _dirs, names in os.walk(path):
        for n in names:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, n)).st_size
    return total


def _gb(n: int) -> str:
    """GB with one decimal, or three significant digits below 1 GB (so small disks still read apart)."""
    x = n / GB
    return f"{x:.1f}" if x >= 1 else f"{x:.3g}"


def format_duration(seconds: float) -> str:
    """`H:MM:SS`, or `M:SS` under an hour.

    >>> format_duration(3725), format_duration(30)
    ('1:02:05', '0:30')
    """
    s = round(seconds)
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


def format_progress(p: Progress) -> str:
    """One progress line: phase, bytes done/total, percent, rate and ETA."""
    if p.total_bytes <= 0:
        return f"{p.phase} {p.detail}".strip()
    pct = 100 * p.done_bytes / p.total_bytes
    line = f"{p.phase} {p.done_bytes / GB:.2f}/{p.total_bytes / GB:.2f} GB ({pct:.0f}%)"
    if p.rate_bps > 0:
        line += f" at {p.rate_bps / 1e6:.1f} MB/s"
    eta = p.eta_s
    if eta is not None:
        line += f", ETA {format_duration(eta)}"
    return line


class ContentHash:
    """The id the Hub gives a file, computed while its bytes go by: sha256 for LFS files, git's blob sha1
    (over `blob <size>\\0` + content) for the others. `problem()` compares size and id with the Hub's.

    >>> h = ContentHash(FileMeta("c.json", 3, None, "0967ef424bce6791893e9a57bb952f80fd536e93"))
    >>> h.update(b"{}\\n"); h.problem() is None
    True
    """

    def __init__(self, meta: FileMeta) -> None:
        self.meta = meta
        self.size = 0
        if meta.sha256:
            self.kind, self.want, self._h = "sha256", meta.sha256, hashlib.sha256()
        elif meta.git_oid:
            self.kind, self.want, self._h = "git oid", meta.git_oid, hashlib.sha1(f"blob {meta.size}\0".encode())
        else:
            self.kind, self.want, self._h = "", "", None

    def update(self, data: bytes | bytearray | memoryview) -> None:
        if self._h is not None:
            self._h.update(data)  # releases the GIL for large buffers: workers hash in parallel
        self.size += len(data)

    def problem(self) -> str | None:
        """None when the bytes seen are the file the Hub describes, else what is wrong (one phrase)."""
        if self.size != self.meta.size:
            return f"size {self.size} != {self.meta.size}"
        if self._h is None:
            return None
        got = self._h.hexdigest()
        return None if got == self.want else f"{self.kind} {got[:12]}… != {self.want[:12]}…"


def hash_into(fd: int, h: ContentHash, limit: int | None = None) -> int:
    """Feed the first `limit` bytes of the open file `fd` (all when None; from its start) to `h`, reading into
    one reused buffer."""
    buf = bytearray(BUFFER)
    view = memoryview(buf)
    done = 0
    while limit is None or done < limit:
        n = os.preadv(fd, [view if limit is None else view[: min(BUFFER, limit - done)]], done)
        if not n:
            break
        h.update(view[:n])
        done += n
    return done


def verify_file(local_dir: str, name: str, meta: FileMeta) -> str | None:
    """None when the regular file `name` under `local_dir` matches `meta`, else what is wrong (one phrase).
    Opened with no symlink followed: a link, FIFO or device planted there is "not a regular file"."""
    try:
        with parent_of(local_dir, name) as (dfd, base):
            fd = open_regular(dfd, base)
    except NotRegular:
        return "not a regular file"
    except FileNotFoundError:
        return "missing"
    try:
        size = os.fstat(fd).st_size
        if size != meta.size:
            return f"size {size} != {meta.size}"
        h = ContentHash(meta)
        hash_into(fd, h)
        return h.problem()
    finally:
        os.close(fd)


def content_key(meta: FileMeta) -> str:
    """A file name for `meta`'s partial download: its content id, so a partial never mixes two versions.

    >>> content_key(FileMeta("a/b.json", 3, None, "ab" * 20))
    'abababababababababababababababababababab'
    """
    key = meta.sha256 or meta.git_oid or ""
    if re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", key):
        return key
    return "path-" + hashlib.sha256(meta.path.encode()).hexdigest()


_RESERVED = (MANIFEST_NAME, ".cache/hgxkit/", ".cache/huggingface/")


def name_problem(name: str) -> str | None:
    """Why a file name from a listing (the Hub's, a mirror's, a peer's) may not be written under local_dir.

    >>> [name_problem(n) for n in ("a/b.safetensors", "../x", "/etc/passwd", "a//b", ".cache/hgxkit/verified.json")]
    [None, "has a '..', '.' or empty part", 'is absolute', "has a '..', '.' or empty part", 'is hgxkit state']
    """
    if not name or "\0" in name:
        return "is empty or holds a NUL"
    if name.startswith("/"):
        return "is absolute"
    if any(part in ("", ".", "..") for part in name.split("/")):
        return "has a '..', '.' or empty part"
    if name == MANIFEST_NAME or name.startswith(_RESERVED[1:]):
        return "is hgxkit state"
    return None


# -- files under local_dir: a container may have mounted it read-write, and this code runs as root -------------
# Every path below local_dir is walked one component at a time from a directory descriptor, never following a
# symlink (O_NOFOLLOW), and only regular files are read; what is written is created new (O_EXCL) under a name
# this code chose, then renamed into place, so a link, FIFO or device planted anywhere on the way is removed by
# name or refused, never written, truncated or read through. local_dir itself is reached the same way from `/`,
# at every use: a container with the models root mounted read-write could have swapped it for a link since the plan.

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_NOT_A_DIR = (errno.ENOENT, errno.ENOTDIR, errno.ELOOP)


class NotRegular(OSError):
    """A symlink, FIFO, device, socket or directory where a regular file was expected."""


def _parts(rel: str) -> list[str]:
    parts = [p for p in rel.split("/") if p]
    if any(p in (".", "..") or "\0" in p for p in parts):
        raise ValueError(f"{rel!r} has a '..' or '.' part")
    return parts


class LinkOnPath(OSError):
    """A component of local_dir's own path is a symlink (or no directory): nothing is read or written through it."""


def open_root(local_dir: str, create: bool = False) -> int:
    """A descriptor of `local_dir` itself, walked from `/` with no symlink followed (missing parts made when
    `create`); LinkOnPath when a part is a link or no directory, FileNotFoundError when one is missing."""

    def refused(walked: str, err: OSError) -> OSError:
        if err.errno == errno.ENOENT:
            return err
        return LinkOnPath(errno.ELOOP, f"{walked} is a symbolic link or no directory", walked)

    root = os.open("/", _DIR_FLAGS)
    try:
        return _walk(root, _parts(os.path.abspath(local_dir)), create, False, refused)
    finally:
        os.close(root)


def open_dir_at(dir_fd: int, rel: str, create: bool = False) -> int:
    """A descriptor of directory `rel` below `dir_fd`, walked with no symlink followed. `create`: a missing part
    is made, and a part that is not a real directory (a planted symlink, file, FIFO, device) is removed by name
    and made; else such a part is FileNotFoundError."""

    def missing(walked: str, _err: OSError) -> OSError:
        return FileNotFoundError(errno.ENOENT, f"{walked.rsplit('/', 1)[-1]} is missing or not a directory")

    return _walk(dir_fd, _parts(rel), create, True, missing)


def _walk(start: int, parts: list[str], create: bool, replace: bool, refused: Callable[[str, OSError], OSError]) -> int:
    """A new descriptor of the directory `parts` below `start`, one part at a time with no link followed: a
    missing part made when `create`, one that is no real directory removed and made when `create` and
    `replace`; else `refused(path walked so far, error)` is raised."""
    fd = os.dup(start)
    walked = ""
    try:
        for part in parts:
            walked += "/" + part
            try:
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as err:
                if err.errno not in _NOT_A_DIR:
                    raise
                if not create or not (replace or err.errno == errno.ENOENT):
                    raise refused(walked, err) from None
                if err.errno != errno.ENOENT:
                    remove_at(fd, part)
                with contextlib.suppress(FileExistsError):  # another worker made it; a link raced in fails below
                    os.mkdir(part, 0o755, dir_fd=fd)
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nxt
        return fd
    except BaseException:
        os.close(fd)
        raise


@contextlib.contextmanager
def parent_of(local_dir: str, rel: str, create: bool = False) -> Iterator[tuple[int, str]]:
    """(descriptor of the directory holding `rel`, `rel`'s last part), walked below `local_dir` as open_dir_at
    does; FileNotFoundError when a directory on the way is missing (and not `create`)."""
    parts = _parts(rel)
    if not parts:
        raise ValueError("an empty name")
    root = open_root(local_dir, create=create)
    try:
        fd = open_dir_at(root, "/".join(parts[:-1]), create)
    finally:
        os.close(root)
    try:
        yield fd, parts[-1]
    finally:
        os.close(fd)


def lstat_at(dir_fd: int, name: str) -> os.stat_result | None:
    """The entry `name` itself (a link is a link), or None."""
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def remove_at(dir_fd: int, name: str) -> None:
    """Remove the entry `name` of `dir_fd` whatever it is (a directory with all below it), following no link."""
    st = lstat_at(dir_fd, name)
    if st is None:
        return
    if not stat.S_ISDIR(st.st_mode):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=dir_fd)
        return
    fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    try:
        with os.scandir(fd) as entries:
            names = [e.name for e in entries]
        for n in names:
            remove_at(fd, n)
    finally:
        os.close(fd)
    with contextlib.suppress(FileNotFoundError):
        os.rmdir(name, dir_fd=dir_fd)


def open_regular(dir_fd: int, name: str, flags: int = os.O_RDONLY) -> int:
    """Open the regular file `name` of `dir_fd`, never through a link; NotRegular for anything else,
    FileNotFoundError when there is nothing. The entry is first opened as a path only (O_PATH: opening a FIFO
    or a device that way does nothing), and reopened only once it proved a regular file (the same inode)."""
    pfd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        if not stat.S_ISREG(os.fstat(pfd).st_mode):
            raise NotRegular(errno.EINVAL, f"{name} is not a regular file")
        return os.open(f"/proc/self/fd/{pfd}", flags | os.O_CLOEXEC)
    finally:
        os.close(pfd)


def create_new(dir_fd: int, name: str, mode: int = 0o644) -> int:
    """A new, empty regular file `name` (whatever was there removed by name first); opened for reading and
    writing."""
    remove_at(dir_fd, name)
    return os.open(name, _NEW_FLAGS & ~os.O_WRONLY | os.O_RDWR, mode, dir_fd=dir_fd)


def write_at(dir_fd: int, name: str, text: str, mode: int = 0o644) -> None:
    """Replace `name` with `text` atomically: a new file under a random name, then a rename (which replaces a
    link planted at `name`, never writes through it)."""
    tmp = f".{name[:64]}.tmp-{secrets.token_hex(8)}"
    fd = os.open(tmp, _NEW_FLAGS, mode, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        st = lstat_at(dir_fd, name)
        if st is not None and stat.S_ISDIR(st.st_mode):
            remove_at(dir_fd, name)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise


def holds_at(dir_fd: int, name: str, text: str, mode: int) -> bool:
    """Whether `name` is already a regular file (no link) of `mode` holding exactly `text`."""
    try:
        fd = open_regular(dir_fd, name)
    except OSError:  # nothing there, a link, a FIFO, a directory: written anew
        return False
    with os.fdopen(fd, newline="") as f:
        if stat.S_IMODE(os.fstat(f.fileno()).st_mode) != mode:
            return False
        try:
            return f.read(len(text) + 1) == text
        except ValueError:  # bytes no text of this encoding: not what would be written
            return False


def atomic_write(path: str, text: str, mode: int = 0o644) -> None:
    """Write `text` to `path` through a new temporary file and a rename, so readers never see half a file and a
    link planted at `path` (or at a temporary name) is never written through. A file that already holds `text`
    is left as it is: a check that finds what it found before (a model's stamp) changes nothing on the node,
    not even a time. `path`'s directory is the caller's (a state directory)."""
    dfd = os.open(os.path.dirname(path) or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        if not holds_at(dfd, os.path.basename(path), text, mode):
            write_at(dfd, os.path.basename(path), text, mode)
    finally:
        os.close(dfd)


def write_under(local_dir: str, rel: str, text: str, mode: int = 0o644) -> None:
    """atomic_write of `local_dir/rel`, every directory below local_dir walked (and made) with no link followed."""
    with parent_of(local_dir, rel, create=True) as (dfd, name):
        write_at(dfd, name, text, mode)


def read_under(local_dir: str, rel: str, limit: int = 256 << 20) -> str:
    """The text of the regular file `local_dir/rel` (never through a link); OSError when there is none."""
    with parent_of(local_dir, rel) as (dfd, name):
        fd = open_regular(dfd, name)
    with os.fdopen(fd, "rb") as f:
        return f.read(limit).decode()


def remove_under(local_dir: str, rel: str) -> None:
    """Remove `local_dir/rel`, whatever it is, following no link (nothing to do when it is not there)."""
    with contextlib.suppress(FileNotFoundError), parent_of(local_dir, rel) as (dfd, name):
        remove_at(dfd, name)


def regular_stat(local_dir: str, rel: str) -> os.stat_result | None:
    """The stat of `local_dir/rel` when it is a regular file reached with no link followed, else None."""
    try:
        with parent_of(local_dir, rel) as (dfd, name):
            st = lstat_at(dfd, name)
    except (FileNotFoundError, ValueError):
        return None
    return st if st is not None and stat.S_ISREG(st.st_mode) else None


def list_under(local_dir: str, rel: str) -> list[str]:
    """The names in directory `local_dir/rel` (walked with no link followed; [] when it is not a directory)."""
    try:
        root = open_root(local_dir)
    except OSError:
        return []
    try:
        fd = open_dir_at(root, rel)
    except OSError:
        return []
    finally:
        os.close(root)
    try:
        with os.scandir(fd) as entries:
            return [e.name for e in entries]
    finally:
        os.close(fd)


def make_dir_under(local_dir: str, rel: str) -> None:
    """Make directory `local_dir/rel` (and those on the way) as real directories, removing planted links."""
    root = open_root(local_dir, create=True)
    try:
        os.close(open_dir_at(root, rel, create=True))
    finally:
        os.close(root)


def move_under(local_dir: str, src: str, dst: str) -> os.stat_result | None:
    """Rename `local_dir/src` to `local_dir/dst` through directory descriptors (whatever was at `dst`, a planted
    link included, is replaced, never followed); what landed at `dst` (its lstat), None when src was missing."""
    with parent_of(local_dir, src) as (sfd, sname), parent_of(local_dir, dst, create=True) as (dfd, dname):
        there = lstat_at(dfd, dname)
        if there is not None and stat.S_ISDIR(there.st_mode):
            remove_at(dfd, dname)
        try:
            os.replace(sname, dname, src_dir_fd=sfd, dst_dir_fd=dfd)
        except FileNotFoundError:
            return None
        return lstat_at(dfd, dname)


def unchanged_since_verify(local_dir: str, entry: VerifiedFile) -> bool:
    """True when the file is still a regular file with the size and mtime it had when verified (metadata only)."""
    st = regular_stat(local_dir, entry.path)
    return st is not None and st.st_size == entry.size and st.st_mtime_ns == entry.mtime_ns


@dataclass(frozen=True)
class ManifestCheck:
    """The metadata-only comparison of a manifest with what is wanted; `ok` means nothing to do."""

    ok: bool
    reason: str
    changed: tuple[str, ...] = ()


def check_manifest(
    manifest: Manifest | None,
    local_dir: str,
    repo_id: str,
    allow_patterns: Sequence[str],
    commit: str | None,
    hub_files: Sequence[FileMeta] | None,
) -> ManifestCheck:
    """Compare a manifest with the wanted repo/commit/files and with the files on disk (stat only).

    `commit`/`hub_files` are None when the Hub was not asked (a pinned commit, a peer or dir source).
    """
    if manifest is None:
        return ManifestCheck(False, "no manifest: never synced, or a sync did not finish")
    if manifest.repo_id != repo_id:
        return ManifestCheck(False, f"manifest is for {manifest.repo_id}, not {repo_id}")
    if list(manifest.allow_patterns) != list(allow_patterns):
        return ManifestCheck(False, "allow_patterns changed since the last sync")
    if commit is not None and manifest.commit != commit:
        return ManifestCheck(False, f"revision moved: synced {manifest.commit[:12]}, wanted {commit[:12]}")
    if hub_files is not None:
        have = {(f.path, f.size, f.sha256, f.git_oid) for f in manifest.files}
        want = {(f.path, f.size, f.sha256, f.git_oid) for f in hub_files}
        if have != want:
            return ManifestCheck(False, "the Hub's file list differs from the manifest")
    changed = tuple(f.path for f in manifest.files if not unchanged_since_verify(local_dir, f))
    if changed:
        return ManifestCheck(False, f"{len(changed)} file(s) changed since verify: {', '.join(changed[:3])}", changed)
    return ManifestCheck(True, f"verified {len(manifest.files)} files at {manifest.commit[:12]}")


@dataclass
class Spec:
    """What to sync: built by the model role from the recipe and its knobs, written to
    `<state_dir>/<name>.spec.json` on the host (no credentials in it), read by the host program (fetch.py)."""

    repo_id: str
    local_dir: str
    revision: str = "main"
    allow_patterns: list[str] = field(default_factory=list)
    endpoint: str = ""
    source: str = "hub"  # hub | dir | peer | fleet | bundle (peer_* name the parent; none: this host is the root)
    bundle_dir: str = ""  # source bundle: the model's directory in a verified bundle on this host (hgxkit.bundle)
    peer_name: str = ""
    peer_address: str = ""
    peer_user: str = "root"
    peer_dir: str = ""
    peer_key: str = ""
    peer_wait_s: float = 3600.0
    peer_program: str = "/opt/hgxkit/hf-venv/bin/python /usr/local/lib/hgxkit/model/hgxkit_fetch.py"  # on the parent
    host_name: str = ""  # this host's inventory name (what a fleet parent counts its children by)
    fleet_port: int = -1  # a fleet host with children serves them on this port (0: any free port; -1: never)
    fleet_bind: str = ""  # the address it binds (its fabric address; "" or 0.0.0.0 only with fleet_bind_any)
    fleet_bind_any: bool = False  # model_fleet_bind_any: may listen on every address of the host
    fleet_children: list[str] = field(default_factory=list)  # the hosts below it in this deploy
    xet: bool = True  # files the Hub keeps in Xet storage go through hf_xet (else plain HTTP, resumable)
    xet_high_performance: bool = True
    xet_cache_dir: str = ""  # "": local_dir/.cache/huggingface/xet (the models disk)
    xet_chunk_cache_gb: float = 10.0
    xet_shard_cache_gb: float = 16.0
    margin_pct: float = 2.0
    margin_gb: float = 1.0
    full_rehash: bool = False
    workers: int = 8
    retries: int = 5
    backoff_s: float = 2.0
    corrupt_refetch: int = 2
    state_dir: str = "/var/lib/hgxkit/model"
    program_sha: str = ""  # sha256 of hgxkit_fetch.py and this file as the role ships them ("" skips the check)

    @classmethod
    def load(cls, path_or_json: str) -> Spec:
        """From a spec file, or from the JSON text itself (the role's status check passes it inline)."""
        text = path_or_json if path_or_json.lstrip().startswith("{") else Path(path_or_json).read_text()
        return cls(**json.loads(text))

    @property
    def name(self) -> str:
        return model_name(self.local_dir)

    @property
    def where(self) -> str:
        return self.endpoint or os.environ.get("HF_ENDPOINT") or "https://huggingface.co"

    @property
    def xet_dir(self) -> str:
        return self.xet_cache_dir or os.path.join(self.local_dir, XET_DIR)

    @property
    def from_parent(self) -> bool:
        """True when the bytes come from another host (peer, or a fleet host below the root)."""
        return self.source == "peer" or (self.source == "fleet" and bool(self.peer_name))

    def xet_env(self) -> dict[str, str]:
        """hf_xet's settings for this sync: caches where the spec puts them, sized as the disk check counts them."""
        env = {
            "HF_XET_CACHE": self.xet_dir,
            "HF_XET_CHUNK_CACHE_SIZE_BYTES": str(int(self.xet_chunk_cache_gb * GB)),
            "HF_XET_SHARD_CACHE_SIZE_LIMIT": str(int(self.xet_shard_cache_gb * GB)),
            "HF_HOME": os.path.join(self.local_dir, ".cache", "huggingface"),  # hf_xet's logs, nothing else
        }
        if self.xet_high_performance:
            env["HF_XET_HIGH_PERFORMANCE"] = "1"
        if not self.xet:
            env["HF_HUB_DISABLE_XET"] = "1"
        return env

    def state_file(self, suffix: str) -> str:
        return os.path.join(self.state_dir, f"{self.name}{suffix}")

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


# -- the verdict stamp: a cache of "complete" that the node's shell can check with one `stat` -----------------
# `<state_dir>/<name>.stamp`, written by the host program each time it has just established that local_dir holds
# the verified copy the spec wants (the end of a sync, a `status` or quickcheck answer "complete"), and removed
# when a sync starts or a check finds the copy incomplete. The model fact's shell fast path (hgxkit.model.facts)
# answers "complete" from it with `stat … | sha256sum` (and, for a branch or tag, one HEAD to the Hub) instead
# of starting Python. The state directory is root's (0755): whoever could write a stamp there could write the
# record and the spec as well, so a forged stamp is outside what this guards against. Everything a container or
# a post controls (local_dir and all below it) is only ever stat'ed, and any change to it fails the comparison.

STAMP_SCHEMA = "hgxkit-model-stamp-1"
# One GNU `stat` line per path, no link followed at the last component (lstat): ctime (%Z) is in it, so any write,
# even one that restores the mtime afterwards, changes the line; device and inode (%d:%i) catch a file swapped for
# a copy. `stat --printf` turns the backslash-n into the newline itself.
STAT_FORMAT = "%n|%F|%s|%.9Y|%.9Z|%d:%i\\n"
_STAMP_BAD = ("\n", "\r", "|", "\0")


def stamp_key(spec: Spec) -> str:
    """What a stamp is valid for: every spec field the `status` verdict depends on (the controller computes the
    same from the spec it sends)."""
    fields = [
        STAMP_SCHEMA,
        spec.repo_id,
        spec.revision,
        list(spec.allow_patterns),
        spec.local_dir,
        spec.endpoint,
        spec.source,
        spec.bundle_dir,
        spec.state_dir,
        spec.program_sha,
        bool(spec.full_rehash),
    ]
    return hashlib.sha256(json.dumps(fields, separators=(",", ":")).encode()).hexdigest()


def stamp_paths(root: str, manifest: Manifest, record: str) -> list[str] | None:
    """The paths a stamp covers, in the order `stat` prints them: every directory from `root` (local_dir's
    realpath) down to each file, each manifest file, the manifest and the host's record. None when a name could
    not go on a line of the stamp or a `stat` line unambiguously (a newline, a '|').

    >>> m = Manifest("o/r", "main", "c" * 40, [], "hub", "", [VerifiedFile("a/b.json", 2, None, "0" * 40, 5)])
    >>> stamp_paths("/m", m, "/s/r.json")
    ['/m', '/m/a', '/m/a/b.json', '/m/.hgxkit-manifest.json', '/s/r.json']
    >>> m.files[0] = VerifiedFile("a|b", 2, None, "0" * 40, 5)
    >>> stamp_paths("/m", m, "/s/r.json") is None
    True
    """
    if not root.startswith("/") or not record.startswith("/") or not manifest.files:
        return None
    dirs: dict[str, None] = {root: None}
    files = []
    for f in manifest.files:
        if name_problem(f.path) is not None:
            return None
        parts = f.path.split("/")
        for i in range(1, len(parts)):
            dirs[os.path.join(root, *parts[:i])] = None
        files.append(os.path.join(root, f.path))
    paths = [*dirs, *files, os.path.join(root, MANIFEST_NAME), record]
    return None if any(c in p for p in paths for c in _STAMP_BAD) else paths


def _stat_matches(out: str, paths: list[str], ndirs: int, manifest: Manifest) -> bool:
    """`stat`'s output shows each directory a directory, and each manifest file a regular file with the size and
    mtime it was verified with (what closes the race between the check and this stamp)."""
    lines = out.split("\n")
    if len(lines) != len(paths) + 1 or lines[-1] != "":
        return False
    sizes = [(f.size, f.mtime_ns) for f in manifest.files]
    for i, (line, path) in enumerate(zip(lines, paths, strict=False)):
        parts = line.split("|")
        if len(parts) != 6 or parts[0] != path:
            return False
        kind, size, mtime = parts[1], parts[2], parts[3]
        if kind != ("directory" if i < ndirs else "regular file"):
            return False
        j = i - ndirs
        if 0 <= j < len(sizes):
            sec, _, frac = mtime.partition(".")
            if not (sec.isdigit() and frac.isdigit() and len(frac) == 9 and size.isdigit()):
                return False
            if (int(size), int(sec) * 10**9 + int(frac)) != sizes[j]:
                return False
    return True


# Set by a `pyinfra --dry` run's status check (hgxkit.model.facts): the checks read the stamp but leave it as it
# is, neither written nor removed, so a dry run changes nothing on the node.
STAMP_READONLY_ENV = "HGXKIT_MODEL_STAMP_READONLY"


def stamp_readonly() -> bool:
    return os.environ.get(STAMP_READONLY_ENV) == "1"


def remove_stamp(spec: Spec) -> None:
    """Forget the verdict (a sync starts, or a check found the copy incomplete); not in a dry run's check."""
    if stamp_readonly():
        return
    with contextlib.suppress(OSError):
        os.unlink(spec.state_file(".stamp"))


def write_stamp(spec: Spec, manifest: Manifest) -> bool:
    """Write `<state_dir>/<name>.stamp` for a copy just found complete: the key, the commit, the sha256 of what
    one `stat` prints for the paths it covers, local_dir's realpath, one file to ask the Hub about, the paths.
    Anything odd (a name that cannot be listed, `stat` missing or failing, a file that differs from the manifest
    already): no stamp, and a stale one is removed. Never raises; True when written. A dry run's check writes
    nothing (`STAMP_READONLY_ENV`)."""
    if stamp_readonly():
        return False
    try:
        root = os.path.realpath(spec.local_dir)
        paths = stamp_paths(root, manifest, os.path.abspath(spec.state_file(".json")))
        if paths is None or spec.full_rehash or any(c in spec.state_dir for c in _STAMP_BAD):
            remove_stamp(spec)
            return False
        ndirs = len(paths) - len(manifest.files) - 2
        # The very `stat` the shell check runs (the same PATH lookup, the C locale for its "%F" words).
        done = subprocess.run(
            ["stat", "--printf", STAT_FORMAT, "--", *paths],
            capture_output=True,
            check=False,
            env={**os.environ, "LC_ALL": "C"},
        )
        out = done.stdout.decode("utf-8", "surrogateescape")
        if done.returncode != 0 or not _stat_matches(out, paths, ndirs, manifest):
            remove_stamp(spec)
            return False
        # A small file that is no LFS object: its HEAD on the Hub answers with the commit the revision names.
        probe = min(manifest.files, key=lambda f: (f.sha256 is not None, f.size, f.path)).path
        if not is_commit(manifest.commit):
            remove_stamp(spec)
            return False
        head = f"{STAMP_SCHEMA} {stamp_key(spec)} {manifest.commit} {len(manifest.files)}"
        body = [head, hashlib.sha256(done.stdout).hexdigest(), root, quote(probe, safe="/"), *paths]
        atomic_write(spec.state_file(".stamp"), "".join(line + "\n" for line in body), 0o644)
        return True
    except (OSError, ValueError):
        remove_stamp(spec)
        return False
