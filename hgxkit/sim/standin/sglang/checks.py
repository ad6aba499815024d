"""Start-up refusals of the SGLang stand-in, with SGLang-like messages (simulated checks).

1. GPUs: the parallel world size (tp × pp, × dp unless DP-attention shares the TP GPUs), from
   ``--base-gpu-id`` on, must fit the GPUs visible in ``NVIDIA_VISIBLE_DEVICES`` (or ``CUDA_VISIBLE_DEVICES``).
   ``all`` or unset means the node's GPUs, ``HGXKIT_SIM_NODE_GPUS`` (default 8). More GPUs than needed is
   fine, as in SGLang: tp 4 with 8 visible starts on the first 4.
2. ``--model-path`` must be a directory with ``config.json`` (the stand-in never downloads).
3. HiCache: each rank pins ``hicache_ratio × device KV pool`` (or ``--hicache-size`` GB) of host memory;
   free host memory (``HGXKIT_SIM_HOST_MEM_GB`` if set, else min(cgroup ``memory.max`` − usage,
   ``MemAvailable``)) is shared by the ranks. Too little → "Not enough host memory available …".

The device KV pool per rank is ``HGXKIT_SIM_KV_POOL_GB_PER_RANK`` if set, else
``HGXKIT_SIM_GPU_MEM_GB`` (141, an H200) × ``mem_fraction_static`` − ``HGXKIT_SIM_WEIGHTS_GB`` (160) / tp
− 4 GB of activations and graphs.

Example:
    >>> visible_gpus({"NVIDIA_VISIBLE_DEVICES": "4,5,6,7"})
    4
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GB = 1 << 30


class StartupError(Exception):
    """Raised to refuse start-up; the message is printed like SGLang's traceback tail."""


def _count(spec: str, node_gpus: int) -> int:
    spec = spec.strip()
    if spec in ("", "all"):
        return node_gpus
    if spec in ("none", "void", "NoDevFiles"):
        return 0
    return len([s for s in spec.split(",") if s.strip()])


def visible_gpus(env: Mapping[str, str]) -> int:
    node_gpus = int(env.get("HGXKIT_SIM_NODE_GPUS", "8"))
    for var in ("NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
        if var in env:
            return _count(env[var], node_gpus)
    return node_gpus


def world_size(args: Mapping[str, Any]) -> int:
    dp = 1 if args["enable_dp_attention"] else args["dp_size"]
    return int(args["tp_size"]) * int(args["pp_size"]) * int(dp)


def check_gpus(args: Mapping[str, Any], env: Mapping[str, str]) -> None:
    """Each node of a group holds world_size / nnodes of its GPUs (tp 16 over 2 nodes: 8 each), taken from
    `--base-gpu-id` on; unused visible GPUs are fine (SGLang takes GPU ids base_gpu_id + rank)."""
    n = visible_gpus(env)
    nnodes = max(int(args.get("nnodes") or 1), 1)
    need = world_size(args) // nnodes
    base = int(args.get("base_gpu_id") or 0)
    where = f"NVIDIA_VISIBLE_DEVICES={env.get('NVIDIA_VISIBLE_DEVICES', '<unset>')}"
    if base + need > n:
        at = f" from --base-gpu-id {base}" if base else ""
        raise StartupError(
            f"RuntimeError: CUDA error: invalid device ordinal (simulated): tp_size={args['tp_size']} × "
            f"dp_size={args['dp_size']} × pp_size={args['pp_size']} needs {need} GPUs{at} but {n} are visible"
            f" ({where})"
        )


def check_model_path(model_path: str) -> Path:
    path = Path(model_path)
    if not (path / "config.json").is_file():
        raise StartupError(
            f"OSError: {model_path} does not appear to have a file named config.json. "
            "Checkout 'https://huggingface.co/{model_path}/tree/main' for available files. "
            "(simulated stand-in: --model-path must be a local directory)".replace("{model_path}", model_path)
        )
    return path


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return None if text in ("", "max") else int(text.split()[0])


def host_free_bytes(env: Mapping[str, str], root: Path = Path("/")) -> int:
    """Free host memory the container may use, in bytes (see module doc)."""
    if env.get("HGXKIT_SIM_HOST_MEM_GB"):
        return int(float(env["HGXKIT_SIM_HOST_MEM_GB"]) * GB)
    candidates: list[int] = []
    meminfo = root / "proc/meminfo"
    if meminfo.exists():
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                candidates.append(int(line.split()[1]) * 1024)
    cg = root / "sys/fs/cgroup"
    limit = _read_int(cg / "memory.max") or _read_int(cg / "memory/memory.limit_in_bytes")
    if limit is not None and limit < (1 << 60):
        used = _read_int(cg / "memory.current") or _read_int(cg / "memory/memory.usage_in_bytes") or 0
        candidates.append(max(limit - used, 0))
    return min(candidates) if candidates else 0


@dataclass(frozen=True)
class MemoryPlan:
    """Simulated per-rank memory figures (bytes) used for the HiCache check and `/server_info`."""

    kv_pool_bytes_per_rank: int
    host_pool_bytes_per_rank: int
    ranks: int
    kv_bytes_per_token: int

    @property
    def max_total_num_tokens(self) -> int:
        return self.kv_pool_bytes_per_rank // self.kv_bytes_per_token

    @property
    def host_pool_tokens(self) -> int:
        return self.host_pool_bytes_per_rank // self.kv_bytes_per_token


def memory_plan(args: Mapping[str, Any], env: Mapping[str, str], kv_bytes_per_token: int) -> MemoryPlan:
    if env.get("HGXKIT_SIM_KV_POOL_GB_PER_RANK"):
        kv = float(env["HGXKIT_SIM_KV_POOL_GB_PER_RANK"]) * GB
    else:
        gpu = float(env.get("HGXKIT_SIM_GPU_MEM_GB", "141"))
        weights = float(env.get("HGXKIT_SIM_WEIGHTS_GB", "160")) / max(int(args["tp_size"]), 1)
        kv = max(gpu * float(args["mem_fraction_static"]) - weights - 4.0, 1.0) * GB
    host = 0.0
    if args["enable_hierarchical_cache"]:
        host = float(args["hicache_size"]) * GB if args["hicache_size"] else float(args["hicache_ratio"]) * kv
    return MemoryPlan(int(kv), int(host), world_size(args), kv_bytes_per_token)


def check_host_memory(plan: MemoryPlan, env: Mapping[str, str], root: Path = Path("/")) -> None:
    if plan.host_pool_bytes_per_rank == 0:
        return
    free_per_rank = host_free_bytes(env, root) / max(plan.ranks, 1)
    if plan.host_pool_bytes_per_rank > free_per_rank:
        raise StartupError(
            "ValueError: Not enough host memory available. Requesting "
            f"{plan.host_pool_bytes_per_rank / GB:.2f} GB but only have {free_per_rank / GB:.2f} GB free. "
            "Please reduce the size of the hierarchical cache."
        )


def run_checks(args: Mapping[str, Any], env: Mapping[str, str] | None = None) -> None:
    """GPU and model-path checks (those that need no model facts)."""
    env = os.environ if env is None else env
    check_gpus(args, env)
    check_model_path(str(args["model_path"]))
