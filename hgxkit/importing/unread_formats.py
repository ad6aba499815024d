"""Formats a post can be that the import does not read, named by their shape for the 'no serving command' refusal:
a Nomad job, a NixOS module, an Unraid template hold their launch in keys hgxkit has no reader for; a PBS, LSF or
Flux job script is read as the shell it runs, its scheduler's directives set aside.

Example:
    >>> unread_format(('job "vllm" {', '  group "g" {'))[0]
    'a HashiCorp Nomad job specification, which hgxkit does not read'
    >>> unread_format(("#!/bin/bash", "#PBS -l select=1", "python infer.py"))[0]
    'a PBS job script, read as the shell it runs (its #PBS directives set aside)'
    >>> unread_format(("vllm serve org/m",)) is None
    True
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# (shape, what it is): the first line that matches names the post's format.
_UNREAD = (
    (re.compile(r'^\s*job\s+"[^"]+"\s*\{'), "a HashiCorp Nomad job specification"),
    (re.compile(r"\bmk(?:Option|EnableOption|If)\b"), "a NixOS module"),  # with a Nix function's `}:` (below)
    (re.compile(r"^\s*<Container\s+version="), "an Unraid container template"),
    # its commands run in a container of an image it names or builds (`"build": {"dockerfile": …}`)
    (re.compile(r'^\s*"(?:postStartCommand|postCreateCommand|postAttachCommand|runArgs)"\s*:'), "a Dev Container"),
)
_DEV_CONTAINER_BUILD = re.compile(r'^\s*"(?:dockerfile|dockerFile)"\s*:\s*"([^"]+)"')
_NIX_ARGUMENTS = re.compile(r"^\s*(?:\{[^{}]*)?\}\s*:\s*$")  # `{ config, lib, ... }:`, or `}:` ending it
_SCHEDULERS = (
    (re.compile(r"^#PBS\s"), "a PBS job script", "#PBS"),
    (re.compile(r"^#BSUB\s"), "an LSF job script", "#BSUB"),
    (re.compile(r"^#\s?FLUX:"), "a Flux job script", "#FLUX:"),
    (re.compile(r"^#\$\s+-"), "a Grid Engine job script", "#$"),
)


_WAY_OUT = "give the command its server runs"


def unread_format(lines: Sequence[str]) -> tuple[str, str] | None:
    """(what the post is, the way out) when its shape is a format hgxkit does not read (or reads only as shell);
    else None."""
    for shape, name in _UNREAD:
        nix = name == "a NixOS module"
        if any(shape.search(line) for line in lines) and (not nix or any(map(_NIX_ARGUMENTS.match, lines))):
            built = next((m.group(1) for m in map(_DEV_CONTAINER_BUILD.match, lines) if m), None)
            if name == "a Dev Container" and built:
                return (
                    f"a Dev Container (devcontainer.json) whose image is built from {built}, not in the post",
                    "build and push that image, then give --image REF and the command its server runs",
                )
            return f"{name}, which hgxkit does not read", _WAY_OUT
    for shape, name, directive in _SCHEDULERS:
        if any(shape.match(line) for line in lines):
            return f"{name}, read as the shell it runs (its {directive} directives set aside)", _WAY_OUT
    return None
