"""Check a recipe against its grammar: the JSON Schema for the data, and what a schema cannot say for the built
recipe (container names after `{{group}}` is filled, ports of every group, words that reach a shell).

Both answer with `Problem`s whose `where` is the key path (`("docker", "options", 3)`); reading a file
(hgxkit.recipe.read) turns the first into an error naming file, key path and line, and the importer runs the
same checks on the recipe it built.

Example:
    >>> format_path(("docker", "options", 3))
    'docker.options[3]'
    >>> schema_problem({"schema_version": 2, "name": "x"}).message.startswith("'image' is a required property")
    True
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from hgxkit.problems import Problem
from hgxkit.recipe.docker_options import canonical
from hgxkit.recipe.schema import (
    ABSOLUTE_PATH,
    CONTAINER_NAME,
    DIGEST,
    IMAGE_REFERENCE,
    MAX_GPUS,
    NAME_TEMPLATE,
    RECIPE_NAME,
    RECIPE_SCHEMA,
    REPO_ID,
    REVISION,
    SCHEMAS,
    SERVED_MODEL_NAME,
)
from hgxkit.recipe.shellwords import shell_value
from hgxkit.recipe.spec import NODE_PLACEHOLDERS, PLACEHOLDER_RE, SCHEMA_VERSION, Grouping, Recipe, parse_publish
from hgxkit.secrets import redact

if TYPE_CHECKING:  # imported when a recipe is validated: a remembered pass (hgxkit.verdicts) needs none
    import jsonschema

KeyPath = tuple[str | int, ...]

_SHOWN_LENGTH = 60


def shown(value: object) -> str:
    """A value for an error message: repr, shortened, credentials masked."""
    text = redact(repr(value))
    return text if len(text) <= _SHOWN_LENGTH else text[: _SHOWN_LENGTH - 1] + "…"


def format_path(path: Sequence[str | int]) -> str:
    """`("docker", "options", 3)` -> `docker.options[3]`."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _at(path: KeyPath, found: str, code: str = "recipe-grammar") -> Problem:
    """A grammar problem at key `path`: `found` says what is wrong and what was expected."""
    return Problem(code, found, where=path)


def _is_integer(_checker: object, instance: object) -> bool:
    """JSON Schema's integer without its `4.0` and without booleans: GPU counts are written as whole numbers."""
    return isinstance(instance, int) and not isinstance(instance, bool)


def _fullmatch_pattern(
    validator: jsonschema.protocols.Validator, pattern: str, instance: object, schema: dict[str, Any]
) -> Iterator[jsonschema.ValidationError]:
    """`pattern` applied to the whole value (`$` alone lets a trailing newline through) and never to a
    value longer than the field allows (a regex over a megabyte is a hang waiting to happen)."""
    if not isinstance(instance, str):
        return
    if len(instance) > schema.get("maxLength", len(instance)):
        return  # maxLength reports it (a field without one is bounded by the file's own size limit)
    if not re.fullmatch(pattern, instance):
        expected = schema.get("description", f"the pattern {pattern}")
        from jsonschema import ValidationError

        yield ValidationError(f"{shown(instance)} does not match: expected {expected}")


@functools.cache
def _validator_class() -> type[jsonschema.protocols.Validator]:
    import jsonschema

    return jsonschema.validators.extend(  # type: ignore[no-any-return]
        jsonschema.Draft202012Validator,
        validators={"pattern": _fullmatch_pattern},
        type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_integer),
    )


def schema_problem(data: dict[str, Any]) -> Problem | None:
    """The first place `data` breaks the JSON Schema of its `schema_version` (None: it fits), shallowest first."""
    version = data.get("schema_version")
    known = ", ".join(str(v) for v in SCHEMAS)
    if "schema_version" in data and (not _whole(version, 1, 10**6) or version not in SCHEMAS):
        newer = _whole(version, SCHEMA_VERSION + 1, 10**6)
        return _at(
            ("schema_version",),
            f"{shown(version)} is not a recipe schema this hgxkit reads ({known}; version 1 is migrated when "
            "loaded): "
            + (
                "the recipe is newer than this hgxkit: upgrade hgxkit"
                if newer
                else f"write schema_version: {SCHEMA_VERSION}"
            ),
            code="recipe-schema",
        )
    validator = _validator_class()(SCHEMAS.get(version, RECIPE_SCHEMA))
    errors = sorted(validator.iter_errors(data), key=lambda e: (len(e.absolute_path), list(map(str, e.path))))
    if not errors:
        return None
    err = errors[0]
    path = tuple(err.absolute_path)
    message = err.message
    if err.validator == "additionalProperties":
        allowed = set(err.schema.get("properties", {}))
        extra = sorted(str(key) for key in err.instance if key not in allowed)
        path = (*path, extra[0])
        message = (
            f"unknown key {shown(extra[0])}; remove it or fix its spelling (allowed: {', '.join(sorted(allowed))})"
        )
    elif err.validator == "required":
        message += "; add it (see recipes/schema.json)"
    elif err.validator in ("maxLength", "maxItems", "minimum", "maximum", "type", "enum", "minItems", "minLength"):
        message = _schema_message(err)
    return _at(path, message, code="recipe-schema")


