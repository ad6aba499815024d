"""What the engine itself would refuse at start-up, found at import: a recipe that imports must be able to start.

The engine's argument parser: each server kind says what its parser refuses (`ServerKind.refuses_flag`, e.g.
SGLang's `--max_num_batched_tokens` or, from 0.5.23, `--cuda-graph-max-bs`; vLLM's `--enable-chunked-prefill=False`
from 0.10), judged against the image the recipe runs (`latest` or untagged is today's engine). And CUDA, for every
kind: `CUDA_VISIBLE_DEVICES` takes GPU ordinals or UUIDs and CUDA stops at the first invalid entry, so
`CUDA_VISIBLE_DEVICES=all` leaves the engine no GPU (`all` is `NVIDIA_VISIBLE_DEVICES`'s word).

Example:
    >>> from hgxkit.recipe.importing.docker_run import import_docker_run
    >>> recipe = import_docker_run("docker run --gpus all vllm/vllm-openai:v0.11.0 --model org/m")
    >>> engine_refusal(recipe) is None
    True
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hgxkit.recipe.model import Recipe

_CUDA_DEVICE = re.compile(r"\d+|(?:GPU|MIG)-[0-9A-Za-z-]+")


@dataclass(frozen=True)
class Refusal:
    """Why the engine would not start: the post's text that causes it (`word`, to point at) and the reason with
    its remedy, in one line."""

    word: str
    reason: str


def engine_refusal(recipe: Recipe) -> Refusal | None:
    """Why the recipe's engine would refuse to start; None when it would start."""
    kind = recipe.server.server_kind
    for setting in recipe.docker.env():
        value = setting.value if setting.name == "CUDA_VISIBLE_DEVICES" else None
        if value is not None and not _CUDA_DEVICE.fullmatch(value.split(",")[0].strip()):
            return Refusal(
                "CUDA_VISIBLE_DEVICES",
                f"CUDA_VISIBLE_DEVICES={value}: CUDA takes GPU ordinals or UUIDs and stops at the first invalid "
                f"entry, so {kind.title} would see no GPU; drop it (the container's GPUs come from --gpus / "
                "NVIDIA_VISIBLE_DEVICES, where `all` is a word)",
            )
    if kind.refuses_flag is None:
        return None
    for use in recipe.server.uses():
        reason = kind.refuses_flag(use.words[0], recipe.image.reference)
        if reason:
            return Refusal(use.words[0], reason)
    return None
