"""Prefill/decode over NIXL in the vLLM stand-in (hgxkit/sim/standin/vllm/nixl.py), as processes on 127.0.0.1: the
prefill request (kv_transfer_params do_remote_decode) answers with the params that name its blocks, the decode
request carrying them pulls the blocks over the prefill's side channel before its first token, and blocks pulled
once are gone (the pull timed in vllm:nixl_xfer_time_seconds); a request without params is served whole, as
vLLM's is; a side-channel port in use or a connector without kv_role ends the start-up. With the real vllm-router
(vllm_router_python), a chat completion goes through its --vllm-pd-disaggregation mode to the two stand-ins."""

from __future__ import annotations

import json
import re
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_standin_pd import Server, _call, _first_token_at, _port, chat_through_router

from hgxkit.sim.hub.makerepo import RepoSpec, make_repo

ROOT = Path(__file__).resolve().parents[3]
PREFILL_BASE_MS = 150  # the prefill's simulated TTFT base: the decode's first token must come after it


def _config(role: str, connector: str = "NixlConnector") -> str:
    return json.dumps({"kv_connector": connector, "kv_role": role} if role else {"kv_connector": connector})


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    spec = RepoSpec(repo_id="org/qwen-8b", total_bytes=64 << 10, shards=1, vocab_size=4096, shape="generic")
    return make_repo(tmp_path_factory.mktemp("models"), spec) / "refs/main"


class VServer(Server):
    """A vLLM stand-in process with a --kv-transfer-config and its own side-channel port."""

    READY = "Application startup complete."

    def __init__(self, model: Path, config: str, side_channel: int, **env: str) -> None:
        self.port, self.side_channel = _port(), side_channel
        environ = self.environ(VLLM_NIXL_SIDE_CHANNEL_PORT=str(side_channel), **env)
        argv = [sys.executable, "-m", "hgxkit.sim.standin.vllm", "serve", str(model), "--host", "127.0.0.1"]
        self.spawn(
            [*argv, "--port", str(self.port), "--served-model-name", "m", "--kv-transfer-config", config], environ
        )

    def exit_output(self) -> tuple[int, str]:
        code = self.proc.wait(timeout=60)
        self._reader.join(timeout=10)
        return code, "".join(self.lines)


@pytest.fixture(scope="module")
def pair(model: Path) -> Iterator[tuple[VServer, VServer]]:
    prefill = VServer(model, _config("kv_producer"), _port(), HGXKIT_SIM_TTFT_BASE_MS=str(PREFILL_BASE_MS))
    decode = VServer(model, _config("kv_consumer"), _port())
    try:
        yield prefill.wait_ready(), decode.wait_ready()
    finally:
        prefill.stop()
        decode.stop()


def _prefill(prefill: VServer, text: str) -> dict[str, Any]:
    """The router's prefill request (vllm-router 0.1.17: max_tokens 1, stream false, do_remote_decode)."""
    params = {"do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None, "remote_block_ids": None}
    body = {"model": "m", "messages": [{"role": "user", "content": text}], "max_tokens": 1, "stream": False}
    status, raw = _call(prefill.url + "/v1/chat/completions", {**body, "kv_transfer_params": params})
    assert status == 200, raw
    return json.loads(raw)


def test_the_prefill_names_its_blocks_and_the_decode_pulls_them(pair: tuple[VServer, VServer]) -> None:
    prefill, decode = pair
    params = _prefill(prefill, "ba be bi")["kv_transfer_params"]
    assert params["do_remote_prefill"] is True and params["do_remote_decode"] is False
    assert (params["remote_host"], params["remote_port"], params["tp_size"]) == ("localhost", prefill.side_channel, 1)
    assert params["remote_block_ids"] and params["remote_request_id"].startswith("chatcmpl-")
    body = {"model": "m", "messages": [{"role": "user", "content": "ba be bi"}], "max_tokens": 6}
    status, raw = _call(decode.url + "/v1/chat/completions", {**body, "kv_transfer_params": params})
    assert status == 200, raw
    assert json.loads(raw)["usage"]["completion_tokens"] == 6
    p, d = prefill.truths()[-1], decode.truths()[-1]
    assert p["output_tokens"] == 1 and p["ttft_ms"] >= PREFILL_BASE_MS and d["output_tokens"] == 6
    assert p["input_tokens"] == d["input_tokens"] and _first_token_at(d) >= _first_token_at(p) - 1
    again = _call(decode.url + "/v1/chat/completions", {**body, "kv_transfer_params": params})
    assert again[0] == 500 and "KV load failed for request" in json.loads(again[1])["error"]["message"]
    pulled, held = _xfer_count(decode), _xfer_count(prefill)
    assert pulled is not None and pulled >= 1 and held == 0  # the transfer is timed where it is pulled


def _xfer_count(server: VServer) -> float | None:
    """vllm:nixl_xfer_time_seconds_count on the server's /metrics (the pulls it timed), None when absent."""
    text = _call(server.url + "/metrics")[1].decode()
    found = re.search(r'^vllm:nixl_xfer_time_seconds_count\{engine="0",model_name="m"\} (\S+)$', text, re.M)
    return float(found.group(1)) if found else None


def test_a_request_without_params_is_served_whole_on_either_side(pair: tuple[VServer, VServer]) -> None:
    for server in pair:
        status, raw = _call(server.url + "/v1/completions", {"model": "m", "prompt": "ba", "max_tokens": 3})
        assert status == 200 and json.loads(raw)["usage"]["completion_tokens"] == 3
        assert json.loads(raw)["kv_transfer_params"] is None


def test_a_decode_whose_prefill_is_unreachable_fails_the_request(pair: tuple[VServer, VServer]) -> None:
    _, decode = pair
    params = {"do_remote_prefill": True, "remote_block_ids": [0], "remote_engine_id": "e", "remote_request_id": "x"}
    params |= {"remote_host": "127.0.0.1", "remote_port": _port(), "tp_size": 1}
    status, raw = _call(decode.url + "/v1/completions", {"prompt": "ba", "max_tokens": 2, "kv_transfer_params": params})
    assert status == 500 and "NIXL handshake with 127.0.0.1" in json.loads(raw)["error"]["message"]


def test_a_side_channel_port_in_use_ends_the_start_up(model: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = VServer(model, _config("kv_both"), port)
        code, output = server.exit_output()
    assert code == 1
    assert f"zmq.error.ZMQError: Address already in use (addr='tcp://localhost:{port}')" in output


def test_a_connector_without_kv_role_ends_the_start_up(model: Path) -> None:
    code, output = VServer(model, _config(""), _port()).exit_output()
    assert code == 1 and "ValueError: Please specify kv_disagg_role when kv_connector is set" in output


def test_a_chat_completion_through_the_real_vllm_router(pair: tuple[VServer, VServer], vllm_router_python: str) -> None:
    prefill, decode = pair
    port = _port()
    argv = [vllm_router_python, "-m", "vllm_router.launch_router", "--vllm-pd-disaggregation", "--policy"]
    argv += ["round_robin", "--host", "127.0.0.1", "--port", str(port), "--prefill", prefill.url]
    argv += ["--decode", decode.url, "--kv-connector", "nixl", "--prometheus-port", str(_port())]
    assert chat_through_router(argv, port)["usage"]["completion_tokens"] == 5
    d = decode.truths()[-1]
    [p] = [t for t in prefill.truths() if t["rid"] == d["rid"]]  # the router sends one request id to both
    assert p["output_tokens"] == 1 and d["output_tokens"] == 5 and _first_token_at(d) >= _first_token_at(p) - 1