def _schema_message(err: jsonschema.ValidationError) -> str:
    """jsonschema's message with the value shortened (its own repeats a megabyte string whole)."""
    value, limit, kind = shown(err.instance), err.validator_value, str(err.validator)
    if kind == "type":
        kinds = limit if isinstance(limit, list) else [limit]
        return f"{value} is not of type {', '.join(map(repr, kinds))}"
    if kind == "enum":
        return f"{value} is not one of {', '.join(map(repr, limit))}"
    limits = {
        "maxLength": f"is longer than {limit} characters",
        "minLength": "is empty; give a value",
        "maxItems": f"has more than {limit} items",
        "minItems": f"needs at least {limit} item(s)",
        "minimum": f"is less than the minimum of {limit}",
        "maximum": f"is more than the maximum of {limit}",
    }
    return f"{value} {limits[kind]}"


def recipe_problems(recipe: Recipe) -> list[Problem]:
    """Every field of `recipe` checked against its grammar, one `Problem` each (`where`: the key path), in file
    order.

    Reading a file runs this after the JSON Schema, for what a schema cannot say (container names after
    `{{group}}` is filled, ports of every group, words that reach a shell); the importer runs it on the
    recipe it built, for everything. Docker and server entries are named by entry index
    (`docker.options[3]`), which is the item index of an imported or dumped recipe.

    Example:
        >>> from dataclasses import replace
        >>> from hgxkit.recipe.read import load_recipe
        >>> recipe = load_recipe("recipes/deepseek-v4-flash-dspark-marlin.yaml")
        >>> [(p.where, p.found.split(": expected")[0]) for p in recipe_problems(replace(recipe, name="A;id"))]
        [(('name',), "'A;id' does not match")]
    """
    problems: list[Problem] = []
    _field_problems(recipe, problems)
    _group_problems(recipe, problems)
    _docker_problems(recipe, problems)
    _server_problems(recipe, problems)
    _node_problems(recipe, problems)
    for index, cell in enumerate(recipe.matrix.cells() if recipe.matrix else ()):
        for word in cell.extra_args:
            _word_problems(problems, ("matrix", "cells", index, "extra_args"), word)
        _client_flag_problems(recipe, cell.extra_args, ("matrix", "cells", index, "extra_args"), problems)
    return problems


_NUMBER = re.compile(r"-[0-9.]+")


def _client_flag_problems(recipe: Recipe, words: Sequence[str], path: KeyPath, problems: list[Problem]) -> None:
    """Each flag of a cell's `extra_args` is one the kind's client lets a recipe add (`BenchClient.extra_flags`):
    what shapes the load, never where the client connects or writes, nor code it loads."""
    client = recipe.server.server_kind.bench
    for word in words:
        flag = word.partition("=")[0]
        if flag.startswith("-") and not _NUMBER.fullmatch(flag) and flag not in client.extra_flags:
            problems.append(
                _at(
                    path,
                    f"{shown(flag)} is not a flag a recipe gives the benchmark client: hgxkit sets where it "
                    "connects, where it writes and its tokenizer; a cell may add only flags that shape the load "
                    f"({', '.join(sorted(client.extra_flags)) or 'none for this kind'})",
                    "client-flag",
                )
            )


def _expected(*keys: str) -> str:
    """The `description` of a schema field: what its grammar expects, in words."""
    node: Any = RECIPE_SCHEMA
    for key in keys:
        node = node["properties"][key]
    return str(node["description"])


_CONTAINER_NAME_EXPECTED = "a container name: letters, digits, '_', '.', '-', starting with a letter or digit"


def _grammar(problems: list[Problem], path: KeyPath, value: str | None, regex: str, expected: str) -> None:
    if value is not None and (len(value) > 512 or not re.fullmatch(regex, value)):
        problems.append(_at(path, f"{shown(value)} does not match: expected {expected}"))


