"""HTTP server speaking the part of the Hugging Face Hub API that `huggingface_hub` uses (simulated).

Endpoints (model repos; ``{rev}`` is URL-quoted, e.g. ``refs%2Fpr%2F1``):

- ``GET /api/models/{org}/{name}`` and ``…/revision/{rev}``: model info (``sha`` = the commit); with
  ``?blobs=true`` (what ``model_info(files_metadata=True)`` sends) siblings carry size, blobId and lfs.
- ``GET /api/models/{org}/{name}/tree/{rev}[/{path}]?recursive=…``: the tree listing.
- ``POST /api/models/{org}/{name}/paths-info/{rev}``: form ``paths=…&expand=…``.
- ``GET /api/models/{org}/{name}/refs``: branches with their commits.
- ``HEAD|GET /{org}/{name}/resolve/{rev}/{path}``: small files are served directly with ``ETag`` (git
  oid), ``X-Repo-Commit``; LFS files answer ``302`` to ``/_lfs/{sha256}`` with ``X-Linked-Etag``
  (sha256), ``X-Linked-Size`` and ``X-Repo-Commit``, as the Hub redirects to its CDN. No ``X-Xet-*``
  header is ever sent, so `huggingface_hub` uses plain HTTP and `hf_xet` is not needed.
- ``Range: bytes=a-[b]`` on file bodies → ``206`` (resume).
- Errors carry ``X-Error-Code`` (``RepoNotFound``, ``RevisionNotFound``, ``EntryNotFound``, ``GatedRepo``)
  and ``X-Error-Message``, which is how `huggingface_hub` picks its exception classes.
- Control: ``GET|POST /_hubsim/faults`` (see `faults`), ``GET|DELETE /_hubsim/requests`` (request log).
- Any repo id: with an auto root (``serve`` has one by default), a repo id found nowhere is answered with a
  small synthetic repository generated on first use, deterministic per id (`makerepo.auto_spec`).

Example:
    ``python3 -m hgxkit.sim.hub serve --root /srv/hub --port 8088`` then
    ``HF_ENDPOINT=http://127.0.0.1:8088 hf download deepseek-ai/DeepSeek-V4-Flash-DSpark``.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import socket
import sys
import threading
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from hgxkit.sim.hub.faults import FaultConfig, FaultState
from hgxkit.sim.hub.store import FileEntry, Repo, RepoStore, Snapshot

_SEND_CHUNK = 64 << 10
_CREATED = "2026-06-27T00:00:00.000Z"


@dataclass(frozen=True)
class RequestRecord:
    """One served request, for tests and debugging (``GET /_hubsim/requests``); `client` is the caller's
    address, so a log can show which host read which file."""

    method: str
    path: str
    range: str | None
    status: int
    body_bytes: int
    authorized: bool
    client: str = ""


class HubError(Exception):
    """An error answer in the Hub's shape."""

    def __init__(self, status: int, code: str | None, message: str, commit: str | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.commit = status, code, message, commit


class HubState:
    """What the handler threads share: the store, fault switches, the request log, a signing secret."""

    def __init__(self, root: Path, faults: FaultConfig | None = None, auto_root: Path | None = None) -> None:
        self.store = RepoStore(root, auto_root)
        self.faults = FaultState(faults or FaultConfig())
        self.secret = secrets.token_hex(16)
        self._lock = threading.Lock()
        self.requests: list[RequestRecord] = []

    def record(self, rec: RequestRecord) -> None:
        with self._lock:
            self.requests.append(rec)
            del self.requests[:-10000]

    def sign(self, sha256: str) -> str:
        return hashlib.sha256(f"{self.secret}:{sha256}".encode()).hexdigest()[:32]


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def tree_entry(f: FileEntry) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": "file", "oid": f.git_oid, "size": f.size, "path": f.path}
    if f.lfs:
        entry["lfs"] = {"oid": f.sha256, "size": f.size, "pointerSize": f.pointer_size}
    return entry


def folder_entry(snap: Snapshot, folder: str) -> dict[str, Any]:
    inner = "".join(f"{p}\0{f.git_oid}\n" for p, f in sorted(snap.files.items()) if p.startswith(folder + "/"))
    return {"type": "directory", "oid": hashlib.sha1(inner.encode()).hexdigest(), "size": 0, "path": folder}


def model_info_doc(repo: Repo, snap: Snapshot, blobs: bool) -> dict[str, Any]:
    """The `/api/models/{id}` document; siblings with sizes and LFS info when `blobs`."""
    siblings: list[dict[str, Any]] = []
    for f in snap.files.values():
        sib: dict[str, Any] = {"rfilename": f.path}
        if blobs:
            sib["size"] = f.size
            sib["blobId"] = f.git_oid
            if f.lfs:
                sib["lfs"] = {"sha256": f.sha256, "size": f.size, "pointerSize": f.pointer_size}
        siblings.append(sib)
    config: dict[str, Any] = {}
    cfg = snap.files.get("config.json")
    if cfg is not None:
        full = json.loads(cfg.disk_path.read_text())
        config = {k: full[k] for k in ("architectures", "model_type") if k in full}
    mtime = max((f.disk_path.stat().st_mtime for f in snap.files.values()), default=time.time())
    org = repo.repo_id.split("/")[0]
    return {
        "_id": hashlib.sha1(repo.repo_id.encode()).hexdigest()[:24],
        "id": repo.repo_id,
        "modelId": repo.repo_id,
        "author": org,
        "sha": snap.commit,
        "lastModified": _iso(mtime),
        "createdAt": _CREATED,
        "private": False,
        "gated": repo.settings.gated,
        "disabled": False,
        "downloads": 0,
        "likes": 0,
        "library_name": "transformers",
        "tags": ["transformers", "safetensors", "text-generation", "simulated"],
        "pipeline_tag": "text-generation",
        "config": config,
        "cardData": {"license": "mit", "simulated": True},
        "siblings": siblings,
        "spaces": [],
        "usedStorage": sum(f.size for f in snap.files.values()),
        "simulated": True,
    }


class HubHandler(BaseHTTPRequestHandler):
    """Routes one request; `server.state` is the shared `HubState`."""

    protocol_version = "HTTP/1.1"
    server_version = "hgxkit-hubsim/0.1 (simulated)"

    @property
    def state(self) -> HubState:
        return self.server.state  # type: ignore[attr-defined]

    def log_message(self, format: str, *args: Any) -> None:
        if os.environ.get("HGXKIT_HUB_ACCESS_LOG"):
            sys.stderr.write(f"hubsim: {self.address_string()} {format % args}\n")

    # -- plumbing -------------------------------------------------------------------------------------

    def _token(self) -> str | None:
        auth = self.headers.get("Authorization", "")
        return auth[7:].strip() if auth.lower().startswith("bearer ") else None

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None, ctype: str = "") -> None:
        # Logged before the answer leaves, so a test that reads the log once its client has the answer sees it.
        self._log(status, 0 if self.command == "HEAD" else len(body))
        self.send_response(status)
        hdrs = {"Content-Type": ctype or "application/json; charset=utf-8", "Content-Length": str(len(body))}
        hdrs.update(headers or {})
        for k, v in hdrs.items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, doc: Any, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(doc).encode(), headers)

    def _log(self, status: int, nbytes: int) -> None:
        self.state.record(
            RequestRecord(
                method=self.command,
                path=self.path,
                range=self.headers.get("Range"),
                status=status,
                body_bytes=nbytes,
                authorized=self._token() is not None,
                client=str(self.client_address[0]),
            )
        )

    def _error(self, err: HubError) -> None:
        headers = {"X-Error-Message": err.message}
        if err.code:
            headers["X-Error-Code"] = err.code
        if err.commit:
            headers["X-Repo-Commit"] = err.commit
        self._json(err.status, {"error": err.message}, headers)

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    # -- lookups ----------------------------------------------------------------------------------------

    def _repo(self, repo_id: str, need_read: bool) -> Repo:
        repo = None if self.state.faults.hides(repo_id) else self.state.store.get(repo_id)
        if repo is None:
            raise HubError(
                401,
                "RepoNotFound",
                "Repository not found",
            )
        if need_read and repo.settings.gated:
            token = self._token()
            if token is None:
                raise HubError(
                    401,
                    "GatedRepo",
                    f"Access to model {repo_id} is restricted. You must have access to it and be "
                    "authenticated to access it. Please log in.",
                )
            if token not in repo.settings.tokens:
                raise HubError(
                    403,
                    "GatedRepo",
                    f"Access to model {repo_id} is restricted and you are not in the authorized list. "
                    f"Visit https://huggingface.co/{repo_id} to ask for access.",
                )
        return repo

    @staticmethod
    def _snapshot(repo: Repo, rev: str) -> Snapshot:
        snap = repo.resolve(rev)
        if snap is None:
            raise HubError(404, "RevisionNotFound", f"Invalid rev id: {rev}")
        return snap

    # -- verbs ------------------------------------------------------------------------------------------

    def do_HEAD(self) -> None:
        self._dispatch()

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def do_DELETE(self) -> None:
        self._dispatch()

    def _dispatch(self) -> None:
        split = urlsplit(self.path)
        raw_parts = [p for p in split.path.split("/") if p]
        query = parse_qs(split.query)
        try:
            if raw_parts[:1] == ["_hubsim"]:
                self._control(raw_parts[1:])
            elif raw_parts[:1] == ["_lfs"] and len(raw_parts) == 2:
                self._lfs(raw_parts[1], query)
            elif raw_parts[:2] == ["api", "models"] and len(raw_parts) >= 4:
                self._api(raw_parts[2:], query)
            elif raw_parts[:2] == ["api", "whoami-v2"]:
                token = self._token()
                if token is None:
                    raise HubError(401, None, "Invalid credentials in Authorization header")
                self._json(200, {"type": "user", "name": "hubsim-user", "auth": {"type": "access_token"}})
            elif len(raw_parts) >= 5 and raw_parts[2] == "resolve":
                repo_id = f"{raw_parts[0]}/{raw_parts[1]}"
                rev = unquote(raw_parts[3])
                self._resolve(repo_id, rev, unquote("/".join(raw_parts[4:])))
            else:
                raise HubError(404, None, f"Not found: {split.path}")
        except HubError as err:
            self._error(err)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _control(self, parts: list[str]) -> None:
        if parts == ["faults"]:
            if self.command == "POST":
                try:
                    self.state.faults.set(FaultConfig.from_json(json.loads(self._read_body() or b"{}")))
                except (ValueError, TypeError) as exc:
                    raise HubError(400, None, str(exc)) from exc
            self._json(200, self.state.faults.config.to_json())
        elif parts == ["requests"]:
            if self.command == "DELETE":
                self.state.requests.clear()
                self._json(200, [])
            else:
                self._json(200, [asdict(r) for r in list(self.state.requests)])
        else:
            raise HubError(404, None, "unknown control endpoint")

    def _api(self, parts: list[str], query: dict[str, list[str]]) -> None:
        repo_id = f"{parts[0]}/{parts[1]}"
        rest = parts[2:]
        flag = query.get("blobs", ["false"])[0].lower() == "true"
        if not rest or rest[0] == "revision":
            repo = self._repo(repo_id, need_read=False)
            rev = unquote(rest[1]) if len(rest) >= 2 else "main"
            snap = self._snapshot(repo, rev)
            self._json(200, model_info_doc(repo, snap, blobs=flag))
        elif rest[0] == "tree" and len(rest) >= 2:
            repo = self._repo(repo_id, need_read=False)
            snap = self._snapshot(repo, unquote(rest[1]))
            prefix = unquote("/".join(rest[2:]))
            recursive = query.get("recursive", ["false"])[0].lower() == "true"
            self._json(200, self._tree(snap, prefix, recursive))
        elif rest[0] == "paths-info" and len(rest) >= 2 and self.command == "POST":
            repo = self._repo(repo_id, need_read=False)
            snap = self._snapshot(repo, unquote(rest[1]))
            form = parse_qs(self._read_body().decode())
            wanted = form.get("paths", [])
            out: list[dict[str, Any]] = []
            folders = set(snap.folders())
            for path in wanted:
                if path in snap.files:
                    out.append(tree_entry(snap.files[path]))
                elif path in folders:
                    out.append(folder_entry(snap, path))
            self._json(200, out)
        elif rest == ["refs"]:
            repo = self._repo(repo_id, need_read=False)
            branches = [
                {"name": b, "ref": f"refs/heads/{b}", "targetCommit": repo.snapshot(b).commit} for b in repo.branches()
            ]
            self._json(200, {"branches": branches, "converts": [], "tags": []})
        else:
            raise HubError(404, None, f"Not found: {self.path}")

    @staticmethod
    def _tree(snap: Snapshot, prefix: str, recursive: bool) -> list[dict[str, Any]]:
        folders = snap.folders()
        if prefix and prefix not in folders:
            raise HubError(404, "EntryNotFound", f"{prefix} does not exist on {snap.branch}", snap.commit)
        base = prefix + "/" if prefix else ""
        out: list[dict[str, Any]] = []
        for folder in folders:
            if folder.startswith(base) and folder != prefix and (recursive or "/" not in folder[len(base) :]):
                out.append(folder_entry(snap, folder))
        for path, f in snap.files.items():
            if path.startswith(base) and (recursive or "/" not in path[len(base) :]):
                out.append(tree_entry(f))
        return out

    def _resolve(self, repo_id: str, rev: str, path: str) -> None:
        repo = self._repo(repo_id, need_read=True)
        snap = self._snapshot(repo, rev)
        entry = snap.files.get(path)
        if entry is None:
            raise HubError(404, "EntryNotFound", f"Entry not found: {path}", snap.commit)
        common = {"X-Repo-Commit": snap.commit, "Accept-Ranges": "bytes"}
        if entry.lfs:
            # The Hub answers LFS files with a redirect to its CDN; here the "CDN" is this same server.
            location = f"/_lfs/{entry.sha256}?" + (
                f"repo={quote(repo_id, safe='')}&path={quote(path, safe='')}"
                f"&commit={snap.commit}&sig={self.state.sign(entry.sha256)}"
            )
            headers = {
                **common,
                "Location": location,
                "ETag": f'"{entry.git_oid}"',
                "X-Linked-Etag": f'"{entry.sha256}"',
                "X-Linked-Size": str(entry.size),
            }
            self._send(302, b"", headers, ctype="text/plain; charset=utf-8")
            return
        self._file_body(entry, path, {**common, "ETag": f'"{entry.git_oid}"'})

    def _lfs(self, sha256: str, query: dict[str, list[str]]) -> None:
        # Like a signed CDN url: the signature stands in for authorisation, no token needed.
        if query.get("sig", [""])[0] != self.state.sign(sha256):
            raise HubError(403, None, "Request signature does not match")
        repo = self.state.store.get(query.get("repo", [""])[0])
        commit = query.get("commit", [""])[0]
        path = query.get("path", [""])[0]
        snap = repo.resolve(commit) if repo else None
        entry = snap.files.get(path) if snap else None
        if entry is None or entry.sha256 != sha256:
            raise HubError(404, None, "Object not found")
        self._file_body(entry, path, {"X-Repo-Commit": commit, "ETag": f'"{sha256}"', "Accept-Ranges": "bytes"})

    def _file_body(self, entry: FileEntry, path: str, headers: dict[str, str]) -> None:
        start, end = 0, entry.size - 1
        status = 200
        rng = self.headers.get("Range")
        if rng:
            parsed = _parse_range(rng, entry.size)
            if parsed is None:
                self._send(416, b"", {**headers, "Content-Range": f"bytes */{entry.size}"})
                return
            start, end = parsed
            status = 206
            headers = {**headers, "Content-Range": f"bytes {start}-{end}/{entry.size}"}
        length = max(end - start + 1, 0)
        if self.command == "HEAD":  # logged before the answer leaves (see _send)
            self._log(status, 0)
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(length))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        if self.command == "HEAD":
            return
        faults = self.state.faults
        cfg = faults.config if faults.applies(path) else FaultConfig()
        # The drop point is a file offset: a resumed request that starts before it is cut there again.
        drop_at = faults.take_drop(path, start)
        drop_after = None if drop_at is None else drop_at - start
        sent = 0
        t0 = time.monotonic()
        with entry.disk_path.open("rb") as fh:
            fh.seek(start)
            while sent < length:
                chunk = bytearray(fh.read(min(_SEND_CHUNK, length - sent)))
                if not chunk:
                    break
                if cfg.corrupt_offset is not None and start + sent <= cfg.corrupt_offset < start + sent + len(chunk):
                    chunk[cfg.corrupt_offset - start - sent] ^= 0xFF
                if drop_after is not None and sent + len(chunk) >= drop_after:
                    chunk = chunk[: max(drop_after - sent, 0)]
                    self.wfile.write(chunk)
                    sent += len(chunk)
                    self.wfile.flush()
                    self._log(status, sent)
                    # Abort like a broken network: no more bytes, connection gone.
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                    return
                self.wfile.write(chunk)
                sent += len(chunk)
                if cfg.rate_bps:
                    ahead = sent / cfg.rate_bps - (time.monotonic() - t0)
                    if ahead > 0:
                        time.sleep(ahead)
        self._log(status, sent)


def _parse_range(header: str, size: int) -> tuple[int, int] | None:
    """``bytes=a-b`` / ``bytes=a-`` / ``bytes=-n`` → inclusive (start, end); None if unsatisfiable."""
    if not header.startswith("bytes=") or "," in header:
        return None
    first, _, last = header[6:].strip().partition("-")
    try:
        if first == "":
            n = int(last)
            return (max(size - n, 0), size - 1) if n > 0 and size > 0 else None
        start = int(first)
        end = int(last) if last else size - 1
    except ValueError:
        return None
    if start >= size or end < start:
        return None
    return start, min(end, size - 1)


class HubServer(ThreadingHTTPServer):
    """The threaded server; `state` is shared with handlers."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr: tuple[str, int], state: HubState) -> None:
        super().__init__(addr, HubHandler)
        self.state = state


def make_server(
    root: Path,
    host: str = "127.0.0.1",
    port: int = 0,
    faults: FaultConfig | None = None,
    auto_root: Path | None = None,
) -> HubServer:
    """Create (not start) a server; port 0 picks a free port (see ``server.server_address``). With `auto_root`,
    any valid repo id not under `root` is generated there on first use (`store.RepoStore`)."""
    return HubServer((host, port), HubState(Path(root), faults, auto_root))
