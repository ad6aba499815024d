"""The vLLM stand-in's simulated multi-node start-up (hgxkit/sim/standin/vllm/cluster.py), as processes on
127.0.0.1: a Ray cluster (`ray start`) under `--distributed-executor-backend ray`, and data-parallel ranks over
hosts (`--data-parallel-size-local`, `--headless --data-parallel-start-rank`). The head answers /health only
once the group is whole; a host that leaves ends it; a host that does not fit is refused with the reason."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from hgxkit.sim.hub.makerepo import RepoSpec, make_repo
from hgxkit.sim.standin.vllm import cluster
from hgxkit.sim.standin.vllm.cluster import ray_status

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    spec = RepoSpec(repo_id="org/llama-8b", total_bytes=64 << 10, shards=1, vocab_size=4096, shape="generic")
    return make_repo(tmp_path_factory.mktemp("models"), spec) / "refs/main"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)


def _spawn(procs: list[subprocess.Popen[str]], *argv: str, **env: str) -> subprocess.Popen[str]:
    environ = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "HGXKIT_SIM_DIST_TIMEOUT": "20",
        "HGXKIT_SIM_READY_DELAY_S": "0",
        "HGXKIT_SIM_TTFT_LOG": os.devnull,
        **env,
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "hgxkit.sim.standin.vllm", *argv],
        env=environ,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    procs.append(proc)
    return proc


class _Log:
    """A process's output read as it comes (a thread drains the pipe), so a test waits for a line, not a time."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self._reader = threading.Thread(target=lambda: self.lines.extend(proc.stdout or []), daemon=True)
        self._reader.start()

    def wait_for(self, text: str, seconds: float = 30) -> None:
        deadline = time.monotonic() + seconds
        while not any(text in line for line in self.lines):
            assert time.monotonic() < deadline, f"no {text!r} in {seconds} s: {''.join(self.lines)[-2000:]}"
            time.sleep(0.05)

    def text(self) -> str:
        self._reader.join(timeout=20)
        return "".join(self.lines)


def _health(port: int) -> int | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as err:
        return err.code
    except OSError:
        return None


def _wait_health(port: int, proc: subprocess.Popen[str], seconds: float = 20) -> int | None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        if _health(port) == 200:
            return 200
        time.sleep(0.2)
    return _health(port)


def _dp(model: Path, http: int, rpc: int, *more: str) -> list[str]:
    return [
        "serve",
        str(model),
        "--port",
        str(http),
        "--data-parallel-size",
        "4",
        "--data-parallel-size-local",
        "2",
        "--data-parallel-address",
        "127.0.0.1",
        "--data-parallel-rpc-port",
        str(rpc),
        *more,
    ]


def test_the_dp_head_serves_once_the_other_host_brought_its_ranks(model: Path, procs) -> None:
    http, rpc = _port(), _port()
    head = _spawn(procs, *_dp(model, http, rpc))
    log = _Log(head)
    log.wait_for("waiting for the others on RPC port")
    assert head.poll() is None and _health(http) is None  # bound, not listening: the group is not whole
    other = _spawn(procs, *_dp(model, _port(), rpc, "--headless", "--data-parallel-start-rank", "2"))
    assert _wait_health(http, head) == 200
    other.kill()
    assert head.wait(timeout=20) == 1  # a host of the group left: the head ends too
    said = log.text()
    assert "data parallel ranks 2..3 joined from 127.0.0.1 (4/4)" in said
    assert "Engine core proc died unexpectedly (a host of the data parallel group left; simulated)" in said


def test_a_host_whose_ranks_overlap_the_heads_is_refused(model: Path, procs) -> None:
    http, rpc = _port(), _port()
    head = _spawn(procs, *_dp(model, http, rpc))
    other = _spawn(procs, *_dp(model, _port(), rpc, "--headless", "--data-parallel-start-rank", "0"))
    assert other.wait(timeout=30) == 1
    out = other.stdout.read() if other.stdout else ""
    assert (
        "RuntimeError: the data parallel head refused these engines: rank(s) 0, 1 are already in the group (simulated)"
    ) in out
    assert head.poll() is None and _health(http) is None


