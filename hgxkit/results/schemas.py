"""The JSON Schemas of everything `hgxkit results` writes or prints (files in `hgxkit/results/schemas/`).

| name | what | `$id` |
|---|---|---|
| `summary` | `summary.json` of a run (schema 2) | `urn:hgxkit:results:summary:2` |
| `fingerprint` | `fingerprint.json` of a run (schema 2; 1 also valid) | `urn:hgxkit:results:fingerprint:2` |
| `ls` | `hgxkit results ls --json` | `urn:hgxkit:results:ls:1` |
| `show` | `hgxkit results show --json` | `urn:hgxkit:results:show:1` |
| `compare` | `hgxkit results compare --json` (two runs, or a run and its reference) | `urn:hgxkit:results:compare:2` |

Example:
    >>> schema_errors({"schema_version": 1, "root": "results", "runs": [], "skipped": []}, "ls")
    []
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from hgxkit.errors import InputError

SCHEMA_NAMES = ("summary", "fingerprint", "ls", "show", "compare")


@cache
def load_schema(name: str) -> dict[str, Any]:
    """One schema document by name (see the table above)."""
    if name not in SCHEMA_NAMES:
        raise KeyError(f"no schema {name!r}; known: {', '.join(SCHEMA_NAMES)}")
    text = resources.files("hgxkit.results").joinpath("schemas", f"{name}.schema.json").read_text()
    return json.loads(text)


@cache
def _registry() -> Registry:
    # The schemas refer to each other by `$id` (show -> summary, fingerprint); resolve those locally.
    return Registry().with_resources(
        (load_schema(name)["$id"], Resource.from_contents(load_schema(name))) for name in SCHEMA_NAMES
    )


def validator(name: str) -> Draft202012Validator:
    return Draft202012Validator(load_schema(name), registry=_registry())


def schema_errors(document: Any, name: str) -> list[str]:
    """Every way `document` breaks schema `name`, one line each (`cells/0/failed: -1 is less than …`)."""
    errors = sorted(validator(name).iter_errors(document), key=lambda e: list(e.absolute_path))
    return [f"{'/'.join(str(p) for p in e.absolute_path) or '(top)'}: {e.message[:200]}" for e in errors]


def validate(document: Any, name: str, source: str) -> None:
    """InputError naming `source` and the first problem when `document` breaks schema `name`."""
    errors = schema_errors(document, name)
    if errors:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise InputError(f"{source}: does not match the {name} schema: {errors[0]}{more}")
