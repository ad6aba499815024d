"""GPU-group planning: which GPUs each container of a recipe gets.

Example:
    >>> plan_gpu_groups(group_size=4, total_gpus=8)
    [(0, 1, 2, 3), (4, 5, 6, 7)]
    >>> parse_groups_arg("0,1;2,3")
    [(0, 1), (2, 3)]
"""

from __future__ import annotations

from hgxkit.errors import InputError


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
