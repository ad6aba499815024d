"""GPU-group planning: which GPUs each container of a recipe gets.

The one group planner: `plan_groups` is what render, check, serving and verify all use.

Example:
    >>> plan_gpu_groups(group_size=4, total_gpus=8)
    [(0, 1, 2, 3), (4, 5, 6, 7)]
    >>> parse_groups_arg("0,1;2,3")
    [(0, 1), (2, 3)]
    >>> gpu_ids_from_spec('"device=0,1,2,3"'), gpu_ids_from_spec("all")
    ([0, 1, 2, 3], None)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hgxkit.errors import InputError

if TYPE_CHECKING:
    from hgxkit.recipe.spec import DockerSpec, Recipe


def plan_gpu_groups(*, group_size: int, total_gpus: int) -> list[tuple[int, ...]]:
    """Consecutive groups of `group_size` GPUs over GPUs 0..total-1; the total must divide evenly."""
    if group_size < 1:
        raise InputError(f"group size {group_size}: must be at least 1")
    if total_gpus % group_size:
        raise InputError(
            f"{total_gpus} GPUs do not divide into groups of {group_size}; "
            f"use a GPU count that is a multiple of {group_size} or explicit --groups"
        )
    return [tuple(range(start, start + group_size)) for start in range(0, total_gpus, group_size)]


def parse_groups_arg(text: str) -> list[tuple[int, ...]]:
    """Parse `--groups "0,1,2,3;4,5,6,7"` into GPU id tuples."""
    groups: list[tuple[int, ...]] = []
    for index, chunk in enumerate(text.split(";")):
        ids = []
        for item in chunk.split(","):
            item = item.strip()
            if not item.isdigit():
                raise InputError(
                    f"--groups {text!r}: group {index} has {item!r}, not a GPU id; "
                    'write ids separated by commas and groups by semicolons, e.g. "0,1,2,3;4,5,6,7"'
                )
            ids.append(int(item))
        groups.append(tuple(ids))
    return groups


def group_problems(groups: list[tuple[int, ...]], total_gpus: int | None) -> list[str]:
    """Overlaps, repeats and out-of-range ids in a group plan, one sentence each (empty when sound)."""
    problems: list[str] = []
    owner: dict[int, int] = {}
    for index, group in enumerate(groups):
        if len(set(group)) != len(group):
            problems.append(f"group {index} lists a GPU twice: {list(group)}")
        for gpu in group:
            if total_gpus is not None and gpu >= total_gpus:
                problems.append(f"group {index} uses GPU {gpu}, but the node has GPUs 0-{total_gpus - 1}")
            if gpu in owner and owner[gpu] != index:
                problems.append(f"groups {owner[gpu]} and {index} overlap on GPU {gpu}")
            owner.setdefault(gpu, index)
    return problems


def gpu_ids_from_spec(value: str | None) -> list[int] | None:
    """GPU ids of a `--gpus` value (`'"device=0,1"'`, `device=2`); None for `all`, a count or placeholders."""
    spec = (value or "").strip("\"'")
    ids = spec.split("device=", 1)[1] if "device=" in spec else ""
    parts = [part.strip() for part in ids.split(",")] if ids else []
    if parts and all(part.isdigit() for part in parts):
        return [int(part) for part in parts]
    return None


def named_gpus(docker: DockerSpec) -> list[int]:
    """The node's GPUs a one-command recipe's container names: its `--gpus` device list, else, under `--gpus all`,
    its own `CUDA_VISIBLE_DEVICES`/`NVIDIA_VISIBLE_DEVICES` (the node's numbering there); [] when neither lists.

    >>> from hgxkit.recipe.docker_parse import parse_option_words
    >>> from hgxkit.recipe.spec import DockerSpec
    >>> options = parse_option_words(["--gpus", "all", "-e", "CUDA_VISIBLE_DEVICES=7,8"], source="r")
    >>> named_gpus(DockerSpec(("docker", "run"), tuple(options)))
    [7, 8]
    """
    listed = gpu_ids_from_spec(docker.last("--gpus"))
    if listed is not None:
        return listed
    for setting in docker.env():
        if setting.name in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"):
            return gpu_ids_from_spec(f"device={(setting.value or '').strip(chr(34) + chr(39))}") or []
    return []


def gpu_count_from_spec(value: str | None) -> int | None:
    """How many GPUs a `--gpus` value names by device list (placeholders count too); None for `all`/absent."""
    spec = (value or "").strip("\"'")
    if "device=" not in spec:
        return None
    return len([part for part in spec.split("device=", 1)[1].split(",") if part.strip()])


def plan_groups(
    recipe: Recipe,
    *,
    total_gpus: int | None = None,
    groups: list[tuple[int, ...]] | None = None,
    refuse_unsound: bool = True,
) -> list[tuple[int, ...]] | None:
    """The GPU groups of `recipe`: explicit `groups`, the recipe's own, or planned over `total_gpus`
    (default: the recipe's `gpus_per_node`). None for a recipe without grouping (one command, as written).

    Raises InputError naming the recipe when the groups cannot be planned, or (unless `refuse_unsound` is
    False, as for `recipe check`, which reports them itself) when groups overlap or leave the node.
    """
    where = recipe.path or recipe.name
    if recipe.groups is None:
        if groups is not None and len(groups) > 1:
            raise InputError(f"{where}: the recipe has no GPU grouping (no X placeholders); it renders one command")
        return None
    if groups is not None:
        planned = groups
    elif recipe.groups.explicit is not None:
        planned = list(recipe.groups.explicit)
    else:
        total = total_gpus if total_gpus is not None else recipe.groups.gpus_per_node
        if total is None:
            raise InputError(f'{where}: how many GPUs? pass --gpus N (e.g. --gpus 8) or --groups "0,1,2,3;4,5,6,7"')
        assert recipe.groups.size is not None  # reading the recipe guarantees size or explicit
        try:
            planned = plan_gpu_groups(group_size=recipe.groups.size, total_gpus=total)
        except InputError as err:
            raise InputError(f"{where}: {err.message}") from None
    problems = group_problems(planned, total_gpus) if refuse_unsound else []
    if problems:
        raise InputError(f"{where}: {problems[0]}; fix the GPU groups")
    return planned
