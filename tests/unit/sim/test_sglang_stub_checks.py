"""Start-up refusals of the SGLang stand-in: GPUs, model path, HiCache host memory."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hgxkit.sim.standin.sglang import checks
from hgxkit.sim.standin.sglang.args import ModelFacts, build_parser, resolve

GB = 1 << 30


def _args(*argv: str) -> dict[str, object]:
    return resolve(build_parser("sglang").parse_args(["--model-path", "/m", *argv]), ModelFacts("deepseek_v4"))


def test_visible_gpus() -> None:
    assert checks.visible_gpus({"NVIDIA_VISIBLE_DEVICES": "0,1,2,3"}) == 4
    assert checks.visible_gpus({"NVIDIA_VISIBLE_DEVICES": "all"}) == 8
    assert checks.visible_gpus({"NVIDIA_VISIBLE_DEVICES": "all", "HGXKIT_SIM_NODE_GPUS": "2"}) == 2
    assert checks.visible_gpus({"NVIDIA_VISIBLE_DEVICES": "none"}) == 0
    assert checks.visible_gpus({"CUDA_VISIBLE_DEVICES": "5"}) == 1
    assert checks.visible_gpus({}) == 8


def test_gpu_count_must_match_world_size() -> None:
    checks.check_gpus(_args("--tp", "4"), {"NVIDIA_VISIBLE_DEVICES": "4,5,6,7"})
    # DP attention shares the TP GPUs: tp 4 × dp 4 runs on 4 GPUs
    checks.check_gpus(
        _args("--tp", "4", "--dp-size", "4", "--enable-dp-attention"), {"NVIDIA_VISIBLE_DEVICES": "0,1,2,3"}
    )
    with pytest.raises(checks.StartupError, match=r"invalid device ordinal.*needs 8 GPUs but 4 are visible"):
        checks.check_gpus(_args("--tp", "4", "--dp-size", "2"), {"NVIDIA_VISIBLE_DEVICES": "0,1,2,3"})
    # more GPUs than needed: SGLang starts on the first ones (tp 4 on 8 visible), or from --base-gpu-id
    checks.check_gpus(_args("--tp", "4"), {"NVIDIA_VISIBLE_DEVICES": "all"})
    checks.check_gpus(_args("--tp", "4", "--base-gpu-id", "4"), {"NVIDIA_VISIBLE_DEVICES": "all"})
    with pytest.raises(checks.StartupError, match=r"needs 4 GPUs from --base-gpu-id 5 but 8 are visible"):
        checks.check_gpus(_args("--tp", "4", "--base-gpu-id", "5"), {"NVIDIA_VISIBLE_DEVICES": "all"})


def test_model_path_needs_config_json(tmp_path: Path) -> None:
    with pytest.raises(checks.StartupError, match=r"does not appear to have a file named config\.json"):
        checks.check_model_path(str(tmp_path))
    (tmp_path / "config.json").write_text("{}")
    assert checks.check_model_path(str(tmp_path)) == tmp_path


def _fake_root(tmp_path: Path, mem_available_gb: float, cgroup_max: str, current: int = 0) -> Path:
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/meminfo").write_text(
        f"MemTotal:       {int(4096 * GB / 1024)} kB\nMemAvailable:   {int(mem_available_gb * GB / 1024)} kB\n"
    )
    cg = tmp_path / "sys/fs/cgroup"
    cg.mkdir(parents=True)
    (cg / "memory.max").write_text(cgroup_max + "\n")
    (cg / "memory.current").write_text(f"{current}\n")
    return tmp_path


def test_host_free_reads_cgroup_and_meminfo(tmp_path: Path) -> None:
    root = _fake_root(tmp_path, mem_available_gb=1000, cgroup_max=str(300 * GB), current=100 * GB)
    assert checks.host_free_bytes({}, root) == 200 * GB  # the cgroup is the tighter bound
    assert checks.host_free_bytes({"HGXKIT_SIM_HOST_MEM_GB": "2048"}, root) == 2048 * GB


def test_host_free_unlimited_cgroup_uses_meminfo(tmp_path: Path) -> None:
    root = _fake_root(tmp_path, mem_available_gb=64, cgroup_max="max")
    assert checks.host_free_bytes({}, root) == 64 * GB


def test_hicache_ratio_needs_host_memory(tmp_path: Path) -> None:
    root = _fake_root(tmp_path, mem_available_gb=1000, cgroup_max="max")
    env = {"HGXKIT_SIM_KV_POOL_GB_PER_RANK": "80"}
    args = _args("--tp", "4", "--enable-hierarchical-cache", "--hicache-ratio", "4")
    plan = checks.memory_plan(args, env, kv_bytes_per_token=24768)
    assert plan.host_pool_bytes_per_rank == 320 * GB and plan.ranks == 4
    with pytest.raises(checks.StartupError) as err:
        checks.check_host_memory(plan, env, root)
    assert str(err.value) == (
        "ValueError: Not enough host memory available. Requesting 320.00 GB but only have 250.00 GB free. "
        "Please reduce the size of the hierarchical cache."
    )
    checks.check_host_memory(plan, {**env, "HGXKIT_SIM_HOST_MEM_GB": "2048"}, root)  # 512 GB per rank


def test_hicache_size_overrides_ratio() -> None:
    env = {"HGXKIT_SIM_KV_POOL_GB_PER_RANK": "80", "HGXKIT_SIM_HOST_MEM_GB": "100"}
    args = _args("--tp", "2", "--enable-hicache", "--hicache-ratio", "4", "--hicache-size", "40")
    plan = checks.memory_plan(args, env, kv_bytes_per_token=1000)
    assert plan.host_pool_bytes_per_rank == 40 * GB
    checks.check_host_memory(plan, env)  # 2 × 40 GB ≤ 100 GB
    with pytest.raises(checks.StartupError, match=r"Requesting 40\.00 GB but only have 25\.00 GB free"):
        checks.check_host_memory(plan, {**env, "HGXKIT_SIM_HOST_MEM_GB": "50"})


def test_default_kv_pool_follows_mem_fraction() -> None:
    plan = checks.memory_plan(_args("--tp", "4", "--mem-fraction-static", "0.88"), {}, kv_bytes_per_token=1)
    assert plan.kv_pool_bytes_per_rank == int((141 * 0.88 - 40 - 4) * GB)


def test_refused_start_exits_1(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "hgxkit.sim.standin.sglang", "serve", str(tmp_path), "--tp", "2"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"NVIDIA_VISIBLE_DEVICES": "0,1", "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 1
    assert "SIMULATED" in proc.stderr
    assert "does not appear to have a file named config.json" in proc.stderr
