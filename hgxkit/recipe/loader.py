"""Read and write recipe YAML files, validating every load against the JSON Schema and each field's grammar.

Errors name the file, the key path and the line: `recipes/x.yaml: docker.options[3] (line 21): …`. A recipe
is untrusted input, so a malformed file is one such line too, never a traceback or a hang: files over
`MAX_RECIPE_BYTES`, binary or non-UTF-8 files, YAML nested deeper than `MAX_NESTING`, aliases that expand past
`MAX_YAML_VALUES` values (a "billion laughs"), duplicate or non-text keys, integers longer than
`MAX_INT_DIGITS` digits, control characters, and credentials written into the recipe are all refused.

Example:
    >>> recipe = load_recipe("recipes/deepseek-v4-flash-dspark-marlin.yaml")
    >>> recipe.image.reference
    'lmsysorg/sglang:dev-dspark'
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from hgxkit.errors import InputError
from hgxkit.kinds import detect_kind
from hgxkit.recipe.docker_options import canonical
from hgxkit.recipe.dockerrun import parse_option_words
from hgxkit.recipe.matrix_io import build_matrix, build_reference, matrix_to_dict, reference_to_dict
from hgxkit.recipe.migrate import migrate
from hgxkit.recipe.model import (
    NODE_PLACEHOLDERS,
    PLACEHOLDER_RE,
    SCHEMA_VERSION,
    DockerSpec,
    Grouping,
    ImageRef,
    ModelSpec,
    Recipe,
    Source,
    parse_publish,
)
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
from hgxkit.recipe.server_args import ServerCommand, group_args
from hgxkit.recipe.shellwords import join_words, shell_value, split_words
from hgxkit.secrets import SecretSpan, find_secrets, redact

KeyPath = tuple[str | int, ...]

# A recipe is a few KiB (the shipped ones are about 4 KiB); 256 KiB holds a reference table of a thousand
# cells. PyYAML reads about 200 KiB a second, so the limit is also the slowest a refusal can be (~2 s).
MAX_RECIPE_BYTES = 256 << 10
# A recipe nests five levels (matrix.smoke.input_len); deeper YAML is not a recipe.
MAX_NESTING = 32
# Values in a recipe, counted as written and again with aliases expanded (a "billion laughs" file of 640 bytes
# expands to 10^9). The shipped recipes hold about 300; PyYAML composes about 15,000 values a second, so
# the limit also keeps a megabyte of `[1,1,1,…]` from taking half a minute.
MAX_YAML_VALUES = 10_000
# Ports, GPU counts and token counts fit in 18 digits; Python refuses to even read ints past 4300 digits.
MAX_INT_DIGITS = 18
# Characters no recipe value may hold: C0 controls other than tab and newline, DEL, C1 controls, Unicode
# line separators, and the bidirectional overrides that make text read differently from what it is.
CONTROL_RE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]")
_SHOWN_LENGTH = 60
_BOMS = {b"\xff\xfe": "UTF-16 (little-endian)", b"\xfe\xff": "UTF-16 (big-endian)"}
_UTF8_BOM = b"\xef\xbb\xbf"
_STR_TAG = "tag:yaml.org,2002:str"


def load_recipe(path: str | Path) -> Recipe:
    """Load and validate a recipe file; raise `InputError` naming file, key path and line."""
    path = Path(path)
    recipe = parse_recipe_text(read_recipe_text(path), source=str(path))
    return Recipe(**{**recipe.__dict__, "path": str(path)})


def read_recipe_text(path: Path) -> str:
    """A recipe file's text: a regular file of at most `MAX_RECIPE_BYTES` bytes of UTF-8.

    Example:
        >>> read_recipe_text(Path("/dev/zero"))
        Traceback (most recent call last):
        hgxkit.errors.InputError: /dev/zero: not a regular file; give a recipe YAML file
    """
    try:
        if not path.is_file():
            if not path.exists():
                raise FileNotFoundError(path)
            # A directory, a device (/dev/zero never ends) or a pipe (it may never be written): not a recipe.
            raise InputError(f"{path}: not a regular file; give a recipe YAML file")
        with path.open("rb") as handle:
            data = handle.read(MAX_RECIPE_BYTES + 1)
    except FileNotFoundError:
        raise InputError(f"{path}: no such recipe file; list shipped recipes with `ls recipes/`") from None
    except OSError as err:
        raise InputError(f"{path}: cannot read recipe: {err.strerror}") from None
    return decode_recipe_bytes(data, source=str(path))


def decode_recipe_bytes(data: bytes, *, source: str) -> str:
    """Recipe bytes as text; refuse oversized, binary, UTF-16 and other non-UTF-8 input with one line.

    Example:
        >>> decode_recipe_bytes(b"\\xff\\xfen\\x00a\\x00", source="r.yaml")
        Traceback (most recent call last):
        hgxkit.errors.InputError: r.yaml: UTF-16 (little-endian) text (byte-order mark); save it as UTF-8
    """
    if len(data) > MAX_RECIPE_BYTES:
        raise InputError(
            f"{source}: larger than {MAX_RECIPE_BYTES >> 10} KiB; a recipe is a few KiB of YAML: "
            "give the recipe file, not a log or a model file"
        )
    for bom, name in _BOMS.items():
        if data.startswith(bom):
            raise InputError(f"{source}: {name} text (byte-order mark); save it as UTF-8")
    data = data.removeprefix(_UTF8_BOM)  # UTF-8 with a BOM is still UTF-8 (Windows editors write one)
    nul = data.find(b"\x00")
    if nul >= 0:
        line = data.count(b"\n", 0, nul) + 1
        raise InputError(f"{source}: binary file (NUL byte at line {line}); a recipe is UTF-8 YAML text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise InputError(
            f"{source}: not UTF-8 (byte 0x{data[err.start]:02X} at line {line}); save it as UTF-8"
        ) from None


def parse_recipe_text(text: str, *, source: str = "<recipe>") -> Recipe:
    """Parse recipe YAML text; see `load_recipe`."""
    if len(text) > MAX_RECIPE_BYTES or "\x00" in text:
        decode_recipe_bytes(text.encode("utf-8", "surrogatepass"), source=source)
    node = _compose(text, source)
    if node is None:
        raise InputError(f"{source}: empty file; a recipe is a YAML mapping with schema_version, name, image, …")
    _inspect(node, source)
    lines = _line_index(node)
    locate = _Locator(source, lines)
    data = _construct(node, source)
    if not isinstance(data, dict):
        raise InputError(f"{source}: a recipe is a YAML mapping with schema_version, name, image, …")
    _check_strings(data, locate)
    _validate_schema(data, locate)
    if data["schema_version"] != SCHEMA_VERSION:
        data = migrate(data, fail=locate.error)  # in memory; `hgxkit recipe migrate` rewrites the file
        _validate_schema(data, locate)
    recipe, items = _build(data, locate)
    problems = recipe_problems(recipe)
    if problems:
        path, problem = problems[0]
        raise locate.error(_item_path(path, items), problem)
    return recipe


class _RecipeYamlLoader(yaml.SafeLoader):
    """PyYAML's safe loader with limits on nesting (its composer recurses once per level) and on values."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.depth = 0
        self.composed = 0

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node | None:
        self.depth += 1
        self.composed += 1
        try:
            if self.depth > MAX_NESTING or self.composed > MAX_YAML_VALUES:
                problem = (
                    f"nested deeper than {MAX_NESTING} levels; a recipe nests at most 5"
                    if self.depth > MAX_NESTING
                    else f"more than {MAX_YAML_VALUES} values; a recipe holds a few hundred"
                )
                raise yaml.composer.ComposerError(None, None, problem, self.peek_event().start_mark)
            return super().compose_node(parent, index)  # type: ignore[no-any-return]
        finally:
            self.depth -= 1


