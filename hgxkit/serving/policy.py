"""Whether HiCache's host pools fit in the node's RAM (who may reach the API is the recipe's judgement:
hgxkit.recipe.judge).

Example:
    >>> memory_problems(HostMemoryNeed(100.0, 8, 2), 2048 * 1024**3, 64.0)
    []
"""

from __future__ import annotations

from dataclasses import dataclass

from hgxkit.problems import Problem
from hgxkit.recipe.danger import flag_number
from hgxkit.recipe.spec import Recipe

GIB = 1024**3
H200_MEMORY_GB = 143771 / 1024  # what nvidia-smi reports for an H200 (the estimates' GPU before a driver reports one)


@dataclass(frozen=True)
class HostMemoryNeed:
    """HiCache host RAM all groups pin together, and how it was estimated."""

    per_rank_gb: float
    ranks: int
    groups: int

    @property
    def total_gb(self) -> float:
        return self.per_rank_gb * self.ranks * self.groups


def hicache_need(recipe: Recipe, *, groups: int, gpu_memory_gb: float, weights_gb: float) -> HostMemoryNeed:
    """Host RAM the HiCache host pools of every group pin: ratio x device KV pool per rank, or --hicache-size.

    The device KV pool per rank is estimated as GPU memory x --mem-fraction-static, minus the rank's share of
    the weights and ~4 GB of activations and graphs (SGLang sizes it the same way, measured after loading).
    """
    from hgxkit.recipe.check import parallel_size

    server = recipe.server
    ranks = parallel_size(recipe)
    if not server.has("--enable-hierarchical-cache"):
        return HostMemoryNeed(0.0, ranks, groups)
    size = server.flag("--hicache-size")
    if size not in (None, "0"):
        return HostMemoryNeed(float(size or 0), ranks, groups)
    fraction = float(server.flag("--mem-fraction-static") or 0.88)
    tp = int(server.flag(server.server_kind.tp_flag) or 1)
    kv_per_rank = max(gpu_memory_gb * fraction - weights_gb / tp - 4.0, 1.0)
    ratio = float(server.flag("--hicache-ratio") or 2.0)
    return HostMemoryNeed(ratio * kv_per_rank, ranks, groups)


def host_pools(recipe: Recipe, *, gpus: int, gpu_memory_gb: float, weights_gb: float) -> list[tuple[str, float]]:
    """The host RAM (GB) the server's flags pin on `gpus` of its GPUs, each with the arithmetic that gives it:
    SGLang's HiCache host pools (per rank, `hicache_need`), vLLM's `--cpu-offload-gb` (per GPU) and
    `--kv-offloading-size` (the buffer of a whole TP group, summed over its ranks).

    Example:
        >>> from hgxkit.recipe.read import load_recipe
        >>> recipe = load_recipe("recipes/deepseek-v4-flash-dspark-marlin.yaml")
        >>> host_pools(recipe, gpus=4, gpu_memory_gb=140.0, weights_gb=160.0)
        [('HiCache 4 ranks x 316.8', 1267.2)]
    """
    server = recipe.server
    pools = []
    hicache = round(hicache_need(recipe, groups=1, gpu_memory_gb=gpu_memory_gb, weights_gb=weights_gb).per_rank_gb, 1)
    if hicache:
        pools.append((f"HiCache {gpus} ranks x {hicache:g}", round(hicache * gpus, 1)))
    offload = flag_number(server.flag("--cpu-offload-gb"))
    if offload:
        pools.append((f"--cpu-offload-gb {offload:g} x {gpus} GPUs", offload * gpus))
    kv = flag_number(server.flag("--kv-offloading-size"))
    tp = int(flag_number(server.flag(server.server_kind.tp_flag)) or 1)
    if kv:
        pools.append((f"--kv-offloading-size {kv:g} x {gpus} GPUs / TP {tp}", round(kv * gpus / tp, 1)))
    return pools


def memory_problems(need: HostMemoryNeed, ram_bytes: int | None, reserve_gb: float) -> list[Problem]:
    """The HiCache refusal when the host pools do not fit in RAM (less `reserve_gb` for the OS)."""
    if not need.total_gb or ram_bytes is None:
        return []
    available = ram_bytes / GIB - reserve_gb
    if need.total_gb <= available:
        return []
    return [
        Problem(
            "hicache-ram",
            f"HiCache host pools need {need.total_gb:.0f} GB ({need.per_rank_gb:.0f} GB x {need.ranks} ranks x "
            f"{need.groups} groups) but the host has {ram_bytes / GIB:.0f} GiB ({reserve_gb:.0f} kept for the OS)",
            "lower --hicache-ratio, set --hicache-size GB, or serve fewer groups",
        )
    ]
