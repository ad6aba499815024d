"""Prefill/decode over NIXL for the vLLM stand-in (``--kv-transfer-config '{"kv_connector":"NixlConnector",…}'``):
the side channel and a SIMULATED KV transfer.

As vLLM's KVTransferConfig, a ``kv_connector`` needs a ``kv_role`` (``kv_producer``, ``kv_consumer`` or ``kv_both``),
and NixlConnector acts on each request's ``kv_transfer_params``, not on the role (vLLM's
distributed/kv_transfer/kv_connector/v1/nixl_connector.py):

- Every NIXL server binds its side channel at ``VLLM_NIXL_SIDE_CHANNEL_HOST`` (``localhost``) port
  ``VLLM_NIXL_SIDE_CHANNEL_PORT`` (5600) + its DP rank once its KV cache is registered; a port already taken ends
  the start-up with ZMQ's ``Address already in use`` (exit 1). vLLM's side channel is a ZMQ socket that hands out
  the NIXL agent's metadata; the stand-in's speaks HTTP: ``GET /hgxkit_sim/nixl/<request id>`` returns the blocks
  a prefill holds for that request, once (then they are freed).
- A request whose ``kv_transfer_params`` has ``do_remote_decode`` (the router's prefill request, ``max_tokens`` 1)
  runs its prefill, holds its blocks for ``VLLM_NIXL_ABORT_REQUEST_TIMEOUT`` seconds (480) and answers with
  ``kv_transfer_params`` naming them: ``do_remote_prefill``, ``remote_block_ids``, ``remote_engine_id``,
  ``remote_request_id``, ``remote_host``, ``remote_port``, ``tp_size``.
- A request carrying those (the router passes them to the decode) pulls the blocks from ``remote_host:remote_port``
  and waits ``HGXKIT_SIM_KV_TRANSFER_US_PER_TOKEN`` (0.5, simulated) per prompt token before its first token, so
  the decode's TTFT holds the transfer; a side channel that does not answer, or blocks already freed, fail the
  request (``kv_load_failure_policy`` ``fail``, vLLM's default) with a 500 (the stand-in's wording).
- A request without ``kv_transfer_params`` is served whole, prefill included, on either side, as vLLM's is.
- Each pull's duration, simulated wait included, is observed in ``vllm:nixl_xfer_time_seconds`` (the histogram
  NixlConnector's NixlPromMetrics exports, with its buckets), on the server that pulled: the decode's /metrics.

Example:
    >>> config_problem({"kv_connector": "NixlConnector"})[:60]
    'Please specify kv_disagg_role when kv_connector is set, supp'
    >>> config_problem({"kv_connector": "NixlConnector", "kv_role": "kv_both"}) is None
    True
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from hgxkit.sim.standin.common.engine import Histogram
from hgxkit.sim.standin.common.httpbase import StandinHandler

ROLES = ("kv_producer", "kv_both", "kv_consumer")  # config/kv_transfer.py: get_args(KVRole)
CONNECTOR = "NixlConnector"
KV_PATH = "/hgxkit_sim/nixl/"
BLOCK_SIZE = 16  # vLLM's default block size on CUDA
# NixlPromMetrics' vllm:nixl_xfer_time_seconds (nixl_connector.py): its buckets, seconds
XFER_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 5.0)
XFER_METRIC = "nixl_xfer_time_seconds"
XFER_DOC = "Histogram of transfer duration for NIXL KV Cache transfers."


class TransferError(Exception):
    """The simulated KV pull failed; the request fails (kv_load_failure_policy fail)."""


def config_problem(config: Mapping[str, Any]) -> str | None:
    """KVTransferConfig.__post_init__'s refusal of a config, or None."""
    role = config.get("kv_role")
    if role is not None and role not in ROLES:
        return f"Unsupported kv_role: {role}. Supported roles are {ROLES}"
    if config.get("kv_connector") is not None and role is None:
        return f"Please specify kv_disagg_role when kv_connector is set, supported roles are {ROLES}"
    return None


class _SideChannelHandler(StandinHandler):
    server_version = "hgxkit-vllm-stub NIXL side channel (simulated)"

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        nixl: Nixl = self.server.nixl  # type: ignore[attr-defined]
        held = nixl.take(path[len(KV_PATH) :]) if path.startswith(KV_PATH) else None
        if held is None:
            self._json(404, {"detail": "no such blocks", "simulated": True})
        else:
            self._json(200, held)


