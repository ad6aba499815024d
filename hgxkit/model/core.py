"""The model sync's core, stdlib only: shared by the model role (controller) and the host program
(`fetch.py`, next to which the role uploads this file as `model_core.py`).

What a synced model is: the files of one commit of a Hub repo that match the recipe's allow patterns,
each checked against the Hub's metadata (size; sha256 for LFS files, the git blob id for the others),
and a manifest (`.hgxkit-manifest.json` in `local_dir`) written only after every file checked out. The
manifest records each file's size and mtime as verified, so a later check compares metadata only.

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
import fnmatch
import hashlib
import json
import os
import re
import shutil
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

GB = 10**9
MANIFEST_NAME = ".hgxkit-manifest.json"
JOURNAL_PATH = ".cache/hgxkit/verified.json"  # per-file verify results of an unfinished sync, under local_dir
PARTIAL_DIR = ".cache/hgxkit/partial"  # resumable partial downloads, named by content id, under local_dir
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


def hash_into(path: str, h: ContentHash, limit: int | None = None) -> int:
    """Feed the first `limit` bytes of `path` (all when None) to `h`, reading into one reused buffer."""
    buf = bytearray(BUFFER)
    view = memoryview(buf)
    done = 0
    with open(path, "rb", buffering=0) as f:
        while limit is None or done < limit:
            n = f.readinto(view if limit is None else view[: min(BUFFER, limit - done)])
            if not n:
                break
            h.update(view[:n])
            done += n
    return done


def verify_file(path: str, meta: FileMeta) -> str | None:
    """None when the file at `path` matches `meta`, else what is wrong (one phrase)."""
    try:
        size = os.path.getsize(path)
    except FileNotFoundError:
        return "missing"
    if size != meta.size:
        return f"size {size} != {meta.size}"
    h = ContentHash(meta)
    hash_into(path, h)
    return h.problem()


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


def safe_path(local_dir: str, name: str) -> str:
    """`local_dir/name`, after checking that the name is harmless and no symlink on the way leads out of
    `local_dir`; ValueError (one phrase) otherwise. Call it right before writing or removing the file."""
    why = name_problem(name)
    if why:
        raise ValueError(f"{name!r} {why}")
    target = os.path.join(local_dir, name)
    root = os.path.realpath(local_dir)
    parent = os.path.realpath(os.path.dirname(target))
    if parent != root and not parent.startswith(root + os.sep):
        raise ValueError(f"{name!r} leads out of {local_dir} through a symlink ({parent})")
    return target


def unchanged_since_verify(local_dir: str, entry: VerifiedFile) -> bool:
    """True when the file still has the size and mtime it had when it was verified (metadata only)."""
    try:
        st = os.stat(os.path.join(local_dir, entry.path))
    except OSError:
        return False
    return st.st_size == entry.size and st.st_mtime_ns == entry.mtime_ns


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


def atomic_write(path: str, text: str, mode: int = 0o644) -> None:
    """Write `text` to `path` through a temporary file and a rename, so readers never see half a file."""
    tmp = f"{path}.tmp.{os.getpid()}.{threading.get_ident()}"  # two threads may write the same file
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


@dataclass
class Spec:
    """What to sync: built by the model role from the recipe and its knobs, written to
    `<state_dir>/<name>.spec.json` on the host (no credentials in it), read by the host program (fetch.py)."""

    repo_id: str
    local_dir: str
    revision: str = "main"
    allow_patterns: list[str] = field(default_factory=list)
    endpoint: str = ""
    source: str = "hub"  # hub | dir | peer | fleet (peer_* name the parent; none: this host is the root)
    peer_name: str = ""
    peer_address: str = ""
    peer_user: str = "root"
    peer_dir: str = ""
    peer_key: str = ""
    peer_wait_s: float = 3600.0
    host_name: str = ""  # this host's inventory name (what a fleet parent counts its children by)
    fleet_port: int = -1  # a fleet host with children serves them on this port (0: any free port; -1: never)
    fleet_bind: str = ""  # the address it binds ("": all of this host's)
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
    program_sha: str = ""  # sha256 of fetch.py and this file as the role ships them ("" skips the check)

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
