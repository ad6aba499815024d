"""The image pull with progress, stdlib only: the node program the pull unit runs, and the controller's reading.

On the node (uploaded by the serve role, run in the unit hgxkit-image-pull): `python3 pullprogress.py REF FILE`
pulls REF through the Docker Engine API (`POST /images/create` on /var/run/docker.sock: the daemon's registry
mirrors apply, as for `docker pull`), follows every layer's byte counts in the JSON stream, and rewrites FILE
(JSON, atomically) about once a second: bytes done and known so far, layers, rate over the last seconds, and at
the end `status` `ok` or `failed: <the daemon's error>`. A registry that wants credentials (the API call sends
none) is pulled with the docker CLI instead (its own credentials), without byte counts.

On the controller: `read_progress` parses FILE's text, `progress_line` formats one line as the model sync does.

Example:
    >>> p = read_progress('{"done": 400000000, "total": 1000000000, "layers_done": 2, "layers": 5, '
    ...                   '"rate_bps": 20000000, "status": "pulling"}')
    >>> progress_line("lmsysorg/sglang:v0.5", p)
    'pulling lmsysorg/sglang:v0.5: 0.40/1.00 GB (40%) at 20.0 MB/s, ETA 0:30, 2/5 layers'
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from http.client import HTTPConnection
from urllib.parse import quote

SOCKET = "/var/run/docker.sock"
WRITE_EVERY_S = 1.0
RATE_WINDOW_S = 10.0
DONE_STATES = ("Download complete", "Verifying Checksum", "Extracting", "Pull complete", "Already exists")


def with_tag(reference: str) -> str:
    """`reference` with `:latest` when it names neither tag nor digest (the API pulls every tag otherwise).

    >>> with_tag("busybox"), with_tag("host:5000/x"), with_tag("x:1"), with_tag("x@sha256:ab")
    ('busybox:latest', 'host:5000/x:latest', 'x:1', 'x@sha256:ab')
    """
    last = reference.rsplit("/", 1)[-1]
    return reference if ":" in last or "@" in last else reference + ":latest"


class Layers:
    """Per-layer byte counts from the Engine API's pull stream; sums and a rate over the last seconds."""

    def __init__(self) -> None:
        self.total: dict[str, int] = {}
        self.done: dict[str, int] = {}
        self.finished: set[str] = set()
        self.seen: set[str] = set()
        self.samples: list[tuple[float, int]] = []

    def feed(self, message: dict) -> None:
        """Take one JSON message of the stream (`{"id", "status", "progressDetail": {"current", "total"}}`)."""
        layer, status = message.get("id"), str(message.get("status") or "")
        detail = message.get("progressDetail") or {}
        if not layer or status.startswith(("Pulling from", "Digest:", "Status:")):  # the tag's lines, not a layer
            return
        self.seen.add(layer)
        if status == "Downloading" and detail.get("total"):
            self.total[layer] = int(detail["total"])
            self.done[layer] = int(detail.get("current") or 0)
        elif status in DONE_STATES:
            if layer in self.total:
                self.done[layer] = self.total[layer]
            self.finished.add(layer)

    def snapshot(self, now: float) -> dict:
        done = sum(self.done.values())
        self.samples = [(t, b) for t, b in self.samples if now - t <= RATE_WINDOW_S] + [(now, done)]
        (t0, b0), (t1, b1) = self.samples[0], self.samples[-1]
        rate = (b1 - b0) / (t1 - t0) if t1 > t0 else 0.0
        return {
            "done": done,
            "total": sum(self.total.values()),
            "layers_done": len(self.finished),
            "layers": len(self.seen),
            "rate_bps": rate,
        }


def _write(path: str, state: dict) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(state, f)
    os.replace(tmp, path)


class _UnixConnection(HTTPConnection):
    def __init__(self, path: str, timeout: float = 3600) -> None:
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.unix_path)


def _cli_pull(reference: str, path: str, started: float) -> int:
    _write(
        path,
        {
            "status": "pulling",
            "detail": "with the docker CLI (registry credentials): no byte counts",
            "started": started,
        },
    )
    res = subprocess.run(["docker", "pull", "-q", reference], capture_output=True, text=True, check=False)
    status = "ok" if res.returncode == 0 else "failed: " + (res.stderr.strip().splitlines() or ["docker pull"])[-1]
    _write(path, {"status": status, "elapsed": time.time() - started})
    return 0 if res.returncode == 0 else 1


def _wants_credentials(message: str) -> bool:
    return any(word in message for word in ("denied", "unauthorized", "authentication required"))


def main(argv: list[str]) -> int:
    """Pull argv[1], writing progress to argv[2]; exit 0 when the image is there."""
    reference, path = with_tag(argv[1]), argv[2]
    started = time.time()
    layers = Layers()
    conn = _UnixConnection(SOCKET)
    try:
        conn.request("POST", "/images/create?fromImage=" + quote(reference, safe=""))
        response = conn.getresponse()
    except OSError as err:
        _write(path, {"status": f"failed: cannot reach the Docker daemon at {SOCKET}: {err}"})
        return 1
    if response.status != 200:
        body = response.read().decode(errors="replace")
        try:
            message = str(json.loads(body).get("message") or body)
        except ValueError:
            message = body.strip()
        if _wants_credentials(message):
            return _cli_pull(reference, path, started)
        _write(path, {"status": f"failed: {message.strip()}"})
        return 1
    last = 0.0
    for raw in response:
        try:
            message = json.loads(raw)
        except ValueError:
            continue
        if message.get("error"):
            error = str(message["error"])
            if _wants_credentials(error):
                return _cli_pull(reference, path, started)
            _write(path, {**layers.snapshot(time.time()), "status": f"failed: {error}"})
            return 1
        layers.feed(message)
        now = time.time()
        if now - last >= WRITE_EVERY_S:
            _write(path, {**layers.snapshot(now), "status": "pulling", "elapsed": now - started})
            last = now
    _write(path, {**layers.snapshot(time.time()), "status": "ok", "elapsed": time.time() - started})
    return 0


def read_progress(text: str) -> dict:
    """The progress file's JSON (`{}` when it is not there yet or half written)."""
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def progress_line(reference: str, p: dict) -> str:
    """One operator line: bytes done/known, percent, rate and ETA (the model sync's format), then layers."""
    from hgxkit.model.core import Progress, format_progress

    if not p.get("total"):
        detail = p.get("detail") or "starting"
        return f"pulling {reference}: {detail}"
    progress = Progress(
        f"pulling {reference}:", int(p.get("done") or 0), int(p["total"]), float(p.get("rate_bps") or 0)
    )
    return f"{format_progress(progress)}, {p.get('layers_done', 0)}/{p.get('layers', 0)} layers"


if __name__ == "__main__":
    sys.exit(main(sys.argv))
