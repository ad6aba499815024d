"""Command-line conventions every `hgxkit` group follows: group options anywhere, `--json` with a schema.

* `share_group_options(group, commands)`: a group's own options (`hgxkit results --root X …`) are accepted
  after the sub-command too (`hgxkit results ls --root X`), where users put them; given in both places, the
  later one wins.
* `json_option(parser, schema, what)`: `--json` with help text, and the JSON Schema its output follows
  (a zero-argument callable, so the schema is read only when asked for); every `--json` output carries a
  `schema_version` (tests/unit/project/test_cli_conventions.py walks every command and validates each output).
* `package_schema(package, name)`: a schema shipped as `<package>/schemas/<name>.schema.json`.
* `walk(parser)`: every (command path, parser) of the tree, for tests and docs.

Example:
    >>> import argparse
    >>> top = argparse.ArgumentParser(prog="x")
    >>> top.add_argument("--root", default="results", help="where")  # doctest: +ELLIPSIS
    _StoreAction(...)
    >>> subs = top.add_subparsers(dest="command")
    >>> _ = subs.add_parser("ls")
    >>> share_group_options(top, subs)
    >>> top.parse_args(["ls", "--root", "X"]).root, top.parse_args(["--root", "Y", "ls"]).root
    ('X', 'Y')
"""

from __future__ import annotations

import argparse
import copy
import json
from collections.abc import Callable, Iterator
from typing import Any

JsonSchema = Callable[[], dict[str, Any]]


def share_group_options(group: argparse.ArgumentParser, commands: argparse._SubParsersAction) -> None:
    """Accept each of `group`'s options (not -h) after every sub-command of `commands` as well.

    The copies default to SUPPRESS: a sub-command that was not given the option leaves the value the group
    parsed (or the group's default) in place, since argparse copies only what the sub-parser set."""
    shared = [
        a
        for a in group._actions
        if a.option_strings
        and not isinstance(a, argparse._HelpAction)
        and not isinstance(a, argparse._SubParsersAction)
    ]
    for sub in {id(p): p for p in commands.choices.values()}.values():
        for action in shared:
            if any(s in sub._option_string_actions for s in action.option_strings):
                continue
            twin = copy.copy(action)
            twin.default = argparse.SUPPRESS
            twin.help = f"{action.help} (also accepted before the sub-command)" if action.help else None
            sub._add_action(twin)


def package_schema(package: str, name: str) -> dict[str, Any]:
    """The JSON Schema file `schemas/<name>.schema.json` of `package` (package data, so wheels carry it)."""
    from importlib import resources

    return json.loads(resources.files(package).joinpath("schemas", f"{name}.schema.json").read_text())


def json_option(parser: argparse.ArgumentParser, schema: JsonSchema, what: str) -> None:
    """`--json`: print `what` as JSON (with a `schema_version`) following `schema()`."""
    parser.add_argument("--json", action="store_true", help=f"print {what} as JSON (with schema_version)")
    parser.set_defaults(json_schema=schema)


def walk(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every (command path, parser) under `parser`, itself first; aliases are visited once."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) not in seen:
                    seen.add(id(sub))
                    yield from walk(sub, (*path, name))
