"""Prefill/decode disaggregation of the SGLang stand-in: the bootstrap server and a SIMULATED KV transfer.

With ``--disaggregation-mode prefill`` the stand-in runs a bootstrap HTTP server on
``--disaggregation-bootstrap-port`` (SGLang's answers ``GET /health`` with ``OK`` and ``/route``); a request that
carries ``bootstrap_room`` runs only its prefill (one token) and then marks the room's KV as ready there. With
``--disaggregation-mode decode`` a request asks ``bootstrap_host:bootstrap_port`` for its room — the stand-in's own
``GET /hgxkit_sim/kv/<room>``, a long poll, where the real engines move the KV over RDMA — waits
``HGXKIT_SIM_KV_TRANSFER_US_PER_TOKEN`` (0.5, simulated) per input token for the transfer, then decodes. So the
decode side's TTFT holds the prefill and the transfer. A room that does not arrive within
``SGLANG_DISAGGREGATION_WAITING_TIMEOUT`` seconds (300, SGLang's variable) fails the request with a 500, as
SGLang's decode does; a request without ``bootstrap_room`` is refused with SGLang's 400 on either side, unless the
transfer backend is ``fake``. ``bootstrap_host`` 2.2.2.2 (SGLang's fake host, used by its warm-up and health
checks) transfers nothing. The sources of these facts are listed in docs/simulation.md.

Example:
    >>> refusal({"text": "hi"}, "prefill", "mooncake", "r1")
    "Invalid request: Disaggregated request received without bootstrap room id. req.rid='r1'"
    >>> refusal({"text": "hi", "bootstrap_room": 7}, "decode", "mooncake", "r1") is None
    True
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from hgxkit.sim.standin.common.engine import Engine
from hgxkit.sim.standin.common.generation import Piece, run_request
from hgxkit.sim.standin.common.httpbase import StandinHandler

FAKE_BOOTSTRAP_HOST = "2.2.2.2"  # sglang.srt.disaggregation.utils: warm-up and health requests, no transfer
KV_PATH = "/hgxkit_sim/kv/"
_KEEP_ROOMS = 100_000  # rooms a decode never asked for are forgotten, oldest first


class TransferError(Exception):
    """The simulated KV transfer failed; the message is SGLang's decode-side one."""


def refusal(body: Mapping[str, Any], mode: str, backend: str, rid: str) -> str | None:
    """SGLang's scheduler refuses a request without ``bootstrap_room`` in either PD mode (400), save with the
    ``fake`` transfer backend; None when the request may run."""
    if mode in ("prefill", "decode") and body.get("bootstrap_room") is None and backend != "fake":
        return f"Invalid request: Disaggregated request received without bootstrap room id. req.rid={rid!r}"
    return None


class Rooms:
    """The prefill side's KV store: room -> what the transfer needs, with waiters for rooms not yet ready."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._ready: OrderedDict[int, dict[str, Any]] = OrderedDict()

    def put(self, room: int, input_tokens: int) -> None:
        with self._cond:
            self._ready[room] = {"room": room, "input_tokens": input_tokens, "ready_at": time.time(), "simulated": True}
            while len(self._ready) > _KEEP_ROOMS:
                self._ready.popitem(last=False)
            self._cond.notify_all()

    def take(self, room: int, timeout_s: float) -> dict[str, Any] | None:
        """Wait up to `timeout_s` for the room; a room is handed over once (then the prefill frees its KV)."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while room not in self._ready:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)
            return self._ready.pop(room)


class _BootstrapHandler(StandinHandler):
    server_version = "hgxkit-sglang-stub bootstrap (simulated)"

    def do_GET(self) -> None:
        split = urlsplit(self.path)
        rooms: Rooms = self.server.rooms  # type: ignore[attr-defined]
        if split.path == "/health":
            self._send(200, b"OK", ctype="text/plain")
        elif split.path == "/route":
            self._json(200, {"simulated": True})
        elif split.path.startswith(KV_PATH):
            timeout = float(parse_qs(split.query).get("timeout", ["0"])[0])
            found = rooms.take(int(split.path[len(KV_PATH) :]), timeout)
            if found is None:
                self._json(404, {"room": None, "simulated": True})
            else:
                self._json(200, found)
        else:
            self._json(404, {"detail": "Not Found"})


