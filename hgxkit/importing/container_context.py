"""What the interactive container a bare launch runs in (`docker run -it … IMAGE bash`, then the launch typed in
it) gives the launch, and what it does not.

The recipe's container runs the launch alone, in the same image: the interactive container's bind mounts are how
a path the server reads is the host's (`context_mounts`); its resource limits (`--ulimit`, `--shm-size`) and its
environment (`-e`) are the launch's own, so they are carried (`context_options`), and its other options (`--rm`,
`-it`, `--name`, `--entrypoint`, mounts the server reads nothing through) are left with a note. A package installed
in that container before the launch (`pip install …`) is not in the image: the post's server ran with it and the
recipe's would not, so the import is refused naming it, unless `--image` gives an image that has it (`installs`).

Example:
    >>> bool(INSTALL.match("pip install flash-attn")), bool(INSTALL.match("pip list"))
    (True, False)
"""

from __future__ import annotations

import re

from hgxkit.errors import InputError
from hgxkit.importing.reading import Candidate, Reading
from hgxkit.recipe.docker_options import canonical
from hgxkit.recipe.spec import parse_volume

# A command that installs software: pip (as `python -m pip` too), uv's pip, apt, conda.
INSTALL = re.compile(
    r"^(?:sudo\s+)?(?:(?:python[\d.]*\s+-m\s+)?pip[\d.]*|uv\s+pip|apt(?:-get)?|conda|mamba|micromamba)\s+install\b"
)
_CARRIED = ("--ulimit", "--shm-size", "--env")
# The interactive container's own options, which say nothing about the server: left without a note.
_SHELL_ONLY = ("--rm", "--interactive", "--tty", "--detach", "--entrypoint", "--name", "--ipc")


def context_mounts(server: Candidate) -> list[tuple[str, str, str]]:
    """(host directory, container directory, `-v` as written with where) of each bind mount of the interactive
    container a launch runs in (a named volume has no host path, and is left out)."""
    if server.context is None:
        return []
    found = []
    for entry in server.context.run.entries:
        for use in entry.uses:
            value = use.value or ""
            if canonical(use.option.name) != "--volume" or not value.startswith("/"):
                continue
            mount = parse_volume(value)
            found.append((mount.source, mount.target, f"-v {value} ({server.context.simple.where()})"))
    return found


def context_options(server: Candidate, notes: list[str]) -> list[str]:
    """The interactive container's options the launch keeps (`_CARRIED`), as words; a note names the others that
    set more than the shell itself (mounts, `--network`, `--privileged`, …), which the recipe's container does not
    get as such."""
    if server.context is None:
        return []
    carried, left = [], []
    for entry in server.context.run.entries:
        name = canonical(entry.uses[0].option.name) if entry.uses else ""
        if name in _CARRIED:
            carried += entry.words
        elif name not in _SHELL_ONLY and not (name == "--gpus" and entry.uses[0].value == "all"):
            left.append(" ".join(entry.words))
    where = server.context.simple.where()
    if carried:
        notes.append(
            f"{server.simple.where()}: {' '.join(carried)} of the container it runs in ({where}) carried to the "
            "server's container"
        )
    if left:
        notes.append(
            f"{server.simple.where()}: the container it runs in ({where}) also has {', '.join(left)}; not carried "
            "(the recipe's container runs the server alone, with a mount of each host path it reads)"
        )
    return carried


def installs(server: Candidate, reading: Reading, image_given: bool, notes: list[str]) -> None:
    """Refuse a bare launch whose interactive container had software installed in it before the launch (the image
    lacks it); with `--image`, a note that the image given is taken to hold it."""
    if server.context is None:
        return
    simples = list(reading.simples)
    start = next((i for i, s in enumerate(simples) if s is server.context.simple), None)
    end = next((i for i, s in enumerate(simples) if s is server.simple), None)
    if start is None or end is None:
        return
    found = [s for s in simples[start + 1 : end] if INSTALL.match(" ".join(s.texts))]
    if not found:
        return
    shown = "; ".join(f"`{' '.join(s.texts)}` ({s.where()})" for s in found)
    if image_given:
        notes.append(
            f"{server.simple.where()}: the image given (--image) is taken to hold what the post installs ({shown})"
        )
        return
    raise InputError(
        f"{found[0].where()}: the post installs software into the container started at "
        f"{server.context.simple.where()} before the launch ({server.simple.where()}): {shown}; its server ran with "
        f"it, and the recipe's container runs the image {server.context.run.image} as it is, without it: build an "
        "image that has it and import with --image REF"
    )
