#!/usr/bin/env python3
"""hgxkit_fetch: sync one model into a directory on this host (shipped to the host and started by roles/model).

Runs in the role's virtualenv (stdlib + huggingface_hub, which brings hf_xet); `hgxkit/model/core.py` is
uploaded next to it as `model_core.py`.
The role starts `run` in a systemd transient unit, so an SSH drop or a pyinfra timeout cannot kill it, and
polls the progress file it writes. `status` is the role's metadata-only check (no hashing, no download). Both
leave `<state_dir>/<name>.stamp` when they find the copy complete (core.write_stamp: what the node's shell checks
first, hgxkit.model.facts); `run` removes it before anything else.

    hgxkit_fetch.py status --spec SPEC.json [--token-stdin]     # one JSON line: complete|incomplete|running|error
    hgxkit_fetch.py run --spec SPEC.json [--token-file F] [--run-id ID]
    hgxkit_fetch.py peer-serve --dir D --state-dir S state|serve|tail OFFSET NAME   # a peer key's forced command

A sync: resolve the revision to a commit; list the files matching the allow patterns with their sizes and
hashes (every name must stay inside local_dir); check free space (files still to fetch plus a margin, plus
hf_xet's caches when the Hub keeps files in Xet storage); fetch what is missing, `workers` files at once, from
the Hub or a mirror, or over SSH from a parent host (a peer, or the host above this one in a fleet tree) as
soon as the parent has verified each file. Each file is hashed as its bytes arrive (size; sha256 of LFS
files, git blob id of the others) into a partial file that a later run resumes mid-file, and moved into
place only when it matches; a corrupted one is fetched again alone. `.hgxkit-manifest.json` is written only
when all files verified, and the record `<state_dir>/<name>.json`; while it runs, the journal
`.cache/hgxkit/verified.json` says which files are verified (what a later run, and a host below, go by).
The token is read from a root-only file that is deleted at once; it never reaches the command line, the
environment, a log or the manifest. A container may have local_dir mounted read-write while this runs as root:
every file below local_dir is reached from a directory descriptor with no symlink followed (core.parent_of).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import hmac
import http.client
import json
import os
import random
import secrets
import shlex
import shutil
import socket
import stat
import subprocess
import sys
import threading
import time
import traceback
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, unquote, urlsplit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import model_core as core  # type: ignore[import-not-found]  # next to this file on the host
except ImportError:  # pragma: no cover - in the repository
    from hgxkit.model import core

Spec = core.Spec

T = TypeVar("T")
HF_DOWNLOAD_CACHE = ".cache/huggingface/download"


class FetchError(Exception):
    """A failure the user must act on; the message is one line naming what is wrong and the remedy."""

    def __init__(self, message: str, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


# -- the Hub ------------------------------------------------------------------------------------------------


def _hub_error(err: Exception, spec: Spec, what: str) -> FetchError:
    """Turn a huggingface_hub exception into a one-line FetchError (transient ones are retried)."""
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        RemoteEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    repo = spec.repo_id
    if isinstance(err, GatedRepoError):
        return FetchError(
            f"{repo} is gated and the token has no access (or none was given): accept its terms at "
            f"{spec.where}/{repo} and set HF_TOKEN on the controller (or hf_token_file in the inventory)"
        )
    if isinstance(err, RepositoryNotFoundError):
        return FetchError(
            f"repository {repo} not found at {spec.where} (or private and the token cannot read it): "
            "check model.repo_id in the recipe"
        )
    if isinstance(err, RevisionNotFoundError):
        return FetchError(
            f"revision {spec.revision!r} of {repo} not found at {spec.where}: check model.revision in the recipe"
        )
    if isinstance(err, RemoteEntryNotFoundError):
        return FetchError(f"{what}: not in {repo}@{spec.revision} at {spec.where}: the file list changed; re-run")
    status = getattr(getattr(err, "response", None), "status_code", None)
    if isinstance(err, HfHubHTTPError) and status in (401, 403):
        return FetchError(f"{spec.where} refused {what} (HTTP {status}): check HF_TOKEN's access to {repo}")
    short = str(err).strip().splitlines()[0][:160] if str(err).strip() else type(err).__name__
    return FetchError(f"network failure {what} from {spec.where}: {short}", transient=True)


def with_retries(spec: Spec, what: str, fn: Callable[[], T], log: Callable[[str], None] = print) -> T:
    """Call `fn`, retrying transient failures with exponential backoff; raise one clear FetchError at the end."""
    attempt = 0
    while True:
        try:
            return fn()
        except FetchError as err:
            failure = err
        except XetFile:
            raise
        except Exception as err:  # huggingface_hub/httpx raise many kinds; classify them
            failure = _hub_error(err, spec, what)
        if not failure.transient or attempt >= spec.retries:
            if failure.transient:
                raise FetchError(f"{failure} (gave up after {attempt + 1} attempts): check the network and re-run")
            raise failure
        delay = min(60.0, spec.backoff_s * 2**attempt) * (0.75 + random.random() / 2)
        log(f"retrying {what} in {delay:.1f}s ({attempt + 1}/{spec.retries}): {failure}")
        time.sleep(delay)
        attempt += 1


class HubAnswer(Exception):
    """An error answer of the Hub API, classified by its X-Error-Code header (as huggingface_hub does)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code = status, code


def _model_info(spec: Spec, token: str | None) -> dict[str, Any]:
    """`GET /api/models/{repo}/revision/{rev}?blobs=true` with the stdlib: the status check stays fast (no
    huggingface_hub import); downloads use huggingface_hub (and hf_xet)."""
    url = f"{spec.where.rstrip('/')}/api/models/{spec.repo_id}/revision/{quote(spec.revision, safe='')}?blobs=true"
    req = urllib.request.Request(url, headers={"User-Agent": "hgxkit-fetch/1"})
    if token:
        req.add_unredirected_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return dict(json.loads(resp.read()))
    except urllib.error.HTTPError as err:
        code = err.headers.get("X-Error-Code", "") if err.headers else ""
        raise HubAnswer(err.code, code, err.headers.get("X-Error-Message", "") if err.headers else "") from None


def _answer_error(err: HubAnswer, spec: Spec) -> FetchError:
    repo = spec.repo_id
    if err.code == "GatedRepo":
        return FetchError(
            f"{repo} is gated and the token has no access (or none was given): accept its terms at "
            f"{spec.where}/{repo} and set HF_TOKEN on the controller (or hf_token_file in the inventory)"
        )
    if err.code == "RepoNotFound" or (err.status in (401, 404) and not err.code):
        return FetchError(
            f"repository {repo} not found at {spec.where} (or private and the token cannot read it): "
            "check model.repo_id in the recipe"
        )
    if err.code == "RevisionNotFound":
        return FetchError(
            f"revision {spec.revision!r} of {repo} not found at {spec.where}: check model.revision in the recipe"
        )
    if err.status in (401, 403):
        return FetchError(f"{spec.where} refused the file list (HTTP {err.status}): check HF_TOKEN's access to {repo}")
    return FetchError(f"network failure reading the file list from {spec.where}: HTTP {err.status}", transient=True)


def bundle_files(spec: Spec) -> tuple[str, list[core.FileMeta]]:
    """Source bundle: the commit and files of the model a bundle carries, from the downloader's own manifest in
    it (whose bytes the bundle's verified bundle.json vouches for); no network at all."""
    try:
        made = core.Manifest.from_json(Path(spec.bundle_dir, core.MANIFEST_NAME).read_text())
    except OSError as err:  # not copied yet (a plan-time status check before the run delivers it): not final
        raise FetchError(f"no bundle model manifest in {spec.bundle_dir} ({err.strerror})", transient=True) from None
    except (ValueError, TypeError, KeyError) as err:
        raise FetchError(
            f"the bundle's model manifest in {spec.bundle_dir} is unreadable ({err}): re-copy the bundle"
        ) from None
    if made.repo_id != spec.repo_id or (core.is_commit(spec.revision) and made.commit != spec.revision):
        raise FetchError(
            f"the bundle holds {made.repo_id}@{made.commit[:12]}, the recipe wants "
            f"{spec.repo_id}@{spec.revision}: make a bundle for this recipe"
        )
    files = [core.FileMeta(f.path, f.size, f.sha256, f.git_oid) for f in made.files]
    return made.commit, core.select_files(files, spec.allow_patterns)


def copy_from_bundle(spec: Spec, metas: list[core.FileMeta]) -> None:
    """Copy `metas` from the bundle into local_dir: each to a new file beside its place, then renamed over it
    (no link in local_dir followed); the caller hashes them against the manifest afterwards."""
    for m in metas:
        _check_name(m.path)
        tmp = f"{m.path}.hgxkit-bundle-copy"
        with (
            open(os.path.join(spec.bundle_dir, m.path), "rb") as src,
            core.parent_of(spec.local_dir, tmp, create=True) as (dfd, name),
        ):
            fd = core.create_new(dfd, name)
            with os.fdopen(fd, "wb") as dst:
                shutil.copyfileobj(src, dst, core.BUFFER)
        core.move_under(spec.local_dir, tmp, m.path)


