"""The vLLM stand-in's start-up refusals (vLLM 0.33's messages) and its model resolution through the HF cache."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from hgxkit.sim.hub.makerepo import RepoSpec, make_repo
from hgxkit.sim.hub.server import make_server as make_hub
from hgxkit.sim.standin.vllm import args as vargs
from hgxkit.sim.standin.vllm import checks, hfcache
from hgxkit.sim.standin.vllm.inprocess import StartupRefused, start

ROOT = Path(__file__).resolve().parents[3]
FAST = {"HGXKIT_SIM_TTFT_BASE_MS": "5", "HGXKIT_SIM_DECODE_STEP_MS": "1", "HGXKIT_SIM_PREFILL_US_PER_TOKEN": "1"}


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Llama-shaped synthetic repo (32 heads, 8 KV heads, 131072 positions, ~15 GiB bf16 estimated)."""
    root = tmp_path_factory.mktemp("models")
    spec = RepoSpec(repo_id="org/llama-8b", total_bytes=64 << 10, shards=1, vocab_size=4096, shape="generic")
    return make_repo(root, spec) / "refs/main"


@pytest.fixture(scope="module")
def dsv4(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("models")
    spec = RepoSpec(repo_id="deepseek-ai/DeepSeek-V4-Flash-DSpark", total_bytes=64 << 10, shards=1)
    return make_repo(root, spec) / "refs/main"


def _refusal(model: Path | str, *flags: str, env: dict[str, str] | None = None) -> str:
    with pytest.raises(StartupRefused) as err, start(model, *flags, env={**FAST, **(env or {})}):
        pass
    assert err.value.status == 1
    return str(err.value)


# -- GPUs ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "ids", "count"),
    [
        ({}, None, 8),
        ({"HGXKIT_SIM_NODE_GPUS": "4"}, None, 4),
        ({"NVIDIA_VISIBLE_DEVICES": "all"}, None, 8),
        ({"NVIDIA_VISIBLE_DEVICES": "4,5,6,7"}, None, 4),
        ({"NVIDIA_VISIBLE_DEVICES": "none"}, None, 0),
        ({"NVIDIA_VISIBLE_DEVICES": "4,5,6,7", "CUDA_VISIBLE_DEVICES": "0,1"}, None, 2),
        # docker --gpus device=2,3 renumbers them 0,1: host indices in CUDA_VISIBLE_DEVICES point nowhere
        ({"NVIDIA_VISIBLE_DEVICES": "2,3", "CUDA_VISIBLE_DEVICES": "2,3"}, None, 0),
        ({"CUDA_VISIBLE_DEVICES": "0,9,1"}, None, 1),  # CUDA stops at the first invalid ordinal
        ({}, [0, 1, 2], 3),
    ],
)
def test_visible_gpus(env: dict[str, str], ids: list[int] | None, count: int) -> None:
    assert checks.visible_gpus(env, ids) == count


def test_world_size_larger_than_the_visible_gpus(llama: Path) -> None:
    msg = _refusal(llama, "-tp", "8", "-pp", "2", env={"NVIDIA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"})
    assert msg.startswith("ValueError: World size (16) is larger than the number of available GPUs (8) in this node.")
    assert "- ray, set '--distributed-executor-backend ray'." in msg and "set '--nnodes' appropriately." in msg


def test_unused_gpus_are_fine_and_ray_or_nnodes_skip_the_local_check(llama: Path) -> None:
    with start(llama, "-tp", "2", env={**FAST, "NVIDIA_VISIBLE_DEVICES": "all"}) as sim:
        assert sim.app.served_names == [str(llama)]
    with start(llama, "-tp", "8", "-pp", "2", "--distributed-executor-backend", "ray", env=FAST):
        pass
    with start(llama, "-tp", "16", "--nnodes", "2", "--node-rank", "0", "--master-addr", "10.0.0.1", env=FAST):
        pass  # 8 GPUs per node


