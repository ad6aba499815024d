"""What a prefill/decode side needs to serve, found at import (the start-up checks every recipe gets are
hgxkit.recipe.engine_start).

A server that is one side of a prefill/decode split (`ServerKind.disaggregation`: SGLang's `--disaggregation-mode
prefill|decode`, a vLLM KV producer or consumer) starts, but serves nothing without the other side and the router
between them. A kind whose split hgxkit deploys (`ServerKind.prefill_decode`: SGLang's and vLLM's, on one node, over a
transfer backend of NVIDIA GPUs) imports both sides as the groups of one recipe (hgxkit.importing.pd_join);
`disaggregation` refuses any other kind's or backend's side, and `split_refusal` a joined recipe that cannot serve
(one side alone, off the host's network: hgxkit.recipe.pd).

"""

from __future__ import annotations

import re

from hgxkit.recipe.engine_start import Refusal
from hgxkit.recipe.nodes import HGX_GPUS
from hgxkit.recipe.pd import pd_problems, sides
from hgxkit.recipe.server_args import ServerCommand
from hgxkit.recipe.spec import Recipe

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