def _field_problems(recipe: Recipe, problems: list[Problem]) -> None:
    _grammar(problems, ("name",), recipe.name, RECIPE_NAME, _expected("name"))
    _grammar(problems, ("image", "reference"), recipe.image.reference, IMAGE_REFERENCE, _expected("image", "reference"))
    _grammar(problems, ("image", "digest"), recipe.image.digest, DIGEST, _expected("image", "digest"))
    model = recipe.model
    _grammar(problems, ("model", "repo_id"), model.repo_id, REPO_ID, _expected("model", "repo_id"))
    _grammar(problems, ("model", "revision"), model.revision, REVISION, _expected("model", "revision"))
    for key in ("local_dir", "mount_point"):
        _grammar(problems, ("model", key), getattr(model, key), ABSOLUTE_PATH, _expected("model", key))


def _group_count(groups: Grouping) -> int:
    """How many containers the grouping can make: known for explicit groups or a node size, else the most."""
    if groups.explicit is not None:
        return len(groups.explicit)
    size = groups.size if isinstance(groups.size, int) and groups.size > 0 else 1
    return max((groups.gpus_per_node or MAX_GPUS) // size, 1)


def _whole(value: object, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _group_problems(recipe: Recipe, problems: list[Problem]) -> None:
    groups = recipe.groups
    if groups is None:
        return
    for key in ("size", "gpus_per_node"):
        value = getattr(groups, key)
        if value is not None and not _whole(value, 1, MAX_GPUS):
            problems.append(_at(("groups", key), f"{shown(value)} is not a whole number of GPUs from 1 to {MAX_GPUS}"))
    for index, group in enumerate(groups.explicit or ()):
        for position, gpu in enumerate(group):
            if not _whole(gpu, 0, MAX_GPUS - 1):
                where = ("groups", "explicit", index, position)
                problems.append(_at(where, f"{shown(gpu)} is not a GPU id from 0 to {MAX_GPUS - 1}"))
    count = _group_count(groups)
    base = groups.port_base
    if base is not None and not _whole(base, 1, 65535):
        problems.append(_at(("groups", "port_base"), f"{shown(base)} is not a port from 1 to 65535"))
    elif base is not None and base + count - 1 > 65535:
        problems.append(
            _at(
                ("groups", "port_base"),
                f"{base} + {count} groups runs past port 65535; use a port_base of at most {65536 - count}",
            )
        )
    template = groups.name_template
    if template is not None:
        _grammar(problems, ("groups", "name_template"), template, NAME_TEMPLATE, _expected("groups", "name_template"))
        if count > 1 and "{{group}}" not in template:
            problems.append(
                _at(
                    ("groups", "name_template"),
                    f"every group would get the container name {shown(template)}; put {{{{group}}}} in it",
                )
            )


def _docker_problems(recipe: Recipe, problems: list[Problem]) -> None:
    groups = recipe.groups
    needs = {
        "{{name}}": (groups is not None and bool(groups.name_template), "groups.name_template"),
        "{{port}}": (groups is not None and groups.port_base is not None, "groups.port_base"),
        "{{gpus}}": (groups is not None, "groups.size or groups.explicit"),
    }
    for index, entry in enumerate(recipe.docker.entries):
        path: KeyPath = ("docker", "options", index)
        for word in entry.words:
            _word_problems(problems, path, word)
            for placeholder, (present, key) in needs.items():
                if placeholder in word and not present:
                    problems.append(_at(path, f"{placeholder} needs {key}; add it"))
        for use in entry.uses:
            option = canonical(use.option.name)
            value = use.value or ""
            if option == "--name":
                _name_problems(recipe, problems, path, value)
            elif option == "--publish":
                _publish_problems(recipe, problems, path, value)
            elif option == "--gpus":
                _gpus_problems(problems, path, value)


def _word_problems(problems: list[Problem], path: KeyPath, word: str) -> None:
    """A word that reaches the rendered command: no command substitution, in any quoting."""
    literal = shell_value(word)
    for marker in ("`", "$("):
        if marker in word or marker in literal:
            problems.append(
                _at(path, f"command substitution ({marker}) in {shown(literal)}; recipes hold values, not commands")
            )
            return


def _filled_name(recipe: Recipe, value: str) -> str:
    template = recipe.groups.name_template if recipe.groups else None
    return value.replace("{{name}}", template or "name").replace("{{group}}", "0")


def _name_problems(recipe: Recipe, problems: list[Problem], path: KeyPath, value: str) -> None:
    filled = _filled_name(recipe, value)
    if not re.fullmatch(CONTAINER_NAME, filled) or len(filled) > 200:
        problems.append(_at(path, f"--name {shown(value)} does not match: expected {_CONTAINER_NAME_EXPECTED}"))
    elif recipe.groups is not None and _group_count(recipe.groups) > 1 and _filled_name(recipe, value) == value:
        problems.append(
            _at(
                path,
                f"--name {shown(value)}: every group would get this container name; write --name '{{{{name}}}}' "
                "with groups.name_template, or put {{group}} in it",
            )
        )


def _port_problem(text: str) -> str | None:
    """Why `text` (one side of a `-p` value: `8080`, `8000-8010`, `80/tcp`) is not a port, or None."""
    ports, _, protocol = text.partition("/")
    if protocol and protocol not in ("tcp", "udp", "sctp"):
        return f"protocol {shown(protocol)} is not tcp, udp or sctp"
    for part in ports.split("-", 1):
        if not part.isascii() or not part.isdigit() or not 1 <= int(part[:6]) <= 65535:
            return f"port {shown(part)} is not a number from 1 to 65535"
    return None


def _publish_problems(recipe: Recipe, problems: list[Problem], path: KeyPath, value: str) -> None:
    if "$" in value:
        return  # decided by the host's shell; Docker checks it when it runs
    mapping = parse_publish(value)
    base = recipe.groups.port_base if recipe.groups and recipe.groups.port_base is not None else 1
    host_port = mapping.host_port.replace("{{port}}", str(base))
    for side in ([host_port] if host_port else []) + [mapping.container_port]:
        problem = _port_problem(side)
        if problem:
            problems.append(_at(path, f"-p {shown(value)}: {problem}"))
            return


def _gpus_problems(problems: list[Problem], path: KeyPath, value: str) -> None:
    spec = shell_value(value).strip("\"'")
    if "device=" not in spec:
        return
    for gpu in spec.split("device=", 1)[1].split(","):
        if gpu.isascii() and gpu.isdigit() and int(gpu[:6]) >= MAX_GPUS:
            problems.append(_at(path, f"--gpus {shown(value)}: GPU id {gpu} is not from 0 to {MAX_GPUS - 1}"))


def _server_problems(recipe: Recipe, problems: list[Problem]) -> None:
    for word in recipe.server.program:
        _word_problems(problems, ("server", "command"), word)
    for index, entry in enumerate(recipe.server.args):
        path: KeyPath = ("server", "args", index)
        for word in entry:
            _word_problems(problems, path, word)
        flag, has_equals, inline = entry[0].partition("=")
        values = [inline] if has_equals else list(entry[1:])
        if flag == "--served-model-name":
            for value in values:
                filled = PLACEHOLDER_RE.sub("x", value)
                if not re.fullmatch(SERVED_MODEL_NAME, filled):
                    problems.append(
                        _at(
                            path,
                            f"--served-model-name {shown(value)} does not match: expected a model name of letters, "
                            "digits and '_', '.', ':', '/', '@', '+', '-' (no spaces, quotes or control characters)",
                        )
                    )
        elif flag == "--port" and values and "$" not in values[0] and "{{" not in values[0]:
            problem = _port_problem(values[0])
            if problem:
                problems.append(_at(path, f"--port: {problem}"))

    for index, entries in enumerate(recipe.groups.server_args or () if recipe.groups else ()):
        for entry in entries:
            for word in entry:
                _word_problems(problems, ("groups", "server_args", index), word)
                if "{{env:" in word:  # secrets are passed once for every group (server.args)
                    problems.append(_at(("groups", "server_args", index), "{{env:…}} belongs in server.args"))


def _node_problems(recipe: Recipe, problems: list[Problem]) -> None:
    """`{{rank}}`, `{{head}}`, `{{dist_port}}` only in a group spanning nodes, and a node count said once."""
    groups = recipe.groups
    nodes = recipe.node_count()
    for index, entry in enumerate(recipe.docker.entries):
        for word in entry.words:
            for placeholder in NODE_PLACEHOLDERS:
                if placeholder in word:
                    problems.append(_at(("docker", "options", index), f"{placeholder} is for server arguments only"))
    for index, entry in enumerate(recipe.server.args):
        for word in entry:
            for placeholder in NODE_PLACEHOLDERS:
                path: KeyPath = ("server", "args", index)
                if placeholder in word and nodes < 2:
                    why = "is filled per host of a group spanning nodes; set groups.nodes (2 or more) or write it"
                    problems.append(_at(path, f"{placeholder} {why}"))
                elif placeholder == "{{dist_port}}" in word and (groups is None or groups.dist_port is None):
                    problems.append(_at(path, "{{dist_port}} needs groups.dist_port; add it"))
    nnodes = recipe.server.flag("--nnodes")
    declared = groups.nodes if groups else None
    if declared is not None and nnodes is not None and nnodes.isdigit() and int(nnodes) != declared:
        says = f"groups.nodes is {declared} but the server says --nnodes {nnodes}; make them equal"
        problems.append(_at(("groups", "nodes"), says))