def start_bootstrap_server(host: str, port: int, rooms: Rooms) -> ThreadingHTTPServer:
    """Bind and serve in a thread; OSError when the port cannot be bound."""
    server = ThreadingHTTPServer((host, port), _BootstrapHandler)
    server.daemon_threads = True
    server.rooms = rooms  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, name="hgxkit-sim-bootstrap", daemon=True).start()
    return server


def fetch_kv(host: str, port: int, room: int, rid: str, timeout_s: float) -> dict[str, Any]:
    """Wait for `room` at the prefill's bootstrap server; TransferError with SGLang's message when it does not
    come within `timeout_s` or the prefill cannot be reached."""
    t0 = time.monotonic()
    head = f"Decode transfer failed for request rank=0 decode_req.req.rid={rid!r} decode_req.req.bootstrap_room={room}"
    url = f"http://{host}:{port}{KV_PATH}{room}?timeout={timeout_s}"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s + 10) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as err:
        if err.code != 404:
            raise TransferError(f"{head} with exception KVTransferError(bootstrap_room={room}): {err}") from None
        elapsed = time.monotonic() - t0
        why = f"Request {room} timed out after {elapsed:.1f}s in KVPoll.WaitingForInput"
    except (OSError, ValueError):
        why = "Failed to get kvcache from prefill instance, it might be dead"
    raise TransferError(f"{head} with exception KVTransferError(bootstrap_room={room}): {why}")


@dataclass
class Disaggregation:
    """One server's PD role: its mode, transfer backend, bootstrap port, and (prefill) its rooms."""

    mode: str
    backend: str
    bootstrap_port: int
    waiting_timeout_s: float = 300.0
    transfer_us_per_token: float = 0.5
    rooms: Rooms | None = None

    @classmethod
    def from_args(cls, args: Mapping[str, Any], env: Mapping[str, str]) -> Disaggregation | None:
        """None when the server is not disaggregated (``--disaggregation-mode null``)."""
        mode = str(args.get("disaggregation_mode") or "null")
        if mode == "null":
            return None
        return cls(
            mode=mode,
            backend=str(args.get("disaggregation_transfer_backend") or "mooncake"),
            bootstrap_port=int(args.get("disaggregation_bootstrap_port") or 8998),
            waiting_timeout_s=float(env.get("SGLANG_DISAGGREGATION_WAITING_TIMEOUT") or 300),
            transfer_us_per_token=float(env.get("HGXKIT_SIM_KV_TRANSFER_US_PER_TOKEN") or 0.5),
            rooms=Rooms() if mode == "prefill" else None,
        )

    def run(
        self,
        engine: Engine,
        request: tuple[str, str, int, int, float],
        vocab: Sequence[str],
        body: Mapping[str, Any],
    ) -> Iterator[Piece]:
        """One request in this role; `request` is (rid, endpoint, input tokens, max new tokens, received)."""
        rid, endpoint, n_in, max_new, received = request
        room = None if body.get("bootstrap_room") is None else int(body["bootstrap_room"])
        host = str(body.get("bootstrap_host") or "")
        if self.mode == "prefill":
            return self._prefill(run_request(engine, rid, endpoint, n_in, 1, received, vocab, room=room), room, n_in)
        if room is None or self.backend == "fake" or host == FAKE_BOOTSTRAP_HOST:  # SGLang's fake transfer
            return run_request(engine, rid, endpoint, n_in, max_new, received, vocab, room=room, prefill=_no_prefill)
        # A router given no bootstrap port sends null; the stand-in then assumes the decode's own port (unconfirmed)
        port = int(body.get("bootstrap_port") or self.bootstrap_port)
        wait = self._transfer(host, port, room, rid)
        return run_request(engine, rid, endpoint, n_in, max_new, received, vocab, room=room, prefill=wait)

    def _prefill(self, pieces: Iterator[Piece], room: int | None, n_in: int) -> Iterator[Piece]:
        try:
            for piece in pieces:
                if room is not None and self.rooms is not None:
                    self.rooms.put(room, n_in)  # the KV is computed: the decode may take it
                yield piece
        finally:
            pieces.close()

    def _transfer(self, host: str, port: int, room: int, rid: str) -> Callable[[int], float]:
        def wait(input_tokens: int) -> float:
            t0 = time.monotonic()
            fetch_kv(host, port, room, rid, self.waiting_timeout_s)
            time.sleep(self.transfer_us_per_token * input_tokens / 1e6)
            return time.monotonic() - t0

        return wait


def _no_prefill(input_tokens: int) -> float:
    return 0.0