def test_the_dp_head_times_out_naming_the_ranks_that_joined(model: Path, procs) -> None:
    http, rpc = _port(), _port()
    head = _spawn(procs, *_dp(model, http, rpc), HGXKIT_SIM_DIST_TIMEOUT="2")
    assert head.wait(timeout=30) == 1
    out = head.stdout.read() if head.stdout else ""
    assert "TimeoutError: Timed out waiting for engines to send initial message on input socket: 2/4 data " in out


def test_vllm_on_ray_serves_once_the_cluster_has_its_gpus(model: Path, procs) -> None:
    ray, http = _port(), _port()
    one = {"HGXKIT_SIM_NODE_GPUS": "1"}  # hosts of one GPU: tp 2 needs both
    _spawn(procs, "ray", "start", "--block", "--head", "--node-ip-address=127.0.0.1", f"--port={ray}", **one)
    deadline = time.monotonic() + 20
    while ray_status("127.0.0.1", ray) is None and time.monotonic() < deadline:
        time.sleep(0.2)  # the head is up before the server looks for it (as after `ray start` returned)
    server = _spawn(
        procs,
        "serve",
        str(model),
        "--port",
        str(http),
        "--tensor-parallel-size",
        "2",
        "--distributed-executor-backend",
        "ray",
        RAY_ADDRESS=f"127.0.0.1:{ray}",
        **one,
    )
    log = _Log(server)
    log.wait_for("Waiting for creating a placement group of specs for 0 seconds")
    assert server.poll() is None and _health(http) is None  # the placement group waits for the second node
    worker = _spawn(procs, "ray", "start", "--block", f"--address=127.0.0.1:{ray}", **one)
    assert _wait_health(http, server) == 200
    status = subprocess.run(
        [sys.executable, "-m", "hgxkit.sim.standin.vllm", "ray", "status", "--address", f"127.0.0.1:{ray}"],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert status.stdout.splitlines()[1:] == ["Active: 2 node(s)", "Resources: 0.0/2.0 GPU"]
    worker.kill()
    assert server.wait(timeout=20) == 1
    out = log.text()
    assert "Waiting for creating a placement group of specs for 0 seconds. specs=2 x {'GPU': 1.0}" in out
    assert "RayActorError: The actor died unexpectedly before finishing this task (a node of the Ray cluster" in out


def test_vllm_on_ray_without_a_cluster_lacks_gpus(model: Path, procs) -> None:
    server = _spawn(
        procs,
        "serve",
        str(model),
        "--port",
        str(_port()),
        "--tensor-parallel-size",
        "2",
        "--distributed-executor-backend",
        "ray",
        RAY_ADDRESS=f"127.0.0.1:{_port()}",
        HGXKIT_SIM_NODE_GPUS="1",
    )
    assert server.wait(timeout=30) == 1
    out = server.stdout.read() if server.stdout else ""
    assert (
        "ValueError: The number of required GPUs exceeds the total number of available GPUs in the placement "
        "group. (simulated: no Ray cluster is running here, 1 local GPU(s), 2 needed)"
    ) in out


def test_a_blocked_ray_worker_stays_joined_while_the_cluster_is_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    """`ray start --block --address=…` stays in the cluster as long as the head does, however quiet the link (it
    once left after the connect timeout, and a two-node group fell apart right after it served)."""
    monkeypatch.setattr(cluster, "CONNECT_TIMEOUT_S", 0.2)
    port = _port()
    head = cluster.RayHead(port, 1, lambda line: None)
    threading.Thread(target=head.serve_forever, daemon=True).start()
    threading.Thread(target=cluster._start_worker, args=(f"127.0.0.1:{port}", 1, True, {}), daemon=True).start()
    deadline = time.monotonic() + 10
    while head.status()["nodes"] < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)  # five connect timeouts of quiet
    assert head.status() == {"nodes": 2, "gpus": 2}