def hub_files(spec: Spec, token: str | None, retry: bool = True) -> tuple[str, list[core.FileMeta]]:
    """Resolve the revision to a commit and list the files matching the allow patterns, with their hashes."""
    if spec.source == "bundle":
        return bundle_files(spec)

    def ask() -> dict[str, Any]:
        try:
            return _model_info(spec, token)
        except HubAnswer as err:
            raise _answer_error(err, spec) from None
        except (OSError, ValueError) as err:
            reason = getattr(err, "reason", None) or err
            raise FetchError(
                f"network failure reading the file list from {spec.where}: {reason}", transient=True
            ) from None

    info = with_retries(spec if retry else Spec(**{**asdict(spec), "retries": 0}), "reading the file list", ask)
    files = []
    for s in info.get("siblings") or []:
        lfs = s.get("lfs") or None
        size = s.get("size", lfs.get("size") if lfs else 0)
        files.append(
            core.FileMeta(
                path=s["rfilename"],
                size=int(size or 0),
                sha256=lfs.get("sha256") if lfs else None,
                git_oid=None if lfs else s.get("blobId"),
            )
        )
    chosen = core.select_files(files, spec.allow_patterns)
    if not chosen:
        raise FetchError(
            f"no file of {spec.repo_id}@{spec.revision} matches allow_patterns {spec.allow_patterns}: "
            "check model.allow_patterns in the recipe"
        )
    return str(info["sha"]), chosen


# -- the bytes: partial files and the streams that fill them -------------------------------------------------


class Partial:
    """A file on its way in: `<local_dir>/.cache/hgxkit/partial/<content id>`, hashed as it is written (no
    second read). It outlives a killed run: the next one hashes the bytes already there once and asks the
    source for the rest (HTTP Range, or an offset to the parent's `peer-serve tail`), so a cut transfer
    resumes mid-file."""

    def __init__(self, local_dir: str, meta: core.FileMeta) -> None:
        self.meta = meta
        self.local_dir = local_dir
        self.rel = f"{core.PARTIAL_DIR}/{core.content_key(meta)}"
        self.path = os.path.join(local_dir, self.rel)  # for messages: every access goes through a directory fd
        self.hash = core.ContentHash(meta)
        self.resumed_at = 0
        self._fd = -1

    @property
    def offset(self) -> int:
        return self.hash.size

    def open(self) -> None:
        """Open for writing at the end of what is there (hashing that once, on the first open of this run). A
        link, FIFO or device planted at the partial's name is removed by name, never opened."""
        if self._fd >= 0:
            return
        with core.parent_of(self.local_dir, self.rel, create=True) as (dfd, name):
            try:
                fd = core.open_regular(dfd, name, os.O_RDWR)
            except core.NotRegular:
                fd = core.create_new(dfd, name)
            except FileNotFoundError:
                fd = core.create_new(dfd, name)
        have = os.fstat(fd).st_size
        if self.offset == 0 and 0 < have <= self.meta.size:
            core.hash_into(fd, self.hash, have)
            self.resumed_at = self.offset
        self._fd = fd
        os.ftruncate(self._fd, self.offset)  # bytes past what was hashed (or a too-long file) go
        os.lseek(self._fd, self.offset, os.SEEK_SET)

    def restart(self) -> None:
        """From byte 0 again (the source ignored the Range, or sent another file)."""
        self.open()
        os.ftruncate(self._fd, 0)
        os.lseek(self._fd, 0, os.SEEK_SET)
        self.hash = core.ContentHash(self.meta)

    def write(self, data: memoryview) -> None:
        self.hash.update(data)
        try:
            while data:
                data = data[os.write(self._fd, data) :]
        except OSError as err:  # not the network's fault: no retry
            raise FetchError(f"cannot write {self.path}: {err.strerror}: free space or fix the disk") from None

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def discard(self) -> None:
        self.close()
        core.remove_under(self.local_dir, self.rel)
        self.hash = core.ContentHash(self.meta)

    def install(self, name: str) -> None:
        """Move the verified file to `name` under local_dir (a rename through directory fds, which replaces
        whatever was planted there), and prove that what landed is the very file written and hashed."""
        self.open()
        st = os.fstat(self._fd)
        self.close()
        landed = core.move_under(self.local_dir, self.rel, name)
        if landed is None or (landed.st_dev, landed.st_ino) != (st.st_dev, st.st_ino):
            raise FetchError(f"{name}: the partial file was swapped while it downloaded; not installed: re-run")


def pump(read_into: Callable[[memoryview], int | None], part: Partial, nbytes: int, what: str) -> None:
    """Move `nbytes` from `read_into` into `part` through one reused buffer (the loop runs once per MB)."""
    buf = bytearray(core.BUFFER)
    view = memoryview(buf)
    left = nbytes
    while left > 0:
        n = read_into(view[: min(core.BUFFER, left)])
        if not n:
            raise FetchError(f"{what}: the stream ended at byte {part.offset} of {part.meta.size}", transient=True)
        part.write(view[:n])
        left -= n


class XetFile(Exception):
    """The Hub keeps this file in Xet storage (its /resolve/ answer carries X-Xet-Hash): hf_xet fetches it."""


class _Redirects(urllib.request.HTTPRedirectHandler):
    """Follow the Hub's redirects; the token goes along only while the origin stays the Hub's (never to a CDN);
    an answer that names a Xet hash stops here (XetFile) when Xet files go through hf_xet."""

    def __init__(self, origin: str, token: str | None, xet: bool) -> None:
        self.origin, self.token, self.xet = origin, token, xet

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        if self.xet and headers.get("X-Xet-Hash"):
            raise XetFile(newurl)
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and self.token and _same_origin(newurl, self.origin):
            new.add_unredirected_header("Authorization", f"Bearer {self.token}")
        return new


class HubBodies:
    """File bodies from the Hub or a mirror.

    Each file is one GET of its /resolve/ URL at the commit, following the Hub's redirect to its storage, as
    `curl -L` would (two requests per LFS file, the token never leaving the Hub's origin); the bytes are hashed
    as they arrive and a partial file resumes with a Range. This part is hand-rolled on purpose:
    huggingface_hub 2.x has no hook to hash the bytes as they arrive (its callers read each file again), keeps
    no partial file between runs, and spends its CPU per 64 KB in httpx/h11 (bench/model_profile.py: 75% of the
    sync's thread time before this, against 8 curls 5-7x faster). A file the Hub keeps in Xet storage (its
    answer names an X-Xet-Hash) goes to huggingface_hub's own downloader instead (hf_xet: chunked, parallel,
    deduplicated), and is hashed right after it lands."""

    def __init__(self, spec: Spec, token: str | None, commit: str) -> None:
        self.spec, self.token, self.commit = spec, token, commit
        self._opener = urllib.request.build_opener(_Redirects(spec.where, token, spec.xet))

    def url(self, meta: core.FileMeta) -> str:
        return f"{self.spec.where.rstrip('/')}/{self.spec.repo_id}/resolve/{self.commit}/{quote(meta.path)}"

    def _request(self, meta: core.FileMeta, method: str, headers: dict[str, str]) -> urllib.request.Request:
        req = urllib.request.Request(self.url(meta), method=method, headers={"User-Agent": "hgxkit-fetch/2", **headers})
        if self.token:
            req.add_unredirected_header("Authorization", f"Bearer {self.token}")
        return req

    def _error(self, err: urllib.error.HTTPError, meta: core.FileMeta) -> FetchError:
        code = err.headers.get("X-Error-Code", "") if err.headers else ""
        if code in ("GatedRepo", "RepoNotFound", "RevisionNotFound"):
            return _answer_error(HubAnswer(err.code, code, ""), self.spec)
        if code == "EntryNotFound" or (err.code == 404 and _same_origin(err.url or "", self.spec.where)):
            return FetchError(
                f"{meta.path}: not in {self.spec.repo_id}@{self.commit[:12]} at {self.spec.where}: re-run"
            )
        if err.code in (401, 403) and _same_origin(err.url or "", self.spec.where):
            return FetchError(f"{self.spec.where} refused {meta.path} (HTTP {err.code}): check HF_TOKEN's access")
        transient = err.code in (403, 404, 408, 416, 429) or err.code >= 500  # off the Hub: a signed URL expired?
        return FetchError(f"{err.url or self.spec.where} answered HTTP {err.code} for {meta.path}", transient=transient)

    def in_xet(self, meta: core.FileMeta) -> bool:
        """Whether the Hub keeps `meta` in Xet storage: one HEAD of its /resolve/ URL, its redirect not followed."""
        req = self._request(meta, "HEAD", {})
        opener = urllib.request.build_opener(_NoRedirects())
        try:
            with opener.open(req, timeout=30) as resp:
                return bool(resp.headers.get("X-Xet-Hash"))
        except urllib.error.HTTPError as err:
            if 300 <= err.code < 400:
                return bool(err.headers.get("X-Xet-Hash"))
            raise self._error(err, meta) from None
        except OSError as err:
            raise FetchError(
                f"network failure asking {self.spec.where} for {meta.path}: {err}", transient=True
            ) from None

    def stream(self, meta: core.FileMeta, part: Partial) -> None:
        """One GET of the rest of the file into `part` (Range from its offset); a FetchError when it fails."""
        part.open()
        req = self._request(
            meta, "GET", {"Accept-Encoding": "identity", **({"Range": f"bytes={part.offset}-"} if part.offset else {})}
        )
        try:
            resp = self._opener.open(req, timeout=60)
        except urllib.error.HTTPError as err:
            if err.code == 416:
                part.restart()
            raise self._error(err, meta) from None
        except XetFile:
            raise
        except OSError as err:
            raise FetchError(
                f"network failure fetching {meta.path} from {self.spec.where}: {err}", transient=True
            ) from None
        with resp:
            if part.offset and resp.status != 206:
                part.restart()  # the server ignored the Range: take the whole file
            elif part.offset and not str(resp.headers.get("Content-Range", "")).startswith(f"bytes {part.offset}-"):
                part.restart()
                raise FetchError(f"{meta.path}: the server answered another range than asked", transient=True)
            try:
                pump(resp.readinto, part, meta.size - part.offset, f"fetching {meta.path}")
            except (OSError, http.client.HTTPException) as err:
                raise FetchError(f"fetching {meta.path} from {self.spec.where}: {err}", transient=True) from None

    def fetch_xet(self, meta: core.FileMeta, local_dir: str) -> None:
        """huggingface_hub's downloader with hf_xet (its caches and settings from the spec's xet_env), into
        `local_dir` (a fresh staging directory: huggingface_hub opens files by path)."""
        from huggingface_hub import hf_hub_download

        hf_hub_download(
            self.spec.repo_id,
            meta.path,
            revision=self.commit,
            local_dir=local_dir,
            endpoint=self.spec.endpoint or None,
            token=self.token or False,
        )


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        return None


