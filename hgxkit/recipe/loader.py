"""Read and write recipe YAML files, validating every load against the JSON Schema.

Errors name the file, the key path and the line: `recipes/x.yaml: docker.options[3] (line 21): …`.

Example:
    >>> recipe = load_recipe("recipes/deepseek-v4-flash-dspark-marlin.yaml")
    >>> recipe.image.reference
    'lmsysorg/sglang:dev-dspark'
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from hgxkit.errors import InputError
from hgxkit.recipe.dockerrun import parse_option_words
from hgxkit.recipe.model import (
    PLACEHOLDER_RE,
    SCHEMA_VERSION,
    BenchmarkMatrix,
    DockerSpec,
    Grouping,
    ImageRef,
    ModelSpec,
    Recipe,
    Reference,
    ReferenceCell,
    SmokeCell,
    Source,
)
from hgxkit.recipe.schema import RECIPE_SCHEMA
from hgxkit.recipe.server_args import ServerCommand, group_args
from hgxkit.recipe.shellwords import join_words, split_words

KeyPath = tuple[str | int, ...]


def load_recipe(path: str | Path) -> Recipe:
    """Load and validate a recipe file; raise `InputError` naming file, key path and line."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: no such recipe file; list shipped recipes with `ls recipes/`") from None
    except OSError as err:
        raise InputError(f"{path}: cannot read recipe: {err.strerror}") from None
    recipe = parse_recipe_text(text, source=str(path))
    return Recipe(**{**recipe.__dict__, "path": str(path)})