@dataclass
class Nixl:
    """One server's NixlConnector: its engine id, side channel, and the blocks its prefills hold."""

    host: str
    port: int
    tp_size: int
    abort_timeout_s: float = 480.0
    transfer_us_per_token: float = 0.5
    engine_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    xfer_time: Histogram = field(default_factory=lambda: Histogram(XFER_BUCKETS))  # seconds per pull
    _held: dict[str, tuple[float, dict[str, Any]]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None

    @classmethod
    def from_config(
        cls, config: Mapping[str, Any] | None, env: Mapping[str, str], tp_size: int, dp_rank: int
    ) -> Nixl | None:
        """None unless the server runs NixlConnector."""
        if not config or config.get("kv_connector") != CONNECTOR:
            return None
        engine_id = config.get("engine_id") or str(uuid.uuid4())
        return cls(
            host=env.get("VLLM_NIXL_SIDE_CHANNEL_HOST") or "localhost",
            port=int(env.get("VLLM_NIXL_SIDE_CHANNEL_PORT") or 5600) + dp_rank,
            tp_size=tp_size,
            abort_timeout_s=float(env.get("VLLM_NIXL_ABORT_REQUEST_TIMEOUT") or 480),
            transfer_us_per_token=float(env.get("HGXKIT_SIM_KV_TRANSFER_US_PER_TOKEN") or 0.5),
            engine_id=str(engine_id),
        )

    def bind(self) -> None:
        """Bind and serve the side channel in a thread; OSError when the port is taken."""
        server = ThreadingHTTPServer((self.host, self.port), _SideChannelHandler)
        server.daemon_threads = True
        server.nixl = self  # type: ignore[attr-defined]
        threading.Thread(target=server.serve_forever, name="nixl_handshake_listener", daemon=True).start()
        self._server = server

    def bind_error(self) -> str:
        return f"Address already in use (addr='tcp://{self.host}:{self.port}')"

    def hold(self, request_id: str, input_tokens: int) -> dict[str, Any]:
        """A finished prefill: hold its blocks and return the kv_transfer_params that name them."""
        blocks = list(range(-(-input_tokens // BLOCK_SIZE)))
        now = time.monotonic()
        with self._lock:
            for stale in [k for k, (until, _) in self._held.items() if until < now]:
                del self._held[stale]
            self._held[request_id] = (now + self.abort_timeout_s, {"input_tokens": input_tokens, "simulated": True})
        return {
            "do_remote_prefill": True,
            "do_remote_decode": False,
            "remote_block_ids": blocks,
            "remote_engine_id": self.engine_id,
            "remote_request_id": request_id,
            "remote_host": self.host,
            "remote_port": self.port,
            "tp_size": self.tp_size,
        }

    def take(self, request_id: str) -> dict[str, Any] | None:
        """The decode read the blocks: hand them over once, None when they were never held or were freed."""
        with self._lock:
            until, held = self._held.pop(request_id, (0.0, None))
        return held if held is not None and until >= time.monotonic() else None

    def pull(self, params: Mapping[str, Any]) -> Callable[[int], float]:
        """The decode side of a request carrying the prefill's params: pull now (TransferError when it fails), and
        a prefill stand-in for `run_request` that waits the simulated transfer time."""
        t0 = time.monotonic()
        wanted = ("remote_block_ids", "remote_engine_id", "remote_request_id", "remote_host", "remote_port")
        if not all(params.get(k) is not None for k in wanted):
            raise TransferError(f"Got invalid KVTransferParams: {dict(params)}")
        url = f"http://{params['remote_host']}:{params['remote_port']}{KV_PATH}{params['remote_request_id']}"
        try:
            with urllib.request.urlopen(url, timeout=30) as resp:
                json.loads(resp.read())
        except urllib.error.HTTPError as err:
            raise TransferError(f"KV load failed for request {params['remote_request_id']}: {err}") from None
        except (OSError, ValueError) as err:
            where = f"{params['remote_host']}:{params['remote_port']}"
            raise TransferError(f"NIXL handshake with {where} failed: {err}") from None

        def wait(input_tokens: int) -> float:
            time.sleep(self.transfer_us_per_token * input_tokens / 1e6)
            took = time.monotonic() - t0
            with self._lock:
                self.xfer_time.observe(took)
            return took

        return wait

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
