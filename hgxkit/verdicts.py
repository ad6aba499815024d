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

What a passing check built from its input can be remembered the same way (`remember_output`, `remembered_output`):
the model downloader that hgxkit.model.nodeprogram joins from its modules and checks against its rule (~15 ms
each run) is the same bytes while the modules are. It is kept with its SHA-256, so a file cut short or changed is
not believed, and under the same folder rules as a pass: it is uploaded to the nodes and run there.

    HGXKIT_CACHE_DIR   the cache folder (default $XDG_CACHE_HOME/hgxkit, else ~/.cache/hgxkit); verdicts are in
                       its `verdicts/` folder, one empty file per remembered pass, built outputs in `built/`
    HGXKIT_VERDICT_CACHE=off   judge everything every time

Example:
    >>> key = verdict_key("demo", b"input", judges=(), libraries=())
    >>> len(key)
    64
"""

from __future__ import annotations

import contextlib
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


def _folder(name: str = "verdicts") -> Path:
    return cache_dir() / name


def remembered(key: str) -> bool:
    """Whether a pass under `key` is remembered (and the cache is on and trusted)."""
    if not _enabled():
        return False
    folder = _folder()
    return _trusted(folder.parent) and _trusted(folder) and (folder / key).is_file()


def remember(key: str) -> None:
    """Remember a pass under `key`; a cache that cannot be written is left as it is (the check just runs again)."""
    folder = _writable_folder("verdicts")
    if folder is not None:
        with contextlib.suppress(OSError):
            os.close(os.open(folder / key, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600))


def remembered_output(key: str) -> bytes | None:
    """What a pass under `key` built, when it is remembered whole (its SHA-256 still matches) in a trusted cache."""
    if not _enabled():
        return None
    folder = _folder("built")
    if not (_trusted(folder.parent) and _trusted(folder)):
        return None
    try:
        with os.fdopen(os.open(folder / key, os.O_RDONLY | os.O_NOFOLLOW), "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
                return None
            digest, _, output = handle.read().partition(b"\n")
    except OSError:
        return None
    return output if hashlib.sha256(output).hexdigest().encode() == digest else None


def remember_output(key: str, output: bytes) -> None:
    """Remember what a pass under `key` built; written whole or not at all (a cache that cannot be written is left
    as it is: the output is built again next time)."""
    folder = _writable_folder("built")
    if folder is None:
        return
    part = folder / f"{key}.{os.getpid()}.part"
    try:
        fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(hashlib.sha256(output).hexdigest().encode() + b"\n" + output)
        os.replace(part, folder / key)
    except OSError:
        part.unlink(missing_ok=True)


def _writable_folder(name: str) -> Path | None:
    """The cache's `name` folder, made if need be, when the cache is on and trusted; None otherwise."""
    if not _enabled():
        return None
    folder = _folder(name)
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:
        # Not in a home that is another user's (root under sudo with the user's HOME): root's folders there would
        # be left in someone else's way.
        if existing.stat().st_uid != os.geteuid():
            return None
        folder.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        folder.mkdir(mode=0o700, exist_ok=True)
    except OSError:
        return None
    return folder if _trusted(folder.parent) and _trusted(folder) else None
