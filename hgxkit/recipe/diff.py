"""`hgxkit recipe diff`: what differs between two recipes, one line per difference.

Compared by meaning, not spelling: `--tp 4` equals `--tp-size=4`, option order does not matter, and
recipe metadata (name, description, reference results) is not part of the setup.

Example:
    >>> from hgxkit.recipe.read import load_recipe
    >>> a = load_recipe("recipes/deepseek-v4-flash-dspark-marlin.yaml")
    >>> b = load_recipe("recipes/deepseek-v4-flash-dspark-flashinfer.yaml")
    >>> [d.line() for d in diff_recipes(a, b)]
    ['server --moe-runner-backend: marlin -> flashinfer_mxfp4']
"""

from __future__ import annotations

from dataclasses import dataclass

from hgxkit.recipe.docker_options import canonical
from hgxkit.recipe.shellwords import join_words, quote_word
from hgxkit.recipe.spec import Recipe

ABSENT = "(absent)"


@dataclass(frozen=True)
class Difference:
    """One setting that differs: area (image, env, docker, server, model, groups), key, both values."""

    area: str
    key: str
    a: str
    b: str

    def line(self) -> str:
        return f"{self.area} {self.key}: {self.a} -> {self.b}"

    def to_json(self) -> dict[str, str]:
        return {"area": self.area, "key": self.key, "a": self.a, "b": self.b}


def diff_recipes(a: Recipe, b: Recipe) -> list[Difference]:
    """Every difference in image, env, docker options, server command and flags, model and grouping (each group's
    own server arguments included)."""
    out: list[Difference] = []
    for area, left, right in (
        ("image", _image(a), _image(b)),
        ("env", _env(a), _env(b)),
        ("docker", _docker(a), _docker(b)),
        ("server", _server(a), _server(b)),
        ("model", _model(a), _model(b)),
        ("groups", _groups(a), _groups(b)),
    ):
        for key in list(dict.fromkeys([*left, *right])):
            va, vb = left.get(key, ABSENT), right.get(key, ABSENT)
            if va != vb:
                out.append(Difference(area, key, va, vb))
    return out


def _shown(value: str) -> str:
    """A value as the shell would need it written, where dollar signs make quoting matter."""
    return quote_word(value) if "$" in value else value


def _image(recipe: Recipe) -> dict[str, str]:
    return {"reference": recipe.image.reference, "digest": recipe.image.digest or ABSENT}


def _env(recipe: Recipe) -> dict[str, str]:
    return {s.name: _shown(s.value) if s.value is not None else "(from host environment)" for s in recipe.docker.env()}


def _docker(recipe: Recipe) -> dict[str, str]:
    values: dict[str, list[str]] = {}
    for use in recipe.docker.uses():
        name = canonical(use.option.name)
        if name == "--env":
            continue
        values.setdefault(name, []).append(_shown(use.value) if use.value is not None else "(set)")
    return {name: ", ".join(sorted(items)) for name, items in values.items()}


def _server(recipe: Recipe) -> dict[str, str]:
    program = join_words(list(recipe.server.program)) or "(the image's entrypoint)"
    values: dict[str, list[str]] = {"(program)": [program]}
    for use in recipe.server.uses():
        values.setdefault(use.name, []).append(_shown(use.value) if use.value is not None else "(set)")
    return {name: ", ".join(items) for name, items in values.items()}


def _model(recipe: Recipe) -> dict[str, str]:
    model = recipe.model
    return {
        "repo_id": model.repo_id or ABSENT,
        "revision": model.revision,
        "local_dir": model.local_dir or ABSENT,
        "mount_point": model.mount_point or ABSENT,
        "allow_patterns": ", ".join(model.allow_patterns) or ABSENT,
    }


def _groups(recipe: Recipe) -> dict[str, str]:
    groups = recipe.groups
    if groups is None:
        return {"grouping": "(none)"}
    return {
        "size": str(groups.size) if groups.size is not None else ABSENT,
        "explicit": str([list(g) for g in groups.explicit]) if groups.explicit else ABSENT,
        "gpus_per_node": str(groups.gpus_per_node) if groups.gpus_per_node else ABSENT,
        "port_base": str(groups.port_base) if groups.port_base is not None else ABSENT,
        "name_template": groups.name_template or ABSENT,
        "nodes": str(groups.nodes) if groups.nodes else ABSENT,
        "dist_port": str(groups.dist_port) if groups.dist_port else ABSENT,
        "hosts": str(groups.hosts) if groups.hosts else ABSENT,
        **_group_args(groups.server_args or ()),
    }


def _group_args(per_group: tuple[tuple[tuple[str, ...], ...], ...]) -> dict[str, str]:
    """Each group's own server arguments (a prefill/decode split's sides), by group and flag: `group 1
    --max-running-requests`."""
    values: dict[str, list[str]] = {}
    for index, entries in enumerate(per_group):
        for flag, *rest in entries:
            values.setdefault(f"group {index} {flag}", []).append(join_words(rest) if rest else "(set)")
    return {key: ", ".join(items) for key, items in values.items()}
