"""Problems and refusals: what a check found, and the one way a role stops a run because of them.

Every check in hgxkit returns `Problem`s (or plain sentences); a role stops the run with `refuse`, which
prints them one per line under a heading that says what failed, where, and what was (not) changed.

Example:
    >>> p = Problem("gpu-count", "7 NVIDIA GPUs on PCI, the inventory expects 8", "reseat the GPU")
    >>> str(p)
    '[gpu-count] 7 NVIDIA GPUs on PCI, the inventory expects 8; reseat the GPU'
    >>> print(problem_lines([p, "a sentence"]))
      - [gpu-count] 7 NVIDIA GPUs on PCI, the inventory expects 8; reseat the GPU
      - a sentence
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyinfra.api.exceptions import DeployError


@dataclass(frozen=True)
class Problem:
    """A failed check: which check, what was found, and the remedy — one sentence when printed."""

    check: str
    found: str
    remedy: str

    def __str__(self) -> str:
        return f"[{self.check}] {self.found}; {self.remedy}"


def problem_lines(problems: Sequence[Problem | str]) -> str:
    """One indented line per problem."""
    return "\n".join(f"  - {problem}" for problem in problems)


def refuse(heading: str, problems: Sequence[Problem | str]) -> None:
    """Stop the run (pyinfra `DeployError`) when there are problems: `heading:` then one line each.

    The heading says what failed and where, e.g. `preflight failed on node1; nothing was changed`.
    """
    if problems:
        raise DeployError(f"{heading}:\n{problem_lines(problems)}")
