"""pyinfra roles: one folder each, with every knob in its `defaults.py`. Roles call hgxkit, never each other.

`check_knob_names(host, *classes)`, called first by every deploy, stops a run whose inventory or `--data` names
a knob that no role and no shared declaration (hgxkit/knobs.py) knows, e.g. a misspelt `--data modles_dir=/x`,
or gives a shared knob or a knob of the roles the deploy runs (`classes`) a value of the wrong type, e.g.
`--data allow_reboot=maybe`: before any role changes anything.
"""

from __future__ import annotations

import ast
from dataclasses import fields
from functools import cache
from pathlib import Path
from typing import Any

from hgxkit.knobs import Knobs, SharedKnobs, refuse_unknown_knobs

ROLES_DIR = Path(__file__).resolve().parent


@cache
def known_knob_names() -> frozenset[str]:
    """Every knob a role or hgxkit declares: the fields of each `roles/*/defaults.py` knob class and the shared
    ones. Read from the files' syntax, not by importing them: importing a role's `defaults` runs the role's
    package, and a deploy that runs few roles should not pay for importing them all."""
    names = set(SharedKnobs.defaults())
    for path in sorted(ROLES_DIR.glob("*/defaults.py")):
        names.update(knob_fields(path.read_text()))
    return frozenset(names)


def knob_fields(source: str) -> list[str]:
    """The field names of the knob classes (subclasses of `Knobs`) in a defaults module's `source`.

    Example:
        >>> knob_fields("class K(Knobs):\\n    a: int = declare(1, 'x')\\n\\nclass Other:\\n    b: int = 2\\n")
        ['a']
    """
    classes = [
        node
        for node in ast.parse(source).body
        if isinstance(node, ast.ClassDef) and any(isinstance(b, ast.Name) and b.id == "Knobs" for b in node.bases)
    ]
    return [
        stmt.target.id
        for cls in classes
        for stmt in cls.body
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
    ]


def check_knob_names(host: Any, *classes: type[Knobs]) -> None:
    """Stop the run when `host`'s inventory or `--data` names a knob nobody declared (naming the closest one), or
    gives a shared knob or a knob of `classes` a value its type refuses (naming the knob)."""
    declared = {f.name for knobs in (SharedKnobs, *classes) for f in fields(knobs)}  # type: ignore[arg-type]
    refuse_unknown_knobs(host.data.dict(), declared, known_knob_names)
    for knobs in (SharedKnobs, *classes):
        knobs.from_host(host)
