"""What the engine itself would refuse at start-up: one judgement for an import (which refuses at the post's word)
and every consumer of a recipe (`recipe check`, deploy, export, bundle: hgxkit.recipe.check), so a recipe written
by hand or edited after its import is held to the flags an imported one is.

The engine's argument parser: each server kind says what its parser refuses (`ServerKind.refuses_flag`, e.g.
SGLang's `--max_num_batched_tokens`, vLLM's `--enable-chunked-prefill=False` from 0.10; and `unknown_flags`: any
flag the option table read from the real engine lacks, vLLM 0.33's or SGLang 0.5.23's, hgxkit.kinds.options; and
`switch_value`: a value written after a switch, which the parser reads as a positional argument; `value_choice`: a
value outside its option's choices, or outside what the engine's config checks after parsing (vLLM's quantization
methods); `model_value`: a value the engine refuses for the model it serves (vLLM's float16 for Gemma 2 and
3); `value_count`: a
flag that takes a value given none, as in a copy cut after `--port`, or a flag of one value given several words,
as an unquoted JSON value the shell splits), judged against the image the recipe runs (`latest` or untagged is
today's engine); a flag a table of another version would have to judge is named as not checked
(`unchecked_flags`, `ServerKind.unchecked_flag`). And CUDA, for every kind: `CUDA_VISIBLE_DEVICES` takes GPU
ordinals or UUIDs and CUDA stops at the first invalid entry, so `CUDA_VISIBLE_DEVICES=all` leaves the engine no
GPU (`all` is `NVIDIA_VISIBLE_DEVICES`'s word).

Example:
    >>> from hgxkit.importing.docker_run import import_docker_run
    >>> recipe = import_docker_run("docker run --gpus all vllm/vllm-openai:v0.11.0 --model org/m")
    >>> engine_refusal(recipe) is None
    True
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hgxkit.kinds import image_matches
from hgxkit.recipe.spec import Recipe

_CUDA_DEVICE = re.compile(r"\d+|(?:GPU|MIG)-[0-9A-Za-z-]+")


@dataclass(frozen=True)
class Refusal:
    """Why the engine would not start: the post's text that causes it (`word`, to point at) and the reason with
    its remedy, in one line."""

    word: str
    reason: str


def engine_refusal(recipe: Recipe, last_word: str | None = None) -> Refusal | None:
    """Why the recipe's engine would refuse to start; None when it would start. `last_word`: the last word of the
    server command as the post wrote it, where the import added flags after it (`--host 0.0.0.0`), so that a value
    the post's copy lacks is told apart from the import's additions, which are whole."""
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
    flags = [use.words[0] for use in recipe.server.uses()]
    for word in flags if kind.refuses_flag else ():
        reason = kind.refuses_flag(word, recipe.image.reference)  # type: ignore[misc]
        if reason:
            return Refusal(word, reason)
    unknown = kind.unknown_flags(flags, recipe.image.reference) if kind.unknown_flags else None
    if unknown:
        return Refusal(*unknown)
    uses = [use.words for use in recipe.server.uses()]
    stray = kind.switch_value(uses, recipe.image.reference) if kind.switch_value else None
    if stray:
        return Refusal(*stray)
    chosen = kind.value_choice(uses, recipe.image.reference) if kind.value_choice else None
    if chosen:
        return Refusal(*chosen)
    model = recipe.model.repo_id or recipe.server.flag(kind.model_flag) or ""
    refused = kind.model_value(model, uses) if kind.model_value and model else None
    if refused:
        return Refusal(*refused)
    written, slot = uses[: _written_end(uses, last_word) + 1], recipe.server.model_slot()
    counted = kind.value_count(written, recipe.image.reference, slot) if kind.value_count else None
    return Refusal(*counted) if counted else foreign_module(recipe)


def _written_end(uses: list[tuple[str, ...]], last_word: str | None) -> int:
    """The index of the last flag entry the post wrote: the last one ending in `last_word`, else the last one (the
    word was rewritten, as a model path placed elsewhere, or the recipe is not an import)."""
    ends = [at for at, words in enumerate(uses) if last_word is not None and words[-1:] == (last_word,)]
    return ends[-1] if ends else len(uses) - 1


def foreign_module(recipe: Recipe) -> Refusal | None:
    """A flag naming a Python import path into a package other than the engine's (`--middleware
    src.timing.log`: the poster's own code) on the engine's own image, which does not hold it, so the server
    would fail to import it at start-up; None otherwise (an image of the post's own may hold it).

    Example:
        >>> from hgxkit.importing.docker_run import import_docker_run
        >>> import_docker_run("docker run --gpus all vllm/vllm-openai:v0.11.0 --model org/m --middleware src.t.log")
        Traceback (most recent call last):
        hgxkit.errors.InputError: <input>: the engine would refuse: --middleware src.t.log: an import path into `src`...
    """
    kind = recipe.server.server_kind
    if not image_matches(recipe.image.reference, kind.images):
        return None
    for use in recipe.server.uses():
        values = (use.value or "").split() if use.name in kind.import_path_flags else []
        for value in values:
            top = re.split(r"[.:]", value, maxsplit=1)[0]
            if top != value and top != kind.name:
                return Refusal(
                    use.words[0],
                    f"{use.name} {value}: an import path into `{top}`, not {kind.title}'s own code, which "
                    f"{recipe.image.reference} does not hold ({kind.title} would fail to import it at start-up): "
                    "build an image holding it and pass --image, or drop the flag",
                )
    return None


def unchecked_flags(recipe: Recipe) -> list[Refusal]:
    """The flags the engine's option table could not judge for the recipe's image (another version), each with
    what was not checked: said in a note, not refused."""
    kind = recipe.server.server_kind
    if kind.unchecked_flag is None:
        return []
    found = ((use.words[0], kind.unchecked_flag(use.words[0], recipe.image.reference)) for use in recipe.server.uses())
    return [Refusal(word, why) for word, why in found if why]
