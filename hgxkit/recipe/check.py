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

from dataclasses import dataclass
from typing import Literal

from hgxkit.errors import InputError
from hgxkit.recipe.danger import dangerous_options
from hgxkit.recipe.groups import gpu_count_from_spec, group_problems, plan_groups
from hgxkit.recipe.model import Recipe

Level = Literal["error", "warning"]
_DEV_TAGS = ("latest", "dev", "nightly")
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


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
    findings += _check_pitfalls(recipe)
    findings += [Finding("warning", "host-input", note) for note in recipe.host_inputs()]
    return findings


def parallel_size(recipe: Recipe) -> int:
    """GPUs one server uses: tp x pp, times dp unless DP-attention runs inside the TP group (flags spelled
    as the recipe's server kind spells them)."""
    kind = recipe.server.server_kind
    tp = _int_flag(recipe, kind.tp_flag, 1)
    pp = _int_flag(recipe, kind.pp_flag, 1)
    dp = _int_flag(recipe, kind.dp_flag, 1)
    if recipe.server.has("--enable-dp-attention"):
        dp = 1
    return tp * pp * dp


def _int_flag(recipe: Recipe, name: str, default: int) -> int:
    value = recipe.server.flag(name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise InputError(
            f"{recipe.path or recipe.name}: server {name} {value!r} is not a whole number"
        ) from None


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
    sizes = {len(group) for group in planned}
    if groups is None:
        count = gpu_count_from_spec(recipe.docker.last("--gpus"))
        if count is not None:
            sizes = {count}
    for size in sorted(sizes):
        if size != want:
            findings.append(
                Finding(
                    "error",
                    "group-size",
                    f"a group has {size} GPUs but the server runs on {want} (tp x pp x dp); "
                    f"make them equal (e.g. --tp {size})",
                )
            )
    if groups is not None and len(planned) > 1 and (recipe.docker.last("--gpus") or "").strip("\"'") == "all":
        findings.append(
            Finding(
                "error",
                "gpus-all",
                "--gpus all gives every group every GPU; use --gpus '\"device={{gpus}}\"'",
            )
        )
    return findings


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
    model_path = recipe.server.flag("--model-path")
    mounts = recipe.docker.mounts()
    if model_path and model_path.startswith("/"):
        covered = any(
            m.target
            and (model_path == m.target.rstrip("/") or model_path.startswith(m.target.rstrip("/") + "/"))
            for m in mounts
        )
        if not covered:
            findings.append(
                Finding(
                    "error",
                    "model-mount",
                    f"--model-path {model_path} is not inside any mount; add -v <host dir>:{model_path}",
                )
            )
    model = recipe.model
    local_dir, mount_point = model.local_dir, model.mount_point
    if local_dir and mount_point and not any(m.source.rstrip("/") == local_dir.rstrip("/") for m in mounts):
        findings.append(
            Finding(
                "error",
                "model-mount",
                f"model.local_dir {local_dir} is not mounted; add -v {local_dir}:{mount_point}",
            )
        )
    return findings


def _check_exposure(recipe: Recipe) -> list[Finding]:
    findings = []
    ports = recipe.docker.ports()
    host = recipe.server.flag("--host")
    network_host = recipe.docker.last("--network") == "host"
    if ports and not network_host and host in (None, "127.0.0.1", "localhost"):
        findings.append(
            Finding(
                "warning",
                "unreachable",
                f"the server listens on {host or '127.0.0.1 (SGLang default)'} inside the container, so the "
                "published port cannot reach it; add --host 0.0.0.0",
            )
        )
    public = [p for p in ports if p.host_port and p.host_ip not in _LOOPBACK]
    if host in ("0.0.0.0", "::") and (public or network_host) and not recipe.server.has("--api-key"):
        findings.append(
            Finding(
                "warning",
                "unauthenticated",
                "--host 0.0.0.0 is published on every interface without --api-key: anyone who reaches the "
                "node can use the API; bind -p 127.0.0.1:… or add --api-key",
            )
        )
    if network_host and ports:
        findings.append(
            Finding("warning", "network-host", "-p is ignored with --network host; drop one of them")
        )
    return findings


def _check_pitfalls(recipe: Recipe) -> list[Finding]:
    findings = []
    server = recipe.server
    docker = recipe.docker

    def warn(code: str, message: str) -> None:
        findings.append(Finding("warning", code, message))

    if any(use.words[0].partition("=")[0] == "--cuda-graph-max-bs" for use in server.uses()):
        warn(
            "cuda-graph-max-bs",
            "--cuda-graph-max-bs is ambiguous in SGLang >= 0.5.23 (it could match --cuda-graph-max-bs-decode "
            "and --cuda-graph-max-bs-prefill) and the server exits; use --cuda-graph-max-bs-decode",
        )
    if docker.values("--shm-size") and docker.last("--ipc") == "host":
        warn("shm-size-ignored", "--shm-size has no effect with --ipc=host (the host's /dev/shm is used)")
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
