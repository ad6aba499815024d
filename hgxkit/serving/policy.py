"""Serving policy checks: who can reach the API (exposure) and whether HiCache's host pools fit in RAM.

Example:
    >>> [p.code for p in exposure_problems("0.0.0.0", None, False)]
    ['exposure']
    >>> exposure_problems("127.0.0.1", None, False)
    []
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hgxkit.errors import InputError
from hgxkit.netaddr import is_loopback
from hgxkit.problems import Problem
from hgxkit.recipe.danger import Danger, PolicyContext, dangerous_options, judge_argv
from hgxkit.recipe.effective import effective_host
from hgxkit.recipe.spec import Recipe

GIB = 1024**3
_TRUE = frozenset({"true", "1", "t", "True", "TRUE"})


def exposure_problems(bind_address: str, api_key: str | None, allow_unauthenticated: bool) -> list[Problem]:
    """Binding beyond loopback needs an API key or an explicit `allow_unauthenticated: true`.

    `api_key` is None or "auto"; any other value (a key pasted into the inventory) is refused, because the
    roles would not pass it to the server, and a key kept in an inventory ends up in version control.
    """
    if api_key not in (None, "auto"):
        return [
            Problem(
                "api_key",
                f"api_key is set to a value other than auto ({len(str(api_key))} characters, not shown)",
                "set api_key: auto (a key is generated on the host, root-only) or remove it",
            )
        ]
    if is_loopback(bind_address) or api_key or allow_unauthenticated:
        return []
    return [
        Problem(
            "exposure",
            f"bind_address {bind_address} publishes the API beyond this host without an API key",
            "set api_key: auto (a key is generated and kept root-only on the host), bind 127.0.0.1, "
            "or set allow_unauthenticated: true",
        )
    ]


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


def recipe_exposure_problems(recipe: Recipe, *, api_key: str | None, allow_unauthenticated: bool) -> list[Problem]:
    """Exposure the recipe itself causes, whatever `bind_address` says: `-P` (`--publish-all`, `=true` too)
    publishes every exposed port on every interface; with `--network host` no port is published, the server's
    effective `--host` is what binds (hgxkit.recipe.effective: through `sh -c` wrappers too; the kind's default
    when absent: SGLang 127.0.0.1, vLLM all interfaces)."""
    problems = []
    if any(value is None or value in _TRUE for value in recipe.docker.values("--publish-all")):
        problems.append(
            Problem(
                "exposure",
                "-P publishes every exposed port on every interface, whatever bind_address says",
                "publish the server's port with -p instead",
            )
        )
    if recipe.docker.last("--network") == "host" and not (api_key or allow_unauthenticated):
        kind = recipe.server.server_kind
        try:
            host = effective_host(recipe)
        except InputError as err:
            return [
                *problems,
                Problem(
                    "exposure",
                    f"{err.message}, so who can reach the API is not known",
                    "write the server's flags without a sh -c wrapper",
                ),
            ]
        if not is_loopback(host):
            problems.append(
                Problem(
                    "exposure",
                    f"--network host with the server listening on {host} (--host, or {kind.title}'s default) "
                    "opens the API on every interface without an API key",
                    "set api_key: auto, add --host 127.0.0.1 to the server, or set allow_unauthenticated: true",
                )
            )
    return problems


def docker_option_problems(
    recipe: Recipe, allowed: Sequence[str], context: PolicyContext | None = None
) -> list[Problem]:
    """Dangerous docker options (hgxkit.recipe.danger) the inventory has not allowed by name or class."""
    return [_option_problem(danger) for danger in dangerous_options(recipe, context) if not danger.allowed_by(allowed)]


def argv_problems(argv: Sequence[str], allowed: Sequence[str], context: PolicyContext | None = None) -> list[Problem]:
    """The same judgement on the literal argv the node is about to hand Docker (the last check before a start)."""
    return [_option_problem(danger) for danger in judge_argv(argv, context) if not danger.allowed_by(allowed)]


def _option_problem(danger: Danger) -> Problem:
    return Problem(
        "docker-option",
        danger.message(),
        f'if you trust this recipe with that, set allow_docker_options: ["{danger.name}"] in the inventory',
    )