def _compose(text: str, source: str) -> yaml.Node | None:
    loader = _RecipeYamlLoader(text)
    try:
        return loader.get_single_node()  # type: ignore[no-any-return]
    except yaml.YAMLError as err:
        raise _yaml_error(err, text, source) from None
    except RecursionError:  # pragma: no cover - the nesting limit stops composing long before
        raise InputError(f"{source}: nested too deeply; a recipe nests at most 5 levels") from None
    finally:
        loader.dispose()


def _construct(node: yaml.Node, source: str) -> Any:
    loader = _RecipeYamlLoader("")
    try:
        return loader.construct_document(node)
    except yaml.YAMLError as err:
        raise _yaml_error(err, "", source) from None
    except (ValueError, TypeError, OverflowError, RecursionError) as err:
        # The node checks refuse what Python cannot build; this is the line for anything they miss.
        raise InputError(f"{source}: cannot read a value ({type(err).__name__}); check the file is a recipe") from None
    finally:
        loader.dispose()


def _yaml_error(err: yaml.YAMLError, text: str, source: str) -> InputError:
    mark = getattr(err, "problem_mark", None)
    if mark is not None:
        where = f" (line {mark.line + 1}, column {mark.column + 1})"
    elif isinstance(err, yaml.reader.ReaderError):
        where = f" (line {text.count(chr(10), 0, err.position) + 1})"
    else:
        where = ""
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    return InputError(f"{source}: not valid YAML{where}: {problem}")


