"""A fleet host serving its verified files to the hosts below it over HTTP, signed requests only."""

from __future__ import annotations

import hmac
import json
import os
import secrets
import socket
import threading
import time
from dataclasses import asdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from hgxkit.model import core

from .fleetauth import _BIND_ANY, FLEET_AUTH_WINDOW_S, FLEET_MAX_CONNECTIONS, FLEET_TIMEOUT_S, bind_problem, fleet_mac
from .parent import _parent_dir
from .progress import Reporter
from .sync import Syncer


def _serve_file(spec: core.Spec, parent: bool = True) -> str:
    """`<state_dir>/<name>.serve.json`: the port and secret of a fleet host's server (its parent's, or its own)."""
    name = core.model_name(_parent_dir(spec)) if parent else spec.name
    return os.path.join(spec.state_dir, f"{name}.serve.json")


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
        spec: core.Spec,
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
