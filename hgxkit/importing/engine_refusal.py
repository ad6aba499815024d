"""What the engine itself would refuse at start-up, found at import: a recipe that imports must be able to start.

The engine's argument parser: each server kind says what its parser refuses (`ServerKind.refuses_flag`, e.g.
SGLang's `--max_num_batched_tokens`, vLLM's `--enable-chunked-prefill=False` from 0.10; and `unknown_flags`: any
flag the option table read from the real engine lacks, vLLM 0.33's or SGLang 0.5.23's, hgxkit.kinds.options; and
`switch_value`: a value written after a switch, which the parser reads as a positional argument; `value_count`: a
flag that takes a value given none, as in a copy cut after `--port`, or a flag of one value given several words,
as an unquoted JSON value the shell splits),
judged against the image the recipe runs (`latest` or untagged is today's engine); a flag a table of another
version would have to judge is named as not checked (`unchecked_flags`, `ServerKind.unchecked_flag`). And CUDA,
for every kind: `CUDA_VISIBLE_DEVICES` takes GPU ordinals or UUIDs and CUDA stops at the first invalid entry, so
`CUDA_VISIBLE_DEVICES=all` leaves the engine no GPU (`all` is `NVIDIA_VISIBLE_DEVICES`'s word).

A server that is one side of a prefill/decode split (`ServerKind.disaggregation`: SGLang's `--disaggregation-mode
prefill|decode`, a vLLM KV producer or consumer) starts, but serves nothing without the other side and the router
between them. A kind whose split hgxkit deploys (`ServerKind.prefill_decode`: SGLang's and vLLM's, on one node, over a
transfer backend of NVIDIA GPUs) imports both sides as the groups of one recipe (hgxkit.importing.pd_join);
`disaggregation` refuses any other kind's or backend's side, and `split_refusal` a joined recipe that cannot serve
(one side alone, off the host's network: hgxkit.recipe.pd).

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
from hgxkit.recipe.nodes import HGX_GPUS
from hgxkit.recipe.pd import pd_problems, sides
from hgxkit.recipe.server_args import ServerCommand
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


DISAGGREGATION = (
    "hgxkit deploys a prefill/decode split only as one node's prefill and decode groups, imported from their own "
    "commands; import those, or a setup that serves both phases"
)


def disaggregation(server: ServerCommand) -> Refusal | None:
    """The flag that makes `server` the prefill or the decode side of a disaggregated setup that hgxkit does not
    deploy (its kind's, or its transfer backend's), with why; None for a server that does both, or a side of a
    split hgxkit deploys."""
    kind = server.server_kind
    found = kind.disaggregation
    value = server.flag(found[0]) if found else None
    if found is None or value is None or not re.fullmatch(found[1], value):
        return None
    split = kind.prefill_decode
    if split is not None and not split.imported:
        return Refusal(
            found[0],
            f"{found[0]} {value}: prefill/decode disaggregation of {kind.title} is not supported yet by import; write "
            f"its recipe with a group per side (groups.server_args, docs/serving.md) or import a setup that serves "
            f"both phases (without {found[0]})",
        )
    if split is not None:
        return transfer_refusal(server, found[0])
    return Refusal(
        found[0],
        f"{found[0]} {value}: prefill/decode disaggregation of {kind.title} is not supported yet; import a setup that "
        f"serves both phases (without {found[0]})",
    )


def transfer_refusal(server: ServerCommand, side_flag: str) -> Refusal | None:
    """Why a side of a split hgxkit deploys would not transfer its KV cache: a transfer backend it does not
    deploy, or one the post leaves to a variable; None for a backend it deploys (or a kind with no split).
    Asked of both sides before they are compared, so a side whose backend cannot run is named first."""
    kind = server.server_kind
    split = kind.prefill_decode
    if split is None:
        return None
    backend = split.backend(server.flag(split.backend_flag))
    if backend in split.backends:
        return None
    if "$" in backend:  # the post's shell would write the value in; the post never sets it
        return Refusal(
            split.backend_flag,
            f"{split.backend_flag} {backend}: a variable the post does not set, so the transfer backend is "
            f"unknown; write it ({' or '.join(split.backends)})",
        )
    return Refusal(
        split.backend_flag if server.flag(split.backend_flag) else side_flag,
        f"{split.backend_flag} {backend}: hgxkit deploys {kind.title}'s prefill/decode split over "
        f"{' or '.join(split.backends)} (the transfer backends of NVIDIA GPUs); {backend} is another "
        f"accelerator's, a test's or another release's: use one of them",
    )


def split_refusal(recipe: Recipe) -> Refusal | None:
    """Why a recipe whose groups are sides of a prefill/decode split would not serve as the post runs it (one side
    alone, two prefills on one bootstrap port, off the host's network), naming the side flag; None when it
    serves or is no split."""
    problems = pd_problems(recipe, HGX_GPUS)
    found = recipe.server.server_kind.disaggregation
    if not problems or found is None:
        return None
    if problems[0].code == "pd-split":
        alone = next(s for s in sides(recipe, HGX_GPUS) if s)
        return Refusal(
            found[0],
            f"{found[0]} {alone}: the post runs the {alone} side of a prefill/decode split alone, which answers no "
            "request; import the post's prefill and decode commands together (the router comes from "
            "`--data router=true`)",
        )
    if problems[0].code == "pd-nodes":
        return Refusal(
            found[0],
            f"{found[0]}: a prefill/decode split whose sides each span nodes is not deployed yet: hgxkit deploys "
            "one node's prefill and decode groups, or a split laid over hosts one side per node",
        )
    return Refusal(found[0], f"prefill/decode split: {problems[0].message}")


def unchecked_flags(recipe: Recipe) -> list[Refusal]:
    """The flags the engine's option table could not judge for the recipe's image (another version), each with
    what was not checked: said in a note, not refused."""
    kind = recipe.server.server_kind
    if kind.unchecked_flag is None:
        return []
    found = ((use.words[0], kind.unchecked_flag(use.words[0], recipe.image.reference)) for use in recipe.server.uses())
    return [Refusal(word, why) for word, why in found if why]