def _inspect(root: yaml.Node, source: str) -> None:
    """Refuse what PyYAML would accept but a recipe must not hold, before anything is built from it.

    Counts values with aliases expanded (memoised per node, so a bomb costs one pass over its few nodes),
    refuses recursive aliases, duplicate keys, keys that are not text, oversized integers and non-finite
    floats, each with its key path and line.
    """
    sizes: dict[int, int] = {}
    active: set[int] = set()

    def fail(path: KeyPath, node: yaml.Node, problem: str) -> InputError:
        return InputError(f"{source}: {format_path(path) or '<top>'} (line {node.start_mark.line + 1}): {problem}")

    def visit(node: yaml.Node, path: KeyPath) -> int:
        if id(node) in sizes:
            return sizes[id(node)]
        if id(node) in active:
            raise fail(path, node, "an alias refers to the value that contains it; write the value out")
        active.add(id(node))
        total = 1
        if isinstance(node, yaml.MappingNode):
            first_line: dict[str, int] = {}
            for key_node, value_node in node.value:
                name = _key_name(key_node, path, fail)
                if name in first_line:
                    raise fail(
                        (*path, name),
                        key_node,
                        f"duplicate key {name!r} (first at line {first_line[name]}); YAML would keep only the "
                        "last silently: remove one",
                    )
                first_line[name] = key_node.start_mark.line + 1
                total += 1 + visit(value_node, (*path, name))
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                total += visit(item, (*path, index))
        else:
            _check_scalar(node, path, fail)
        if total > MAX_YAML_VALUES:
            raise fail(
                path,
                node,
                f"expands to more than {MAX_YAML_VALUES} values through YAML aliases (an alias bomb?); "
                "write the values out without &anchors and *aliases",
            )
        active.discard(id(node))
        sizes[id(node)] = total
        return total

    visit(root, ())


def _key_name(key_node: yaml.Node, path: KeyPath, fail: Any) -> str:
    """A mapping key as text; recipe keys are names, so numbers, booleans, nulls and merges are refused."""
    if isinstance(key_node, yaml.ScalarNode) and key_node.tag == _STR_TAG:
        return str(key_node.value)
    if key_node.tag == "tag:yaml.org,2002:merge":
        raise fail(path, key_node, "YAML merge keys (<<) are not supported in recipes; write the keys out")
    shown = key_node.value if isinstance(key_node, yaml.ScalarNode) else "a list or mapping"
    raise fail(
        path,
        key_node,
        f"key {_shown(shown)} is not a name (YAML reads it as {key_node.tag.rsplit(':', 1)[-1]}); recipe keys "
        "are names like image or docker: fix the key or quote it",
    )


