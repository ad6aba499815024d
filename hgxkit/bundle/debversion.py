"""Debian versions and package relations as apt and dpkg read them: the order is dpkg's own
(`dpkg --compare-versions`), the relations (`Depends: a (>= 1.2) | b, c (<< 2)`) those of Debian policy 7.1.

Why dpkg and not a Python package: `bundle create` already needs Debian's own tools on the controller
(apt-ftparchive, gpg, gpgv; `aptbundle.TOOLS`), so dpkg, which is essential on every such system, is there too; it
is the very order apt on the node applies, and it adds no dependency to a controller's install.

Example:
    >>> newest(["1.9.0-1", "1.10.0-1", "1.0~rc1"])
    '1.10.0-1'
    >>> [[(r.name, r.op, r.version) for r in alt] for alt in parse_relations("a (>= 1.2) | b:any, c (<< 2)")]
    [[('a', '>=', '1.2'), ('b', None, None)], [('c', '<<', '2')]]
"""

from __future__ import annotations

import functools
import re
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass

from hgxkit.errors import HgxkitError

# Debian policy 5.6.12: [epoch:]upstream_version[-debian_revision]; checked here so that dpkg is never handed an
# argument it would read as an option.
VERSION = re.compile(r"^(?:[0-9]+:)?[0-9][A-Za-z0-9.+~:-]*$")
# The relation operators of policy 7.1, as dpkg's --compare-versions names them; `<` and `>` are the obsolete
# spellings of `<=` and `>=` that dpkg still reads that way.
OPERATORS = {"<<": "lt", "<=": "le", "=": "eq", ">=": "ge", ">>": "gt", "<": "le", ">": "ge"}
RELATION = re.compile(
    r"^(?P<name>[a-z0-9][a-z0-9.+-]*)(?::[a-z0-9-]+)?"
    r"(?:\s*\(\s*(?P<op><<|<=|=|>=|>>|<|>)\s*(?P<version>[^\s)]+)\s*\))?"
    r"(?:\s*\[[^\]]*\])?(?:\s*<[^>]*>)*$"
)


@dataclass(frozen=True)
class Relation:
    """One package a relation names, with its version constraint (`op`, `version`) or none."""

    name: str
    op: str | None = None
    version: str | None = None

    def allows(self, version: str) -> bool:
        """Whether a package of this name at `version` satisfies the relation."""
        return self.op is None or satisfies(version, self.op, str(self.version))


def valid(version: str) -> bool:
    """Whether `version` is a Debian version dpkg can order."""
    return bool(VERSION.match(version))


def _checked(version: str) -> str:
    if not valid(version):
        raise HgxkitError(f"version {version!r} is not a Debian version; refused: check the repository's Packages")
    return version


@functools.lru_cache(maxsize=65536)
def _holds(a: str, op: str, b: str) -> bool:
    try:
        res = subprocess.run(["dpkg", "--compare-versions", _checked(a), op, _checked(b)], check=False)
    except FileNotFoundError:
        raise HgxkitError("dpkg not found: bundle create runs on Debian or Ubuntu (apt-get install dpkg)") from None
    if res.returncode not in (0, 1):
        raise HgxkitError(f"dpkg --compare-versions {a} {op} {b} failed; refused: check the repository's Packages")
    return res.returncode == 0


def satisfies(version: str, op: str, bound: str) -> bool:
    """Whether `version op bound` holds (`op` one of `OPERATORS`), in dpkg's order."""
    if op not in OPERATORS:
        raise HgxkitError(f"relation operator {op!r} is not Debian's; refused: check the repository's Packages")
    return _holds(version, OPERATORS[op], bound)


def compare(a: str, b: str) -> int:
    """-1, 0 or 1 as `a` orders before, with or after `b`."""
    if _holds(a, "lt", b):
        return -1
    return 0 if _holds(a, "eq", b) else 1


def newest(versions: Iterable[str]) -> str:
    """The highest of `versions` in dpkg's order (what apt takes as the candidate)."""
    return max(versions, key=functools.cmp_to_key(compare))


def parse_relations(field: str) -> list[list[Relation]]:
    """A relation field (`Depends`, `Pre-Depends`): every comma-separated requirement as its alternatives."""
    out = []
    for requirement in filter(None, (part.strip() for part in field.split(","))):
        alternatives = []
        for alt in requirement.split("|"):
            match = RELATION.match(alt.strip())
            if match is None:
                raise HgxkitError(f"relation {alt.strip()!r} is not Debian's syntax; refused: check the Packages")
            alternatives.append(Relation(match["name"], match["op"], match["version"]))
        out.append(alternatives)
    return out