def test_data_parallel_ranks_need_their_gpus(llama: Path) -> None:
    msg = _refusal(llama, "-tp", "4", "-dp", "4", env={"NVIDIA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"})
    assert msg.startswith("RuntimeError: CUDA error: invalid device ordinal")
    with start(llama, "-tp", "4", "-dp", "4", "-dpl", "2", env=FAST):
        pass
    # no GPU at all: vLLM cannot even pick a platform
    assert _refusal(llama, env={"NVIDIA_VISIBLE_DEVICES": "none"}).startswith(
        "RuntimeError: Failed to infer device type, please set the environment variable `VLLM_LOGGING_LEVEL=DEBUG`"
    )


def test_heads_must_divide_by_tp(llama: Path) -> None:
    msg = _refusal(llama, "-tp", "3")
    assert msg == "ValueError: Total number of attention heads (32) must be divisible by tensor parallel size (3)."


# -- model ---------------------------------------------------------------------------------------------------


def test_local_dir_without_config_json(tmp_path: Path) -> None:
    msg = _refusal(tmp_path)
    assert msg.startswith(f"ValueError: Invalid repository ID or local directory specified: '{tmp_path}'.")
    assert "ensure the presence of a 'config.json'" in msg and "has no config.json" in msg


def _cache(home: Path, repo: str, model: Path, branch: str = "main") -> Path:
    """Put `model`'s files into an HF cache under `home` the way huggingface_hub lays it out."""
    root = home / "hub" / ("models--" + repo.replace("/", "--"))
    commit = "0123456789abcdef0123456789abcdef01234567"
    snap = root / "snapshots" / commit
    snap.mkdir(parents=True)
    for f in model.iterdir():
        (snap / f.name).write_bytes(f.read_bytes())
    (root / "refs").mkdir()
    (root / "refs" / branch).write_text(commit)
    return snap


