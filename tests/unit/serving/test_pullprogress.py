"""The image pull's progress (hgxkit/serving/pullprogress.py): the node program against a fake Docker socket,
the layer arithmetic and the operator's line."""

from __future__ import annotations

import json
import socketserver
import threading
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import ClassVar

import pytest

from hgxkit.serving import pullprogress
from hgxkit.serving.pullprogress import Layers, progress_line, read_progress

MB = 1_000_000
STREAM = [
    {"status": "Pulling from lmsysorg/sglang", "id": "v0.5"},
    {"status": "Pulling fs layer", "progressDetail": {}, "id": "aaa"},
    {"status": "Already exists", "progressDetail": {}, "id": "ccc"},
    {"status": "Downloading", "progressDetail": {"current": 100 * MB, "total": 600 * MB}, "id": "aaa"},
    {"status": "Downloading", "progressDetail": {"current": 50 * MB, "total": 400 * MB}, "id": "bbb"},
    {"status": "Download complete", "progressDetail": {}, "id": "bbb"},
    {"status": "Digest: sha256:" + "ab" * 32},
]


def test_layers_sum_the_known_bytes_and_count_finished_layers() -> None:
    layers = Layers()
    for message in STREAM:
        layers.feed(message)
    snap = layers.snapshot(10.0)
    assert (snap["done"], snap["total"], snap["layers_done"], snap["layers"]) == (500 * MB, 1000 * MB, 2, 3)
    assert layers.snapshot(15.0)["rate_bps"] == 0.0  # nothing new in 5 s
    layers.feed({"status": "Downloading", "progressDetail": {"current": 300 * MB, "total": 600 * MB}, "id": "aaa"})
    assert layers.snapshot(20.0)["rate_bps"] == 20 * MB  # 200 MB more over the 10 s window


def test_the_operator_line_has_bytes_rate_eta_and_layers() -> None:
    p = {"done": 250 * MB, "total": 1000 * MB, "layers_done": 1, "layers": 4, "rate_bps": 25 * MB, "status": "pulling"}
    assert progress_line("hgxkit-sim/big:1", p) == (
        "pulling hgxkit-sim/big:1: 0.25/1.00 GB (25%) at 25.0 MB/s, ETA 0:30, 1/4 layers"
    )
    assert progress_line("x:1", {"status": "pulling"}) == "pulling x:1: starting"
    assert read_progress('{"done": 1') == {}


class _Docker(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    lines: ClassVar[list[dict]] = []
    asked: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        type(self).asked.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        for message in self.lines:
            self.wfile.write((json.dumps(message) + "\r\n").encode())

    def address_string(self) -> str:  # a unix socket has no client address
        return "docker.sock"

    def log_message(self, *args: object) -> None:
        pass


class _UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


@pytest.mark.parametrize(
    ("tail", "rc", "status"),
    [
        ([], 0, "ok"),
        (
            [{"errorDetail": {"message": "no space"}, "error": "write /var/lib/docker: no space"}],
            1,
            "failed: write /var/lib/docker: no space",
        ),
    ],
)
def test_the_node_program_follows_the_engine_api_stream(tmp_path: Path, monkeypatch, tail, rc, status) -> None:
    sock = str(tmp_path / "docker.sock")
    _Docker.lines, _Docker.asked = [*STREAM, *tail], []
    server = _UnixServer(sock, _Docker)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setattr(pullprogress, "SOCKET", sock)
    try:
        out = tmp_path / "progress.json"
        assert pullprogress.main(["pullprogress.py", "lmsysorg/sglang", str(out)]) == rc
    finally:
        server.shutdown()
        server.server_close()
    assert _Docker.asked == ["/images/create?fromImage=lmsysorg%2Fsglang%3Alatest"]
    final = json.loads(out.read_text())
    assert (final["status"], final["done"], final["total"], final["layers"]) == (status, 500 * MB, 1000 * MB, 3)


def test_the_pull_unit_runs_the_program_or_docker_pull_without_python3() -> None:
    from hgxkit.hostcmd import text
    from hgxkit.serving.steps import start_pull_command

    command = text(start_pull_command("lmsysorg/sglang:dev", "/var/lib/hgxkit/serve/pullprogress.py", "/p.json"))
    assert command == (
        "systemctl reset-failed hgxkit-image-pull >/dev/null 2>&1; systemctl is-active --quiet hgxkit-image-pull || "
        "{ rm -f /p.json; systemd-run --unit hgxkit-image-pull --collect --quiet /bin/sh -c 'if command -v python3 "
        ">/dev/null 2>&1; then exec python3 /var/lib/hgxkit/serve/pullprogress.py lmsysorg/sglang:dev /p.json; "
        "else exec docker pull -q lmsysorg/sglang:dev; fi'; }"
    )