def _same_origin(url: str, base: str) -> bool:
    a, b = urlsplit(url), urlsplit(base)
    return (a.scheme, a.netloc) == (b.scheme, b.netloc)


# -- parents: a peer, or the fleet host above this one --------------------------------------------------------

_STATE_SPLIT = "--hgxkit-result--"


def _ssh_opts(spec: Spec, control: bool = False) -> list[str]:
    """SSH to the parent with the host's peer key; AES-GCM first (AES-NI makes it the cheapest cipher per byte).
    `control`: share one connection for the small state reads; bulk streams get their own connection each."""
    opts = [
        "-i",
        spec.peer_key,
        "-T",
        "-o",
        "BatchMode=yes",
        "-o",
        "StrictHostKeyChecking=accept-new",
        "-o",
        f"UserKnownHostsFile={os.path.join(spec.state_dir, 'peer_known_hosts')}",
        "-o",
        "ConnectTimeout=10",
        "-o",
        "ServerAliveInterval=15",
        "-o",
        "LogLevel=ERROR",
        "-o",
        "Compression=no",
        "-o",
        "Ciphers=aes128-gcm@openssh.com,aes256-gcm@openssh.com,chacha20-poly1305@openssh.com,aes128-ctr",
    ]
    if control:
        path = os.path.join(spec.state_dir, "ssh-%C")
        return [*opts, "-o", "ControlMaster=auto", "-o", f"ControlPath={path}", "-o", "ControlPersist=15"]
    return [*opts, "-o", "ControlPath=none"]


def _target(spec: Spec) -> str:
    return f"{spec.peer_user}@{spec.peer_address}"


def _parent_dir(spec: Spec) -> str:
    return (spec.peer_dir or spec.local_dir).rstrip("/")


@dataclass
class ParentState:
    """What the parent holds: its commit, its whole file list (when it has one), the files it has verified,
    and whether its sync ended (complete, or failed with `error`)."""

    commit: str = ""
    repo_id: str = ""
    allow_patterns: list[str] = field(default_factory=list)
    plan: list[core.FileMeta] | None = None
    verified: dict[str, tuple[int, str | None, str | None]] = field(default_factory=dict)
    complete: bool = False
    error: str = ""
    error_at: float = 0.0


def _listing(doc: dict[str, Any], key: str, parent: str) -> list[core.FileMeta]:
    """File entries of a parent's manifest or journal; untrusted: every name must be harmless."""
    out = []
    for f in doc.get(key) or []:
        meta = core.FileMeta(str(f["path"]), int(f["size"]), f.get("sha256") or None, f.get("git_oid") or None)
        why = core.name_problem(meta.path)
        if why:
            raise FetchError(f"{parent} lists {meta.path!r}, which {why}: refusing its listing")
        out.append(meta)
    return out


def _who(spec: Spec) -> str:
    return f"fleet parent {spec.peer_name}" if spec.source == "fleet" else f"peer {spec.peer_name}"


def _parse_state(doc: Any, result: Any, who: str) -> ParentState | None:
    """A parent's manifest (complete) or journal (syncing) and its last result, as ParentState (None: neither)."""
    state = ParentState()
    try:
        if isinstance(result, dict) and result.get("ok") is False:
            state.error, state.error_at = str(result.get("error", "failed"))[:300], float(result.get("finished_at", 0))
        if not doc:
            return state if state.error else None
        state.commit = str(doc["commit"])
        state.repo_id = str(doc.get("repo_id", ""))
        state.allow_patterns = [str(p) for p in doc.get("allow_patterns") or []]
        state.complete = doc.get("schema") == core.MANIFEST_SCHEMA and "verified_at" in doc
        files = _listing(doc, "files", who)
        state.plan = files if state.complete else (_listing(doc, "plan", who) if "plan" in doc else None)
        state.verified = {f.path: (f.size, f.sha256, f.git_oid) for f in files}
    except (ValueError, TypeError, KeyError, AttributeError) as err:
        raise FetchError(f"{who}: its manifest or journal is not valid ({err})") from None
    return state


def _ssh_read(spec: Spec, remote: str) -> str:
    res = subprocess.run(["ssh", *_ssh_opts(spec, control=True), _target(spec), remote], capture_output=True, text=True)
    if res.returncode == 255:
        msg = (res.stderr.strip().splitlines() or ["ssh failed"])[-1]
        raise FetchError(f"cannot reach {spec.peer_name} at {_target(spec)} over SSH: {msg}", transient=True)
    return res.stdout


def peer_command(spec: Spec, verb: str, *args: str) -> str:
    """The remote command of a read from the parent: its program's `peer-serve` (which the parent's
    authorized_keys also forces for this host's key, so the key can run nothing else)."""
    words = [*shlex.split(spec.peer_program), "peer-serve", "--dir", _parent_dir(spec), "--state-dir", spec.state_dir]
    return shlex.join([*words, verb, *args])


def parent_state(spec: Spec) -> ParentState | None:
    """The parent's state read over SSH: its manifest or journal, and its last result."""
    head, _, tail = _ssh_read(spec, peer_command(spec, "state")).partition(_STATE_SPLIT)
    try:
        doc, result = (json.loads(head) if head.strip() else None), (json.loads(tail) if tail.strip() else None)
    except ValueError as err:
        raise FetchError(f"{_who(spec)}: its manifest or journal is not valid ({err})") from None
    return _parse_state(doc, result, _who(spec))


class ParentLink:
    """How this host reads its parent: over HTTP when the parent serves its verified files (a fleet host does,
    while its sync runs and until the hosts below it are done: no encryption cost per byte, sendfile on its
    side), with the port and a secret read over SSH from a root-only file; else over SSH (`peer-serve tail`)."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.base = ""  # http://parent:port when the parent serves
        self._secret = ""
        self._next_look = 0.0
        self._opener = urllib.request.build_opener(_NoRedirects())

    def _look(self, now: bool = False) -> None:
        """Read the parent's serve file over SSH (at most once a second): its port and secret, or nothing."""
        if self.base or (time.time() < self._next_look and not now) or self.spec.source != "fleet":
            return
        self._next_look = time.time() + 1
        text = _ssh_read(self.spec, peer_command(self.spec, "serve"))
        try:
            doc = json.loads(text) if text.strip() else {}
            port, secret = int(doc["port"]), str(doc["secret"])
            address = str(doc.get("address") or self.spec.peer_address)
        except (ValueError, TypeError, KeyError, AttributeError):
            return
        address = f"[{address}]" if ":" in address else address
        self.base, self._secret = f"http://{address}:{port}", secret

    def _req(self, path: str, headers: dict[str, str] | None = None, data: bytes | None = None) -> Any:
        """One request to the parent's server, signed with the secret (the secret itself never goes on the wire)."""
        headers = dict(headers or {})
        method = "POST" if data is not None else "GET"
        headers.update(fleet_auth(self._secret, method, path, headers.get("Range", ""), data or b""))
        req = urllib.request.Request(self.base + path, data=data, headers=headers, method=method)
        return self._opener.open(req, timeout=FLEET_TIMEOUT_S)

    def _drop(self) -> None:
        """The parent's server did not answer: SSH for a minute, then its serve file is read again."""
        self.base = ""
        self._next_look = time.time() + 60

    def state(self) -> ParentState | None:
        self._look()
        if self.base:
            try:
                with self._req("/state") as resp:
                    doc = json.loads(resp.read())
                return _parse_state(doc.get("state"), doc.get("result"), _who(self.spec))
            except (OSError, ValueError, http.client.HTTPException, AttributeError):
                self._drop()
        return parent_state(self.spec)

    def stream(self, meta: core.FileMeta, part: Partial) -> None:
        if not self.base:
            return ssh_stream(self.spec, meta, part)
        part.open()
        headers = {"Range": f"bytes={part.offset}-"} if part.offset else {}
        try:
            resp = self._req("/files/" + quote(meta.path), headers)
        except urllib.error.HTTPError as err:
            raise FetchError(
                f"{self.spec.peer_name} answered HTTP {err.code} for {meta.path}", transient=True
            ) from None
        except OSError as err:
            self._drop()
            raise FetchError(f"copying {meta.path} from {self.spec.peer_name}: {err}", transient=True) from None
        with resp:
            if part.offset and resp.status != 206:
                part.restart()
            try:
                pump(resp.readinto, part, meta.size - part.offset, f"copying {meta.path} from {self.spec.peer_name}")
            except (OSError, http.client.HTTPException) as err:
                raise FetchError(f"copying {meta.path} from {self.spec.peer_name}: {err}", transient=True) from None

    def done(self) -> None:
        """Tell a serving parent this host has its copy (it stops serving once all its children said so)."""
        with contextlib.suppress(FetchError):
            self._look(now=True)
        if self.base:
            with contextlib.suppress(OSError, http.client.HTTPException):
                self._req("/done", data=self.spec.host_name.encode()).close()