def parse_recipe_text(text: str, *, source: str = "<recipe>") -> Recipe:
    """Parse recipe YAML text; see `load_recipe`."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise InputError(f"{source}: not valid YAML{where}: {problem}") from None
    lines = _line_index(node)
    locate = _Locator(source, lines)
    if not isinstance(data, dict):
        raise InputError(f"{source}: a recipe is a YAML mapping with schema_version, name, image, …")
    _validate_schema(data, locate)
    return _build(data, locate)


class _Locator:
    """Formats errors with the file name, a key path and the line it starts on."""

    def __init__(self, source: str, lines: dict[KeyPath, int]) -> None:
        self.source = source
        self.lines = lines

    def error(self, path: KeyPath, problem: str) -> InputError:
        probe = tuple(path)
        while probe and probe not in self.lines:
            probe = probe[:-1]
        line = self.lines.get(probe)
        where = f" (line {line})" if line else ""
        return InputError(f"{self.source}: {format_path(path) or '<top>'}{where}: {problem}")


def format_path(path: Sequence[str | int]) -> str:
    """`("docker", "options", 3)` -> `docker.options[3]`."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _line_index(node: yaml.Node | None, path: KeyPath = ()) -> dict[KeyPath, int]:
    index: dict[KeyPath, int] = {}
    if node is None:
        return index
    index[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            child = (*path, key.value)
            index.update(_line_index(value, child))
            index[child] = key.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            index.update(_line_index(item, (*path, i)))
    return index


def _validate_schema(data: dict[str, Any], locate: _Locator) -> None:
    validator = jsonschema.Draft202012Validator(RECIPE_SCHEMA)
    errors = sorted(validator.iter_errors(data), key=lambda e: (len(e.absolute_path), list(map(str, e.path))))
    if not errors:
        return
    err = errors[0]
    path = tuple(err.absolute_path)
    message = err.message
    if err.validator == "additionalProperties":
        allowed = set(err.schema.get("properties", {}))
        extra = sorted(key for key in err.instance if key not in allowed)
        path = (*path, extra[0])
        message = (
            f"unknown key {extra[0]!r}; remove it or fix its spelling (allowed: {', '.join(sorted(allowed))})"
        )
    elif err.validator == "required":
        message += "; add it (see recipes/schema.json)"
    elif err.validator == "const" and path == ("schema_version",):
        message = (
            f"schema_version must be {SCHEMA_VERSION}; this hgxkit reads version {SCHEMA_VERSION} recipes"
        )
    raise locate.error(path, message)


def _words(item: str, path: KeyPath, locate: _Locator) -> list[str]:
    try:
        words = split_words(item, source="")
    except InputError as err:
        raise locate.error(path, err.message.lstrip(": ")) from None
    for word in words:
        if word.is_operator:
            raise locate.error(path, f"shell operator {word.text!r} is not allowed here; quote it")
    for word in words:
        for match in re.finditer(r"\{\{[^}]*\}\}", word.text):
            if not PLACEHOLDER_RE.fullmatch(match.group(0)):
                raise locate.error(
                    path,
                    f"unknown placeholder {match.group(0)}; use {{{{name}}}}, {{{{gpus}}}}, {{{{port}}}}, "
                    "{{group}} or {{env:NAME}}",
                )
    return [word.text for word in words]


def _build(data: dict[str, Any], locate: _Locator) -> Recipe:
    docker_data = data["docker"]
    entries = []
    for i, item in enumerate(docker_data["options"]):
        path = ("docker", "options", i)
        words = _words(item, path, locate)
        try:
            entries.extend(parse_option_words(words, source=""))
        except InputError as err:
            raise locate.error(path, err.message.lstrip(": ")) from None
    invocation = tuple(docker_data.get("invocation", "docker run").split())
    server_data = data.get("server") or {}
    program = _words(server_data.get("command", ""), ("server", "command"), locate)
    args: list[tuple[str, ...]] = []
    for i, item in enumerate(server_data.get("args", [])):
        words = _words(item, ("server", "args", i), locate)
        args.extend(group_args(words) if words else [])
    recipe = Recipe(
        name=data["name"],
        description=data.get("description"),
        source=Source(**(data.get("source") or {})),
        image=ImageRef(**data["image"]),
        docker=DockerSpec(invocation, tuple(entries)),
        server=ServerCommand(tuple(program), tuple(args)),
        model=_model(data.get("model") or {}),
        groups=_groups(data.get("groups"), locate),
        reference=_reference(data.get("reference")),
        matrix=_matrix(data.get("matrix"), locate),
        schema_version=data["schema_version"],
    )
    _check_placeholders(recipe, locate)
    return recipe


def _model(data: dict[str, Any]) -> ModelSpec:
    return ModelSpec(
        repo_id=data.get("repo_id"),
        revision=data.get("revision", "main"),
        local_dir=data.get("local_dir"),
        mount_point=data.get("mount_point"),
        allow_patterns=tuple(data.get("allow_patterns", ())),
    )


def _groups(data: dict[str, Any] | None, locate: _Locator) -> Grouping | None:
    if data is None:
        return None
    explicit = data.get("explicit")
    if explicit is None and data.get("size") is None:
        raise locate.error(("groups",), "give either size (GPUs per group) or explicit (lists of GPU ids)")
    return Grouping(
        size=data.get("size"),
        explicit=tuple(tuple(group) for group in explicit) if explicit is not None else None,
        gpus_per_node=data.get("gpus_per_node"),
        port_base=data.get("port_base"),
        name_template=data.get("name_template"),
    )


def _reference(data: dict[str, Any] | None) -> Reference | None:
    if data is None:
        return None
    cells = tuple(ReferenceCell(**cell) for cell in data.get("cells", ()))
    return Reference(
        tool=data["tool"],
        label=data.get("label"),
        notes=data.get("notes"),
        slo_ttft_p99_ms=data.get("slo_ttft_p99_ms"),
        cells=cells,
    )


def _matrix(data: dict[str, Any] | None, locate: _Locator) -> BenchmarkMatrix | None:
    if data is None:
        return None
    if len(data["num_prompts"]) != len(data["concurrencies"]):
        raise locate.error(
            ("matrix", "num_prompts"),
            f"{len(data['num_prompts'])} entries for {len(data['concurrencies'])} concurrencies; "
            "give one prompt count per concurrency",
        )
    smoke = data.get("smoke")
    return BenchmarkMatrix(
        input_lens=tuple(data["input_lens"]),
        concurrencies=tuple(data["concurrencies"]),
        num_prompts=tuple(data["num_prompts"]),
        output_len=data["output_len"],
        dataset=data.get("dataset", "random-ids"),
        random_range_ratio=data.get("random_range_ratio", 1.0),
        smoke=SmokeCell(**smoke) if smoke else None,
        notes=data.get("notes"),
    )


def _check_placeholders(recipe: Recipe, locate: _Locator) -> None:
    """Placeholders need the grouping fields that fill them."""
    groups = recipe.groups
    needs = {
        "{{name}}": (groups is not None and bool(groups.name_template), "groups.name_template"),
        "{{port}}": (groups is not None and groups.port_base is not None, "groups.port_base"),
        "{{gpus}}": (groups is not None, "groups.size or groups.explicit"),
    }
    for i, word_list in enumerate(recipe.docker.entries):
        for word in word_list.words:
            for placeholder, (present, key) in needs.items():
                if placeholder in word and not present:
                    raise locate.error(("docker", "options", i), f"{placeholder} needs {key}; add it")


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
        out["groups"] = groups
    if recipe.reference is not None:
        ref = _drop_none({k: v for k, v in recipe.reference.__dict__.items() if k != "cells"})
        ref["cells"] = [_drop_none(cell.__dict__) for cell in recipe.reference.cells]
        out["reference"] = ref
    if recipe.matrix is not None:
        matrix = _drop_none({k: v for k, v in recipe.matrix.__dict__.items() if k != "smoke"})
        for key in ("input_lens", "concurrencies", "num_prompts"):
            matrix[key] = list(matrix[key])
        if recipe.matrix.smoke is not None:
            matrix["smoke"] = dict(recipe.matrix.smoke.__dict__)
        out["matrix"] = matrix
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
