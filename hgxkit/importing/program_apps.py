"""Deployments written as a program rather than a command: named where nothing in a post serves.

A Ray Serve application, a Modal or Beam app and a Terraform container definition each start the engine from code the
import does not run (Python that builds the command, HCL that a cloud's scheduler reads); a Dockerfile on an
engine's image whose launch the post lacks holds no command at all. Each is known by a line only it writes and
refused by name, with the way out: the engine's own command.

Example:
    >>> app_refusal("app.py", ["import modal", "app = modal.App('x')"]).split(": ", 1)[0]
    'app.py:1'
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_WAY_OUT = (
    "hgxkit deploys SGLang and vLLM from their own commands: import the `vllm serve` or `python -m "
    "sglang.launch_server` command instead"
)
# (a line only that kind of program writes, what it is)
_APPS = (
    (
        # `from ray import serve`, `from ray.serve.llm import LLMConfig`
        re.compile(
            r"^\s*(?:from\s+ray\s+import\s+(?:[\w, ]*\b)?serve\b|from\s+ray\.serve\S*\s+import\b|import\s+ray\.serve\b)"
        ),
        "a Ray Serve application starts the engine from its Python code, not from a command the post holds",
    ),
    (
        re.compile(r"^\s*(?:import\s+modal\b|from\s+modal\s+import\b)"),
        "a Modal app builds its container and the engine's command in Python, which the import does not run",
    ),
    (
        re.compile(r"^\s*(?:import\s+beam\b|from\s+beam\s+import\b)"),
        "no serving command found as a shell runs one: a Beam app (beam.cloud) builds its image and the engine's "
        "command in Python, which the import does not run",
    ),
    (
        re.compile(r"^\s*@bentoml\.service\b"),
        "a BentoML service builds the engine in Python (its engine arguments in code), which the import does not run",
    ),
    (
        re.compile(r"^\s*(?:resource|module)\s+\"[\w-]+\"(?:\s+\"[\w-]+\")?\s*\{"),
        "a Terraform configuration (HCL): its container definition is for a cloud's scheduler (ECS, GKE), and its "
        "command is HCL, which the import does not read; write that container as the `docker run` it amounts to",
    ),
    (
        re.compile(r"^\s*FROM\s+(?:docker\.io/)?(?:vllm/vllm-openai|lmsysorg/sglang)(?:[:@\s]|$)", re.IGNORECASE),
        "a Dockerfile on an engine's image that is no launch as the post holds it: it builds an image of its own "
        "(RUN, COPY), or its ENTRYPOINT or CMD is not in the post (a copy cut before it?); give the `docker run` "
        "it amounts to (with --image REF for an image it builds)",
    ),
)


def app_refusal(name: str, lines: Sequence[str]) -> str | None:
    """`FILE:LINE: what the program is; the way out` for the first program-defined deployment in the post `name`
    of `lines`, else None."""
    found = app_line(lines)
    if found is None:
        return None
    number, what = found
    return f"{name}:{number}: {what}" + ("" if "; " in what else f"; {_WAY_OUT}")


def app_line(lines: Sequence[str]) -> tuple[int, str] | None:
    """(1-based line, what it is) of the first line only a program-defined deployment writes, else None."""
    for number, line in enumerate(lines, 1):
        for sign, what in _APPS:
            if sign.match(line):
                return number, what
    return None