def ssh_stream(spec: Spec, meta: core.FileMeta, part: Partial) -> None:
    """The rest of `meta` from the parent over SSH (its `peer-serve tail`: the file from an offset), into `part`."""
    part.open()
    remote = peer_command(spec, "tail", str(part.offset), meta.path)
    argv = ["ssh", *_ssh_opts(spec), _target(spec), remote]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    with contextlib.suppress(OSError):
        fcntl.fcntl(proc.stdout.fileno(), 1031, 1 << 20)  # F_SETPIPE_SZ: 1 MB reads from ssh
    problem: FetchError | None = None
    try:
        pump(proc.stdout.readinto, part, meta.size - part.offset, f"copying {meta.path} from {spec.peer_name}")
        if proc.stdout.read(1):
            problem = FetchError(f"{meta.path} on {spec.peer_name} is longer than {meta.size} bytes")
    except FetchError as err:
        problem = err
    finally:
        proc.stdout.close()
        if problem is not None:
            proc.kill()
        code = proc.wait()
        err_text = proc.stderr.read().decode(errors="replace").strip()
        proc.stderr.close()
    if code not in (0, -9) or (problem is not None and err_text):
        msg = (err_text.splitlines() or [f"exit {code}"])[-1]
        raise FetchError(f"copying {meta.path} from {spec.peer_name}: {msg}", transient=True)
    if problem is not None:
        raise problem


def _serve_file(spec: Spec, parent: bool = True) -> str:
    """`<state_dir>/<name>.serve.json`: the port and secret of a fleet host's server (its parent's, or its own)."""
    name = core.model_name(_parent_dir(spec)) if parent else spec.name
    return os.path.join(spec.state_dir, f"{name}.serve.json")


FLEET_TIMEOUT_S = 10.0  # every socket operation of the fleet server (and of its clients): idle ones are dropped
FLEET_MAX_CONNECTIONS = 32  # connections served at once (one thread each; at least workers + 2 per child)
FLEET_AUTH_WINDOW_S = 300  # how far a signed request's clock may be off; its nonce is not accepted twice within
_BIND_ANY = ("", "0.0.0.0", "::", "[::]")


def fleet_mac(secret: str, method: str, target: str, rng: str, stamp: str, nonce: str, body: bytes = b"") -> str:
    """HMAC-SHA256 of one fleet request with the run's secret: method, target, Range, time, nonce and body.

    >>> fleet_mac("s", "GET", "/state", "", "1", "n")[:16]
    '03947af2736850e9'
    """
    msg = "\n".join((method, target, rng, stamp, nonce)).encode() + b"\n" + body
    return hmac.new(secret.encode(), msg, hashlib.sha256).hexdigest()


def fleet_auth(secret: str, method: str, target: str, rng: str = "", body: bytes = b"") -> dict[str, str]:
    """The headers that authenticate one request to a fleet server (the secret itself is never sent)."""
    stamp, nonce = str(int(time.time())), secrets.token_hex(12)
    mac = fleet_mac(secret, method, target, rng, stamp, nonce, body)
    return {"X-Hgxkit-Time": stamp, "X-Hgxkit-Nonce": nonce, "Authorization": f"hgxkit-hmac {mac}"}


def bind_problem(bind: str, bind_any: bool) -> str | None:
    """Why a fleet server may not listen on `bind`: every address of the host needs the knob.

    >>> bind_problem("10.0.0.5", False) is None, bind_problem("0.0.0.0", False)[:40]
    (True, 'would listen on every address (0.0.0.0):')
    """
    if bind in _BIND_ANY and not bind_any:
        return (
            f"would listen on every address ({bind or 'none set'}): set fabric_address or model_peer_address "
            "on the host, or model_fleet_bind_any: true"
        )
    return None


class _BoundedServer(ThreadingHTTPServer):
    """ThreadingHTTPServer with a cap on connections: one over `cap` is closed as it is accepted, so idle or
    slow clients can hold at most `cap` threads (each of which the handler's timeout ends)."""

    daemon_threads = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], cap: int) -> None:
        self._slots = threading.BoundedSemaphore(cap)
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


