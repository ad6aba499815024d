"""What the engine itself would refuse at start-up, found at import: a recipe that imports must be able to start.

Each rule is a refusal of the real engine's argument parser or of CUDA, checked against the image the recipe
runs (a `latest` or untagged image is today's engine; a pinned older version keeps its own parser):

- SGLang parses with plain argparse: an underscore spelling (`--max_num_batched_tokens`, a vLLM habit) is not
  converted to dashes and is an `unrecognized arguments` error (vLLM's FlexibleArgumentParser converts it).
- SGLang >= 0.5.23 (and `latest`): `--cuda-graph-max-bs` is ambiguous between `--cuda-graph-max-bs-decode` and
  `--cuda-graph-max-bs-prefill`, and argparse exits.
- vLLM >= 0.10 (and `latest`): boolean flags are `BooleanOptionalAction`s, so `--enable-chunked-prefill=False`
  is `ignored explicit argument 'False'`; the off spelling is `--no-enable-chunked-prefill`.
- Both: `CUDA_VISIBLE_DEVICES` takes GPU ordinals or UUIDs and CUDA stops at the first invalid entry, so
  `CUDA_VISIBLE_DEVICES=all` leaves the engine no GPU (`all` is `NVIDIA_VISIBLE_DEVICES`'s word).

Example:
    >>> image_version("lmsysorg/sglang:v0.4.6.post1-cu124"), image_version("vllm/vllm-openai:latest")
    ((0, 4, 6), None)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hgxkit.recipe.imageref import repository
from hgxkit.recipe.model import Recipe

_VERSION = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?")
_CUDA_DEVICE = re.compile(r"\d+|(?:GPU|MIG)-[0-9A-Za-z-]+")
_BOOL_VALUE = re.compile(r"(?i)true|false|yes|no|on|off|0|1")


def image_version(reference: str) -> tuple[int, ...] | None:
    """The engine version an image tag names (`v0.5.23-cu129` -> (0, 5, 23)); None for `latest`, no tag or
    a tag without a version (`dev`, `nightly`): today's engine."""
    tag = reference.split("@", 1)[0][len(repository(reference)) + 1 :]
    match = _VERSION.match(tag)
    return tuple(int(part) for part in match.groups() if part is not None) if match else None


def _at_least(reference: str, version: tuple[int, ...]) -> bool:
    found = image_version(reference)
    return found is None or found >= version


@dataclass(frozen=True)
class Refusal:
    """Why the engine would not start: the post's text that causes it (`word`, to point at) and the reason with
    its remedy, in one line."""

    word: str
    reason: str


def engine_refusal(recipe: Recipe) -> Refusal | None:
    """Why the recipe's engine would refuse to start; None when it would start."""
    kind = recipe.server.kind
    image = recipe.image.reference
    for setting in recipe.docker.env():
        if setting.name == "CUDA_VISIBLE_DEVICES" and setting.value is not None:
            first = setting.value.split(",")[0].strip()
            if not _CUDA_DEVICE.fullmatch(first):
                return Refusal(
                    "CUDA_VISIBLE_DEVICES",
                    f"CUDA_VISIBLE_DEVICES={setting.value}: CUDA takes GPU ordinals or UUIDs and stops at the first "
                    f"invalid entry, so {kind} would see no GPU; drop it (the container's GPUs come from --gpus / "
                    "NVIDIA_VISIBLE_DEVICES, where `all` is a word)",
                )
    for use in recipe.server.uses():
        word = use.words[0]
        name, has_value, value = word.partition("=")
        if not name.startswith("--"):
            continue
        if kind == "sglang" and "_" in name:
            dashed = name.replace("_", "-")
            return Refusal(
                name,
                f"{name}: SGLang's argument parser does not turn underscores into dashes (vLLM's does) and has no "
                f"{name}, so it exits with `unrecognized arguments`; write the SGLang flag ({dashed} if it has one) "
                "or drop it",
            )
        if kind == "sglang" and name == "--cuda-graph-max-bs" and _at_least(image, (0, 5, 23)):
            return Refusal(
                name,
                f"--cuda-graph-max-bs is ambiguous in SGLang >= 0.5.23 ({image}): it could match "
                "--cuda-graph-max-bs-decode and --cuda-graph-max-bs-prefill and argparse exits; use "
                "--cuda-graph-max-bs-decode, or pin an image of the version the post used",
            )
        if (
            kind == "vllm" and has_value and name.startswith("--enable-") and _BOOL_VALUE.fullmatch(value)
            and _at_least(image, (0, 10))
        ):  # fmt: skip
            switch = name if value.lower() in ("true", "yes", "on", "1") else f"--no-{name[2:]}"
            return Refusal(
                word,
                f"{word}: vLLM >= 0.10 ({image}) parses {name} as a switch and exits with `ignored explicit "
                f"argument '{value}'`; write {switch}",
            )
    return None
