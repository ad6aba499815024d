"""Problems and refusals: what a check found, and the one way a role stops a run because of them.

Every check in hgxkit (node gates, recipe grammar and `recipe check`, the importer, serving policy) returns
`Problem`s: a stable code for scripts, what was found, the remedy, its level and where it was found. A role
stops the run with `refuse`, which prints them one per line under a heading that says what failed, where, and
what was (not) changed.

Example:
    >>> p = Problem("gpu-count", "7 NVIDIA GPUs on PCI, the inventory expects 8", "reseat the GPU")
    >>> str(p)
    '[gpu-count] 7 NVIDIA GPUs on PCI, the inventory expects 8; reseat the GPU'
    >>> print(problem_lines([p, "a sentence"]))
      - [gpu-count] 7 NVIDIA GPUs on PCI, the inventory expects 8; reseat the GPU
      - a sentence
    >>> Problem("port", "port 0 is not from 1 to 65535", level="warning", where=("server", "args", 2)).message
    'port 0 is not from 1 to 65535'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Level = Literal["error", "warning"]
# Where a problem was found: a host or file name, or a key path inside a recipe (`("docker", "options", 3)`).
Where = str | tuple[str | int, ...]


@dataclass(frozen=True)
class Problem:
    """A failed check: a stable `code`, what was `found`, the `remedy` (may be empty when `found` says it),
    its `level`, and `where` it was found (empty: the run's own host or recipe)."""

    code: str
    found: str
    remedy: str = ""
    level: Level = "error"
    where: Where = ""

    @property
    def message(self) -> str:
        """The sentence without the code: what was found, then the remedy."""
        return f"{self.found}; {self.remedy}" if self.remedy else self.found

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}"


def problem_lines(problems: Sequence[Problem | str]) -> str:
    """One indented line per problem."""
    return "\n".join(f"  - {problem}" for problem in problems)


def refuse(heading: str, problems: Sequence[Problem | str]) -> None:
    """Stop the run (pyinfra `DeployError`) when there are problems: `heading:` then one line each.

    The heading says what failed and where, e.g. `preflight failed on node1; nothing was changed`.
    """
    if problems:
        # Here, not at the top: the recipe checks use Problem too, and `hgxkit recipe …` must not load pyinfra
        # (and its SSH stack) for them.
        from pyinfra.api.exceptions import DeployError

        raise DeployError(f"{heading}:\n{problem_lines(problems)}")