def _check_scalar(node: yaml.Node, path: KeyPath, fail: Any) -> None:
    value = str(node.value)
    if node.tag == "tag:yaml.org,2002:int":
        digits = len(re.sub(r"[^0-9a-fA-F]", "", value.split("x", 1)[-1]))
        if digits > MAX_INT_DIGITS:
            raise fail(path, node, f"an integer of {digits} digits; recipe numbers are ports, counts and lengths")
    elif node.tag == "tag:yaml.org,2002:float" and not _finite(value):
        raise fail(path, node, f"{_shown(value)} is not a finite number; write a number")


def _finite(value: str) -> bool:
    text = value.replace("_", "").lower().lstrip("+-")
    if text in (".inf", ".nan"):
        return False
    try:
        return math.isfinite(float(text)) if ":" not in text else True
    except ValueError:
        return True  # PyYAML's own constructor decides; this check is only about infinities


def _check_strings(data: Any, locate: _Locator) -> None:
    """Every text value: no control characters, and no credential written out (it belongs in the environment)."""
    for path, value in _strings(data, ()):
        control = CONTROL_RE.search(value)
        if control:
            raise locate.error(
                path, f"control character U+{ord(control.group()):04X} in {_shown(value)}; remove it"
            )
        secrets = [span for span in find_secrets(value) if path[-1] not in _PROSE_KEYS or _in_prose(value, span)]
        if secrets:
            env_name = secrets[0].env_name
            raise locate.error(
                path,
                f"a credential ({secrets[0].kind}) is written in the recipe; recipes are shared, so give it "
                f"from the environment: -e {env_name} for a container variable, {{{{env:{env_name}}}}} elsewhere",
            )


# Free-text fields: prose says "per token: 5.2" and "the --token flag", so there only credentials that are
# recognisable by their value, or assigned to a variable written as one (`DB_PASSWORD=…`), are refused.
_PROSE_KEYS = frozenset({"description", "notes", "author", "tool", "label"})


def _in_prose(text: str, span: SecretSpan) -> bool:
    if span.kind in ("flag-value", "flag-in-list"):
        return False
    if span.kind != "secret-name":
        return True
    return text[: span.start].rstrip(" :='\"").endswith(span.env_name)


def _strings(data: Any, path: KeyPath) -> Iterator[tuple[KeyPath, str]]:
    if isinstance(data, str):
        yield path, data
    elif isinstance(data, dict):
        for key, value in data.items():
            yield from _strings(value, (*path, key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from _strings(value, (*path, index))


def _shown(value: object) -> str:
    """A value for an error message: repr, shortened, credentials masked."""
    text = redact(repr(value))
    return text if len(text) <= _SHOWN_LENGTH else text[: _SHOWN_LENGTH - 1] + "…"


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
    if len(instance) > schema.get("maxLength", MAX_RECIPE_BYTES):
        return  # maxLength reports it
    if not re.fullmatch(pattern, instance):
        expected = schema.get("description", f"the pattern {pattern}")
        yield jsonschema.ValidationError(f"{_shown(instance)} does not match: expected {expected}")


_Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    validators={"pattern": _fullmatch_pattern},
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_integer),
)


