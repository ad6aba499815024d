"""The SGLang stand-in's HTTP API, in-process on 127.0.0.1 with a fast latency model."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hgxkit.sim.standin.sglang.server import StubApp

Url = str
StartStub = Callable[..., tuple[Url, StubApp]]  # the `start_stub` fixture (tests/unit/conftest.py)


def _req(url: str, body: Any = None, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def _get_json(url: str, headers: dict[str, str] | None = None) -> Any:
    status, body = _req(url, headers=headers)
    assert status == 200, body
    return json.loads(body)


def _sse(body: bytes) -> list[Any]:
    events = [line[6:] for line in body.decode().split("\n") if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    return [json.loads(e) for e in events[:-1]]


def test_health_and_ready_wait_for_startup(start_stub: StartStub) -> None:
    url, app = start_stub(ready=False)
    assert _req(url + "/health")[0] == 503
    assert _req(url + "/ready")[0] == 503
    assert _req(url + "/v1/models")[0] == 503
    app.ready_event.set()
    assert _req(url + "/health") == (200, b"")
    assert _req(url + "/health_generate")[0] == 200
    assert _get_json(url + "/ready") == {"status": "ready"}


def test_model_info_and_models(start_stub: StartStub, model_dir: Path) -> None:
    url, _ = start_stub()
    info = _get_json(url + "/model_info")
    assert info["model_path"] == str(model_dir) and info["tokenizer_path"] == str(model_dir)
    assert info["model_type"] == "deepseek_v4" and info["simulated"] is True
    models = _get_json(url + "/v1/models")
    assert [m["id"] for m in models["data"]] == ["dsv4"]
    assert _get_json(url + "/v1/models/dsv4")["id"] == "dsv4"
    status, body = _req(url + "/v1/models/other")
    assert status == 404 and b"model_not_found" in body


def test_server_info_fingerprint(start_stub: StartStub) -> None:
    url, _ = start_stub("--tp", "4", "--speculative-algorithm", "DSPARK", "--moe-runner-backend", "marlin")
    info = _get_json(url + "/server_info")
    assert info["simulated"] is True and info["version"] == "0.5.23"
    assert (info["tp_size"], info["speculative_algorithm"], info["speculative_num_draft_tokens"]) == (4, "DSPARK", 6)
    assert info["moe_runner_backend"] == "marlin" and info["kv_cache_dtype"] == "fp8_e4m3"
    assert info["launch_command"].startswith("sglang serve --tp 4")
    state = info["internal_states"][0]
    assert state["avg_spec_accept_length"] == 1.0 and state["tp_size"] == 4
    assert info["max_total_num_tokens"] == state["memory_usage"]["token_capacity"] > 0
    assert _get_json(url + "/get_server_info")["version"] == "0.5.23"


def test_generate_native_streaming(start_stub: StartStub) -> None:
    url, app = start_stub("--speculative-algorithm", "DSPARK")
    status, body = _req(
        url + "/generate", {"input_ids": list(range(500)), "sampling_params": {"max_new_tokens": 40}, "stream": True}
    )
    assert status == 200
    chunks = _sse(body)
    metas = [c["meta_info"] for c in chunks]
    assert metas[0]["completion_tokens"] == 1 and metas[0]["prompt_tokens"] == 500
    assert metas[-1]["completion_tokens"] == 40
    assert metas[-1]["finish_reason"] == {"type": "length", "length": 40}
    assert all(m["finish_reason"] is None for m in metas[:-1])
    # text is cumulative, and each chunk holds one word per token
    assert all(chunks[i + 1]["text"].startswith(chunks[i]["text"]) for i in range(len(chunks) - 1))
    assert len(chunks[-1]["text"].split()) == 40
    assert len(chunks) < 40  # several tokens per step with DSPARK
    assert metas[-1]["spec_verify_ct"] == len(chunks) - 1
    [truth] = app.engine.truths
    assert truth.input_tokens == 500 and truth.output_tokens == 40 and truth.steps == len(chunks) - 1


def test_generate_text_counts_words_plus_bos(start_stub: StartStub) -> None:
    url, _ = start_stub()
    status, body = _req(url + "/generate", {"text": "ba be bi bo", "sampling_params": {"max_new_tokens": 3}})
    assert status == 200
    doc = json.loads(body)
    assert doc["meta_info"]["prompt_tokens"] == 5 and doc["meta_info"]["completion_tokens"] == 3
    assert len(doc["text"].split()) == 3
    assert "spec_accept_length" not in doc["meta_info"]


def test_openai_completions(start_stub: StartStub) -> None:
    url, _ = start_stub("--enable-cache-report")
    status, body = _req(url + "/v1/completions", {"model": "dsv4", "prompt": "ba be", "max_tokens": 5})
    doc = json.loads(body)
    assert status == 200 and doc["object"] == "text_completion"
    assert doc["usage"] == {
        "prompt_tokens": 3,
        "completion_tokens": 5,
        "total_tokens": 8,
        "prompt_tokens_details": {"cached_tokens": 0},
    }
    body = {"prompt": [1, 2, 3, 4], "max_tokens": 6, "stream": True, "stream_options": {"include_usage": True}}
    status, raw = _req(url + "/v1/completions", body)
    chunks = _sse(raw)
    texts = [c["choices"][0]["text"] for c in chunks if c["choices"]]
    assert len("".join(texts).split()) == 6
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["prompt_tokens"] == 4
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "length"


def test_openai_chat(start_stub: StartStub) -> None:
    url, _ = start_stub()
    req = {"model": "dsv4", "messages": [{"role": "user", "content": "ba be bi"}], "max_tokens": 4}
    doc = json.loads(_req(url + "/v1/chat/completions", req)[1])
    assert doc["object"] == "chat.completion"
    assert doc["choices"][0]["message"]["role"] == "assistant"
    assert len(doc["choices"][0]["message"]["content"].split()) == 4
    assert doc["usage"]["completion_tokens"] == 4 and doc["usage"]["prompt_tokens"] == 6
    chunks = _sse(_req(url + "/v1/chat/completions", {**req, "stream": True})[1])
    assert chunks[0]["object"] == "chat.completion.chunk"
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert len("".join(c["choices"][0]["delta"]["content"] for c in chunks).split()) == 4


def test_metrics_only_with_enable_metrics(start_stub: StartStub) -> None:
    url, _ = start_stub()
    assert _req(url + "/metrics")[0] == 404
    url, _ = start_stub("--enable-metrics", "--speculative-algorithm", "DSPARK")
    _req(url + "/generate", {"input_ids": [1] * 100, "sampling_params": {"max_new_tokens": 30}})
    status, body = _req(url + "/metrics")
    text = body.decode()
    assert status == 200
    labels = 'engine_type="unified",model_name="dsv4",pp_rank="0",tp_rank="0"'
    for name in ("spec_accept_length", "num_running_reqs", "num_queue_reqs", "spec_accept_rate", "gen_throughput"):
        assert f"# TYPE sglang:{name} gauge" in text
        assert f"sglang:{name}{{{labels}}} " in text
    assert "# TYPE sglang:time_to_first_token_seconds histogram" in text
    assert f'sglang:time_to_first_token_seconds_bucket{{{labels},le="+Inf"}} 1' in text
    assert f"sglang:time_to_first_token_seconds_count{{{labels}}} 1" in text
    assert f"sglang:prompt_tokens_total{{{labels}}} 100" in text
    assert f"sglang:generation_tokens_total{{{labels}}} 30" in text


def test_api_key_and_exemptions(start_stub: StartStub) -> None:
    url, _ = start_stub("--api-key", "sk-1", "--enable-metrics")
    assert _req(url + "/v1/models") == (401, b'{"error": "Unauthorized"}')
    assert _req(url + "/v1/models", headers={"Authorization": "Bearer wrong"})[0] == 401
    assert _req(url + "/v1/models", headers={"Authorization": "Bearer sk-1"})[0] == 200
    assert _req(url + "/server_info")[0] == 401
    assert _req(url + "/generate", {"text": "ba"})[0] == 401
    assert _req(url + "/flush_cache")[0] == 401
    for exempt in ("/health", "/health_generate", "/ready", "/metrics"):
        assert _req(url + exempt)[0] == 200, exempt
    url, _ = start_stub("--api-key", "sk-1", "--admin-api-key", "admin")
    assert _req(url + "/flush_cache", headers={"Authorization": "Bearer sk-1"})[0] == 401
    assert _req(url + "/flush_cache", headers={"Authorization": "Bearer admin"})[0] == 200


def test_accept_length_dspark_mean_and_flush_reset(start_stub: StartStub) -> None:
    url, _ = start_stub("--speculative-algorithm", "DSPARK", env={"HGXKIT_SIM_ACCEPT_MEAN": "5.3"})
    for _ in range(4):
        _req(url + "/generate", {"input_ids": [1, 2], "sampling_params": {"max_new_tokens": 400}})
    accept = _get_json(url + "/server_info")["internal_states"][0]["avg_spec_accept_length"]
    assert 5.0 <= accept <= 5.6  # 1 + Binomial(5, 0.86) per step, mean 5.3, ~300 steps
    status, body = _req(url + "/flush_cache")
    assert status == 200 and body.startswith(b"Cache flushed")
    assert _get_json(url + "/server_info")["internal_states"][0]["avg_spec_accept_length"] == 1.0
    _req(url + "/generate", {"input_ids": [1, 2], "sampling_params": {"max_new_tokens": 400}})
    assert _get_json(url + "/server_info")["internal_states"][0]["avg_spec_accept_length"] > 4.5


def test_no_speculative_algorithm_means_one_token_per_step(start_stub: StartStub) -> None:
    url, app = start_stub("--enable-metrics")
    status, body = _req(
        url + "/generate", {"input_ids": [1], "sampling_params": {"max_new_tokens": 20}, "stream": True}
    )
    assert status == 200
    chunks = _sse(body)
    assert [c["meta_info"]["completion_tokens"] for c in chunks] == list(range(1, 21))
    assert app.engine.avg_spec_accept_length == 1.0
    # like SGLang: no accept length in /server_info without a speculative algorithm
    assert "avg_spec_accept_length" not in _get_json(url + "/server_info")["internal_states"][0]
    metrics = _req(url + "/metrics")[1].decode()
    assert 'sglang:spec_accept_length{engine_type="unified",model_name="dsv4",pp_rank="0",tp_rank="0"} 1.0' in metrics


class VirtualClock:
    """`time` for the stand-in's modules: sleeping advances the monotonic clock instead of waiting, so a
    simulated latency is exactly the model's, however busy the machine (under load a real sleep overshot by
    24 ms and the wall-clock version of the test below failed)."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.lock = threading.Lock()

    def monotonic(self) -> float:
        with self.lock:
            return self.now

    def sleep(self, seconds: float) -> None:
        with self.lock:
            self.now += max(seconds, 0.0)

    @staticmethod
    def time() -> float:
        return time.time()


