"""The copy on disk: the manifest and journal found there, files reached with no link followed, leftovers."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import stat

from hgxkit.model import core

from .errors import FetchError

HF_DOWNLOAD_CACHE = ".cache/huggingface/download"


def load_manifest(local_dir: str) -> core.Manifest | None:
    try:
        return core.Manifest.from_json(core.read_under(local_dir, core.MANIFEST_NAME))
    except (OSError, ValueError, TypeError, KeyError):
        return None


def load_journal(spec: core.Spec, commit: str) -> dict[str, core.VerifiedFile]:
    try:
        doc = json.loads(core.read_under(spec.local_dir, core.JOURNAL_PATH))
        if doc.get("commit") != commit:
            return {}
        return {f["path"]: core.VerifiedFile(**f) for f in doc.get("files", [])}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return {}


def _stamp(spec: core.Spec, meta: core.FileMeta) -> core.VerifiedFile:
    st = core.regular_stat(spec.local_dir, meta.path)
    if st is None:
        raise FetchError(f"{meta.path} in {spec.local_dir} is no longer a regular file (replaced as it was verified)")
    return core.VerifiedFile(meta.path, meta.size, meta.sha256, meta.git_oid, st.st_mtime_ns)


def _matches(entry: core.VerifiedFile, meta: core.FileMeta) -> bool:
    return (entry.size, entry.sha256, entry.git_oid) == (meta.size, meta.sha256, meta.git_oid)


def _ids(meta: core.FileMeta) -> tuple[int, str | None, str | None]:
    return (meta.size, meta.sha256, meta.git_oid)


def prepare_dir(path: str) -> None:
    """Create `path` and prove it is writable (a probe file under a random name, created new); a one-line error
    otherwise."""
    try:
        dfd = core.open_root(path, create=True)
        try:
            probe = f".hgxkit-write-test.{secrets.token_hex(8)}"
            os.close(core.create_new(dfd, probe))
            os.unlink(probe, dir_fd=dfd)
        finally:
            os.close(dfd)
    except core.LinkOnPath as err:
        raise link_refused(path, err) from None
    except PermissionError:
        raise FetchError(
            f"permission denied at {path}: make it writable by root (or pick another model.local_dir)"
        ) from None
    except OSError as err:
        raise FetchError(f"cannot write to {path}: {err.strerror}: fix the file system or model.local_dir") from None


def link_refused(local_dir: str, err: core.LinkOnPath) -> FetchError:
    """The one-line error of a sync that found a link on local_dir's own path (checked at every use)."""
    return FetchError(
        f"refusing {local_dir}: {err.strerror}, and root follows no link to a model directory (a container with a "
        "directory above it mounted read-write may have put it there); nothing was written through it: remove the "
        "link, see what that container did, and run again"
    )


def _walk_under(local_dir: str, rel: str) -> list[str]:
    """Every file name (relative to local_dir) below `rel`, walked with no link followed."""
    out = []
    for n in core.list_under(local_dir, rel):
        sub = f"{rel}/{n}"
        st = None
        with contextlib.suppress(OSError, ValueError), core.parent_of(local_dir, sub) as (dfd, name):
            st = core.lstat_at(dfd, name)
        if st is not None and stat.S_ISDIR(st.st_mode):
            out += _walk_under(local_dir, sub)
        elif st is not None:
            out.append(sub)
    return out


def remove_orphans(local_dir: str, keep: set[str]) -> None:
    """Delete partial downloads nothing will resume: huggingface_hub's (uniquely named, never reused) and
    ours whose content id is not among `keep` (an older revision's). No link is followed on the way."""
    for rel in _walk_under(local_dir, HF_DOWNLOAD_CACHE):
        if rel.endswith(".incomplete"):
            core.remove_under(local_dir, rel)
    for n in core.list_under(local_dir, core.PARTIAL_DIR):
        if n not in keep:
            core.remove_under(local_dir, f"{core.PARTIAL_DIR}/{n}")
    core.remove_under(local_dir, core.STAGE_DIR)  # hf_xet staging directories of a killed run


def _size_or_none(local_dir: str, path: str) -> int | None:
    """The size of the regular file `local_dir/path` (None when it is missing, a link, a FIFO, a device...)."""
    st = core.regular_stat(local_dir, path)
    return None if st is None else st.st_size


def _incomplete_bytes(local_dir: str) -> int:
    total = 0
    for rel in _walk_under(local_dir, HF_DOWNLOAD_CACHE) + _walk_under(local_dir, core.STAGE_DIR):
        if rel.endswith(".incomplete"):
            total += _size_or_none(local_dir, rel) or 0
    return total


def _forget(spec: core.Spec, path: str) -> None:
    """Remove a bad file and huggingface_hub's note that it has it, so it is fetched again (by name, following no
    link on the way)."""
    _check_name(path)
    core.remove_under(spec.local_dir, path)
    core.remove_under(spec.local_dir, f"{HF_DOWNLOAD_CACHE}/{path}.metadata")


def _check_name(path: str) -> None:
    why = core.name_problem(path)
    if why:
        raise FetchError(f"refusing to write {path!r}, which {why}: check the source's file list")
