"""Prefill/decode disaggregation in the SGLang stand-in (hgxkit/sim/standin/sglang/disagg.py), as processes on
127.0.0.1: a prefill and a decode server take one request with the same bootstrap room at once and the decode
answers after the prefill's KV came; either refuses a request without a room; a room that never comes fails the
decode after SGLANG_DISAGGREGATION_WAITING_TIMEOUT; a bootstrap port in use refuses the prefill's start. With a
real sglang-router (its `sglang_router` package importable here, or HGXKIT_TEST_SGLANG_ROUTER_PYTHON naming an
interpreter that has it), a chat completion goes through the real router's PD mode to the two stand-ins, and the
router's answers while a decode is down are those the rollout plans with (hgxkit.serving.rollout.split_gaps)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hgxkit.sim.hub.makerepo import RepoSpec, make_repo

ROOT = Path(__file__).resolve().parents[3]
PREFILL_BASE_MS = 150  # the prefill's simulated TTFT base: the decode's TTFT must hold it
WAIT_S = 2.0  # SGLANG_DISAGGREGATION_WAITING_TIMEOUT of the decode


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    spec = RepoSpec(repo_id="org/llama-8b", total_bytes=64 << 10, shards=1, vocab_size=4096, shape="generic")
    return make_repo(tmp_path_factory.mktemp("models"), spec) / "refs/main"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """A stand-in process and its output, read as it comes (a thread drains the pipe)."""

    READY = "The server is fired up and ready to roll!"

    def __init__(self, model: Path, mode: str, *more: str, port: int | None = None, **env: str) -> None:
        self.port = port or _port()
        environ = self.environ(HGXKIT_SIM_KV_POOL_GB_PER_RANK="10", **env)
        argv = ["serve", str(model), "--host", "127.0.0.1", "--port", str(self.port)]
        argv += ["--disaggregation-mode", mode, *more]
        self.spawn([sys.executable, "-m", "hgxkit.sim.standin.sglang", *argv], environ)

    @staticmethod
    def environ(**env: str) -> dict[str, str]:
        """The stand-in's environment: this one's, ready at once, fast simulated steps, then `env`."""
        fast = {"HGXKIT_SIM_READY_DELAY_S": "0", "HGXKIT_SIM_TTFT_BASE_MS": "5", "HGXKIT_SIM_DECODE_STEP_MS": "1"}
        here = {"PYTHONPATH": str(ROOT), "NVIDIA_VISIBLE_DEVICES": "0", "HGXKIT_SIM_TTFT_LOG": os.devnull}
        return {**os.environ, **here, **fast, **env}

    def spawn(self, argv: list[str], environ: dict[str, str]) -> None:
        self.proc = subprocess.Popen(argv, env=environ, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=lambda: self.lines.extend(self.proc.stdout or []), daemon=True)
        self._reader.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait_ready(self, seconds: float = 60) -> Server:
        deadline = time.monotonic() + seconds
        while not any(self.READY in line for line in self.lines):
            assert self.proc.poll() is None, "".join(self.lines)[-2000:]
            assert time.monotonic() < deadline, f"not ready in {seconds} s: {''.join(self.lines)[-2000:]}"
            time.sleep(0.05)
        return self

    def truths(self) -> list[dict[str, Any]]:
        return json.loads(_call(self.url + "/hgxkit_sim/requests")[1])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)


def _call(url: str, body: Any = None, timeout: float = 60) -> tuple[int, bytes]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def _both(prefill: Server, decode: Server, path: str, body: dict[str, Any]) -> dict[str, tuple[int, bytes]]:
    """Send `body` to both servers at once, as the router does; their answers by role."""
    answers: dict[str, tuple[int, bytes]] = {}
    threads = [
        threading.Thread(target=lambda s=server, k=key: answers.__setitem__(k, _call(s.url + path, body)))
        for key, server in (("prefill", prefill), ("decode", decode))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return answers


@pytest.fixture(scope="module")
def pair(model: Path) -> Iterator[tuple[Server, Server, int]]:
    bootstrap = _port()
    prefill = Server(
        model,
        "prefill",
        "--disaggregation-bootstrap-port",
        str(bootstrap),
        HGXKIT_SIM_TTFT_BASE_MS=str(PREFILL_BASE_MS),
    )
    decode = Server(model, "decode", SGLANG_DISAGGREGATION_WAITING_TIMEOUT=str(WAIT_S))
    try:
        prefill.wait_ready()
        decode.wait_ready()
        yield prefill, decode, bootstrap
    finally:
        prefill.stop()
        decode.stop()


def chat_through_router(argv: list[str], port: int) -> dict[str, Any]:
    """Start the real router (`argv`, listening on `port`), send one chat completion (max_tokens 5) through it once
    it has registered its workers, stop it; the answer."""
    with tempfile.TemporaryFile() as log:
        router = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        try:
            body = {"model": "m", "messages": [{"role": "user", "content": "ba be"}], "max_tokens": 5}
            deadline = time.monotonic() + 120  # a loaded machine starts the router and checks its workers slowly
            while True:  # the router refuses or answers 503 until it has checked and registered both workers
                try:
                    status, raw = _call(f"http://127.0.0.1:{port}/v1/chat/completions", body, timeout=30)
                except OSError:
                    status, raw = 0, b""
                if status == 200 or time.monotonic() > deadline or router.poll() is not None:
                    break
                time.sleep(0.2)
            if status != 200:
                log.seek(0)
                said = log.read().decode(errors="replace")[-3000:]
                raise AssertionError(f"{status} {raw!r}; router exit {router.poll()}, its log:\n{said}")
            return json.loads(raw)
        finally:
            router.terminate()
            router.wait(timeout=20)


def _first_token_at(truth: dict[str, Any]) -> float:
    """When a side's first token left, in ms on the wall clock (each side counts its TTFT from its own arrival)."""
    return truth["received_at"] * 1000 + truth["ttft_ms"]