def _validate_schema(data: dict[str, Any], locate: _Locator) -> None:
    version = data.get("schema_version")
    known = ", ".join(str(v) for v in SCHEMAS)
    if "schema_version" in data and (not _whole(version, 1, 10**6) or version not in SCHEMAS):
        newer = _whole(version, SCHEMA_VERSION + 1, 10**6)
        raise locate.error(
            ("schema_version",),
            f"{_shown(version)} is not a recipe schema this hgxkit reads ({known}; version 1 is migrated when "
            "loaded): " + ("the recipe is newer than this hgxkit: upgrade hgxkit" if newer else
                           f"write schema_version: {SCHEMA_VERSION}"),
        )  # fmt: skip
    validator = _Validator(SCHEMAS.get(version, RECIPE_SCHEMA))
    errors = sorted(validator.iter_errors(data), key=lambda e: (len(e.absolute_path), list(map(str, e.path))))
    if not errors:
        return
    err = errors[0]
    path = tuple(err.absolute_path)
    message = err.message
    if err.validator == "additionalProperties":
        allowed = set(err.schema.get("properties", {}))
        extra = sorted(str(key) for key in err.instance if key not in allowed)
        path = (*path, extra[0])
        message = (
            f"unknown key {_shown(extra[0])}; remove it or fix its spelling (allowed: {', '.join(sorted(allowed))})"
        )
    elif err.validator == "required":
        message += "; add it (see recipes/schema.json)"
    elif err.validator in ("maxLength", "maxItems", "minimum", "maximum", "type", "enum", "minItems", "minLength"):
        message = _schema_message(err)
    raise locate.error(path, message)


def _schema_message(err: jsonschema.ValidationError) -> str:
    """jsonschema's message with the value shortened (its own repeats a megabyte string whole)."""
    shown, limit, kind = _shown(err.instance), err.validator_value, str(err.validator)
    if kind == "type":
        kinds = limit if isinstance(limit, list) else [limit]
        return f"{shown} is not of type {', '.join(map(repr, kinds))}"
    if kind == "enum":
        return f"{shown} is not one of {', '.join(map(repr, limit))}"
    limits = {
        "maxLength": f"is longer than {limit} characters",
        "minLength": "is empty; give a value",
        "maxItems": f"has more than {limit} items",
        "minItems": f"needs at least {limit} item(s)",
        "minimum": f"is less than the minimum of {limit}",
        "maximum": f"is more than the maximum of {limit}",
    }
    return f"{shown} {limits[kind]}"


def _words(item: str, path: KeyPath, locate: _Locator) -> list[str]:
    try:
        words = split_words(item, source="")
    except InputError as err:
        raise locate.error(path, err.message.lstrip(": ")) from None
    for word in words:
        if word.is_operator:
            raise locate.error(path, f"shell operator {word.text!r} is not allowed here; quote it")
    for word in words:
        for match in re.finditer(r"\{\{[^{}]{0,64}\}\}", word.text):  # no `{`: linear on "{{{{…"
            if not PLACEHOLDER_RE.fullmatch(match.group(0)):
                raise locate.error(
                    path,
                    f"unknown placeholder {match.group(0)}; use {{{{name}}}}, {{{{gpus}}}}, {{{{port}}}}, "
                    "{{group}}, {{rank}}, {{head}}, {{dist_port}} or {{env:NAME}}",
                )
    return [word.text for word in words]


# For each docker entry and server argument entry of a built recipe, the YAML list item it came from (one
# item may hold several entries, e.g. `--rm -d`), so that errors found on the recipe name the right line.
_ItemIndex = dict[str, list[int]]


def _build(data: dict[str, Any], locate: _Locator) -> tuple[Recipe, _ItemIndex]:
    docker_data = data["docker"]
    entries = []
    items: _ItemIndex = {"options": [], "args": []}
    for i, item in enumerate(docker_data["options"]):
        path = ("docker", "options", i)
        words = _words(item, path, locate)
        try:
            parsed = parse_option_words(words, source="")
        except InputError as err:
            raise locate.error(path, err.message.lstrip(": ")) from None
        entries.extend(parsed)
        items["options"].extend([i] * len(parsed))
    invocation = tuple(docker_data.get("invocation", "docker run").split())
    server_data = data.get("server") or {}
    program = _words(server_data.get("command", ""), ("server", "command"), locate)
    args: list[tuple[str, ...]] = []
    for i, item in enumerate(server_data.get("args", [])):
        words = _words(item, ("server", "args", i), locate)
        grouped = group_args(words) if words else []
        args.extend(grouped)
        items["args"].extend([i] * len(grouped))
    try:
        kind = detect_kind(data["image"]["reference"], program, server_data.get("kind")).name
    except InputError as err:
        raise locate.error(("server", "kind"), err.message) from None
    matrix = build_matrix(
        data.get("matrix"), words=lambda item, path: _words(item, path, locate), fail=locate.error
    )
    recipe = Recipe(
        name=data["name"],
        description=data.get("description"),
        source=Source(**(data.get("source") or {})),
        image=ImageRef(**data["image"]),
        docker=DockerSpec(invocation, tuple(entries)),
        server=ServerCommand(tuple(program), tuple(args), kind),
        model=_model(data.get("model") or {}),
        groups=_groups(data.get("groups"), locate),
        reference=build_reference(data.get("reference"), matrix, fail=locate.error),
        matrix=matrix,
        schema_version=data["schema_version"],
    )
    return recipe, items


