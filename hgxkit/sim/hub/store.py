"""Repositories on disk as the simulated Hub sees them: files, git/LFS object ids, commits (simulated).

Layout under the store root: ``<org>/<name>/hubsim.json`` and ``<org>/<name>/refs/<branch>/<files…>``.
A file is an LFS file when `.gitattributes` of its branch marks its pattern ``filter=lfs``. Ids follow git:
a non-LFS file's oid is ``sha1("blob <size>\\0" + content)``; an LFS file's oid is the git oid of its
pointer file and its LFS oid is the content's sha256. A branch's commit hash is a sha1 over its sorted
(path, oid) list, so it is stable per content and changes whenever any file changes.

Example:
    >>> import tempfile, pathlib
    >>> from hgxkit.sim.hub.makerepo import RepoSpec, make_repo
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> _ = make_repo(root, RepoSpec(repo_id="org/tiny", total_bytes=1 << 20, shards=1))
    >>> store = RepoStore(root)
    >>> snap = store.get("org/tiny").resolve("main")
    >>> len(snap.commit), snap.files["config.json"].lfs
    (40, False)
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path

_CHUNK = 1 << 20


@dataclass(frozen=True)
class FileEntry:
    """One file of a branch, with the ids the Hub reports for it."""

    path: str
    disk_path: Path
    size: int
    git_oid: str
    lfs: bool
    sha256: str
    pointer_size: int

    def etag(self) -> str:
        """The id the Hub uses as the ETag: sha256 for LFS files, the git blob oid otherwise."""
        return self.sha256 if self.lfs else self.git_oid


@dataclass(frozen=True)
class Snapshot:
    """One branch at its current content."""

    branch: str
    commit: str
    files: dict[str, FileEntry]

    def folders(self) -> list[str]:
        """Every directory that holds a file, e.g. ``a`` and ``a/b`` for ``a/b/c.txt``."""
        out: set[str] = set()
        for path in self.files:
            parts = path.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                out.add("/".join(parts[:i]))
        return sorted(out)


@dataclass
class RepoSettings:
    """`hubsim.json`: whether the repo is gated and which tokens may read it."""

    gated: str | bool = False
    tokens: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, path: Path) -> RepoSettings:
        if not path.exists():
            return cls()
        doc = json.loads(path.read_text())
        return cls(gated=doc.get("gated", False), tokens=list(doc.get("tokens", [])))


def _lfs_patterns(gitattributes: Path) -> list[str]:
    if not gitattributes.exists():
        return []
    patterns = []
    for line in gitattributes.read_text().splitlines():
        parts = line.split()
        if len(parts) >= 2 and "filter=lfs" in parts[1:]:
            patterns.append(parts[0])
    return patterns


def _is_lfs(path: str, patterns: list[str]) -> bool:
    name = path.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatch(name, p) or fnmatch.fnmatch(path, p) for p in patterns)


def pointer_text(sha256: str, size: int) -> bytes:
    """The git-lfs pointer file that git stores in place of an LFS file."""
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()


def git_blob_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class _HashCache:
    """sha256 and git oids per (path, size, mtime): hashing GBs once per server, not per request."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, int, int], tuple[str, str]] = {}

    def hashes(self, disk_path: Path) -> tuple[str, str]:
        st = disk_path.stat()
        key = (str(disk_path), st.st_size, st.st_mtime_ns)
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None:
            return hit
        sha256 = hashlib.sha256()
        sha1 = hashlib.sha1(b"blob %d\0" % st.st_size)
        with disk_path.open("rb") as fh:
            while chunk := fh.read(_CHUNK):
                sha256.update(chunk)
                sha1.update(chunk)
        result = (sha256.hexdigest(), sha1.hexdigest())
        with self._lock:
            self._cache[key] = result
        return result


