"""Serving decisions as pure functions: container specs with a spec hash, the rollout plan, exposure and RAM.

The sglang_serve role renders one container per GPU group from the recipe, labels it with a hash of its
full spec, and compares labels (pyinfra's docker.container never recreates on a changed spec).

Example:
    >>> from hgxkit.recipe.loader import load_recipe
    >>> specs = container_specs(load_recipe("recipes/deepseek-v4-flash-dspark-marlin.yaml"), total_gpus=8,
    ...                         bind_address="127.0.0.1", api_key=False, image="lmsysorg/sglang@sha256:" + "0" * 64)
    >>> [(s.name, s.port) for s in specs]
    [('deepseek-v4-flash-0', 5000), ('deepseek-v4-flash-1', 5001)]
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field

from hgxkit.bringup import Problem
from hgxkit.recipe.dockerrun import parse_option_words
from hgxkit.recipe.model import Recipe, parse_publish
from hgxkit.recipe.render import render_recipe

MANAGED_LABEL = "hgxkit.serve"
SPEC_LABEL = "hgxkit.spec"
GROUP_LABEL = "hgxkit.group"
RECIPE_LABEL = "hgxkit.recipe"
DIGEST_LABEL = "hgxkit.image-digest"
API_KEY_ENV = "SGLANG_API_KEY"
LOOPBACK = ("127.0.0.1", "::1", "localhost")
GIB = 1024**3


@dataclass(frozen=True)
class ContainerSpec:
    """One serving container: what `docker run` gets, and the labels that identify it."""

    group: int
    name: str
    gpus: list[int]
    port: int | None
    argv: list[str]
    spec_hash: str
    labels: dict[str, str] = field(default_factory=dict)

    def shell(self, api_key_file: str | None = None) -> str:
        """The `docker run` command line; the API key is read from a root-only file when the shell runs it."""
        from hgxkit.recipe.shellwords import quote_word

        words = []
        for word in self.argv:
            if api_key_file and f"${{{API_KEY_ENV}}}" in word:
                words.append(word.replace(f"${{{API_KEY_ENV}}}", f'"$(cat {api_key_file})"'))
            else:
                words.append(quote_word(word))
        return " ".join(words)


def container_specs(
    recipe: Recipe, *, total_gpus: int | None, bind_address: str, api_key: bool, image: str
) -> list[ContainerSpec]:
    """Render every group's container: published ports bound to `bind_address`, `--api-key` when asked,
    detached, labelled, and run by `image` (a digest reference)."""
    specs = []
    for group in render_recipe(recipe, total_gpus=total_gpus):
        docker_end = len(recipe.docker.invocation) + len(recipe.docker.words())
        invocation = group.argv[: len(recipe.docker.invocation)]
        options, detached = _bind_ports(group.argv[len(recipe.docker.invocation) : docker_end], bind_address)
        if not detached:
            options = ["-d", *options]  # the role waits on health itself; the container must not hold the shell
        server = group.argv[docker_end + 1 :]
        if api_key and "--api-key" not in server:
            server = [*server, "--api-key", f"${{{API_KEY_ENV}}}"]
        body = [*options, image, *server]
        spec_hash = hashlib.sha256(json.dumps(body).encode()).hexdigest()[:16]
        labels = {
            MANAGED_LABEL: "1",
            RECIPE_LABEL: recipe.name,
            GROUP_LABEL: str(group.group),
            SPEC_LABEL: spec_hash,
        }
        label_words = [w for key, value in labels.items() for w in ("--label", f"{key}={value}")]
        argv = [*invocation, *label_words, *body]
        specs.append(
            ContainerSpec(
                group.group,
                group.name or f"{recipe.name}-{group.group}",
                group.gpus or [],
                group.port,
                argv,
                spec_hash,
                labels,
            )
        )
    return specs


def _bind_ports(options: list[str], bind_address: str) -> tuple[list[str], bool]:
    """Rewrite each `-p`/`--publish` to bind `bind_address` (replacing any host address the recipe had);
    also say whether the options already detach."""
    out: list[str] = []
    detached = False
    for entry in parse_option_words(options, source="serve"):
        words = list(entry.words)
        for use in entry.uses:
            detached = detached or use.option.name == "--detach"
            if use.option.name != "--publish" or not use.value:
                continue
            mapping = parse_publish(use.value)
            if not mapping.host_port:
                continue
            host = f"[{bind_address}]" if ":" in bind_address else bind_address
            bound = f"{host}:{mapping.host_port}:{mapping.container_port}"
            words[-1] = words[-1][: len(words[-1]) - len(use.value)] + bound
        out.extend(words)
    return out, detached


@dataclass(frozen=True)
class RunningContainer:
    """A serving container hgxkit manages on the host, from `docker ps -a` and `docker inspect`."""

    name: str
    container_id: str
    spec_hash: str | None
    group: int | None
    running: bool
    started_at: str | None = None


@dataclass(frozen=True)
class Rollout:
    """What to do: groups to (re)create one at a time, containers to remove, and what stays untouched."""

    replace: list[ContainerSpec]
    remove: list[RunningContainer]
    keep: list[RunningContainer]

    @property
    def changes(self) -> bool:
        return bool(self.replace or self.remove)


def plan_rollout(current: list[RunningContainer], desired: list[ContainerSpec]) -> Rollout:
    """Compare running containers with the desired specs by name and spec hash."""
    by_name = {c.name: c for c in current}
    replace, keep = [], []
    for spec in desired:
        running = by_name.get(spec.name)
        if running and running.spec_hash == spec.spec_hash and running.running:
            keep.append(running)
        else:
            replace.append(spec)
    wanted = {spec.name for spec in desired}
    remove = [c for c in current if c.name not in wanted]
    return Rollout(replace, remove, keep)


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
    if bind_address in LOOPBACK or api_key or allow_unauthenticated:
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
    tp = int(server.flag("--tp-size") or 1)
    kv_per_rank = max(gpu_memory_gb * fraction - weights_gb / tp - 4.0, 1.0)
    ratio = float(server.flag("--hicache-ratio") or 2.0)
    return HostMemoryNeed(ratio * kv_per_rank, ranks, groups)


def memory_problems(need: HostMemoryNeed, ram_bytes: int | None, reserve_gb: float) -> list[Problem]:
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


_DIGEST = re.compile(r"@(sha256:[0-9a-f]{64})")


def digest_of(repo_digest: str) -> str | None:
    """`lmsysorg/sglang@sha256:…` -> `sha256:…`."""
    match = _DIGEST.search(repo_digest)
    return match.group(1) if match else None


def by_digest(reference: str, digest: str) -> str:
    """`lmsysorg/sglang:dev-dspark` + digest -> `lmsysorg/sglang@sha256:…` (the tag is dropped: it can move)."""
    repo = reference.split("@", 1)[0]
    last = repo.rsplit("/", 1)[-1]
    if ":" in last:
        repo = repo[: len(repo) - len(last)] + last.split(":", 1)[0]
    return f"{repo}@{digest}"
