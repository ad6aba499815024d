"""Multi-node start-up of the vLLM stand-in (SIMULATED): a Ray cluster and vLLM's data parallelism over hosts.

- **Ray** (`ray start`, the `ray` command of the stand-in image): `ray start --head --port=P` starts a head that
  holds the cluster (every node's GPUs) on port P; `ray start --address=HEAD:P` joins it (with `--block` it
  stays until stopped; it ends when the head goes away). `vllm serve … --distributed-executor-backend ray` then
  waits, as vLLM's placement group does, until the cluster has tp x pp x dp GPUs (logging "Waiting for creating a
  placement group …") and only then opens its port: `/health` answers only when every node has joined. A
  node that leaves later ends the server (Ray's actor death). No Ray cluster on the host: vLLM's error about
  the GPUs the placement group lacks.
- **Data parallelism over hosts**: the head (`--data-parallel-size N --data-parallel-size-local n
  --data-parallel-address A --data-parallel-rpc-port P`, no `--headless`) listens on P and opens its HTTP port
  only when the headless hosts (`--headless --data-parallel-start-rank k`) have brought every rank; a host whose
  ranks overlap, fall outside 0..N-1 or disagree on N, the model or the version is refused with the reason.

The timeout is HGXKIT_SIM_DIST_TIMEOUT (default 600 s). Every message says `simulated`.

Example:
    python3 -m hgxkit.sim.standin.vllm ray start --head --port=6379          # as `ray start --head`
    python3 -m hgxkit.sim.standin.vllm ray start --block --address=10.0.0.1:6379
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from hgxkit.sim.standin.vllm import checks

Log = Callable[[str], None]
RAY_PORT = 6379
DP_RPC_PORT = 29550  # vLLM's default data_parallel_rpc_port
CONNECT_TIMEOUT_S = 5.0  # one connection attempt (and a status query); not how long a joined node stays


class ClusterError(Exception):
    """The group did not form: the message is the kind of error vLLM (or Ray) gives."""


def timeout_s(env: Mapping[str, str]) -> float:
    return float(env.get("HGXKIT_SIM_DIST_TIMEOUT", "600") or 600)


def _send(conn: socket.socket, message: Mapping[str, Any]) -> None:
    conn.sendall(json.dumps(message).encode() + b"\n")


def _receive(conn: socket.socket) -> dict[str, Any]:
    line = conn.makefile().readline()
    return json.loads(line) if line.strip() else {}


def _connect(host: str, port: int, deadline: float) -> socket.socket | None:
    """A connection to host:port, retried until `deadline` (None when it never answered)."""
    while True:
        try:
            return socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S)
        except OSError:
            if time.monotonic() > deadline:
                return None
            time.sleep(1)


def _on_close(conn: socket.socket, lost: Callable[[], None]) -> None:
    """Call `lost` when the peer closes `conn` (in a thread)."""

    def wait() -> None:
        try:
            while conn.recv(1024):
                pass
        except OSError:
            pass
        lost()

    threading.Thread(target=wait, daemon=True).start()


# -- Ray ---------------------------------------------------------------------------------------------------


class RayHead:
    """The head of a simulated Ray cluster: its nodes' GPUs, on a TCP port (joins and `status` queries)."""

    def __init__(self, port: int, gpus: int, log: Log) -> None:
        self.port, self.log = port, log
        self.nodes: dict[str, int] = {"head": gpus}
        self.lock = threading.Lock()
        self.server = socket.create_server(("", port))

    def status(self) -> dict[str, int]:
        with self.lock:
            return {"nodes": len(self.nodes), "gpus": sum(self.nodes.values())}

    def serve_forever(self) -> None:
        while True:
            conn, peer = self.server.accept()
            threading.Thread(target=self._one, args=(conn, peer), daemon=True).start()

    def _one(self, conn: socket.socket, peer: tuple[str, int]) -> None:
        try:
            hello = _receive(conn)
        except (OSError, ValueError):
            conn.close()
            return
        if hello.get("status"):
            _send(conn, self.status())
            conn.close()
            return
        node = f"{peer[0]}:{peer[1]}"
        with self.lock:
            self.nodes[node] = int(hello.get("gpus", 0))
        self.log(
            f"[simulated Ray] node {peer[0]} joined with {hello.get('gpus', 0)} GPU(s); "
            f"{self.status()['nodes']} node(s) alive"
        )
        _send(conn, {"ok": True})

        def left() -> None:
            with self.lock:
                self.nodes.pop(node, None)
            self.log(f"[simulated Ray] node {peer[0]} left; {self.status()['nodes']} node(s) alive")

        _on_close(conn, left)