class FleetServer:
    """A fleet host serving its verified files to the hosts below it, over HTTP on `fleet_port`: `/state` (its
    journal or manifest), `/files/<name>` (a verified file, Range for resume, sent with sendfile), `/done`.

    It listens on `fleet_bind` only (the host's fabric address; every address only with `fleet_bind_any`).
    Every request is signed with the secret this server made (HMAC over method, target, Range, time and a
    nonce: the secret never crosses the wire), which only root reads (`<name>.serve.json`, mode 0600): the
    children read it over SSH with their peer key. Anything unsigned gets 403 and does not keep the server
    alive. Each connection's socket operations time out (`timeout_s`), at most `max_connections` are served at
    once, and a file is opened only as a regular file reached with no symlink followed. The server lives while
    the sync runs, then until every child said it is done, or no signed request came for `idle_s`."""

    def __init__(
        self,
        spec: Spec,
        syncer: Syncer,
        timeout_s: float = FLEET_TIMEOUT_S,
        max_connections: int | None = None,
    ) -> None:
        why = bind_problem(spec.fleet_bind, spec.fleet_bind_any)
        if why:
            raise FleetRefused(why)
        self.spec, self.syncer = spec, syncer
        self.secret = secrets.token_urlsafe(32)
        self.done: set[str] = set()
        self.last = time.time()
        self.served = 0
        self._served_lock = threading.Lock()
        self._nonces: dict[str, float] = {}
        self._nonce_lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = timeout_s  # StreamRequestHandler sets it on the socket: an idle connection is dropped

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                outer.handle(self)

            do_POST = do_GET

        bind = "" if spec.fleet_bind in _BIND_ANY else spec.fleet_bind.strip("[]")
        cap = max_connections or max(FLEET_MAX_CONNECTIONS, len(spec.fleet_children) * (spec.workers + 2))
        self.httpd = _BoundedServer((bind, spec.fleet_port), Handler, cap)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        doc = {"port": self.httpd.server_address[1], "secret": self.secret, "address": bind}
        core.atomic_write(_serve_file(spec, parent=False), json.dumps(doc), mode=0o600)

    def _state(self) -> dict[str, Any]:
        s = self.syncer
        if s.manifest is not None:
            return json.loads(s.manifest.to_json())
        with s._lock:
            return {
                "commit": s.commit,
                "repo_id": self.spec.repo_id,
                "allow_patterns": list(self.spec.allow_patterns),
                "plan": [asdict(m) for m in s.plan],
                "files": [asdict(v) for v in s.verified.values()],
            }

    def _verified(self) -> dict[str, core.VerifiedFile]:
        if self.syncer.manifest is not None:
            return {f.path: f for f in self.syncer.manifest.files}
        with self.syncer._lock:
            return dict(self.syncer.verified)

    def authentic(self, h: BaseHTTPRequestHandler, body: bytes) -> bool:
        """Whether the request carries a fresh, unused nonce and a valid HMAC of itself with the secret."""
        stamp, nonce = h.headers.get("X-Hgxkit-Time", ""), h.headers.get("X-Hgxkit-Nonce", "")
        auth = h.headers.get("Authorization", "")
        if not (stamp.isdigit() and 8 <= len(nonce) <= 64 and auth.startswith("hgxkit-hmac ")):
            return False
        now = time.time()
        if abs(now - int(stamp)) > FLEET_AUTH_WINDOW_S:
            return False
        want = fleet_mac(self.secret, h.command, h.path, h.headers.get("Range", ""), stamp, nonce, body)
        if not hmac.compare_digest(auth.removeprefix("hgxkit-hmac "), want):
            return False
        with self._nonce_lock:
            if nonce in self._nonces:
                return False  # a replay
            self._nonces = {n: t for n, t in self._nonces.items() if now - t <= 2 * FLEET_AUTH_WINDOW_S}
            self._nonces[nonce] = now
        return True

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        body = b""
        if h.command == "POST":
            length = h.headers.get("Content-Length") or "0"
            if not length.isdigit() or int(length) > 256:
                h.close_connection = True
                return _answer(h, 413, b"")
            body = h.rfile.read(int(length))
        if not self.authentic(h, body):
            h.close_connection = True
            return _answer(h, 403, b"")
        self.last = time.time()  # only a signed request keeps the server alive
        path = unquote(urlsplit(h.path).path)
        if h.command == "POST" and path == "/done":
            self.done.add(body.decode(errors="replace"))
            return _answer(h, 200, b"")
        if path == "/state":
            known = self.syncer.manifest is not None or self.syncer.commit
            doc = {"state": self._state() if known else None, "result": self.syncer.result}
            return _answer(h, 200, json.dumps(doc).encode())
        entry = self._verified().get(path.removeprefix("/files/")) if path.startswith("/files/") else None
        if entry is None or core.name_problem(entry.path):
            return _answer(h, 404, b"")
        try:
            with core.parent_of(self.spec.local_dir, entry.path) as (dfd, name):
                fd = core.open_regular(dfd, name)
        except (OSError, ValueError):  # missing, or a link, FIFO or device planted at its name
            return _answer(h, 404, b"")
        with os.fdopen(fd, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            start = 0
            rng = h.headers.get("Range", "")
            if rng.startswith("bytes=") and rng.endswith("-") and rng[6:-1].isdigit():
                start = min(int(rng[6:-1]), size)
            h.send_response(206 if start else 200)
            h.send_header("Content-Length", str(size - start))
            if start:
                h.send_header("Content-Range", f"bytes {start}-{size - 1}/{size}")
            h.end_headers()
            # Counted before the bytes go: a child can get the last of them, say it is done and end the server
            # before this thread runs again (a count made after sendfile read 0.00 GB on a busy machine).
            with self._served_lock:
                self.served += size - start
            try:
                h.wfile.flush()
                h.connection.sendfile(f, start, size - start)
            except OSError:
                with self._served_lock:
                    self.served -= size - start

    def linger(self, children: list[str], rep: Reporter) -> None:
        """Serve on until every child said it is done, or none asked anything (signed) for `idle_s`."""
        idle_s = max(30.0, min(self.spec.peer_wait_s, 120.0))
        if children and not set(children) <= self.done:
            rep.phase("serving", detail=f"{len(self.done)} of {len(children)} hosts below have their copy")
        while children and not set(children) <= self.done and time.time() - self.last < idle_s:
            time.sleep(0.2)

    def close(self) -> None:
        Path(_serve_file(self.spec, parent=False)).unlink(missing_ok=True)
        self.httpd.shutdown()
        self.httpd.server_close()


class FleetRefused(Exception):
    """The fleet server may not start as configured (the message says why and the knob)."""


def _answer(h: BaseHTTPRequestHandler, status: int, body: bytes) -> None:
    h.send_response(status)
    h.send_header("Content-Length", str(len(body)))
    h.send_header("Content-Type", "application/json")
    if h.close_connection:
        h.send_header("Connection", "close")
    h.end_headers()
    h.wfile.write(body)


# -- the one thing a peer key may run on this host -------------------------------------------------------------


def peer_serve(local_dir: str, state_dir: str, request: list[str], out: Any = None) -> int:
    """Answer one read of a host below this one over SSH: the forced command of its key in authorized_keys
    (`restrict,from=...,command="... peer-serve --dir D --state-dir S"`), so that key can do nothing else.

    `request` is the verb and its words (from SSH_ORIGINAL_COMMAND, whatever the client put before them):
    `state` (the manifest or journal, then the last result), `serve` (this host's fleet server: port and secret),
    `tail OFFSET NAME` (a file of the copy from byte OFFSET: only a name the manifest or journal lists, opened as
    a regular file reached with no symlink followed). Everything is read only; the exit status is 2 on a refusal."""
    out = out if out is not None else sys.stdout.buffer
    name = core.model_name(local_dir)
    words = list(request)
    while len(words) >= 2 and words[0] in ("--dir", "--state-dir"):
        words = words[2:]
    verb = words[0] if words else ""

    def state_text(path: str) -> str:
        with contextlib.suppress(OSError):
            dfd = os.open(os.path.dirname(path), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                fd = core.open_regular(dfd, os.path.basename(path))
            finally:
                os.close(dfd)
            with os.fdopen(fd, "rb") as f:
                return f.read(1 << 20).decode(errors="replace")
        return ""

    def listing() -> str:
        for rel in (core.MANIFEST_NAME, core.JOURNAL_PATH):
            with contextlib.suppress(OSError, ValueError):
                return core.read_under(local_dir, rel)
        return ""

    if verb == "state" and len(words) == 1:
        result = state_text(os.path.join(state_dir, f"{name}.result.json"))
        out.write(f"{listing()}\n{_STATE_SPLIT}\n{result}".encode())
        return 0
    if verb == "serve" and len(words) == 1:
        out.write(state_text(os.path.join(state_dir, f"{name}.serve.json")).encode())
        return 0
    if verb == "tail" and len(words) == 3 and words[1].isdigit() and core.name_problem(words[2]) is None:
        try:
            listed = {str(f.get("path")) for f in json.loads(listing() or "{}").get("files") or []}
        except (ValueError, AttributeError):
            listed = set()
        if words[2] in listed:
            try:
                with core.parent_of(local_dir, words[2]) as (dfd, base):
                    fd = core.open_regular(dfd, base)
            except (OSError, ValueError):
                print(f"hgxkit peer-serve: {words[2]} is not a regular file of {local_dir}", file=sys.stderr)
                return 2
            with os.fdopen(fd, "rb") as f:
                f.seek(int(words[1]))
                shutil.copyfileobj(f, out, core.BUFFER)
            out.flush()
            return 0
    print(
        f"hgxkit peer-serve: refused {' '.join(words)[:200]!r}: not one of state, serve, tail OFFSET NAME "
        f"(a verified file of {local_dir})",
        file=sys.stderr,
    )
    return 2


# -- progress and results -----------------------------------------------------------------------------------


class Reporter:
    """Writes `<name>.progress.json` every second while a sync runs, and `<name>.result.json` at the end."""

    def __init__(self, spec: Spec, run_id: str) -> None:
        self.spec, self.run_id = spec, run_id
        self.progress = core.Progress("starting", run_id=run_id)
        self._samples: deque[tuple[float, int]] = deque(maxlen=10)
        self._inflight: Callable[[], int] = lambda: 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._last_log = 0.0
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> Reporter:
        self.write()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def phase(self, phase: str, total: int = 0, files_total: int = 0, detail: str = "") -> None:
        with self._lock:
            self.progress = core.Progress(
                phase, total_bytes=total, files_total=files_total, run_id=self.run_id, detail=detail
            )
            self._samples.clear()
            self._inflight = lambda: 0
        self.log(f"{phase} {detail}".strip())
        self.write()

    def track(self, inflight: Callable[[], int]) -> None:
        self._inflight = inflight

    def file_done(self, size: int) -> None:
        with self._lock:
            self.progress.done_bytes += size
            self.progress.files_done += 1

    def log(self, msg: str) -> None:
        print(f"hgxkit-fetch: {msg}", flush=True)

    def write(self) -> None:
        with self._lock:
            p = self.progress
            now = time.time()
            done = min(p.total_bytes or sys.maxsize, p.done_bytes + self._inflight())
            self._samples.append((now, done))
            t0, d0 = self._samples[0]
            rate = (done - d0) / (now - t0) if now - t0 > 0.5 else p.rate_bps
            snap = core.Progress(**{**asdict(p), "done_bytes": done, "rate_bps": max(rate, 0.0), "updated_at": now})
        core.atomic_write(self.spec.state_file(".progress.json"), json.dumps(asdict(snap)))
        if snap.total_bytes and now - self._last_log >= 10:
            self._last_log = now
            self.log(core.format_progress(snap))

    def _loop(self) -> None:
        while not self._stop.wait(1.0):
            try:
                self.write()
            except Exception as err:  # progress must never kill the sync
                print(f"hgxkit-fetch: progress: {err}", file=sys.stderr)

    def result(self, ok: bool, **fields: Any) -> None:
        doc = {"ok": ok, "run_id": self.run_id, "finished_at": time.time(), **fields}
        core.atomic_write(self.spec.state_file(".result.json"), json.dumps(doc, sort_keys=True))


# -- the sync -----------------------------------------------------------------------------------------------


def load_manifest(local_dir: str) -> core.Manifest | None:
    try:
        return core.Manifest.from_json(core.read_under(local_dir, core.MANIFEST_NAME))
    except (OSError, ValueError, TypeError, KeyError):
        return None


def load_journal(spec: Spec, commit: str) -> dict[str, core.VerifiedFile]:
    try:
        doc = json.loads(core.read_under(spec.local_dir, core.JOURNAL_PATH))
        if doc.get("commit") != commit:
            return {}
        return {f["path"]: core.VerifiedFile(**f) for f in doc.get("files", [])}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return {}


def _stamp(spec: Spec, meta: core.FileMeta) -> core.VerifiedFile:
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
    except PermissionError:
        raise FetchError(
            f"permission denied at {path}: make it writable by root (or pick another model.local_dir)"
        ) from None
    except OSError as err:
        raise FetchError(f"cannot write to {path}: {err.strerror}: fix the file system or model.local_dir") from None


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


def _forget(spec: Spec, path: str) -> None:
    """Remove a bad file and huggingface_hub's note that it has it, so it is fetched again (by name, following no
    link on the way)."""
    _check_name(path)
    core.remove_under(spec.local_dir, path)
    core.remove_under(spec.local_dir, f"{HF_DOWNLOAD_CACHE}/{path}.metadata")


def _check_name(path: str) -> None:
    why = core.name_problem(path)
    if why:
        raise FetchError(f"refusing to write {path!r}, which {why}: check the source's file list")


class Feed:
    """Which files may be fetched now: all at once from the Hub; from a parent, each as soon as the parent has
    verified it (the same ids as this host's list), so a fleet streams down the tree file by file."""

    def __init__(self, syncer: Syncer, metas: list[core.FileMeta]) -> None:
        self.s = syncer
        self.waiting = {m.path: m for m in metas}
        self.parent = syncer.spec.from_parent
        self._next_poll = 0.0
        self._seen = -1
        self._deadline = time.time() + syncer.spec.peer_wait_s
        self._last_note = 0.0

    def ready(self) -> list[core.FileMeta]:
        if not self.waiting:
            return []
        if not self.parent:
            out = sorted(self.waiting.values(), key=lambda m: (-m.size, m.path))  # largest first: short tail
            self.waiting.clear()
            return out
        now = time.time()
        if now < self._next_poll:
            return []
        self._next_poll = now + 0.5
        spec = self.s.spec
        state = with_retries(spec, f"reading {spec.peer_name}'s progress", self.s.link.state, self.s.rep.log)
        if state is not None and state.error and state.error_at >= self.s.started:
            raise FetchError(f"{spec.peer_name}, which this host copies from, failed: {state.error}")
        out = []
        if state is not None and state.commit == self.s.commit:
            out = [m for m in self.waiting.values() if state.verified.get(m.path) == _ids(m)]
            for m in out:
                del self.waiting[m.path]
        have = len(state.verified) if state is not None else 0
        if have != self._seen:
            self._seen, self._deadline = have, now + spec.peer_wait_s
        elif now > self._deadline:
            held = f"holds commit {state.commit[:12]}" if state and state.commit else "has not started its sync"
            raise FetchError(
                f"{spec.peer_name} {held}; waited {spec.peer_wait_s:.0f}s for {len(self.waiting)} files of "
                f"{self.s.commit[:12]}: deploy the model to {spec.peer_name} too (same recipe), then re-run"
            )
        if self.waiting and not out and now - self._last_note >= 10:
            self._last_note = now
            self.s.rep.log(f"waiting for {spec.peer_name}: {len(self.waiting)} files not there yet")
        return sorted(out, key=lambda m: (-m.size, m.path))


class Syncer:
    """One sync of `spec` (see the module docstring); `run()` returns the result fields."""

    def __init__(self, spec: Spec, token: str | None, rep: Reporter) -> None:
        self.spec, self.token, self.rep = spec, token, rep
        self.verified: dict[str, core.VerifiedFile] = {}
        self._lock = threading.Lock()
        self._active: set[Partial] = set()
        self.commit = ""
        self.plan: list[core.FileMeta] = []
        self.started = time.time()
        self.hub: HubBodies | None = None
        self.to_fetch: list[core.FileMeta] = []
        self._xet_checked = False
        self.link = ParentLink(spec)
        self.manifest: core.Manifest | None = None  # set when this host's copy is complete (what it serves)
        self.result: dict[str, Any] | None = None  # set when the sync failed (what the hosts below read)
        self.fetched: list[str] = []
        self.rehashed: list[str] = []
        self.refetched_corrupt: list[str] = []
        self.resumed: list[str] = []

    # metadata
    def metadata(self) -> tuple[str, list[core.FileMeta]]:
        spec = self.spec
        if spec.source == "peer":
            if not (spec.peer_address and spec.peer_key):
                raise FetchError("model_source peer needs model_peer (an inventory host): set it in the inventory")
            self.rep.phase("reading the peer's file list", detail=spec.peer_name)
            state = self._wait_for_plan()
            if state.repo_id != spec.repo_id or list(state.allow_patterns) != list(spec.allow_patterns):
                raise FetchError(
                    f"peer {spec.peer_name} holds {state.repo_id} with allow_patterns {state.allow_patterns}, not "
                    f"{spec.repo_id} with {spec.allow_patterns}: sync the peer with the same recipe first"
                )
            if core.is_commit(spec.revision) and state.commit != spec.revision:
                raise FetchError(
                    f"peer {spec.peer_name} holds commit {state.commit[:12]}, the recipe pins {spec.revision[:12]}: "
                    "re-sync the peer first"
                )
            assert state.plan is not None
            return state.commit, state.plan
        if spec.source == "fleet" and spec.peer_name and not (spec.peer_address and spec.peer_key):
            raise FetchError("model_source fleet: the parent host has no address or key: re-run the deploy")
        self.rep.phase("resolving", detail=f"{spec.repo_id}@{spec.revision} at {spec.where}")
        return hub_files(spec, self.token)

    def _wait_for_plan(self) -> ParentState:
        spec = self.spec
        deadline = time.time() + spec.peer_wait_s
        while True:
            what = f"reading {spec.peer_name}'s file list"
            state = with_retries(spec, what, self.link.state, self.rep.log)
            if state is not None and state.plan is not None:
                return state
            if state is not None and state.error and state.error_at >= self.started:
                raise FetchError(f"peer {spec.peer_name} failed its sync: {state.error}")
            if time.time() >= deadline:
                raise FetchError(
                    f"peer {spec.peer_name} has no verified copy or file list in {_parent_dir(spec)} after "
                    f"{spec.peer_wait_s:.0f}s: deploy the model to the peer first"
                )
            self.rep.log(f"waiting for peer {spec.peer_name} to start its sync")
            time.sleep(2)

    def journal(self) -> None:
        """`.cache/hgxkit/verified.json`: the commit, the whole file list and the files verified so far. A later
        run trusts the verified ones (size+mtime); hosts below this one in a fleet copy them from here."""
        with self._lock:
            doc = {
                "commit": self.commit,
                "repo_id": self.spec.repo_id,
                "allow_patterns": list(self.spec.allow_patterns),
                "plan": [asdict(m) for m in self.plan],
                "files": [asdict(v) for v in self.verified.values()],
            }
            core.write_under(self.spec.local_dir, core.JOURNAL_PATH, json.dumps(doc))

    def _verified(self, meta: core.FileMeta, fetched: bool) -> None:
        with self._lock:
            self.verified[meta.path] = _stamp(self.spec, meta)
            if fetched:
                self.fetched.append(meta.path)
        self.rep.file_done(meta.size)
        self.journal()

    def hash_files(self, metas: list[core.FileMeta]) -> list[core.FileMeta]:
        """Hash `metas` in parallel; record the good ones, return the bad ones."""
        bad: list[core.FileMeta] = []
        self.rep.phase("verifying", total=sum(m.size for m in metas), files_total=len(metas))

        def one(meta: core.FileMeta) -> None:
            problem = core.verify_file(self.spec.local_dir, meta.path, meta)
            if problem is None:
                with self._lock:
                    self.verified[meta.path] = _stamp(self.spec, meta)
            else:
                self.rep.log(f"{meta.path}: {problem}")
                with self._lock:
                    bad.append(meta)
            self.rep.file_done(meta.size)

        with ThreadPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1))) as pool:
            list(pool.map(one, metas))
        self.journal()
        return bad

    def _inflight(self) -> int:
        with self._lock:
            ours = sum(p.offset for p in self._active)
        return ours + _incomplete_bytes(self.spec.local_dir)  # hf_xet's files in flight

    def fetch_one(self, meta: core.FileMeta, stream: Callable[[core.FileMeta, Partial], None], where: str) -> None:
        """Stream one file into its partial (resuming it), check its id, then move it into place; a corrupted
        copy is fetched again from byte 0, up to corrupt_refetch times."""
        spec = self.spec
        _check_name(meta.path)
        part = Partial(spec.local_dir, meta)
        problem: str | None = None
        with self._lock:
            self._active.add(part)
        try:
            for _ in range(spec.corrupt_refetch + 1):
                part.open()
                if part.offset < meta.size:  # a partial that is whole only needs its check
                    with_retries(spec, f"fetching {meta.path}", lambda: stream(meta, part), self.rep.log)
                problem = part.hash.problem()
                if problem is None:
                    if part.resumed_at:
                        self.rep.log(f"{meta.path}: resumed at byte {part.resumed_at}")
                        with self._lock:
                            self.resumed.append(meta.path)
                    part.install(meta.path)
                    self._verified(meta, fetched=True)
                    return
                self.rep.log(f"{meta.path} is corrupted ({problem}); fetching it again")
                part.discard()
                with self._lock:
                    self.refetched_corrupt.append(meta.path)
        finally:
            part.close()
            with self._lock:
                self._active.discard(part)
        raise FetchError(
            f"{meta.path} is corrupted ({problem}) after {spec.corrupt_refetch + 1} fetches from {where}: "
            + ("the server sends a bad copy; try another mirror" if where == spec.where else f"re-sync {where}")
        )

    def fetch_xet(self, meta: core.FileMeta) -> None:
        """A file in Xet storage: hf_xet writes it, then it is hashed (while the page cache still holds it)."""
        spec = self.spec
        assert self.hub is not None
        _forget(spec, meta.path)
        problem: str | None = None
        for _ in range(spec.corrupt_refetch + 1):
            # huggingface_hub writes by path: it gets a fresh directory under a random name (made by this code, no
            # link on the way), and the file is renamed into place through directory fds, then checked as a
            # regular file. A container racing huggingface_hub inside that directory is the residual risk.
            stage = f"{core.STAGE_DIR}/{secrets.token_hex(8)}"
            try:
                core.make_dir_under(spec.local_dir, stage)
                hub, where = self.hub, os.path.join(spec.local_dir, stage)
                with_retries(spec, f"fetching {meta.path} (xet)", partial(hub.fetch_xet, meta, where), self.rep.log)
                core.move_under(spec.local_dir, f"{stage}/{meta.path}", meta.path)
            finally:
                core.remove_under(spec.local_dir, stage)
            problem = core.verify_file(spec.local_dir, meta.path, meta)
            if problem is None:
                self._verified(meta, fetched=True)
                return
            self.rep.log(f"{meta.path} is corrupted ({problem}); fetching it again")
            _forget(spec, meta.path)
            with self._lock:
                self.refetched_corrupt.append(meta.path)
        raise FetchError(
            f"{meta.path} is corrupted ({problem}) after {spec.corrupt_refetch + 1} fetches from {spec.where}: "
            "the server sends a bad copy; try another mirror"
        )

    def fetch(self, metas: list[core.FileMeta]) -> None:
        """Fetch `metas` with `workers` transfers at once, each file as soon as its source has it."""
        spec = self.spec
        self.rep.phase("downloading", total=sum(m.size for m in metas), files_total=len(metas))
        self.rep.track(self._inflight)
        if spec.from_parent:
            link = self.link

            def one(m: core.FileMeta) -> None:
                self.fetch_one(m, link.stream, spec.peer_name)

        else:
            hub = self.hub
            assert hub is not None

            def one(m: core.FileMeta) -> None:
                try:
                    self.fetch_one(m, hub.stream, spec.where)
                except XetFile:
                    self.xet_space()
                    self.fetch_xet(m)

        feed = Feed(self, metas)
        errors: list[BaseException] = []
        with ThreadPoolExecutor(max_workers=max(1, spec.workers)) as pool:
            running: set[Future[None]] = set()
            queue: deque[core.FileMeta] = deque()
            while feed.waiting or queue or running:
                try:
                    queue.extend(feed.ready())
                except FetchError as err:  # the parent failed or stalled: start no more, finish what runs
                    errors.insert(0, err)
                    queue.clear()
                    feed.waiting.clear()
                while queue and len(running) < max(1, spec.workers):
                    running.add(pool.submit(one, queue.popleft()))
                if not running:
                    time.sleep(0.2)  # waiting for the parent to verify more files
                    continue
                done, running = wait(running, timeout=0.5, return_when=FIRST_COMPLETED)
                # A file that fails does not stop the others: each good one is journaled for the next run.
                errors += [e for e in (fut.exception() for fut in done) if e is not None]
        if errors:
            raise errors[0]

    def xet_space(self) -> None:
        """Before the first file goes through hf_xet: the free-space check again, with hf_xet's caches."""
        with self._lock:
            if self._xet_checked:
                return
            self._xet_checked = True
        self.rep.log(f"files in Xet storage: hf_xet, HF_XET_HIGH_PERFORMANCE, caches in {self.spec.xet_dir}")
        self.disk_check(self.to_fetch, xet=True)

    def disk_check(self, to_fetch: list[core.FileMeta], xet: bool) -> None:
        spec = self.spec
        partial = {
            m.path: _size_or_none(spec.local_dir, f"{core.PARTIAL_DIR}/{core.content_key(m)}") or 0 for m in to_fetch
        }
        remaining = sum(m.size - partial[m.path] for m in to_fetch)
        needs = [
            core.DiskNeed(
                spec.local_dir,
                core.disk_need(remaining, spec.margin_pct, spec.margin_gb),
                f"{len(to_fetch)} files, {core.format_bytes(remaining)} to fetch + margin",
            )
        ]
        if xet:
            caches = int((spec.xet_chunk_cache_gb + spec.xet_shard_cache_gb) * core.GB)
            needs.append(
                core.DiskNeed(
                    spec.xet_dir,
                    max(0, caches - core.dir_bytes(spec.xet_dir)),
                    f"hf_xet's caches at {spec.xet_dir}: chunk {spec.xet_chunk_cache_gb:g} GB + shard "
                    f"{spec.xet_shard_cache_gb:g} GB (model_xet_chunk_cache_gb, model_xet_shard_cache_gb)",
                )
            )
        shorts = core.disk_shortfalls(needs)
        if shorts:
            raise FetchError(
                "; ".join(shorts)
                + ": free space there, or choose another model.local_dir"
                + (" or model_xet_cache_dir" if xet else "")
            )

    def run(self) -> dict[str, Any]:
        spec = self.spec
        prepare_dir(spec.local_dir)
        self.commit, metas = self.metadata()
        for m in metas:
            why = core.name_problem(m.path)
            if why:
                raise FetchError(f"the file list from {spec.where} names {m.path!r}, which {why}: refusing it")
        self.plan = metas
        manifest = load_manifest(spec.local_dir)
        if manifest is not None:
            ok = core.check_manifest(manifest, spec.local_dir, spec.repo_id, spec.allow_patterns, self.commit, metas)
            if ok.ok and not spec.full_rehash:
                self.write_record(manifest)
                core.write_stamp(spec, manifest)
                self.manifest = manifest
                return {"commit": self.commit, "fetched": [], "rehashed": [], "seconds": 0.0, "already": True}
            # Never leave a manifest that claims files this run may replace.
            core.remove_under(spec.local_dir, core.MANIFEST_NAME)
        known: dict[str, core.VerifiedFile] = {}
        if not spec.full_rehash:
            if manifest is not None and manifest.commit == self.commit:
                known.update({f.path: f for f in manifest.files})
            known.update(load_journal(spec, self.commit))
        to_hash, to_fetch = [], []
        for m in metas:
            entry = known.get(m.path)
            if entry and _matches(entry, m) and core.unchanged_since_verify(spec.local_dir, entry):
                self.verified[m.path] = entry
            elif _size_or_none(spec.local_dir, m.path) == m.size:
                to_hash.append(m)
            else:
                to_fetch.append(m)
        if to_hash:
            bad = self.hash_files(to_hash)
            self.rehashed = [m.path for m in to_hash]
            to_fetch += bad
        if spec.source == "bundle" and to_fetch:  # copied, then hashed like any file found in place
            copy_from_bundle(spec, to_fetch)
            self.fetched = [m.path for m in to_fetch]
            to_fetch = self.hash_files(to_fetch)
        if spec.source in ("dir", "bundle") and to_fetch:
            first = to_fetch[0].path
            why = core.verify_file(spec.local_dir, first, to_fetch[0]) or "changed"
            raise FetchError(
                f"{len(to_fetch)} of {len(metas)} files missing or wrong in {spec.local_dir} ({first}: {why}); "
                + (
                    "the bundle's copy differs from its manifest: re-copy the bundle (`hgxkit bundle verify`)"
                    if spec.source == "bundle"
                    else "model_source dir only verifies: copy the model there, or use model_source hub"
                )
            )
        if to_fetch:
            self.to_fetch = to_fetch
            for m in to_fetch:  # wrong or partial copies in place are useless: their space counts as free
                _forget(spec, m.path)
            remove_orphans(spec.local_dir, {core.content_key(m) for m in to_fetch})
            self.disk_check(to_fetch, xet=False)  # before the first request for a file
            if not spec.from_parent:
                self.hub = HubBodies(spec, self.token, self.commit)
                big = max(to_fetch, key=lambda m: m.size)
                ask = f"asking {spec.where} for {big.path}"
                if spec.xet and with_retries(spec, ask, lambda: self.hub.in_xet(big), self.rep.log):  # type: ignore[union-attr]
                    self.xet_space()  # a Xet repo: hf_xet's caches are checked before the first byte
            self.journal()
            self.fetch(to_fetch)
        files = [self.verified[m.path] for m in metas]
        new = core.Manifest(
            repo_id=spec.repo_id,
            revision=spec.revision,
            commit=self.commit,
            allow_patterns=list(spec.allow_patterns),
            source=f"{spec.source}:{spec.peer_name}" if spec.from_parent else spec.source.replace("fleet", "hub"),
            endpoint="" if spec.source == "peer" else spec.where,
            files=files,
            verified_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        )
        core.write_under(spec.local_dir, core.MANIFEST_NAME, new.to_json())
        self.manifest = new
        core.remove_under(spec.local_dir, core.JOURNAL_PATH)
        core.remove_under(spec.local_dir, core.PARTIAL_DIR)
        core.remove_under(spec.local_dir, core.STAGE_DIR)
        self.write_record(new)
        core.write_stamp(spec, new)  # last: the record and the manifest are in what it covers
        return {
            "commit": self.commit,
            "fetched": sorted(self.fetched),
            "rehashed": sorted(self.rehashed),
            "refetched_corrupt": sorted(self.refetched_corrupt),
            "resumed": sorted(self.resumed),
            "bytes": new.total_bytes,
            "seconds": round(time.time() - self.started, 3),
            "already": False,
        }

    def write_record(self, manifest: core.Manifest) -> None:
        """`<state_dir>/<name>.json`: what the verify role reads (which commit is on this host, from where)."""
        text = manifest.to_json()  # the text written to local_dir (never read back through what may be a link)
        record = {
            "name": self.spec.name,
            "repo_id": manifest.repo_id,
            "revision": manifest.revision,
            "commit": manifest.commit,
            "local_dir": self.spec.local_dir,
            "source": manifest.source,
            "endpoint": manifest.endpoint,
            "files": len(manifest.files),
            "total_bytes": manifest.total_bytes,
            "verified_at": manifest.verified_at,
            "manifest_sha256": hashlib.sha256(text.encode()).hexdigest(),
        }
        os.makedirs(self.spec.state_dir, exist_ok=True)
        core.atomic_write(self.spec.state_file(".json"), json.dumps(record, indent=1, sort_keys=True) + "\n")


