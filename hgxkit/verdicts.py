"""Remembered verdicts: a check whose answer depends only on its input and on the code that judges it need not
run twice on the same input.

Loading a recipe scans every string for credentials (detect-secrets' detectors) and validates the document
against the JSON Schema. Importing detect-secrets (it pulls in `requests`) and jsonschema costs the controller
about 0.08 s of CPU (0.05 s and 0.03 s, measured here) each time pyinfra starts, for an answer that cannot
change while the recipe's text and hgxkit do not. So a *pass* is remembered under a key that
is the SHA-256 of the input and of everything that decides the answer: the judging code's source files, the
judging libraries' versions and Python's. A failure is never remembered: it is judged again and its message
comes from the check itself. Anything unusual (no cache folder, one that another user could write, a read-only
home) means "not remembered", and the check runs.

    HGXKIT_CACHE_DIR   the cache folder (default $XDG_CACHE_HOME/hgxkit, else ~/.cache/hgxkit); verdicts are in
                       its `verdicts/` folder, one empty file per remembered pass
    HGXKIT_VERDICT_CACHE=off   judge everything every time

Example:
    >>> key = verdict_key("demo", b"input", judges=(), libraries=())
    >>> len(key)
    64
"""

from __future__ import annotations

import functools
import hashlib
import os
import stat
import sys
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

CACHE_DIR_ENV = "HGXKIT_CACHE_DIR"
SWITCH_ENV = "HGXKIT_VERDICT_CACHE"


def cache_dir() -> Path:
    """Where hgxkit keeps what it may forget: $HGXKIT_CACHE_DIR, $XDG_CACHE_HOME/hgxkit or ~/.cache/hgxkit."""
    named = os.environ.get(CACHE_DIR_ENV)
    if named:
        return Path(named)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return Path(xdg) / "hgxkit" if xdg else Path.home() / ".cache" / "hgxkit"


@functools.cache
def _file_digest(path: str) -> bytes:
    return hashlib.sha256(Path(path).read_bytes()).digest()


@functools.cache
def _version(library: str) -> str:
    try:
        return metadata.version(library)
    except metadata.PackageNotFoundError:
        return "absent"


def verdict_key(kind: str, payload: bytes, *, judges: Iterable[Path | str], libraries: Iterable[str]) -> str:
    """The key of a verdict on `payload`: it changes when the input, a judging source file, a judging library's
    version or Python's version does."""
    h = hashlib.sha256(f"{kind}\0{sys.version}\0".encode())
    for library in sorted(libraries):
        h.update(f"{library}={_version(library)}\0".encode())
    for path in sorted(str(p) for p in judges):
        h.update(path.encode() + b"\0" + _file_digest(path))
    h.update(payload)
    return h.hexdigest()


def _enabled() -> bool:
    return os.environ.get(SWITCH_ENV, "on").strip().lower() not in ("off", "0", "no", "false")


def _trusted(folder: Path) -> bool:
    """Only a folder this user owns and nobody else can write: a pass planted by another user is not believed."""
    try:
        info = folder.lstat()
    except OSError:
        return False
    return (
        stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid() and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    )


def _folder() -> Path:
    return cache_dir() / "verdicts"


def remembered(key: str) -> bool:
    """Whether a pass under `key` is remembered (and the cache is on and trusted)."""
    if not _enabled():
        return False
    folder = _folder()
    return _trusted(folder.parent) and _trusted(folder) and (folder / key).is_file()


def remember(key: str) -> None:
    """Remember a pass under `key`; a cache that cannot be written is left as it is (the check just runs again)."""
    if not _enabled():
        return
    folder = _folder()
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:
        # Not in a home that is another user's (root under sudo with the user's HOME): root's folders there would
        # be left in someone else's way.
        if existing.stat().st_uid != os.geteuid():
            return
        folder.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        folder.mkdir(mode=0o700, exist_ok=True)
        if _trusted(folder.parent) and _trusted(folder):
            os.close(os.open(folder / key, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600))
    except OSError:
        pass
