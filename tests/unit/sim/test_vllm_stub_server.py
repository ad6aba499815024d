"""The vLLM stand-in's HTTP API in vLLM 0.33's shapes, in-process on 127.0.0.1 with a fast latency model."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from hgxkit.sim.hub.makerepo import RepoSpec, make_repo
from hgxkit.sim.standin.vllm.inprocess import start

ROOT = Path(__file__).resolve().parents[3]
FAST = {
    "HGXKIT_SIM_TTFT_BASE_MS": "20",
    "HGXKIT_SIM_PREFILL_US_PER_TOKEN": "4",
    "HGXKIT_SIM_DECODE_STEP_MS": "1",
    "HGXKIT_SIM_DECODE_MS_PER_RUNNING": "0",
    "HGXKIT_SIM_SEED": "3",
}


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    spec = RepoSpec(repo_id="org/llama-8b", total_bytes=64 << 10, shards=1, vocab_size=4096, shape="generic")
    return make_repo(tmp_path_factory.mktemp("models"), spec) / "refs/main"


def _req(url: str, body: Any = None, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def _events(raw: bytes) -> list[str]:
    """The SSE payloads of a streamed answer, as vLLM frames them (``data: …\\n\\n``)."""
    text = raw.decode()
    assert text.endswith("data: [DONE]\n\n")
    return [block.removeprefix("data: ") for block in text.split("\n\n") if block]


def test_health_version_load_and_models(model: Path) -> None:
    with start(model, "--served-model-name", "llama", "alias", "--max-model-len", "8192", env=FAST) as sim:
        assert _req(sim.url + "/health") == (200, b"")
        assert _req(sim.url + "/ping") == (200, b"")
        assert json.loads(_req(sim.url + "/version")[1]) == {"version": "0.33.0"}
        assert json.loads(_req(sim.url + "/load")[1]) == {"server_load": 0}
        status, body = _req(sim.url + "/v1/models")
        doc = json.loads(body)
        assert status == 200 and b'"object":"list"' in body  # compact JSON, as FastAPI writes it
        assert [c["id"] for c in doc["data"]] == ["llama", "alias"]
        card = doc["data"][0]
        assert card["root"] == str(model) and card["owned_by"] == "vllm" and card["max_model_len"] == 8192
        assert card["parent"] is None and card["permission"][0]["object"] == "model_permission"
        assert _req(sim.url + "/nope") == (404, b'{"detail":"Not Found"}')
        assert _req(sim.url + "/v1/completions")[0] == 405  # GET on a POST route


def test_api_key_guards_v1_only(model: Path) -> None:
    with start(model, "--api-key", "k1", "k2", env=FAST) as sim:
        assert _req(sim.url + "/v1/models") == (401, b'{"error":"Unauthorized"}')
        assert _req(sim.url + "/v1/models", headers={"Authorization": "Bearer nope"})[0] == 401
        for key in ("k1", "k2"):
            assert _req(sim.url + "/v1/models", headers={"Authorization": f"Bearer {key}"})[0] == 200
        assert _req(sim.url + "/v1/models", headers={"Authorization": "bearer k1"})[0] == 200  # scheme: any case
        for path in ("/health", "/metrics", "/version"):
            assert _req(sim.url + path)[0] == 200
        assert _req(sim.url + "/tokenize", {"prompt": "ba"})[0] == 200  # /tokenize stays open, as in vLLM
    with start(model, env={**FAST, "VLLM_API_KEY": "env-key"}) as sim:
        assert _req(sim.url + "/v1/models")[0] == 401
        assert _req(sim.url + "/v1/models", headers={"Authorization": "Bearer env-key"})[0] == 200


def test_a_refused_requests_body_is_not_read_as_the_next_request(model: Path) -> None:
    """A router's pooled connection: a POST answered 401 before any route read its body, then the next request."""
    with start(model, "--api-key", "k1", env=FAST) as sim:
        conn = http.client.HTTPConnection("127.0.0.1", int(sim.url.rsplit(":", 1)[1]), timeout=30)
        body = json.dumps({"prompt": "ba", "max_tokens": 2})
        try:
            conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
            first = conn.getresponse()
            assert (first.status, first.read()) == (401, b'{"error":"Unauthorized"}')
            conn.request("POST", "/v1/completions", body, {"Authorization": "Bearer k1"})
            second = conn.getresponse()
            assert second.status == 200 and json.loads(second.read())["usage"]["completion_tokens"] == 2
        finally:
            conn.close()