def ray_status(host: str, port: int) -> dict[str, int] | None:
    """The cluster's nodes and GPUs from its head, or None when no head answers."""
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S) as conn:
            _send(conn, {"status": True})
            return _receive(conn) or None
    except (OSError, ValueError):
        return None


def ray_main(argv: list[str], env: Mapping[str, str] | None = None) -> int:
    """`ray start|status|stop …` of the stand-in image (module doc)."""
    env = os.environ if env is None else env
    parser = argparse.ArgumentParser(prog="ray", description="SIMULATED Ray (hgxkit stand-in)")
    sub = parser.add_subparsers(dest="command", required=True)
    start = sub.add_parser("start")
    start.add_argument("--head", action="store_true")
    start.add_argument("--address", default=None)
    start.add_argument("--port", type=int, default=RAY_PORT)
    start.add_argument("--node-ip-address", default=None)
    start.add_argument("--num-gpus", type=int, default=None)
    start.add_argument("--block", action="store_true")
    start.add_argument("--daemon", action="store_true", help=argparse.SUPPRESS)
    status = sub.add_parser("status")
    status.add_argument("--address", default=None)
    sub.add_parser("stop")
    args, _ = parser.parse_known_args(argv)  # Ray's other options (ports, resources) are accepted, not simulated
    if args.command == "status":
        host, _, port = (args.address or env.get("RAY_ADDRESS") or f"127.0.0.1:{RAY_PORT}").rpartition(":")
        found = ray_status(host or "127.0.0.1", int(port))
        if found is None:
            print("ConnectionError: Could not find any running Ray instance. (simulated)", file=sys.stderr)
            return 1
        print(
            f"======== Cluster status (simulated) ========\nActive: {found['nodes']} node(s)\n"
            f"Resources: 0.0/{found['gpus']}.0 GPU"
        )
        return 0
    if args.command == "stop":
        return 0
    gpus = args.num_gpus if args.num_gpus is not None else checks.visible_gpus(env)
    if args.head:
        return _start_head(args, gpus, env, argv)
    if not args.address:
        print("ValueError: `ray start` needs --head or --address=HEAD:PORT (simulated)", file=sys.stderr)
        return 1
    return _start_worker(args.address, gpus, args.block, env)


def _log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _start_head(args: argparse.Namespace, gpus: int, env: Mapping[str, str], argv: list[str]) -> int:
    if args.block or args.daemon:
        try:
            head = RayHead(args.port, gpus, _log)
        except OSError as err:
            _log(f"ConnectionError: Ray's GCS port {args.port} is in use: {err.strerror} (simulated)")
            return 1
        if not args.daemon:
            _ready_lines(args.port, args.node_ip_address)
        head.serve_forever()
        return 0
    # without --block Ray starts its processes in the background and returns (as `ray start --head` does)
    root = str(Path(__file__).resolve().parents[4])  # the directory holding the `hgxkit` package
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (root, os.environ.get("PYTHONPATH"))))}
    subprocess.Popen(
        [sys.executable, "-m", "hgxkit.sim.standin.vllm", "ray", *argv, "--daemon"],
        env=environ,
        start_new_session=True,
        stdout=sys.stderr,
        stderr=sys.stderr,
    )
    deadline = time.monotonic() + 30
    while ray_status("127.0.0.1", args.port) is None:
        if time.monotonic() > deadline:
            _log(f"RuntimeError: the Ray head did not start on port {args.port} (simulated)")
            return 1
        time.sleep(0.2)
    _ready_lines(args.port, args.node_ip_address)
    return 0


def _ready_lines(port: int, address: str | None) -> None:
    _log("Local node IP: " + (address or "127.0.0.1"))
    _log("--------------------\nRay runtime started. (simulated)\n--------------------")
    _log(f"To add another node to this Ray cluster, run\n  ray start --address='{address or '<head>'}:{port}'")


