"""HTTP plumbing shared by the stand-ins' handlers: JSON answers, chunked Server-Sent Events, request bodies.

Example:
    >>> class Hello(StandinHandler):
    ...     def do_GET(self) -> None:
    ...         self._json(200, {"hello": "simulated"})
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any


class StandinHandler(BaseHTTPRequestHandler):
    """Base handler: HTTP/1.1 keep-alive, no per-request log lines, helpers for answers and SSE streams."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return  # the stand-ins log like their servers, not like http.server

    def _send(
        self, status: int, body: bytes, ctype: str = "application/json", headers: dict[str, str] | None = None
    ) -> None:
        self._drain()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, doc: Any) -> None:
        self._send(status, json.dumps(doc).encode())

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _sse(self, doc: Any) -> None:
        payload = doc if isinstance(doc, str) else json.dumps(doc)
        self._chunk(f"data: {payload}\n\n".encode())

    def _end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _drain(self) -> None:
        """Read the request's body if no route did (a 401 or 404 answered before it): on a kept-alive connection
        its bytes would otherwise be read as the next request line, as a router's pooled connection does."""
        if getattr(self, "_read_of", None) is not self.headers:
            self._read_of = self.headers
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length and getattr(self, "_read_of", None) is not self.headers else b""
        self._read_of = self.headers
        if not raw:
            return {}
        doc = json.loads(raw)
        if not isinstance(doc, dict):
            raise ValueError("request body must be a JSON object")
        return doc
