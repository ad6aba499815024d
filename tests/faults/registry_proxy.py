"""A registry stand-in's faulty front for the fault matrix's image-pull cases (test-tree code; runs on the node).

    python3 registry_proxy.py LISTEN_PORT UPSTREAM_PORT FAULT_FILE

Forwards every request to the node's registry on 127.0.0.1:UPSTREAM_PORT. While FAULT_FILE holds
`{"mode": "drop" | "corrupt", "count": N, "min_size": BYTES}`, the next N whole-blob answers (200, at least
`min_size` bytes) are spoiled: `drop` sends the headers and half the body, then closes the connection; `corrupt`
sends the whole body with its middle byte flipped (same length, so only the digest can tell). Each spoiled
answer is noted in FAULT_FILE's `done` list. Standard library only (the node's python3).
"""

from __future__ import annotations

import http.client
import http.server
import json
import socket
import sys
import threading

LOCK = threading.Lock()
HOP = {"connection", "transfer-encoding", "content-length", "keep-alive"}


def take_fault(path: str, size: int) -> str:
    """The fault to do to this answer ('' for none), counted down in the fault file."""
    with LOCK:
        try:
            with open(FAULT_FILE) as f:
                fault = json.load(f)
        except (OSError, ValueError):
            return ""
        if fault.get("count", 0) <= 0 or size < fault.get("min_size", 0):
            return ""
        fault["count"] -= 1
        fault.setdefault("done", []).append(f"{fault['mode']} {path} ({size} bytes)")
        with open(FAULT_FILE, "w") as f:
            json.dump(fault, f)
        return fault["mode"]


class Front(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.forward()

    def do_HEAD(self) -> None:
        self.forward()

    def forward(self) -> None:
        upstream = http.client.HTTPConnection("127.0.0.1", UPSTREAM, timeout=120)
        upstream.putrequest(self.command, self.path, skip_accept_encoding=True)
        for key, value in self.headers.items():  # every line: Docker sends one Accept per manifest type
            if key.lower() not in HOP | {"host"}:
                upstream.putheader(key, value)
        upstream.endheaders()
        answer = upstream.getresponse()
        body = answer.read()
        fault = ""
        if self.command == "GET" and answer.status == 200 and "/blobs/sha256:" in self.path:
            fault = take_fault(self.path, len(body))
        self.send_response(answer.status)
        for key, value in answer.getheaders():
            if key.lower() not in HOP:
                self.send_header(key, value)
        length = int(answer.getheader("Content-Length") or len(body)) if self.command == "HEAD" else len(body)
        self.send_header("Content-Length", str(length))
        self.end_headers()
        if fault == "corrupt":
            middle = len(body) // 2
            body = body[:middle] + bytes([body[middle] ^ 0xFF]) + body[middle + 1 :]
        if fault == "drop":
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return
        if self.command == "GET":
            self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        sys.stderr.write(f"registry front: {format % args}\n")


if __name__ == "__main__":
    LISTEN, UPSTREAM, FAULT_FILE = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    http.server.ThreadingHTTPServer(("127.0.0.1", LISTEN), Front).serve_forever()