def _start_worker(address: str, gpus: int, block: bool, env: Mapping[str, str]) -> int:
    host, _, port = address.strip("'\"").rpartition(":")
    conn = _connect(host, int(port), time.monotonic() + timeout_s(env))
    if conn is None:
        _log(
            f"ConnectionError: Could not connect to the Ray head at {host}:{port} within {int(timeout_s(env))} "
            "s (simulated)"
        )
        return 1
    _send(conn, {"gpus": gpus})
    if not _receive(conn).get("ok"):
        _log(f"RuntimeError: the Ray head at {host}:{port} refused this node (simulated)")
        return 1
    _log(f"Ray runtime started; this node joined the cluster at {host}:{port} with {gpus} GPU(s). (simulated)")
    if not block:
        return 0
    # A joined node stays as long as its head (real Ray's `--block`): an idle connection is not a lost one. With
    # the connect timeout left on, the node "lost" its head after 5 quiet seconds and the group fell apart.
    conn.settimeout(None)
    ended = threading.Event()
    _on_close(conn, ended.set)
    ended.wait()
    _log("The head of the Ray cluster went away; this node stops. (simulated)")
    return 1


def wait_for_ray(need: int, env: Mapping[str, str], log: Log) -> bool:
    """`vllm serve … --distributed-executor-backend ray`: wait until the local cluster has `need` GPUs (vLLM's
    placement group; True), or False when there is none and this host has them (vLLM starts a local Ray
    instance); raise ClusterError when there is no cluster and too few GPUs, or the cluster never has them."""
    host, _, port = (env.get("RAY_ADDRESS") or f"127.0.0.1:{RAY_PORT}").rpartition(":")
    found = ray_status(host, int(port))
    if found is None:
        gpus = checks.visible_gpus(env)
        if gpus >= need:
            return False  # a local Ray instance holds them all
        raise ClusterError(
            f"ValueError: The number of required GPUs exceeds the total number of available GPUs in "
            f"the placement group. (simulated: no Ray cluster is running here, {gpus} local GPU(s), "
            f"{need} needed)"
        )
    log(f"Connected to Ray cluster at {host}:{port}: {found['nodes']} node(s), {found['gpus']} GPU(s). (simulated)")
    limit = timeout_s(env)
    started = time.monotonic()
    said = 0.0
    while found is not None and found["gpus"] < need:
        waited = time.monotonic() - started
        if waited > limit:
            raise ClusterError(
                f"ValueError: Cannot provide a placement group of {need} GPU bundle(s) within "
                f"{int(limit)} seconds. (simulated: the cluster has {found['gpus']})"
            )
        if waited - said >= 10 or not said:
            log(
                f"Waiting for creating a placement group of specs for {int(waited)} seconds. specs={need} x "
                f"{{'GPU': 1.0}}; the cluster has {found['gpus']} GPU(s). (simulated)"
            )
            said = max(waited, 0.001)
        time.sleep(1)
        found = ray_status(host, int(port))
    if found is None:
        raise ClusterError("RuntimeError: the Ray head went away while the placement group was made (simulated)")
    log(f"[simulated Ray] placement group of {need} GPU(s) ready over {found['nodes']} node(s)")
    return True


def watch_ray(need: int, env: Mapping[str, str], lost: Callable[[str], None]) -> None:
    """Call `lost` once the cluster no longer has `need` GPUs (a node left: Ray's actors on it died)."""
    host, _, port = (env.get("RAY_ADDRESS") or f"127.0.0.1:{RAY_PORT}").rpartition(":")

    def poll() -> None:
        while True:
            time.sleep(2)
            found = ray_status(host, int(port))
            if found is None or found["gpus"] < need:
                lost(
                    "ray.exceptions.RayActorError: The actor died unexpectedly before finishing this task "
                    "(a node of the Ray cluster left; simulated)"
                )
                return

    threading.Thread(target=poll, daemon=True).start()


# -- data parallelism over hosts ---------------------------------------------------------------------------


def dp_hello(ns: argparse.Namespace, model: str, version: str) -> dict[str, Any]:
    """What a host of a data-parallel group tells the head: its ranks, and what must be equal everywhere."""
    local = int(ns.data_parallel_size_local if ns.data_parallel_size_local is not None else ns.data_parallel_size)
    return {
        "start": int(ns.data_parallel_start_rank or 0),
        "local": local,
        "size": int(ns.data_parallel_size),
        "tp": int(ns.tensor_parallel_size),
        "model": model,
        "version": version,
    }


def spans_hosts(ns: argparse.Namespace) -> bool:
    """True when this command is one host of data-parallel ranks spread over hosts."""
    local = ns.data_parallel_size_local
    return local is not None and int(local) < int(ns.data_parallel_size) and ns.data_parallel_rank is None