class Repo:
    """A repository directory: its settings and its branches."""

    def __init__(self, repo_id: str, path: Path, cache: _HashCache) -> None:
        self.repo_id = repo_id
        self.path = path
        self._cache = cache

    @property
    def settings(self) -> RepoSettings:
        return RepoSettings.load(self.path / "hubsim.json")

    def branches(self) -> list[str]:
        refs = self.path / "refs"
        return sorted(p.name for p in refs.iterdir() if p.is_dir()) if refs.is_dir() else []

    def snapshot(self, branch: str) -> Snapshot:
        tree = self.path / "refs" / branch
        patterns = _lfs_patterns(tree / ".gitattributes")
        files: dict[str, FileEntry] = {}
        for disk_path in sorted(p for p in tree.rglob("*") if p.is_file()):
            rel = disk_path.relative_to(tree).as_posix()
            sha256, blob_oid = self._cache.hashes(disk_path)
            size = disk_path.stat().st_size
            lfs = _is_lfs(rel, patterns)
            pointer = pointer_text(sha256, size)
            files[rel] = FileEntry(
                path=rel,
                disk_path=disk_path,
                size=size,
                git_oid=git_blob_oid(pointer) if lfs else blob_oid,
                lfs=lfs,
                sha256=sha256,
                pointer_size=len(pointer),
            )
        listing = "".join(f"{p}\0{f.git_oid}\n" for p, f in sorted(files.items()))
        commit = hashlib.sha1(f"{self.repo_id}\n{listing}".encode()).hexdigest()
        return Snapshot(branch=branch, commit=commit, files=files)

    def resolve(self, revision: str) -> Snapshot | None:
        """Branch name (also ``refs/heads/<b>``) or full commit hash → snapshot; None if unknown."""
        name = revision.removeprefix("refs/heads/")
        if name in self.branches():
            return self.snapshot(name)
        for branch in self.branches():
            snap = self.snapshot(branch)
            if snap.commit == revision:
                return snap
        return None


_REPO_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}")


def valid_repo_id(repo_id: str) -> bool:
    """``org/name`` with the Hub's characters, no ``..`` (what the stand-in will generate a repo for)."""
    return bool(_REPO_ID.fullmatch(repo_id)) and ".." not in repo_id and not repo_id.endswith((".git", "."))


class RepoStore:
    """All repositories under a root directory (model repos only).

    With `auto_root`, a valid repo id found nowhere is generated there on first use (`makerepo.auto_spec`:
    deterministic, so every node and run serves the same files and commit), which lets any imported recipe
    name any model. `root` may be read-only; `auto_root` must be writable."""

    def __init__(self, root: Path, auto_root: Path | None = None) -> None:
        self.root = Path(root)
        self.auto_root = Path(auto_root) if auto_root is not None else None
        self._cache = _HashCache()
        self._auto_lock = threading.Lock()

    def get(self, repo_id: str) -> Repo | None:
        if repo_id.count("/") != 1 or ".." in repo_id:
            return None
        path = self.root / repo_id
        if (path / "refs").is_dir():
            return Repo(repo_id, path, self._cache)
        if self.auto_root is None or not valid_repo_id(repo_id):
            return None
        return Repo(repo_id, self._generate(repo_id), self._cache)

    def _generate(self, repo_id: str) -> Path:
        from hgxkit.sim.hub.makerepo import auto_spec, make_repo

        target = self.auto_root / repo_id  # type: ignore[operator]
        if (target / ".complete").is_file():
            return target
        with self._auto_lock:
            if not (target / ".complete").is_file():
                tmp = self.auto_root / f".build-{os.getpid()}-{threading.get_ident()}"  # type: ignore[operator]
                shutil.rmtree(tmp, ignore_errors=True)
                built = make_repo(tmp, auto_spec(repo_id))
                (built / ".complete").write_text("generated by the hgxkit Hub stand-in (simulated)\n")
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.rmtree(target, ignore_errors=True)
                built.rename(target)
                shutil.rmtree(tmp, ignore_errors=True)
        return target

    def repo_ids(self) -> list[str]:
        return sorted(
            f"{org.name}/{name.name}"
            for org in self.root.iterdir()
            if org.is_dir()
            for name in org.iterdir()
            if (name / "refs").is_dir()
        )