def _room(bootstrap: int, room: int) -> dict[str, Any]:
    return {"bootstrap_host": "127.0.0.1", "bootstrap_port": bootstrap, "bootstrap_room": room}


def test_a_request_with_a_room_is_prefilled_on_one_and_decoded_on_the_other(pair: tuple[Server, Server, int]) -> None:
    prefill, decode, bootstrap = pair
    messages = [{"role": "user", "content": "ba be bi"}]
    answers = _both(
        prefill, decode, "/v1/chat/completions", {"messages": messages, "max_tokens": 6, **_room(bootstrap, 11)}
    )
    status, raw = answers["decode"]
    assert status == 200, raw
    answer = json.loads(raw)
    assert answer["usage"]["completion_tokens"] == 6 and len(answer["choices"][0]["message"]["content"].split()) == 6
    assert answers["prefill"][0] == 200 and json.loads(answers["prefill"][1])["usage"]["completion_tokens"] == 1
    [p] = [t for t in prefill.truths() if t["bootstrap_room"] == 11]
    [d] = [t for t in decode.truths() if t["bootstrap_room"] == 11]
    assert p["output_tokens"] == 1 and d["output_tokens"] == 6 and d["simulated"] is True
    assert p["ttft_ms"] >= PREFILL_BASE_MS and _first_token_at(d) >= _first_token_at(p) - 1  # waited for the KV
    assert p["input_tokens"] == d["input_tokens"]


def test_the_decode_streams_generate_after_the_transfer(pair: tuple[Server, Server, int]) -> None:
    prefill, decode, bootstrap = pair
    body = {"text": "ba be", "sampling_params": {"max_new_tokens": 4}, "stream": True, **_room(bootstrap, 12)}
    answers = _both(prefill, decode, "/generate", body)
    status, raw = answers["decode"]
    events = [line[6:] for line in raw.decode().split("\n") if line.startswith("data: ")]
    assert status == 200 and events[-1] == "[DONE]"
    last = json.loads(events[-2])
    assert last["meta_info"]["completion_tokens"] == 4 and last["meta_info"]["finish_reason"]["type"] == "length"
    [d] = [t for t in decode.truths() if t["bootstrap_room"] == 12]
    [p] = [t for t in prefill.truths() if t["bootstrap_room"] == 12]
    assert _first_token_at(d) >= _first_token_at(p) - 1


def test_either_side_refuses_a_request_without_a_room(pair: tuple[Server, Server, int]) -> None:
    prefill, decode, _ = pair
    for server in (decode, prefill):
        status, raw = _call(server.url + "/generate", {"text": "ba", "rid": "r1"})
        assert status == 400
        message = "Invalid request: Disaggregated request received without bootstrap room id. req.rid='r1'"
        assert json.loads(raw) == {"error": {"message": message}}
    status, raw = _call(decode.url + "/v1/completions", {"prompt": "ba", "max_tokens": 2})
    error = json.loads(raw)
    assert status == 400 and error["object"] == "error" and error["code"] == 400
    assert error["message"].startswith("Invalid request: Disaggregated request received without bootstrap room id.")


