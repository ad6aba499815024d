#!/usr/bin/env python3
"""hgxkit_fetch: sync one model into a directory on this host (shipped to the host and started by roles/model).

Runs in the role's virtualenv (stdlib + huggingface_hub, which brings hf_xet); `hgxkit/model/core.py` is
uploaded next to it as `model_core.py`.
The role starts `run` in a systemd transient unit, so an SSH drop or a pyinfra timeout cannot kill it, and
polls the progress file it writes. `status` is the role's metadata-only check (no hashing, no download).

    hgxkit_fetch.py status --spec SPEC.json [--token-stdin]     # one JSON line: complete|incomplete|running|error
    hgxkit_fetch.py run --spec SPEC.json [--token-file F] [--run-id ID]

A sync: resolve the revision to a commit; list the files matching the allow patterns with their sizes and
hashes; check free space (files still to fetch plus a margin); fetch what is missing (from the Hub or a
mirror, or with rsync from a peer host holding a verified copy); verify every file (size; sha256 of LFS
files, git blob id of the others), re-fetching a corrupted one alone; write `.hgxkit-manifest.json` only when
all files verified, and the record `<state_dir>/<name>.json`. The token is read from a root-only file that
is deleted at once; it never reaches the command line, the environment, a log or the manifest.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
import traceback
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

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


def hub_files(spec: Spec, token: str | None, retry: bool = True) -> tuple[str, list[core.FileMeta]]:
    """Resolve the revision to a commit and list the files matching the allow patterns, with their hashes."""

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


# -- peers --------------------------------------------------------------------------------------------------


def _ssh_opts(spec: Spec) -> list[str]:
    return [
        "-i",
        spec.peer_key,
        "-o",
        "BatchMode=yes",
        "-o",
        "StrictHostKeyChecking=accept-new",
        "-o",
        f"UserKnownHostsFile={os.path.join(spec.state_dir, 'peer_known_hosts')}",
        "-o",
        "ConnectTimeout=10",
        "-o",
        "LogLevel=ERROR",
    ]


def peer_manifest(spec: Spec, log: Callable[[str], None]) -> core.Manifest:
    """The peer's manifest; waits (up to peer_wait_s) while the peer is still syncing."""
    deadline = time.time() + spec.peer_wait_s
    target = f"{spec.peer_user}@{spec.peer_address}"
    path = os.path.join(spec.peer_dir or spec.local_dir, core.MANIFEST_NAME)
    while True:
        res = subprocess.run(
            ["ssh", *_ssh_opts(spec), target, "cat", path], capture_output=True, text=True, check=False
        )
        if res.returncode == 0:
            try:
                return core.Manifest.from_json(res.stdout)
            except (ValueError, TypeError, KeyError) as err:
                raise FetchError(f"peer {spec.peer_name}: {path} is not a valid manifest ({err})") from None
        if res.returncode == 255:
            msg = (res.stderr.strip().splitlines() or ["ssh failed"])[-1]
            raise FetchError(f"cannot reach peer {spec.peer_name} at {target} over SSH: {msg}")
        if time.time() >= deadline:
            raise FetchError(
                f"peer {spec.peer_name} has no verified copy at {path} after {spec.peer_wait_s:.0f}s: "
                "deploy the model to the peer first"
            )
        log(f"waiting for peer {spec.peer_name} to finish its sync")
        time.sleep(5)