def test_unknown_model_name_is_vllms_404(model: Path) -> None:
    with start(model, "--served-model-name", "llama", env=FAST) as sim:
        status, body = _req(sim.url + "/v1/completions", {"model": "gpt-4", "prompt": "ba", "max_tokens": 2})
    assert status == 404
    assert json.loads(body) == {
        "error": {
            "message": "The model `gpt-4` does not exist. Valid aliases: llama.",
            "type": "NotFoundError",
            "param": "model",
            "code": 404,
        }
    }


def test_completions_stream_in_vllms_sse_format(model: Path) -> None:
    with start(model, "--served-model-name", "llama", env=FAST) as sim:
        body = {"model": "llama", "prompt": "ba be bi", "max_tokens": 5, "stream": True, "ignore_eos": True}
        status, raw = _req(sim.url + "/v1/completions", {**body, "stream_options": {"include_usage": True}})
        assert status == 200
        events = _events(raw)
        chunks = [json.loads(e) for e in events[:-1]]
        assert all(": " not in e.split('"text"')[0] for e in events[:-1])  # compact JSON
        *tokens, usage = chunks
        assert len(tokens) == 5 and all(c["object"] == "text_completion" and c["model"] == "llama" for c in chunks)
        assert tokens[0]["id"].startswith("cmpl-") and len({c["id"] for c in chunks}) == 1
        assert list(tokens[0]["choices"][0]) == [
            "index",
            "text",
            "logprobs",
            "finish_reason",
            "stop_reason",
            "prompt_token_ids",
            "token_ids",
            "weight_versions",
        ]
        assert [c["choices"][0]["finish_reason"] for c in tokens] == [None] * 4 + ["length"]
        assert usage["choices"] == [] and usage["usage"] == {
            "prompt_tokens": 4,
            "total_tokens": 9,
            "completion_tokens": 5,
        }
        assert "kv_transfer_params" not in usage  # the usage chunk drops nulls, as vLLM's does
        _, raw = _req(sim.url + "/v1/completions", body)  # no include_usage: no usage chunk
        assert all(json.loads(e)["choices"] for e in _events(raw)[:-1])


