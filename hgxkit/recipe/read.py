"""Read recipe YAML files into `Recipe`s: bytes to text to YAML to data to a built recipe, validated on the way.

Errors name the file, the key path and the line: `recipes/x.yaml: docker.options[3] (line 21): …`. A recipe
is untrusted input, so a malformed file is one such line too, never a traceback or a hang: files over
`MAX_RECIPE_BYTES`, binary or non-UTF-8 files, YAML nested deeper than `MAX_NESTING`, aliases that expand past
`MAX_YAML_VALUES` values (a "billion laughs"), duplicate or non-text keys, integers longer than
`MAX_INT_DIGITS` digits, control characters, and credentials written into the recipe are all refused. What
the grammar says (JSON Schema, field patterns) is checked by hgxkit.recipe.validate; writing a recipe back
is hgxkit.recipe.dump.

Example:
    >>> recipe = load_recipe("recipes/deepseek-v4-flash-dspark-marlin.yaml")
    >>> recipe.image.reference
    'lmsysorg/sglang:dev-dspark'
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from hgxkit.errors import InputError
from hgxkit.kinds import detect_kind
from hgxkit.problems import Problem
from hgxkit.recipe.danger import expansion_problems
from hgxkit.recipe.docker_parse import parse_option_words
from hgxkit.recipe.matrix_io import build_matrix, build_reference
from hgxkit.recipe.server_args import ServerCommand, group_args
from hgxkit.recipe.shellwords import split_words
from hgxkit.recipe.spec import (
    PLACEHOLDER_RE,
    SCHEMA_VERSION,
    DockerSpec,
    Grouping,
    ImageRef,
    ModelSpec,
    Recipe,
    Source,
)
from hgxkit.recipe.validate import KeyPath, format_path, recipe_problems, schema_problem, shown
from hgxkit.secrets import SecretSpan, find_secrets
from hgxkit.verdicts import remember, remembered, verdict_key

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
    key = _checks_key(text) if data.get("schema_version") == SCHEMA_VERSION else None
    if key is None or not remembered(key):
        _check_strings(data, locate)
        locate.refuse(schema_problem(data))
        if key is not None:
            remember(key)
    if data["schema_version"] != SCHEMA_VERSION:
        from hgxkit.recipe.migrate import migrate  # here: only an older schema's recipe needs the migrations

        data = migrate(data, fail=locate.error)  # in memory; `hgxkit recipe migrate` rewrites the file
        locate.refuse(schema_problem(data))
    recipe, items = _build(data, locate)
    problems = recipe_problems(recipe) + expansion_problems(recipe)
    if problems:
        first = problems[0]
        raise locate.error(_item_path(tuple(first.where), items), first.message)
    return recipe


# The credential scan and the schema check of a current-schema recipe are remembered by hgxkit.verdicts: their
# answer is decided by the text, this package's code, hgxkit.kinds (the schema's kind names), the secret
# patterns and the versions of the libraries below; a pass skips importing detect-secrets and jsonschema.
_JUDGES_LIBRARIES = ("PyYAML", "detect-secrets", "jsonschema", "jsonschema-specifications", "referencing")


def _judges() -> list[Path]:
    here = Path(__file__).parent
    return [
        *here.glob("*.py"),
        *(here.parent / "kinds").glob("*.py"),
        here.parent / "secrets.py",
        here.parent / "verdicts.py",
    ]


def _checks_key(text: str) -> str | None:
    try:
        return verdict_key(
            "recipe-checks", text.encode("utf-8", "surrogatepass"), judges=_judges(), libraries=_JUDGES_LIBRARIES
        )
    except OSError:  # a judge's source unreadable (a zipped install): judge every time
        return None


class _Limits:
    """Limits on nesting (PyYAML's composer recurses once per level) and on values, for a composer below it."""

    depth = 0
    composed = 0

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
                raise yaml.composer.ComposerError(None, None, problem, self.peek_event().start_mark)  # type: ignore[attr-defined]
            return super().compose_node(parent, index)  # type: ignore[misc, no-any-return]
        finally:
            self.depth -= 1


class _RecipeYamlLoader(_Limits, yaml.SafeLoader):
    """PyYAML's safe loader, all in Python, with the limits: it composes a recipe, or says what is wrong with it."""


# libyaml's scanner and parser (C) under PyYAML's own composer and the same limits. Only what parsing yields comes
# from C (events, with their values, tags and start marks: the same as the Python parser's for every YAML file in
# this repository, tests/unit/recipe/test_recipe_yaml.py); composing, aliases and their limits stay in Python, so
# the C loader's own composer, which would skip them, is never used. A recipe's events come ~9 ms sooner.
_FAST = bool(getattr(yaml, "__with_libyaml__", False))

if _FAST:

    class _FastRecipeComposer(_Limits, yaml.composer.Composer, yaml.cyaml.CParser, yaml.resolver.Resolver):
        def __init__(self, stream: str) -> None:
            yaml.cyaml.CParser.__init__(self, stream)
            yaml.composer.Composer.__init__(self)
            yaml.resolver.Resolver.__init__(self)


def _compose(text: str, source: str) -> yaml.Node | None:
    if _FAST:
        try:
            return _fast_compose(text)
        except (yaml.YAMLError, UnicodeError):
            pass  # composed again below: the Python loader's refusal, message and line are the ones a user gets
    loader = _RecipeYamlLoader(text)
    try:
        return loader.get_single_node()  # type: ignore[no-any-return]
    except yaml.YAMLError as err:
        raise _yaml_error(err, text, source) from None
    except RecursionError:  # pragma: no cover - the nesting limit stops composing long before
        raise InputError(f"{source}: nested too deeply; a recipe nests at most 5 levels") from None
    finally:
        loader.dispose()


def _fast_compose(text: str) -> yaml.Node | None:
    composer = _FastRecipeComposer(text)
    try:
        return composer.get_single_node()  # type: ignore[no-any-return]
    finally:
        composer.dispose()


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
    key = key_node.value if isinstance(key_node, yaml.ScalarNode) else "a list or mapping"
    raise fail(
        path,
        key_node,
        f"key {shown(key)} is not a name (YAML reads it as {key_node.tag.rsplit(':', 1)[-1]}); recipe keys "
        "are names like image or docker: fix the key or quote it",
    )


def _check_scalar(node: yaml.Node, path: KeyPath, fail: Any) -> None:
    value = str(node.value)
    if node.tag == "tag:yaml.org,2002:int":
        digits = len(re.sub(r"[^0-9a-fA-F]", "", value.split("x", 1)[-1]))
        if digits > MAX_INT_DIGITS:
            raise fail(path, node, f"an integer of {digits} digits; recipe numbers are ports, counts and lengths")
    elif node.tag == "tag:yaml.org,2002:float" and not _finite(value):
        raise fail(path, node, f"{shown(value)} is not a finite number; write a number")


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
            raise locate.error(path, f"control character U+{ord(control.group()):04X} in {shown(value)}; remove it")
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

    def refuse(self, problem: Problem | None) -> None:
        """Raise the error for a key-path `problem` (nothing when there is none)."""
        if problem is not None:
            raise self.error(tuple(problem.where), problem.message)


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
    matrix = build_matrix(data.get("matrix"), words=lambda item, path: _words(item, path, locate), fail=locate.error)
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
        hosts=data.get("hosts"),
        server_args=_group_server_args(data.get("server_args"), locate),
    )


def _group_server_args(
    data: list[list[str]] | None, locate: _Locator
) -> tuple[tuple[tuple[str, ...], ...], ...] | None:
    if data is None:
        return None
    out = []
    for index, items in enumerate(data):
        entries: list[tuple[str, ...]] = []
        for position, item in enumerate(items):
            words = _words(item, ("groups", "server_args", index, position), locate)
            entries.extend(group_args(words) if words else [])
        out.append(tuple(entries))
    return tuple(out)