def test_repo_id_from_the_hf_cache_offline(llama: Path, tmp_path: Path) -> None:
    snap = _cache(tmp_path, "org/cached", llama)
    env = {**FAST, "HF_HOME": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    with start("org/cached", "--served-model-name", "c", env=env) as sim:
        assert sim.app.model_path == "org/cached" and sim.app.served_names == ["c"]
        assert f"resolved model path={snap}" in sim.log.getvalue()
    msg = _refusal("org/not-cached", env={**env})
    assert "Invalid repository ID or local directory specified: 'org/not-cached'" in msg
    assert f"HF_HUB_OFFLINE is set and no snapshot with config.json in the cache {tmp_path / 'hub'}" in msg


def test_hf_hub_cache_wins_over_hf_home(llama: Path, tmp_path: Path) -> None:
    _cache(tmp_path / "other", "org/m", llama)
    env = {"HF_HOME": str(tmp_path / "home"), "HF_HUB_CACHE": str(tmp_path / "other" / "hub"), "HF_HUB_OFFLINE": "1"}
    assert hfcache.resolve_model("org/m", env).source == "cache"


@pytest.fixture()
def hub_url(tmp_path: Path) -> Iterator[str]:
    gated = RepoSpec(
        repo_id="org/gated",
        total_bytes=64 << 10,
        shards=1,
        vocab_size=4096,
        gated=True,
        tokens=("ok",),
        shape="generic",
    )
    make_repo(tmp_path / "hub", gated)
    server = make_hub(tmp_path / "hub", auto_root=tmp_path / "auto")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_repo_id_downloaded_from_hf_endpoint_into_the_cache(hub_url: str, tmp_path: Path) -> None:
    env = {**FAST, "HF_ENDPOINT": hub_url, "HF_HOME": str(tmp_path / "hf")}
    with start("meta-llama/Llama-3.1-8B-Instruct", env=env) as sim:
        assert sim.app.max_model_len == 131072  # from the downloaded config.json
    resolved = hfcache.resolve_model("meta-llama/Llama-3.1-8B-Instruct", {**env, "HF_HUB_OFFLINE": "1"})
    assert resolved.source == "cache" and (resolved.path / "model-00003-of-00003.safetensors").is_file()
    assert (resolved.path / "config.json").is_symlink()  # huggingface_hub's layout: snapshot -> blobs
    gated = _refusal("org/gated", env=env)
    assert "Invalid repository ID or local directory specified: 'org/gated'" in gated and "401 GatedRepo" in gated
    with start("org/gated", env={**env, "HF_TOKEN": "ok"}):
        pass


def test_unreachable_hub_falls_back_to_the_cache(llama: Path, tmp_path: Path) -> None:
    _cache(tmp_path, "org/cached", llama)
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    env = {"HF_HOME": str(tmp_path), "HF_ENDPOINT": dead}
    assert hfcache.resolve_model("org/cached", env).source == "cache"
    with pytest.raises(hfcache.ModelNotFound, match="cannot reach"):
        hfcache.resolve_model("org/missing", env)


# -- lengths and memory --------------------------------------------------------------------------------------


def test_max_model_len_above_the_models(llama: Path) -> None:
    msg = _refusal(llama, "--max-model-len", "200k")
    assert msg.startswith(
        "ValueError: User-specified max_model_len (200000) is greater than the derived max_model_len "
        "(max_position_embeddings=131072 or model_max_length=None in model's config.json)."
    )
    with start(llama, "--max-model-len", "200k", env={**FAST, "VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}) as sim:
        assert sim.app.max_model_len == 200000


def test_a_quantization_method_vllm_lacks_fails_its_model_config(llama: Path) -> None:
    assert _refusal(llama, "-q", "slimquant_marlin").startswith(
        "ValueError: Unknown quantization method: slimquant_marlin. Must be one of ['awq',"
    )


def test_kv_cache_must_hold_one_max_length_request(dsv4: Path) -> None:
    # DeepSeek-V4-shaped: ~277 GB of fp8 weights; on 2 GPUs nothing is left for the KV cache
    assert _refusal(dsv4, "-tp", "2").startswith("ValueError: No available memory for the cache blocks.")
    msg = _refusal(dsv4, "-tp", "8", "--gpu-memory-utilization", "0.3")
    assert msg.startswith("ValueError: To serve at least one request with the model's max seq len (1048576), (")
    assert "Based on the available memory, the estimated maximum model length is" in msg
    with start(dsv4, "-tp", "8", "--max-model-len", "64k", env=FAST) as sim:
        assert "GPU KV cache size:" in sim.log.getvalue() and "(simulated)" in sim.log.getvalue()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--enable-auto-tool-choice"], "TypeError: Error: --enable-auto-tool-choice requires --tool-call-parser"),
        (["--enable-log-outputs"], "TypeError: Error: --enable-log-outputs requires --enable-log-requests"),
        (["--headless", "-asc", "2"], "ValueError: --api-server-count=2 cannot be used with --headless"),
        (["--enable-per-request-metrics", "--disable-log-stats"], "ValueError: Error: --enable-per-request-metrics"),
    ],
)
def test_argument_combinations_vllm_refuses(llama: Path, flags: list[str], message: str) -> None:
    assert _refusal(llama, *flags).startswith(message)


def test_refusals_exit_1_with_a_traceback_tail_and_port_conflicts(llama: Path) -> None:
    env = {**os.environ, **FAST, "NVIDIA_VISIBLE_DEVICES": "0,1"}
    res = subprocess.run(
        [sys.executable, "-m", "hgxkit.sim.standin.vllm", "serve", str(llama), "-tp", "4"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 1
    lines = res.stderr.strip().splitlines()
    assert lines[-5] == "Traceback (most recent call last):" and "simulated" in lines[-4]
    assert lines[-1] == "- multiprocessing, set '--nnodes' appropriately."
    assert "ValueError: World size (4) is larger than the number of available GPUs (2) in this node." in res.stderr
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        res = subprocess.run(
            [
                sys.executable,
                "-m",
                "hgxkit.sim.standin.vllm",
                "serve",
                str(llama),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert res.returncode == 1 and res.stderr.strip().endswith("OSError: [Errno 98] Address already in use")


def test_served_model_name_is_checked_before_anything_starts() -> None:
    with pytest.raises(vargs.ServeArgsError):
        vargs.parse_serve(["--served-model-name", "x", "-tp", "2"])
