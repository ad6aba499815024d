"""Multi-node start-up of the SGLang stand-in (SIMULATED torch.distributed rendezvous), so a group spanning
nodes (`--nnodes N --node-rank R --dist-init-addr HEAD:PORT`) behaves like SGLang 0.5.23's:

- rank 0 listens on the dist-init port and opens its HTTP port only when every other rank has joined with
  matching settings (TP/PP size, node count, model, version); until then `/health` is refused. A rank that
  does not join within the timeout fails it: `torch.distributed.DistStoreError: Timed out after N seconds
  waiting for clients. k/n clients joined.` A rank that leaves later ends it (as NCCL's watchdog does).
- ranks >= 1 connect to the head (retrying until the timeout, then `[c10d] The client socket has timed out
  …`), are refused on a mismatch with the head's reason, and once joined run SGLang's dummy health server
  on `--host:--port` (200 on /health, /health_generate, /ping whatever happens: probe rank 0).

The timeout is `--dist-timeout` or HGXKIT_SIM_DIST_TIMEOUT (default 600 s).

Example (what the launcher does):
    hello = Hello.of(args, version="0.5.23", model="…")
    head_wait(args, hello, log, timeout_s=600)       # rank 0: blocks until all joined, returns the links
    join(args, hello, log, timeout_s=600)            # rank >= 1: returns the connection to keep open
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

Log = Callable[[str], None]


class RendezvousError(Exception):
    """The group did not form: the message is SGLang's kind of error."""


@dataclass(frozen=True)
class Hello:
    """What a rank tells the head: settings that must be equal on every node, and its rank."""

    rank: int
    nnodes: int
    tp_size: int
    pp_size: int
    model: str
    version: str

    @classmethod
    def of(cls, args: Mapping[str, Any], *, version: str, model: str) -> Hello:
        return cls(
            int(args["node_rank"]), int(args["nnodes"]), int(args["tp_size"]), int(args["pp_size"]), model, version
        )

    def mismatch(self, other: Hello) -> str | None:
        """What differs between the head's settings and a joining rank's (None when they match)."""
        diffs = [
            f"{name} {getattr(other, name)} != head's {getattr(self, name)}"
            for name in ("nnodes", "tp_size", "pp_size", "model", "version")
            if getattr(self, name) != getattr(other, name)
        ]
        return "; ".join(diffs) or None


def split_addr(addr: str) -> tuple[str, int]:
    host, _, port = str(addr).rpartition(":")
    return host.strip("[]"), int(port)


def head_wait(args: Mapping[str, Any], hello: Hello, log: Log, timeout_s: float) -> list[socket.socket]:
    """Rank 0: accept the other ranks until all joined (or raise RendezvousError); return their sockets."""
    _, port = split_addr(args["dist_init_addr"])
    server = socket.create_server(("", port), reuse_port=False)
    server.settimeout(1.0)
    log(f"Init parallel begin. (simulated rendezvous on port {port}, waiting for {hello.nnodes - 1} node(s))")
    joined: dict[int, socket.socket] = {}
    deadline = time.monotonic() + timeout_s
    while len(joined) < hello.nnodes - 1:
        if time.monotonic() > deadline:
            server.close()
            raise RendezvousError(
                f"torch.distributed.DistStoreError: Timed out after {int(timeout_s)} seconds waiting for clients. "
                f"{len(joined) + 1}/{hello.nnodes} clients joined."
            )
        try:
            conn, peer = server.accept()
        except TimeoutError:
            continue
        conn.settimeout(10)
        try:
            other = Hello(**json.loads(conn.makefile().readline()))
        except (OSError, ValueError, TypeError):
            conn.close()
            continue
        why = hello.mismatch(other) or (f"node_rank {other.rank} joined twice" if other.rank in joined else None)
        if why or not 0 < other.rank < hello.nnodes:
            why = why or f"node_rank {other.rank} is not in 1..{hello.nnodes - 1}"
            conn.sendall(json.dumps({"ok": False, "error": why}).encode() + b"\n")
            conn.close()
            log(f"[simulated rendezvous] refused node_rank {other.rank} from {peer[0]}: {why}")
            continue
        conn.sendall(b'{"ok": true}\n')
        conn.settimeout(None)
        joined[other.rank] = conn
        log(f"[simulated rendezvous] node_rank {other.rank} joined from {peer[0]}")
    server.close()
    log("Init parallel ends. elapsed=… (simulated)")
    return list(joined.values())


def join(args: Mapping[str, Any], hello: Hello, log: Log, timeout_s: float) -> socket.socket:
    """Rank >= 1: connect to the head (retrying), be accepted or raise RendezvousError; return the socket."""
    host, port = split_addr(args["dist_init_addr"])
    deadline = time.monotonic() + timeout_s
    log(f"Init parallel begin. (simulated: node_rank {hello.rank} joining {host}:{port})")
    while True:
        try:
            conn = socket.create_connection((host, port), timeout=5)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise RendezvousError(
                    f"[c10d] The client socket has timed out after {int(timeout_s)}s while trying to connect to "
                    f"({host}, {port})."
                ) from None
            time.sleep(1)
    conn.sendall(json.dumps(asdict(hello)).encode() + b"\n")
    answer = json.loads(conn.makefile().readline() or '{"ok": false, "error": "the head closed the connection"}')
    if not answer.get("ok"):
        conn.close()
        raise RendezvousError(f"RuntimeError: the head (node_rank 0) refused this node: {answer.get('error')}")
    conn.settimeout(None)
    log("Init parallel ends. elapsed=… (simulated)")
    return conn


def watch(links: list[socket.socket], on_lost: Callable[[str], None]) -> None:
    """Call `on_lost` (once) when any of the group's connections closes: a rank left the group."""

    def one(conn: socket.socket) -> None:
        try:
            while conn.recv(1024):
                pass
        except OSError:
            pass
        on_lost(
            "NCCL error: remote process exited or there was a network error (a node of the group left; "
            "simulated watchdog)"
        )

    for conn in links:
        threading.Thread(target=one, args=(conn,), daemon=True).start()