def _item_path(path: KeyPath, items: _ItemIndex) -> KeyPath:
    """A recipe-level path (`docker.options[<entry>]`) as the path of the YAML item the entry came from."""
    if len(path) >= 3 and path[0] in ("docker", "server") and path[1] in items and isinstance(path[2], int):
        index = path[2]
        mapped = items[str(path[1])]
        if index < len(mapped):
            return (path[0], path[1], mapped[index], *path[3:])
    return path


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
        nodes=data.get("nodes"),
        dist_port=data.get("dist_port"),
    )


Problem = tuple[KeyPath, str]


def recipe_problems(recipe: Recipe) -> list[Problem]:
    """Every field of `recipe` checked against its grammar, as `(key path, what was expected)`, in file order.

    The loader runs this after the JSON Schema, for what a schema cannot say (container names after
    `{{group}}` is filled, ports of every group, words that reach a shell); the importer runs it on the
    recipe it built, for everything. Docker and server entries are named by entry index
    (`docker.options[3]`), which is the item index of an imported or dumped recipe.

    Example:
        >>> from dataclasses import replace
        >>> recipe = load_recipe("recipes/deepseek-v4-flash-dspark-marlin.yaml")
        >>> [(path, why.split(": expected")[0]) for path, why in recipe_problems(replace(recipe, name="A;id"))]
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
    return problems


def _expected(*keys: str) -> str:
    """The `description` of a schema field: what its grammar expects, in words."""
    node: Any = RECIPE_SCHEMA
    for key in keys:
        node = node["properties"][key]
    return str(node["description"])


_CONTAINER_NAME_EXPECTED = "a container name: letters, digits, '_', '.', '-', starting with a letter or digit"


def _grammar(problems: list[Problem], path: KeyPath, value: str | None, regex: str, expected: str) -> None:
    if value is not None and (len(value) > 512 or not re.fullmatch(regex, value)):
        problems.append((path, f"{_shown(value)} does not match: expected {expected}"))


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
            problems.append((("groups", key), f"{_shown(value)} is not a whole number of GPUs from 1 to {MAX_GPUS}"))
    for index, group in enumerate(groups.explicit or ()):
        for position, gpu in enumerate(group):
            if not _whole(gpu, 0, MAX_GPUS - 1):
                problems.append(
                    (("groups", "explicit", index, position), f"{_shown(gpu)} is not a GPU id from 0 to {MAX_GPUS - 1}")
                )
    count = _group_count(groups)
    base = groups.port_base
    if base is not None and not _whole(base, 1, 65535):
        problems.append((("groups", "port_base"), f"{_shown(base)} is not a port from 1 to 65535"))
    elif base is not None and base + count - 1 > 65535:
        problems.append(
            (
                ("groups", "port_base"),
                f"{base} + {count} groups runs past port 65535; use a port_base of at most {65536 - count}",
            )
        )
    template = groups.name_template
    if template is not None:
        _grammar(problems, ("groups", "name_template"), template, NAME_TEMPLATE, _expected("groups", "name_template"))
        if count > 1 and "{{group}}" not in template:
            problems.append(
                (
                    ("groups", "name_template"),
                    f"every group would get the container name {_shown(template)}; put {{{{group}}}} in it",
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
                    problems.append((path, f"{placeholder} needs {key}; add it"))
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
                (path, f"command substitution ({marker}) in {_shown(literal)}; recipes hold values, not commands")
            )
            return


def _filled_name(recipe: Recipe, value: str) -> str:
    template = recipe.groups.name_template if recipe.groups else None
    return value.replace("{{name}}", template or "name").replace("{{group}}", "0")


def _name_problems(recipe: Recipe, problems: list[Problem], path: KeyPath, value: str) -> None:
    filled = _filled_name(recipe, value)
    if not re.fullmatch(CONTAINER_NAME, filled) or len(filled) > 200:
        problems.append((path, f"--name {_shown(value)} does not match: expected {_CONTAINER_NAME_EXPECTED}"))
    elif recipe.groups is not None and _group_count(recipe.groups) > 1 and _filled_name(recipe, value) == value:
        problems.append(
            (
                path,
                f"--name {_shown(value)}: every group would get this container name; write --name '{{{{name}}}}' "
                "with groups.name_template, or put {{group}} in it",
            )
        )


def _port_problem(text: str) -> str | None:
    """Why `text` (one side of a `-p` value: `8080`, `8000-8010`, `80/tcp`) is not a port, or None."""
    ports, _, protocol = text.partition("/")
    if protocol and protocol not in ("tcp", "udp", "sctp"):
        return f"protocol {_shown(protocol)} is not tcp, udp or sctp"
    for part in ports.split("-", 1):
        if not part.isascii() or not part.isdigit() or not 1 <= int(part[:6]) <= 65535:
            return f"port {_shown(part)} is not a number from 1 to 65535"
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
            problems.append((path, f"-p {_shown(value)}: {problem}"))
            return


def _gpus_problems(problems: list[Problem], path: KeyPath, value: str) -> None:
    spec = shell_value(value).strip("\"'")
    if "device=" not in spec:
        return
    for gpu in spec.split("device=", 1)[1].split(","):
        if gpu.isascii() and gpu.isdigit() and int(gpu[:6]) >= MAX_GPUS:
            problems.append((path, f"--gpus {_shown(value)}: GPU id {gpu} is not from 0 to {MAX_GPUS - 1}"))


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
                        (
                            path,
                            f"--served-model-name {_shown(value)} does not match: expected a model name of letters, "
                            "digits and '_', '.', ':', '/', '@', '+', '-' (no spaces, quotes or control characters)",
                        )
                    )
        elif flag == "--port" and values and "$" not in values[0] and "{{" not in values[0]:
            problem = _port_problem(values[0])
            if problem:
                problems.append((path, f"--port: {problem}"))


def _node_problems(recipe: Recipe, problems: list[Problem]) -> None:
    """`{{rank}}`, `{{head}}`, `{{dist_port}}` only in a group spanning nodes, and a node count said once."""
    groups = recipe.groups
    nodes = recipe.node_count()
    for index, entry in enumerate(recipe.docker.entries):
        for word in entry.words:
            for placeholder in NODE_PLACEHOLDERS:
                if placeholder in word:
                    problems.append((("docker", "options", index), f"{placeholder} is for server arguments only"))
    for index, entry in enumerate(recipe.server.args):
        for word in entry:
            for placeholder in NODE_PLACEHOLDERS:
                path: KeyPath = ("server", "args", index)
                if placeholder in word and nodes < 2:
                    why = "is filled per host of a group spanning nodes; set groups.nodes (2 or more) or write it"
                    problems.append((path, f"{placeholder} {why}"))
                elif placeholder == "{{dist_port}}" in word and (groups is None or groups.dist_port is None):
                    problems.append((path, "{{dist_port}} needs groups.dist_port; add it"))
    nnodes = recipe.server.flag("--nnodes")
    declared = groups.nodes if groups else None
    if declared is not None and nnodes is not None and nnodes.isdigit() and int(nnodes) != declared:
        problems.append(
            (("groups", "nodes"), f"groups.nodes is {declared} but the server says --nnodes {nnodes}; make them equal"),
        )


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