# -- commands -----------------------------------------------------------------------------------------------


def read_token(args: argparse.Namespace) -> str | None:
    """The token from stdin or from a file that is deleted at once; never from argv or the environment."""
    token = None
    if getattr(args, "token_stdin", False):
        token = sys.stdin.read().strip() or None
    elif getattr(args, "token_file", None):
        path = Path(args.token_file)
        try:
            token = path.read_text().strip() or None
        except FileNotFoundError:
            token = None
        path.unlink(missing_ok=True)
    return token


def program_sha() -> str:
    """sha256 over this file and model_core.py next to it (what the role compares with the version it ships)."""
    here = os.path.dirname(os.path.abspath(__file__))
    h = hashlib.sha256()
    for name in ("hgxkit_fetch.py", "model_core.py"):
        with open(os.path.join(here, name), "rb") as f:
            h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()


def unit_active(spec: Spec) -> bool:
    if shutil.which("systemctl") is None:
        return False
    unit = core.unit_name(spec.local_dir)
    res = subprocess.run(["systemctl", "is-active", "--quiet", unit], stderr=subprocess.DEVNULL, check=False)
    return res.returncode == 0


def status(spec: Spec, token: str | None) -> dict[str, Any]:
    """The metadata-only check: is `local_dir` a verified copy of what the spec wants?"""
    started = time.time()
    out: dict[str, Any] = {"name": spec.name, "unit": core.unit_name(spec.local_dir)}
    if unit_active(spec):
        return {**out, "state": "running", "reason": "a sync is running"}
    manifest = load_manifest(spec.local_dir)
    commit: str | None = None
    files: list[core.FileMeta] | None = None
    if spec.full_rehash:
        return {**out, "state": "incomplete", "reason": "a full re-hash was asked for (model_full_rehash)"}
    if spec.program_sha and spec.program_sha != program_sha():
        return {**out, "state": "incomplete", "reason": "the role ships a newer downloader"}
    if core.is_commit(spec.revision):
        commit = spec.revision
    elif spec.source != "peer" and manifest is not None:
        try:
            commit, files = hub_files(spec, token, retry=False)
        except FetchError as err:
            if not err.transient:
                return {**out, "state": "error", "reason": str(err)}
            return {**out, "state": "incomplete", "reason": f"cannot re-resolve {spec.revision!r}: {err}"}
    check = core.check_manifest(manifest, spec.local_dir, spec.repo_id, spec.allow_patterns, commit, files)
    state = "complete" if check.ok else "incomplete"
    reason = check.reason
    if check.ok:
        try:
            record = json.loads(Path(spec.state_file(".json")).read_text())
        except (OSError, ValueError):
            record = {}
        if manifest is not None and record.get("commit") != manifest.commit:
            state, reason = "incomplete", "the host's record of the sync is missing"
    # The verdict, cached for the node's shell check (hgxkit.model.facts): written for exactly what was read here.
    if state == "complete" and manifest is not None:
        core.write_stamp(spec, manifest)
    else:
        core.remove_stamp(spec)
    commit_out = manifest.commit if manifest else commit
    return {**out, "state": state, "reason": reason, "commit": commit_out, "elapsed_s": round(time.time() - started, 3)}


