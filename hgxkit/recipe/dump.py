"""Write a `Recipe` back as YAML: plain data in the order a person reads it, long strings kept on one line.

Example:
    >>> from hgxkit.recipe.read import load_recipe
    >>> dump_recipe(load_recipe("recipes/deepseek-v4-flash-dspark-marlin.yaml")).splitlines()[1]
    'schema_version: 2'
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import yaml

from hgxkit.recipe.matrix_io import matrix_to_dict, reference_to_dict
from hgxkit.recipe.shellwords import join_words
from hgxkit.recipe.spec import Recipe


def recipe_to_dict(recipe: Recipe) -> dict[str, Any]:
    """The recipe as plain data in file order (what `dump_recipe` writes)."""
    out: dict[str, Any] = {
        "schema_version": recipe.schema_version,
        "name": recipe.name,
        "description": recipe.description,
        "source": _drop_none(recipe.source.__dict__) or None,
        "image": _drop_none(recipe.image.__dict__),
        "model": _drop_none({**recipe.model.__dict__, "allow_patterns": list(recipe.model.allow_patterns)}),
        "docker": {
            "invocation": " ".join(recipe.docker.invocation),
            "options": [join_words(list(entry.words)) for entry in recipe.docker.entries],
        },
        "server": {
            "kind": recipe.server.kind,
            "command": join_words(list(recipe.server.program)),
            "args": [join_words(list(entry)) for entry in recipe.server.args],
        },
    }
    if not out["model"].get("allow_patterns"):
        out["model"].pop("allow_patterns", None)
    if recipe.groups is not None:
        groups = _drop_none(recipe.groups.__dict__)
        if recipe.groups.explicit is not None:
            groups["explicit"] = [list(group) for group in recipe.groups.explicit]
        if recipe.groups.server_args is not None:
            groups["server_args"] = [
                [join_words(list(entry)) for entry in entries] for entries in recipe.groups.server_args
            ]
        out["groups"] = groups
    if recipe.matrix is not None:
        out["matrix"] = matrix_to_dict(recipe.matrix)
    if recipe.reference is not None:
        out["reference"] = reference_to_dict(recipe.reference)
    return {k: v for k, v in out.items() if v is not None}


def _drop_none(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if v is not None}


class _Dumper(yaml.SafeDumper):
    """Block style, original key order, and long strings kept on one line."""


_YAML_BREAKS = frozenset("\x85\u2028\u2029\r")


def _str_presenter(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if any(char in _YAML_BREAKS or not (char.isprintable() or char in "\n\t") for char in value):
        # YAML folds these into line breaks in other styles; escaped double quotes keep them exact.
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"')
    style = "|" if "\n" in value else (">" if len(value) > 90 else None)
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str_presenter)


def dump_recipe(recipe: Recipe) -> str:
    """The recipe as YAML text, in the order a person reads it."""
    header = "# hgxkit recipe; schema: recipes/schema.json. Placeholders are filled per GPU group.\n"
    body = yaml.dump(recipe_to_dict(recipe), Dumper=_Dumper, sort_keys=False, width=100, allow_unicode=True)
    return header + body


def recipe_hash(recipe: Recipe) -> str:
    """`sha256:` of the recipe file as verify fingerprints it (of its dump when it was never a file)."""
    data = Path(recipe.path).read_bytes() if recipe.path else dump_recipe(recipe).encode()
    return "sha256:" + hashlib.sha256(data).hexdigest()