def rsync_from_peer(spec: Spec, paths: list[str]) -> None:
    """Copy `paths` from the peer's directory with rsync over SSH (partial files resume)."""
    list_file = os.path.join(spec.state_dir, f"{spec.name}.rsync-files")
    core.atomic_write(list_file, "".join(p + "\n" for p in paths))
    src = f"{spec.peer_user}@{spec.peer_address}:{(spec.peer_dir or spec.local_dir).rstrip('/')}/"
    argv = [
        "rsync",
        "-a",
        "--inplace",
        "--partial",
        f"--files-from={list_file}",
        "-e",
        " ".join(["ssh", *_ssh_opts(spec)]),
        src,
        spec.local_dir.rstrip("/") + "/",
    ]
    res = subprocess.run(argv, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        msg = (res.stderr.strip().splitlines() or [f"rsync exit {res.returncode}"])[-1]
        raise FetchError(f"rsync from peer {spec.peer_name}: {msg}", transient=True)


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
        return core.Manifest.from_json(Path(local_dir, core.MANIFEST_NAME).read_text())
    except (OSError, ValueError, TypeError, KeyError):
        return None


def _journal_path(spec: Spec) -> Path:
    return Path(spec.local_dir, core.JOURNAL_PATH)


def load_journal(spec: Spec, commit: str) -> dict[str, core.VerifiedFile]:
    try:
        doc = json.loads(_journal_path(spec).read_text())
    except (OSError, ValueError):
        return {}
    if doc.get("commit") != commit:
        return {}
    return {f["path"]: core.VerifiedFile(**f) for f in doc.get("files", [])}


def _stamp(spec: Spec, meta: core.FileMeta) -> core.VerifiedFile:
    st = os.stat(os.path.join(spec.local_dir, meta.path))
    return core.VerifiedFile(meta.path, meta.size, meta.sha256, meta.git_oid, st.st_mtime_ns)


def _matches(entry: core.VerifiedFile, meta: core.FileMeta) -> bool:
    return (entry.size, entry.sha256, entry.git_oid) == (meta.size, meta.sha256, meta.git_oid)


def prepare_dir(path: str) -> None:
    """Create `path` and prove it is writable; a one-line error otherwise."""
    try:
        os.makedirs(path, exist_ok=True)
        probe = os.path.join(path, f".hgxkit-write-test.{os.getpid()}")
        with open(probe, "w"):
            pass
        os.unlink(probe)
    except PermissionError:
        raise FetchError(
            f"permission denied at {path}: make it writable by root (or pick another model.local_dir)"
        ) from None
    except OSError as err:
        raise FetchError(f"cannot write to {path}: {err.strerror}: fix the file system or model.local_dir") from None


def remove_orphans(local_dir: str) -> None:
    """Delete partial downloads a killed run left (huggingface_hub names them uniquely, never reuses them)."""
    root = os.path.join(local_dir, HF_DOWNLOAD_CACHE)
    for dirpath, _dirs, names in os.walk(root):
        for n in names:
            if n.endswith(".incomplete"):
                Path(dirpath, n).unlink(missing_ok=True)


def _incomplete_bytes(local_dir: str) -> int:
    total = 0
    for dirpath, _dirs, names in os.walk(os.path.join(local_dir, HF_DOWNLOAD_CACHE)):
        for n in names:
            if n.endswith(".incomplete"):
                with contextlib.suppress(OSError):
                    total += os.path.getsize(os.path.join(dirpath, n))
    return total


def _forget(spec: Spec, path: str) -> None:
    """Remove a bad file and huggingface_hub's note that it has it, so it is fetched again."""
    Path(spec.local_dir, path).unlink(missing_ok=True)
    Path(spec.local_dir, HF_DOWNLOAD_CACHE, path + ".metadata").unlink(missing_ok=True)


class Syncer:
    """One sync of `spec` (see the module docstring); `run()` returns the result fields."""

    def __init__(self, spec: Spec, token: str | None, rep: Reporter) -> None:
        self.spec, self.token, self.rep = spec, token, rep
        self.verified: dict[str, core.VerifiedFile] = {}
        self._lock = threading.Lock()
        self.commit = ""
        self.fetched: list[str] = []
        self.rehashed: list[str] = []
        self.refetched_corrupt: list[str] = []

    # metadata
    def metadata(self) -> tuple[str, list[core.FileMeta]]:
        spec = self.spec
        if spec.source == "peer":
            if not (spec.peer_address and spec.peer_key):
                raise FetchError("model_source peer needs model_peer (an inventory host): set it in the inventory")
            self.rep.phase("reading the peer's manifest", detail=spec.peer_name)
            m = peer_manifest(spec, self.rep.log)
            if m.repo_id != spec.repo_id or list(m.allow_patterns) != list(spec.allow_patterns):
                raise FetchError(
                    f"peer {spec.peer_name} holds {m.repo_id} with allow_patterns {m.allow_patterns}, not "
                    f"{spec.repo_id} with {spec.allow_patterns}: sync the peer with the same recipe first"
                )
            if core.is_commit(spec.revision) and m.commit != spec.revision:
                raise FetchError(
                    f"peer {spec.peer_name} holds commit {m.commit[:12]}, the recipe pins {spec.revision[:12]}: "
                    "re-sync the peer first"
                )
            return m.commit, [core.FileMeta(f.path, f.size, f.sha256, f.git_oid) for f in m.files]
        self.rep.phase("resolving", detail=f"{spec.repo_id}@{spec.revision} at {spec.where}")
        return hub_files(spec, self.token)

    def record(self, verified: list[core.VerifiedFile]) -> None:
        self.verified.update({v.path: v for v in verified})

    def journal(self) -> None:
        with self._lock:
            doc = {"commit": self.commit, "files": [asdict(v) for v in self.verified.values()]}
            path = _journal_path(self.spec)
            path.parent.mkdir(parents=True, exist_ok=True)
            core.atomic_write(str(path), json.dumps(doc))

    def hash_files(self, metas: list[core.FileMeta]) -> list[core.FileMeta]:
        """Hash `metas` in parallel; record the good ones, return the bad ones."""
        bad: list[core.FileMeta] = []
        self.rep.phase("verifying", total=sum(m.size for m in metas), files_total=len(metas))

        def one(meta: core.FileMeta) -> None:
            problem = core.verify_file(os.path.join(self.spec.local_dir, meta.path), meta)
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

    def fetch(self, metas: list[core.FileMeta]) -> None:
        """Fetch `metas`, verify each, re-fetch a corrupted one alone (up to corrupt_refetch times)."""
        spec = self.spec
        pending = {m.path for m in metas}
        self.rep.phase("downloading", total=sum(m.size for m in metas), files_total=len(metas))

        def inflight() -> int:
            total = _incomplete_bytes(spec.local_dir)
            for p in list(pending):
                with contextlib.suppress(OSError):
                    total += os.path.getsize(os.path.join(spec.local_dir, p))
            return total

        self.rep.track(inflight)
        if spec.source == "peer":
            with_retries(spec, f"copying from peer {spec.peer_name}", lambda: rsync_from_peer(spec, sorted(pending)))
            pending.clear()
            self.fetched += [m.path for m in metas]
            bad = self.hash_files(metas)
            for attempt in range(spec.corrupt_refetch):
                if not bad:
                    break
                for m in bad:
                    _forget(spec, m.path)
                self.refetched_corrupt += [m.path for m in bad]
                with_retries(spec, "re-copying from the peer", lambda b=bad: rsync_from_peer(spec, [m.path for m in b]))
                bad = self.hash_files(bad)
                _ = attempt
            if bad:
                raise FetchError(f"{bad[0].path} from peer {spec.peer_name} is corrupted: re-sync the peer")
            return

        from huggingface_hub import hf_hub_download

        def one(meta: core.FileMeta) -> None:
            _forget(spec, meta.path)  # missing or wrong: never let huggingface_hub keep a bad copy it noted
            for n in range(spec.corrupt_refetch + 1):
                with_retries(
                    spec,
                    f"fetching {meta.path}",
                    lambda: hf_hub_download(
                        spec.repo_id,
                        meta.path,
                        revision=self.commit,
                        local_dir=spec.local_dir,
                        endpoint=spec.endpoint or None,
                        token=self.token or False,
                    ),
                    self.rep.log,
                )
                problem = core.verify_file(os.path.join(spec.local_dir, meta.path), meta)
                if problem is None:
                    with self._lock:
                        self.verified[meta.path] = _stamp(spec, meta)
                        self.fetched.append(meta.path)
                        pending.discard(meta.path)
                    self.rep.file_done(meta.size)
                    self.journal()
                    return
                self.rep.log(f"{meta.path} is corrupted ({problem}); fetching it again")
                _forget(spec, meta.path)
                with self._lock:
                    self.refetched_corrupt.append(meta.path)
                _ = n
            raise FetchError(
                f"{meta.path} is corrupted ({problem}) after {spec.corrupt_refetch + 1} fetches from {spec.where}: "
                "the server sends a bad copy; try another mirror"
            )

        with ThreadPoolExecutor(max_workers=max(1, spec.workers)) as pool:
            for fut in [pool.submit(one, m) for m in metas]:
                fut.result()

    def run(self) -> dict[str, Any]:
        spec = self.spec
        started = time.time()
        prepare_dir(spec.local_dir)
        self.commit, metas = self.metadata()
        manifest = load_manifest(spec.local_dir)
        if manifest is not None:
            ok = core.check_manifest(manifest, spec.local_dir, spec.repo_id, spec.allow_patterns, self.commit, metas)
            if ok.ok and not spec.full_rehash:
                self.write_record(manifest)
                return {"commit": self.commit, "fetched": [], "rehashed": [], "seconds": 0.0, "already": True}
            # Never leave a manifest that claims files this run may replace.
            Path(spec.local_dir, core.MANIFEST_NAME).unlink(missing_ok=True)
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
        if spec.source == "dir" and to_fetch:
            first = to_fetch[0].path
            why = core.verify_file(os.path.join(spec.local_dir, first), to_fetch[0]) or "changed"
            raise FetchError(
                f"{len(to_fetch)} of {len(metas)} files missing or wrong in {spec.local_dir} ({first}: {why}); "
                "model_source dir only verifies: copy the model there, or use model_source hub"
            )
        if to_fetch:
            remove_orphans(spec.local_dir)
            on_disk = sum(_size_or_none(spec.local_dir, m.path) or 0 for m in to_fetch)
            remaining = sum(m.size for m in to_fetch)
            need = core.disk_need(remaining, spec.margin_pct, spec.margin_gb)
            free = shutil.disk_usage(spec.local_dir).free + on_disk
            short = core.disk_shortfall(need, free, spec.local_dir)
            if short:
                raise FetchError(
                    f"{short} ({len(to_fetch)} files, {core.format_bytes(remaining)} to fetch + margin): "
                    "free space there, or choose another model.local_dir"
                )
            self.fetch(to_fetch)
        files = [self.verified[m.path] for m in metas]
        new = core.Manifest(
            repo_id=spec.repo_id,
            revision=spec.revision,
            commit=self.commit,
            allow_patterns=list(spec.allow_patterns),
            source=spec.source if spec.source != "peer" else f"peer:{spec.peer_name}",
            endpoint=spec.where if spec.source != "peer" else "",
            files=files,
            verified_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        )
        core.atomic_write(os.path.join(spec.local_dir, core.MANIFEST_NAME), new.to_json())
        _journal_path(spec).unlink(missing_ok=True)
        self.write_record(new)
        return {
            "commit": self.commit,
            "fetched": sorted(self.fetched),
            "rehashed": sorted(self.rehashed),
            "refetched_corrupt": sorted(self.refetched_corrupt),
            "bytes": new.total_bytes,
            "seconds": round(time.time() - started, 3),
            "already": False,
        }

    def write_record(self, manifest: core.Manifest) -> None:
        """`<state_dir>/<name>.json`: what the verify role reads (which commit is on this host, from where)."""
        text = Path(self.spec.local_dir, core.MANIFEST_NAME).read_text()
        import hashlib

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


def _size_or_none(local_dir: str, path: str) -> int | None:
    try:
        return os.path.getsize(os.path.join(local_dir, path))
    except OSError:
        return None


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
    import hashlib

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
    args = parser.parse_args(argv)
    token = read_token(args)
    spec = Spec.load(args.spec)
    if args.command == "status":
        print(json.dumps(status(spec, token)))
        return 0
    if args.command == "result":
        return report_result(spec)
    os.makedirs(spec.state_dir, exist_ok=True)
    run_id = args.run_id or f"{os.getpid()}-{int(time.time())}"
    rep = Reporter(spec, run_id)
    with rep:
        try:
            result = Syncer(spec, token, rep).run()
        except FetchError as err:
            rep.phase("failed", detail=str(err))
            rep.result(False, error=str(err))
            print(f"hgxkit-fetch: error: {err}", file=sys.stderr, flush=True)
            return 1
        except Exception as err:
            traceback.print_exc()
            msg = (
                f"unexpected {type(err).__name__}: {str(err)[:200]}; see journalctl -u {core.unit_name(spec.local_dir)}"
            )
            rep.phase("failed", detail=msg)
            rep.result(False, error=msg)
            return 1
        rep.phase("done", detail=f"{spec.repo_id}@{result['commit'][:12]}")
        rep.result(True, **result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