def test_ttft_follows_the_latency_model(start_stub: StartStub, monkeypatch: pytest.MonkeyPatch) -> None:
    from hgxkit.sim.standin.common import engine, generation
    from hgxkit.sim.standin.sglang import server

    clock = VirtualClock()
    for module in (engine, generation, server):
        monkeypatch.setattr(module, "time", clock)
    url, app = start_stub()
    _req(url + "/generate", {"input_ids": [7] * 5000, "sampling_params": {"max_new_tokens": 2}})
    [truth] = app.engine.truths
    assert truth.ttft_ms == 20 + 5000 * 0.004  # base + per-token prefill (HGXKIT_SIM_* of the fixture), exactly


def test_queueing_beyond_max_running_requests(start_stub: StartStub) -> None:
    url, app = start_stub("--max-running-requests", "1")
    # 600 tokens: the first runs ~0.8 s, so the second, sent once the first runs, waits well over 50 ms on any load
    body = {"input_ids": [1], "sampling_params": {"max_new_tokens": 600}}
    threads = [threading.Thread(target=_req, args=(url + "/generate", body)) for _ in range(2)]
    threads[0].start()
    deadline = time.monotonic() + 30  # the second is sent once the first holds the one running slot, however slow
    while app.engine.running < 1 and threads[0].is_alive() and time.monotonic() < deadline:
        time.sleep(0.001)
    threads[1].start()
    for t in threads:
        t.join()
    first, second = sorted(app.engine.truths, key=lambda t: t.received_at)
    assert first.queue_ms < 50  # admitted at once (a loaded machine may still take a few ms to get there)
    assert second.queue_ms > 200  # waited for most of the first request's ~0.8 s
    assert second.ttft_ms > first.ttft_ms + 200


