"""`hgxkit recipe check`: find what would break a recipe on a node before anything is started.

Errors are setups that cannot work (overlapping GPU groups, a group size that is not the server's
parallel size, two groups on one host port, a model path no mount provides) and docker options that give the
container power over the node (`dangerous-option`, see `hgxkit.recipe.danger`). Warnings are known pitfalls
from the SGLang notes, each with its reason.

Example:
    >>> from hgxkit.recipe.loader import load_recipe
    >>> [f.code for f in check_recipe(load_recipe("recipes/deepseek-v4-flash-dspark-marlin.yaml"), 8)
    ...  if f.level == "error"]
    []
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from hgxkit.errors import InputError
from hgxkit.netaddr import is_loopback
from hgxkit.recipe.danger import dangerous_options
from hgxkit.recipe.groups import gpu_count_from_spec, group_problems, plan_groups
from hgxkit.recipe.model import Mount, Recipe
from hgxkit.recipe.network_env import host_interface_settings
from hgxkit.recipe.nodes import parallel_size as nodes_parallel_size

Level = Literal["error", "warning"]
_DEV_TAGS = ("latest", "dev", "nightly")


@dataclass(frozen=True)
class Finding:
    """One problem: its level, a stable code for scripts, and a sentence with the reason and remedy."""

    level: Level
    code: str
    message: str


def check_recipe(recipe: Recipe, total_gpus: int | None = None) -> list[Finding]:
    """Every error and warning for `recipe` on a node with `total_gpus` GPUs (None: the recipe's default)."""
    findings: list[Finding] = []
    findings += _check_groups(recipe, total_gpus)
    findings += _check_ports(recipe, total_gpus)
    findings += _check_model_mount(recipe)
    findings += [Finding("error", "dangerous-option", danger.message()) for danger in dangerous_options(recipe)]
    findings += _check_exposure(recipe)
    findings += _check_host_interfaces(recipe)
    findings += _check_pitfalls(recipe)
    findings += [Finding("warning", "host-input", note) for note in recipe.host_inputs()]
    return findings


def parallel_size(recipe: Recipe) -> int:
    """GPUs one server uses over all its hosts: tp x pp, times dp unless SGLang's DP attention runs inside the
    TP group (flags spelled as the recipe's server kind spells them: vLLM's `-tp`, `--tensor_parallel_size`)."""
    return nodes_parallel_size(recipe.server, recipe.path or recipe.name)


def _planned_groups(recipe: Recipe, total_gpus: int | None) -> list[tuple[int, ...]]:
    """The recipe's GPU groups (the one planner, unsound plans kept: the checks below report them), or []
    when it has no grouping or no GPU count to plan on."""
    groups = recipe.groups
    if groups is None or (groups.explicit is None and (total_gpus or groups.gpus_per_node) is None):
        return []
    return plan_groups(recipe, total_gpus=total_gpus, refuse_unsound=False) or []


def _check_groups(recipe: Recipe, total_gpus: int | None) -> list[Finding]:
    findings: list[Finding] = []
    groups = recipe.groups
    total = total_gpus if total_gpus is not None else (groups.gpus_per_node if groups else None)
    try:
        planned = _planned_groups(recipe, total_gpus)
    except InputError as err:
        return [Finding("error", "gpu-count", err.message)]
    findings += [Finding("error", "gpu-groups", problem) for problem in group_problems(planned, total)]
    want = parallel_size(recipe)
    nodes = recipe.node_count()
    sizes = {len(group) for group in planned}
    if groups is None:
        count = gpu_count_from_spec(recipe.docker.last("--gpus"))
        if count is not None:
            sizes = {count}
        elif total is not None and (recipe.docker.last("--gpus") or "").strip("\"'") == "all":
            findings += _gpus_all(want, nodes, total)
    for size in sorted(sizes):
        if size * nodes != want:
            findings.append(Finding("error", "group-size", _size_message(size, nodes, want)))
    if groups is not None and len(planned) > 1 and (recipe.docker.last("--gpus") or "").strip("\"'") == "all":
        findings.append(
            Finding(
                "error",
                "gpus-all",
                "--gpus all gives every group every GPU; use --gpus '\"device={{gpus}}\"'",
            )
        )
    return findings


def _size_message(size: int, nodes: int, want: int) -> str:
    """Why a group's GPUs do not match the server's parallel size, and the remedies that fit."""
    if nodes > 1:
        return (
            f"a group has {size} GPUs on each of {nodes} nodes ({size * nodes} in all) but the server runs on {want} "
            f"(tp x pp x dp); make them equal (groups.size x groups.nodes = tp x pp x dp)"
        )
    message = f"a group has {size} GPUs but the server runs on {want} (tp x pp x dp); make them equal "
    message += f"(e.g. --tp {size})"
    if want > size and want % size == 0:
        message += f", or spread the server over {want // size} nodes with --nnodes {want // size} and --node-rank"
    return message


def _gpus_all(want: int, nodes: int, total: int) -> list[Finding]:
    """`--gpus all` gives the container every GPU of the node: enough for the server's share, or not."""
    per_host = want // nodes if want % nodes == 0 else want
    if per_host > total:
        more = -(-want // total)
        message = (
            f"--gpus all gives the container the node's {total} GPUs but the server runs on {want} (tp x pp x dp) "
            f"on {nodes} node(s); lower tp x pp x dp to {total}, or spread the server over {more} nodes with "
            f"--nnodes {more} and --node-rank"
        )
        return [Finding("error", "group-size", message)]
    if per_host < total:
        message = (
            f"--gpus all gives the container all {total} GPUs of the node but the server uses {per_host} "
            "(tp x pp x dp); the others idle: use --gpus '\"device=…\"' or GPU groups"
        )
        return [Finding("warning", "gpus-all", message)]
    return []


def _check_ports(recipe: Recipe, total_gpus: int | None) -> list[Finding]:
    try:
        count = max(len(_planned_groups(recipe, total_gpus)), 1)
    except InputError:
        return []  # the group checks already explain why the recipe cannot be planned
    base = recipe.groups.port_base if recipe.groups else None
    owners: dict[tuple[str, str], int] = {}
    findings = []
    for index in range(count):
        group_port = str(base + index) if base is not None else ""
        for mapping in recipe.docker.ports():
            host_port = mapping.host_port.replace("{{port}}", group_port)
            if not host_port:
                continue
            key = (mapping.host_ip, host_port)
            if key in owners:
                who = f"groups {owners[key]} and {index}" if owners[key] != index else f"group {index}"
                findings.append(
                    Finding(
                        "error",
                        "port-clash",
                        f"{who} publish host port {host_port} twice; give the port an X placeholder (500X) "
                        "so each group gets its own",
                    )
                )
            owners.setdefault(key, index)
    return findings


def _check_model_mount(recipe: Recipe) -> list[Finding]:
    findings = []
    kind = recipe.server.server_kind
    model_path = recipe.server.flag(kind.model_flag)
    mounts = recipe.docker.mounts()
    if model_path and model_path.startswith("/") and not any(_inside(model_path, m.target) for m in mounts):
        findings.append(
            Finding(
                "error",
                "model-mount",
                f"{kind.model_flag} {model_path} is not inside any mount; add -v <host dir>:{model_path}",
            )
        )
    model = recipe.model
    local_dir, mount_point = model.local_dir, model.mount_point
    if local_dir and mount_point and not any(_mounted_at(local_dir, mount_point, m) for m in mounts):
        findings.append(
            Finding(
                "error",
                "model-mount",
                f"model.local_dir {local_dir} is not mounted at {mount_point}; add -v {local_dir}:{mount_point}",
            )
        )
    return findings


def _inside(path: str, directory: str) -> bool:
    """True when `path` is `directory` or under it (a model under a mounted parent directory is mounted)."""
    base = directory.rstrip("/")
    return bool(base) and (path.rstrip("/") == base or path.startswith(base + "/"))


def _mounted_at(local_dir: str, mount_point: str, mount: Mount) -> bool:
    """True when `mount` puts host `local_dir` at `mount_point`: itself, or through a parent directory."""
    source, target = mount.source.rstrip("/"), mount.target.rstrip("/")
    if not source.startswith("/") or not _inside(local_dir, source):
        return False
    return mount_point.rstrip("/") == target + local_dir.rstrip("/")[len(source) :]


def _check_exposure(recipe: Recipe) -> list[Finding]:
    findings = []
    ports = recipe.docker.ports()
    kind = recipe.server.server_kind
    written = recipe.server.flag("--host")
    host = written or kind.default_host  # judged by what the engine really binds when --host is absent
    network_host = recipe.docker.last("--network") == "host"
    if ports and not network_host and is_loopback(host):
        findings.append(
            Finding(
                "error",  # the deploy would wait for a health answer that can never come
                "unreachable",
                f"the server listens on {written or f'{host} ({kind.title} default)'} inside the container, so the "
                "published port cannot reach it; add --host 0.0.0.0",
            )
        )
    public = [p for p in ports if p.host_port and not is_loopback(p.host_ip)]
    if host in ("0.0.0.0", "::") and (public or network_host) and not recipe.server.has("--api-key"):
        findings.append(
            Finding(
                "warning",
                "unauthenticated",
                f"{'--host ' + host if written else f'{kind.title} listens on {host} by default and'} is published on "
                "every interface without --api-key: anyone who reaches the node can use the API; bind -p 127.0.0.1:… "
                "or add --api-key",
            )
        )
    if network_host and ports:
        findings.append(
            Finding("warning", "network-host", "-p is ignored with --network host; drop one of them")
        )
    return findings


def _check_host_interfaces(recipe: Recipe) -> list[Finding]:
    """A container on its own (bridge) network told to use a host interface (`NCCL_SOCKET_IFNAME=bond0`):
    the interface does not exist there, and NCCL or Gloo fails at init."""
    if recipe.docker.last("--network") == "host":
        return []
    settings = host_interface_settings((e.name, e.value) for e in recipe.docker.env())
    return [
        Finding("error", "host-interface", f"-e {name}={value} names a host network interface, but the container "
                "has its own network (no --network host), where only lo and eth0 exist: add --network host or drop "
                f"{name}")
        for name, value in settings
    ]  # fmt: skip


def _check_pitfalls(recipe: Recipe) -> list[Finding]:
    findings = []
    server = recipe.server
    docker = recipe.docker

    def warn(code: str, message: str) -> None:
        findings.append(Finding("warning", code, message))

    if docker.values("--shm-size") and docker.last("--ipc") == "host":
        warn("shm-size-ignored", "--shm-size has no effect with --ipc=host (the host's /dev/shm is used)")
    if server.kind == "sglang":
        _sglang_pitfalls(recipe, warn)
    tag = (
        recipe.image.reference.rsplit(":", 1)[-1]
        if ":" in recipe.image.reference.rsplit("/", 1)[-1]
        else "latest"
    )
    if not recipe.image.digest and tag.startswith(_DEV_TAGS):
        warn(
            "moving-tag",
            f"image tag {tag!r} moves; the serve role runs the digest it pulled, pin it in image.digest to "
            "refuse a changed image",
        )
    return findings


def _sglang_pitfalls(recipe: Recipe, warn: Callable[[str, str], None]) -> None:
    """Known SGLang pitfalls: flags of its CLI, DSpark and HiCache settings."""
    server = recipe.server
    docker = recipe.docker
    if any(use.words[0].partition("=")[0] == "--cuda-graph-max-bs" for use in server.uses()):
        warn(
            "cuda-graph-max-bs",
            "--cuda-graph-max-bs is ambiguous in SGLang >= 0.5.23 (it could match --cuda-graph-max-bs-decode "
            "and --cuda-graph-max-bs-prefill) and the server exits; use --cuda-graph-max-bs-decode",
        )
    algorithm = (server.flag("--speculative-algorithm") or "").upper()
    dspark_model = "dspark" in f"{recipe.model.repo_id or ''} {recipe.model.local_dir or ''}".lower()
    if algorithm in ("EAGLE", "EAGLE3", "NEXTN") and dspark_model:
        warn(
            "wrong-spec-algorithm",
            f"--speculative-algorithm {algorithm} on a DSpark checkpoint serves with accept length 1.0; "
            "use --speculative-algorithm DSPARK",
        )
    if algorithm == "DSPARK":
        shape_flags = [
            f
            for f in ("--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens")
            if server.has(f)
        ]
        if shape_flags:
            warn(
                "dspark-shape",
                f"{', '.join(shape_flags)} are ignored with DSPARK (the draft shape comes from the "
                "checkpoint); use --speculative-dspark-block-size",
            )
    env = {setting.name: setting.value for setting in docker.env()}
    if env.get("SGLANG_RAGGED_VERIFY_MODE") == "compact" and not server.has(
        "--speculative-dspark-sps-table-path"
    ):
        warn(
            "compact-without-sps",
            "SGLANG_RAGGED_VERIFY_MODE=compact without --speculative-dspark-sps-table-path verifies the "
            "whole block anyway; build a table with sglang.benchmark.dspark_sps_profiler or use static",
        )
    if server.has("--enable-hierarchical-cache") and server.flag("--hicache-size") in (None, "0"):
        ratio = server.flag("--hicache-ratio") or "2 (default)"
        warn(
            "hicache-host-ram",
            f"HiCache ratio {ratio} pins ratio x the device KV pool in host RAM per rank, for every "
            "group; two TP4 groups at ratio 4 can need terabytes; the serve role checks RAM, or set "
            "--hicache-size GB",
        )