def _mismatch(head: Mapping[str, Any], other: Mapping[str, Any], have: set[int]) -> str | None:
    for name in ("size", "tp", "model", "version"):
        if head[name] != other.get(name):
            return f"{name} {other.get(name)} != head's {head[name]}"
    ranks = set(range(int(other["start"]), int(other["start"]) + int(other["local"])))
    if not ranks or min(ranks) < 0 or max(ranks) >= int(head["size"]):
        return f"ranks {min(ranks, default=0)}..{max(ranks, default=0)} are not in 0..{int(head['size']) - 1}"
    if ranks & have:
        return f"rank(s) {', '.join(map(str, sorted(ranks & have)))} are already in the group"
    return None


def _next_hello(server: socket.socket) -> tuple[socket.socket, tuple[str, int], dict[str, Any]] | None:
    """The next host that connects and what it says; None when none came within the accept timeout."""
    try:
        conn, peer = server.accept()
        conn.settimeout(10)
        return conn, peer, _receive(conn)
    except (OSError, ValueError):  # TimeoutError is an OSError
        return None


def dp_head_wait(
    ns: argparse.Namespace, hello: Mapping[str, Any], env: Mapping[str, str], log: Log
) -> list[socket.socket]:
    """The head: accept headless hosts on the RPC port until every DP rank is there (or raise ClusterError)."""
    port = int(ns.data_parallel_rpc_port or DP_RPC_PORT)
    server = socket.create_server(("", port))
    server.settimeout(1.0)
    size = int(hello["size"])
    have = set(range(int(hello["start"]), int(hello["start"]) + int(hello["local"])))
    log(f"[simulated] data parallel group of {size} ranks: {len(have)} here, waiting for the others on RPC port {port}")
    links: list[socket.socket] = []
    deadline = time.monotonic() + timeout_s(env)
    while len(have) < size:
        if time.monotonic() > deadline:
            server.close()
            raise ClusterError(
                f"TimeoutError: Timed out waiting for engines to send initial message on input "
                f"socket: {len(have)}/{size} data parallel ranks joined (simulated)"
            )
        arrived = _next_hello(server)
        if arrived is None:
            continue
        conn, peer, other = arrived
        why = _mismatch(hello, other, have) if other else "no hello"
        if why:
            _send(conn, {"ok": False, "error": why})
            conn.close()
            log(f"[simulated] refused the engines of {peer[0]}: {why}")
            continue
        _send(conn, {"ok": True})
        conn.settimeout(None)
        have |= set(range(int(other["start"]), int(other["start"]) + int(other["local"])))
        links.append(conn)
        log(
            f"[simulated] data parallel ranks {other['start']}..{int(other['start']) + int(other['local']) - 1} "
            f"joined from {peer[0]} ({len(have)}/{size})"
        )
    server.close()
    return links


def dp_join(ns: argparse.Namespace, hello: Mapping[str, Any], env: Mapping[str, str], log: Log) -> socket.socket:
    """A headless host: bring its ranks to the head at --data-parallel-address:--data-parallel-rpc-port."""
    host, port = str(ns.data_parallel_address or "127.0.0.1"), int(ns.data_parallel_rpc_port or DP_RPC_PORT)
    conn = _connect(host, port, time.monotonic() + timeout_s(env))
    if conn is None:
        raise ClusterError(
            f"TimeoutError: could not reach the data parallel head at tcp://{host}:{port} within "
            f"{int(timeout_s(env))} s (simulated)"
        )
    _send(conn, hello)
    answer = _receive(conn) or {"ok": False, "error": "the head closed the connection"}
    if not answer.get("ok"):
        conn.close()
        raise ClusterError(
            f"RuntimeError: the data parallel head refused these engines: {answer.get('error')} (simulated)"
        )
    conn.settimeout(None)
    log(
        f"[simulated] data parallel ranks {hello['start']}..{int(hello['start']) + int(hello['local']) - 1} joined "
        f"the head at tcp://{host}:{port}"
    )
    return conn


def watch(links: list[socket.socket], lost: Callable[[str], None]) -> None:
    """Call `lost` when a host of the group goes away (its connection closes)."""
    for conn in links:
        _on_close(
            conn,
            lambda: lost(
                "RuntimeError: Engine core proc died unexpectedly (a host of the data parallel group left; simulated)"
            ),
        )