def test_a_room_that_never_comes_fails_the_decode_after_the_timeout(pair: tuple[Server, Server, int]) -> None:
    _, decode, bootstrap = pair
    t0 = time.monotonic()
    status, raw = _call(decode.url + "/v1/completions", {"prompt": "ba", "max_tokens": 2, **_room(bootstrap, 13)})
    assert time.monotonic() - t0 >= WAIT_S
    error = json.loads(raw)
    assert status == 500 and error["code"] == 500
    assert "Decode transfer failed for request rank=0" in error["message"]
    assert f"KVTransferError(bootstrap_room=13): Request 13 timed out after {WAIT_S:.0f}" in error["message"]
    [d] = [t for t in decode.truths() if t["bootstrap_room"] == 13]
    assert d["output_tokens"] == 0


def test_a_prefill_whose_bootstrap_port_is_taken_does_not_start(model: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        prefill = Server(model, "prefill", "--disaggregation-bootstrap-port", str(port))
        try:
            assert prefill.proc.wait(timeout=60) == 1
        finally:
            prefill.stop()
    prefill._reader.join(timeout=10)
    assert f"error while attempting to bind on address ('127.0.0.1', {port})" in "".join(prefill.lines)


def test_a_chat_completion_through_the_real_router(pair: tuple[Server, Server, int], router_python: str) -> None:
    python = router_python
    prefill, decode, bootstrap = pair
    port = _port()
    argv = [python, "-m", "sglang_router.launch_router", "--pd-disaggregation", "--host", "127.0.0.1"]
    argv += ["--port", str(port), "--prefill", prefill.url, str(bootstrap), "--decode", decode.url]
    argv += ["--prometheus-port", str(_port())]  # its default, 29000, is one port for every router at once
    assert chat_through_router(argv, port)["usage"]["completion_tokens"] == 5
    [d] = [t for t in decode.truths() if t["bootstrap_room"] is not None and t["output_tokens"] == 5]
    [p] = [t for t in prefill.truths() if t["bootstrap_room"] == d["bootstrap_room"]]
    assert p["output_tokens"] == 1 and _first_token_at(d) >= _first_token_at(p) - 1


def test_the_real_router_while_a_decode_is_down_answers_from_another_or_at_once(
    pair: tuple[Server, Server, int], model: Path, router_python: str
) -> None:
    """With a second decode, a stopped one costs a few answers at most: 502 while a request's retries all go to it
    (cache_aware sends one prefix to one decode), until its circuit opens after 10 failed tries and the router
    sends to the other; with no decode left, the router answers 502/503 at once, never holding the request, and
    200 again within --cb-timeout-duration-secs of the decode's return (a failing decode opens the prefill's circuit
    too, so without it the split stays at 503 for the router's default minute). What split_gaps and
    router_circuit_reopen_s rely on."""
    prefill, _, bootstrap = pair
    first, second = Server(model, "decode").wait_ready(), Server(model, "decode").wait_ready()
    port, reopen_s = _port(), 2
    argv = [router_python, "-m", "sglang_router.launch_router", "--pd-disaggregation", "--host", "127.0.0.1"]
    argv += ["--port", str(port), "--prefill", prefill.url, str(bootstrap), "--decode", first.url]
    argv += ["--decode", second.url, "--cb-timeout-duration-secs", str(reopen_s), "--prometheus-port", str(_port())]
    router = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    count = iter(range(10**6))

    def ask() -> tuple[int, float]:
        body = {"text": "ba be", "rid": f"down-{next(count)}", "sampling_params": {"max_new_tokens": 3}}
        start = time.monotonic()
        try:
            status = _call(f"http://127.0.0.1:{port}/generate", body, timeout=30)[0]
        except OSError:
            status = 0
        return status, time.monotonic() - start

    def until_200(seconds: float) -> float:
        start = time.monotonic()
        while ask()[0] != 200:
            assert time.monotonic() - start < seconds, f"no 200 through the router in {seconds} s"
        return time.monotonic() - start

    try:
        until_200(60)  # the router has registered its workers
        first.stop()
        answered = [ask()[0] for _ in range(12)]
        assert set(answered) <= {200, 502} and answered.count(502) <= 3, answered
        second.stop()
        gap = [ask() for _ in range(6)]
        # At once: well under the client's 30 s timeout a held request would run into (generous for a loaded host).
        assert {status for status, _ in gap} <= {502, 503} and max(s for _, s in gap) < 15, gap
        back = Server(model, "decode", port=second.port).wait_ready()
        try:
            # Within the short circuit timeout, not the router's default minute (margin for a loaded host).
            assert until_200(40) < 30
        finally:
            back.stop()
    finally:
        router.terminate()
        router.wait(timeout=20)
        first.stop()
        second.stop()