def test_flush_cache_busy_times_out(start_stub: StartStub) -> None:
    url, app = start_stub(env={"HGXKIT_SIM_DECODE_STEP_MS": "20"})
    # 100 tokens of 20 ms: the request still runs ~2 s after it is seen running, on any load
    t = threading.Thread(
        target=_req, args=(url + "/generate", {"input_ids": [1], "sampling_params": {"max_new_tokens": 100}})
    )
    t.start()
    deadline = time.monotonic() + 30
    while app.engine.running < 1 and t.is_alive() and time.monotonic() < deadline:
        time.sleep(0.001)
    status = _req(url + "/flush_cache?timeout=0.01")[0]
    t.join()
    assert status == 400


def test_subprocess_start_logs_ready_line_and_stops_on_sigterm(
    model_dir: Path, tmp_path: Path, fast_latency_env: dict[str, str]
) -> None:
    env = {**os.environ, **fast_latency_env, "HGXKIT_SIM_READY_DELAY_S": "0.3", "NVIDIA_VISIBLE_DEVICES": "0"}
    env["HGXKIT_SIM_TTFT_LOG"] = str(tmp_path / "truth.jsonl")
    proc = subprocess.Popen(
        [sys.executable, "-m", "hgxkit.sim.standin.sglang", "serve", str(model_dir), "--port", "0", "--enable-metrics"],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stderr is not None
        lines: list[str] = []
        port = None
        for line in proc.stderr:
            lines.append(line)
            if "Uvicorn running on http://127.0.0.1:" in line:
                port = int(line.split("127.0.0.1:")[1].split()[0])
            if "The server is fired up and ready to roll!" in line:
                break
        assert lines[0].startswith("hgxkit SGLang stand-in: SIMULATED")
        assert port is not None
        status, _ = _req(f"http://127.0.0.1:{port}/generate", {"text": "ba", "sampling_params": {"max_new_tokens": 2}})
        assert status == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    [record] = [json.loads(x)["hgxkit_sim_request"] for x in (tmp_path / "truth.jsonl").read_text().splitlines()]
    assert record["input_tokens"] == 2 and record["output_tokens"] == 2 and record["simulated"] is True


def test_shim_runs_the_stand_in_as_sglang(tmp_path: Path) -> None:
    from hgxkit.sim.standin.sglang.shim import default_stub_root, install_shim

    site, bindir = tmp_path / "site", tmp_path / "bin"
    written = install_shim(site, default_stub_root(), bindir, python=sys.executable)
    assert {p.name for p in written} == {"__init__.py", "launch_server.py", "main.py", "sglang"}
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(
        [sys.executable, "-m", "sglang.launch_server", "--model-path", "/m", "--cuda-graph-max-bs", "8"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1].startswith("sglang serve: error: ambiguous option: --cuda-graph-max-bs")
    proc = subprocess.run(
        [str(bindir / "sglang"), "serve", "/m", "--bogus"], capture_output=True, text=True, env=env, timeout=60
    )
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1] == "sglang serve: error: unrecognized arguments: --bogus"
    proc = subprocess.run([str(bindir / "sglang"), "version"], capture_output=True, text=True, env=env, timeout=60)
    assert "hgxkit stand-in, simulated" in proc.stdout