def test_chat_stream_sends_the_role_first_then_content_then_usage(model: Path) -> None:
    with start(model, env=FAST) as sim:
        body = {
            "messages": [{"role": "user", "content": [{"type": "text", "text": "ba be"}]}],
            "max_completion_tokens": 3,
            "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        }
        _, raw = _req(sim.url + "/v1/chat/completions", body)
    chunks = [json.loads(e) for e in _events(raw)[:-1]]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert chunks[0]["object"] == "chat.completion.chunk" and chunks[0]["id"].startswith("chatcmpl-")
    content = chunks[1:-1]
    assert len(content) == 3 and all("content" in c["choices"][0]["delta"] for c in content)
    assert content[-1]["choices"][0]["finish_reason"] == "length" and content[-1]["usage"]["completion_tokens"] == 3
    # BOS, the user role token, 2 words, the generation prompt: the synthetic chat template's count
    assert chunks[-1]["usage"] == {"prompt_tokens": 5, "total_tokens": 8, "completion_tokens": 3}


def test_non_streaming_answers(model: Path) -> None:
    with start(model, env=FAST) as sim:
        status, body = _req(sim.url + "/v1/completions", {"prompt": [1, 2, 3], "max_tokens": 4})
        doc = json.loads(body)
        assert status == 200 and doc["object"] == "text_completion" and len(doc["choices"][0]["text"].split()) == 4
        assert doc["usage"]["prompt_tokens"] == 3 and doc["usage"]["completion_tokens"] == 4
        doc = json.loads(_req(sim.url + "/v1/completions", {"prompt": "ba"})[1])
        assert doc["usage"]["completion_tokens"] == 16  # vLLM's default max_tokens for completions
        doc = json.loads(
            _req(sim.url + "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})[
                1
            ]
        )
        assert doc["object"] == "chat.completion" and doc["choices"][0]["message"]["role"] == "assistant"
        status, body = _req(sim.url + "/v1/completions", {"prompt": "ba " * 200000, "max_tokens": 1})
        assert (
            status == 400 and "exceeds model's maximum context length (131072)" in json.loads(body)["error"]["message"]
        )


def test_tokenize_detokenize_match_the_real_tokenizer(model: Path) -> None:
    import tokenizers

    tok = tokenizers.Tokenizer.from_file(str(model / "tokenizer.json"))
    text = "ba be zzz bi"
    with start(model, env=FAST) as sim:
        doc = json.loads(_req(sim.url + "/tokenize", {"prompt": text})[1])
        assert doc["tokens"] == tok.encode(text).ids and doc["count"] == 5 and doc["max_model_len"] == 131072
        plain = json.loads(_req(sim.url + "/tokenize", {"prompt": text, "add_special_tokens": False})[1])
        assert plain["tokens"] == tok.encode(text, add_special_tokens=False).ids
        ids = tok.encode("ba be bi", add_special_tokens=False).ids
        assert json.loads(_req(sim.url + "/detokenize", {"tokens": ids})[1]) == {"prompt": "ba be bi"}
        assert _req(sim.url + "/detokenize", {"tokens": [-1]})[0] == 400


def _metric(text: str, name: str) -> float:
    [line] = [x for x in text.splitlines() if x.startswith(name + "{") or x.startswith(name + " ")]
    return float(line.rsplit(" ", 1)[1])


def test_metrics_have_vllms_names_and_follow_the_requests(model: Path) -> None:
    with start(model, "--served-model-name", "llama", env=FAST) as sim:
        for _ in range(3):
            _req(sim.url + "/v1/completions", {"prompt": "ba be", "max_tokens": 4})
        text = _req(sim.url + "/metrics")[1].decode()
    assert text.startswith("# hgxkit vLLM stand-in: SIMULATED metrics")
    labels = '{engine="0",model_name="llama"}'
    assert f"vllm:num_requests_running{labels} 0.0" in text and f"vllm:num_requests_waiting{labels} 0.0" in text
    assert _metric(text, "vllm:prompt_tokens_total") == 9.0 and _metric(text, "vllm:generation_tokens_total") == 12.0
    assert _metric(text, "vllm:time_to_first_token_seconds_count") == 3.0
    assert 'vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="llama"}' in text
    assert 'vllm:request_success_total{engine="0",finished_reason="length",model_name="llama"} 3.0' in text
    assert "# TYPE vllm:kv_cache_usage_perc gauge" in text and "# TYPE vllm:prompt_tokens_total counter" in text
    assert "vllm:e2e_request_latency_seconds_sum" in text and "vllm:inter_token_latency_seconds_count" in text
    assert "vllm:spec_decode" not in text  # only with --speculative-config


def test_spec_decode_counters_with_speculative_config(model: Path) -> None:
    spec = '{"method": "eagle3", "model": "org/draft", "num_speculative_tokens": 3}'
    with start(model, "--speculative-config", spec, env={**FAST, "HGXKIT_SIM_ACCEPT_MEAN": "2.5"}) as sim:
        for _ in range(4):
            _req(sim.url + "/v1/completions", {"prompt": "ba", "max_tokens": 60})
        text = _req(sim.url + "/metrics")[1].decode()
    drafts = _metric(text, "vllm:spec_decode_num_drafts_total")
    draft_tokens = _metric(text, "vllm:spec_decode_num_draft_tokens_total")
    accepted = _metric(text, "vllm:spec_decode_num_accepted_tokens_total")
    per_pos = [
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("vllm:spec_decode_num_accepted_tokens_per_pos_total{")
    ]
    assert drafts > 0 and draft_tokens == 3 * drafts and len(per_pos) == 3
    assert sum(per_pos) == accepted and per_pos[0] >= per_pos[1] >= per_pos[2]  # accepted drafts are a prefix
    assert 1.8 <= 1 + accepted / drafts <= 3.0  # the configured mean accept length, 2.5 (bonus token included)
    assert _metric(text, "vllm:generation_tokens_total") == 240.0


def test_disable_log_stats_hides_engine_metrics(model: Path) -> None:
    with start(model, "--disable-log-stats", env=FAST) as sim:
        text = _req(sim.url + "/metrics")[1].decode()
    assert text.startswith("# hgxkit vLLM stand-in") and "vllm:" not in text.split("\n", 1)[1]


def test_per_request_metrics_ride_on_the_usage_chunk(model: Path) -> None:
    with start(model, "--enable-per-request-metrics", env=FAST) as sim:
        body = {"prompt": "ba", "max_tokens": 3, "stream": True, "stream_options": {"include_usage": True}}
        usage = json.loads(_events(_req(sim.url + "/v1/completions", body)[1])[-2])
    metrics = usage["metrics"]
    assert metrics["simulated"] is True and metrics["time_to_first_token_ms"] > 15 and metrics["queue_time_ms"] >= 0


def test_truth_records_the_requests(model: Path) -> None:
    with start(model, env=FAST) as sim:
        _req(sim.url + "/v1/completions", {"prompt": "ba be", "max_tokens": 3})
        [truth] = json.loads(_req(sim.url + "/hgxkit_sim/requests")[1])
    assert truth["simulated"] is True and truth["input_tokens"] == 3 and truth["output_tokens"] == 3
    assert truth["ttft_ms"] >= 20 and truth["endpoint"] == "/v1/completions"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_process_refuses_connections_until_ready_then_logs_like_vllm_and_stops_on_sigterm(model: Path) -> None:
    port = _free_port()
    env = {**os.environ, **FAST, "HGXKIT_SIM_READY_DELAY_S": "4"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "hgxkit.sim.standin.vllm", "serve", str(model), "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    said: list[str] = []
    reader = threading.Thread(target=lambda: said.extend(proc.stderr or []), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 30
        while not any("GPU KV cache size" in line for line in said):  # the engine "loads", its socket bound
            assert proc.poll() is None and time.monotonic() < deadline, "".join(said)[-2000:]
            time.sleep(0.05)
        with pytest.raises(urllib.error.URLError) as refused:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
        assert isinstance(refused.value.reason, ConnectionRefusedError)  # bound, not listening: as vLLM 0.33
        with socket.socket() as other, pytest.raises(OSError):  # bound: the port is taken
            other.bind(("0.0.0.0", port))
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).status == 200:
                    break
            except urllib.error.URLError:
                time.sleep(0.1)
        else:
            pytest.fail("the stand-in never became ready")
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
        reader.join(timeout=20)
    finally:
        proc.kill()
    err = "".join(said)
    assert proc.returncode == 0
    assert f"Starting vLLM server on http://0.0.0.0:{port}" in err  # host unset: all interfaces, shown as 0.0.0.0
    assert "vLLM server version 0.33.0, serving model" in err and "SIMULATED" in err
    lines = err.splitlines()
    ready = [i for i, line in enumerate(lines) if line.endswith("INFO:     Application startup complete.")]
    stop = [i for i, line in enumerate(lines) if line.endswith("INFO:     Shutting down")]
    assert ready and stop and ready[0] < stop[0]
    assert lines[0].startswith("hgxkit vLLM stand-in: SIMULATED")


def test_headless_worker_opens_no_port_and_stops_on_sigterm(model: Path) -> None:
    port = _free_port()
    cmd = [sys.executable, "-m", "hgxkit.sim.standin.vllm", "serve", str(model), "--port", str(port)]
    flags = ["-tp", "16", "--nnodes", "2", "--node-rank", "1", "--master-addr", "10.0.0.1", "--headless"]
    proc = subprocess.Popen([*cmd, *flags], cwd=ROOT, env={**os.environ, **FAST}, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    launched = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if "headless multiproc executor" in line:
                launched.set()  # its last step before waiting for SIGTERM: no port comes after it

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert launched.wait(60), "".join(lines)
        assert proc.poll() is None
        with pytest.raises(urllib.error.URLError):  # rank > 0 runs workers only: no API server
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
        reader.join(timeout=20)
    finally:
        proc.kill()
    err = "".join(lines)
    assert proc.returncode == 0
    assert (
        "Launching vLLM (v0.33.0) headless multiproc executor, with head node address 10.0.0.1:29501 for "
        "torch.distributed process group." in err
    )
    assert "Starting vLLM server" not in err