def report_result(spec: Spec) -> int:
    """The role's last step: one line on how the latest sync ended; exit 1 unless it succeeded."""
    unit = core.unit_name(spec.local_dir)
    try:
        doc = json.loads(Path(spec.state_file(".result.json")).read_text())
    except (OSError, ValueError):
        doc = None
    if unit_active(spec):
        try:
            p = core.Progress(**json.loads(Path(spec.state_file(".progress.json")).read_text()))
            where = core.format_progress(p)
        except (OSError, ValueError, TypeError):
            where = "running"
        print(f"the sync is still running in {unit} ({where}): re-run the deploy to attach", file=sys.stderr)
        return 1
    if doc is None:
        print(f"{unit} ended without a result (killed?): re-run the deploy to resume", file=sys.stderr)
        return 1
    if not doc.get("ok"):
        print(str(doc.get("error")), file=sys.stderr)
        return 1
    print(
        f"{spec.repo_id}@{str(doc.get('commit'))[:12]} verified in {spec.local_dir}: fetched "
        f"{len(doc.get('fetched', []))} files, re-fetched corrupted {doc.get('refetched_corrupt', [])}"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hgxkit_fetch.py", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_status = sub.add_parser("status", help="metadata-only check; prints one JSON line")
    p_status.add_argument("--spec", required=True)
    p_status.add_argument("--token-stdin", action="store_true")
    p_run = sub.add_parser("run", help="sync (resolve, check disk, fetch, verify, write the manifest)")
    p_run.add_argument("--spec", required=True)
    p_run.add_argument("--token-file")
    p_run.add_argument("--run-id", default="")
    p_result = sub.add_parser("result", help="how the latest sync ended (exit 1 unless it succeeded)")
    p_result.add_argument("--spec", required=True)
    p_peer = sub.add_parser("peer-serve", help="answer a read of a host below (the forced command of its SSH key)")
    p_peer.add_argument("--dir", required=True)
    p_peer.add_argument("--state-dir", required=True)
    p_peer.add_argument("request", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.command == "peer-serve":
        original = os.environ.get("SSH_ORIGINAL_COMMAND")
        if original is not None:  # under the forced command: only the words after `peer-serve` count
            try:
                words = shlex.split(original)
            except ValueError:
                words = []
            request = words[words.index("peer-serve") + 1 :] if "peer-serve" in words else words
        else:
            request = args.request
        return peer_serve(args.dir, args.state_dir, request)
    token = read_token(args)
    spec = Spec.load(args.spec)
    if args.command == "status":
        print(json.dumps(status(spec, token)))
        return 0
    if args.command == "result":
        return report_result(spec)
    os.makedirs(spec.state_dir, exist_ok=True)
    core.remove_stamp(spec)  # first: from now on only this run says whether the copy is complete
    os.environ.update(spec.xet_env())  # before huggingface_hub (and hf_xet) read their settings
    run_id = args.run_id or f"{os.getpid()}-{int(time.time())}"
    rep = Reporter(spec, run_id)
    with rep:
        syncer = Syncer(spec, token, rep)
        server, code = None, 1
        if spec.source == "fleet" and spec.fleet_port >= 0 and spec.fleet_children:
            try:
                server = FleetServer(spec, syncer)
            except OSError as err:  # the hosts below copy over SSH instead
                rep.log(f"cannot serve the hosts below on port {spec.fleet_port} ({err.strerror}): they use SSH")
            except FleetRefused as err:
                rep.log(f"not serving the hosts below over HTTP: it {err}; they use SSH")
        try:
            code = _sync(spec, syncer, rep)
        finally:
            if server is not None:
                server.linger(spec.fleet_children, rep)
                server.close()
                if code == 0:
                    rep.phase(
                        "done", detail=f"{spec.repo_id}@{syncer.commit[:12]}, served {server.served / 1e9:.2f} GB"
                    )
    return code


def _sync(spec: Spec, syncer: Syncer, rep: Reporter) -> int:
    """Run the sync, write its result; 0 when the copy is complete and verified."""
    try:
        result = syncer.run()
    except FetchError as err:
        return _failed(syncer, rep, str(err))
    except Exception as err:
        traceback.print_exc()
        unit = core.unit_name(spec.local_dir)
        return _failed(syncer, rep, f"unexpected {type(err).__name__}: {str(err)[:200]}; see journalctl -u {unit}")
    rep.phase("done", detail=f"{spec.repo_id}@{result['commit'][:12]}")
    rep.result(True, **result)
    syncer.link.done()
    return 0


def _failed(syncer: Syncer, rep: Reporter, msg: str) -> int:
    rep.phase("failed", detail=msg)
    rep.result(False, error=msg)
    syncer.result = {"ok": False, "error": msg, "finished_at": time.time()}
    print(f"hgxkit-fetch: error: {msg}", file=sys.stderr, flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
