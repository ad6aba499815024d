"""A vLLM stand-in inside the calling Python process, on 127.0.0.1 (for tests and tools; simulated).

`start` parses a ``vllm serve`` command line exactly as the stand-in's launcher does, runs the same start-up
checks, and serves from a thread; the latency model comes from `env` (``HGXKIT_SIM_*``), not the process
environment. Start-up refusals raise `StartupRefused` with the exit status and the log.

Example:
    >>> with start(Path("/models/tiny"), "--served-model-name", "tiny", env={"HGXKIT_SIM_TTFT_BASE_MS": "5"}) as sim:
    ...     urllib.request.urlopen(sim.url + "/health").status  # doctest: +SKIP
    200
"""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from hgxkit.sim.standin.vllm import args as vargs
from hgxkit.sim.standin.vllm.launcher import Log, announce, prepare
from hgxkit.sim.standin.vllm.server import VllmApp, VllmServer


class StartupRefused(Exception):
    """The stand-in refused to start (as `vllm serve` would exit with `status`); `log` is what it printed."""

    def __init__(self, status: int, log: str) -> None:
        # the message is the error the traceback ends with ("ValueError: …", possibly several lines)
        tail = log.rsplit("Traceback (most recent call last):\n", 1)[-1].split("\n", 1)[-1].strip()
        super().__init__(tail or f"exit status {status}")
        self.status = status
        self.log = log


@dataclass
class Running:
    """A started stand-in: its base URL, shared state, server and the log it wrote so far."""

    url: str
    app: VllmApp
    server: VllmServer
    log: io.StringIO


@contextmanager
def start(model: Path | str, *flags: str, env: Mapping[str, str] | None = None) -> Iterator[Running]:
    """Serve ``vllm serve MODEL FLAGS…`` on 127.0.0.1 (a free port unless ``--port`` is in `flags`)."""
    argv = [str(model), "--host", "127.0.0.1", "--port", "0", *flags]
    stream = io.StringIO()
    log = Log(stream)
    ns, warnings = vargs.parse_serve(argv)
    for line in warnings:
        log(line, "argparse_utils.py:389", "WARNING")
    prepared = prepare(ns, dict(env or {}), log, truth_log=io.StringIO())
    if isinstance(prepared, int):
        raise StartupRefused(prepared, stream.getvalue())
    server, _ = prepared
    if server is None:
        raise ValueError("--headless starts no API server: nothing to serve in-process")
    announce(server, log)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Running(f"http://127.0.0.1:{server.server_address[1]}", server.app, server, stream)
    finally:
        server.shutdown()
        server.server_close()
