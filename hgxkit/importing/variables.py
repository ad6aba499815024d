"""Shell variables a post sets (`model=org/name`, `export HF_HOME=/data/hf`) and the `$NAME`s they resolve.

A definition reaches every later command of the same file, in document order, whichever fence either is in:
a reader pastes a post's fences into one shell (a later definition of the same name replaces it, so a page
listing variants, each with its own `export` lines, gives each variant its own). A definition made inside
`if`/`for`, or by a command substitution, has no single value: a server that uses it is refused, naming the
line.

Example:
    >>> from hgxkit.importing.commands import simple_commands
    >>> from hgxkit.importing.post import find_commands, read_post
    >>> post = read_post("p", "model=org/m\\nexport HF_HOME=/hf\\nvllm serve $model --port $PORT")
    >>> simple = simple_commands(find_commands(post))
    >>> scope = Scope.before(simple, simple[-1])
    >>> scope.resolve("$model", where="p:3"), sorted(scope.exported())
    (('org/m', ['model'], []), ['HF_HOME'])
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from hgxkit.errors import InputError
from hgxkit.importing.commands import Simple, simple_index
from hgxkit.recipe.shellwords import EXPANDING_TILDE, dollar_segments
from hgxkit.secrets import is_secret_name

_NAME = re.compile(r"^\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?$")
_PASS_ON = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")
# Variables every host has: never the post's to define.
HOST_VARIABLES = frozenset({"HOME", "PWD", "USER", "PATH", "HOSTNAME", "SHELL", "UID"})


@dataclass(frozen=True)
class Definition:
    """`NAME=value` as the post wrote it: the value in lexer notation, where, and how it was set."""

    name: str
    value: str
    line: int
    exported: bool
    in_block: str | None  # set inside `if`/`for`: no single value
    computed: bool  # set by a command substitution


class Scope:
    """The definitions that reach one command."""

    def __init__(self, definitions: dict[str, Definition], source: str) -> None:
        self.definitions = definitions
        self.source = source

    @classmethod
    def before(cls, simples: Sequence[Simple], target: Simple) -> Scope:
        """Definitions of `target`'s file that reach it (see the module docstring)."""
        post = target.command.post
        index = simple_index(simples)  # one pass over a post: a scan per command would be quadratic
        end = index.position.get(id(target), len(simples))
        found: dict[str, Definition] = {}
        for position in index.definitions:
            if position >= end:
                break
            simple = simples[position]
            if simple.command.post is not post:
                continue
            for definition, has_value in _definitions(simple):
                if has_value:
                    found[definition.name] = definition
                elif definition.name in found:  # `export NAME`: an earlier definition goes to the environment
                    old = found[definition.name]
                    found[definition.name] = Definition(old.name, old.value, old.line, True, old.in_block, old.computed)
        return cls(found, post.name)

    def exported(self) -> dict[str, Definition]:
        """Exported definitions: the environment of a command run in this shell."""
        return {name: d for name, d in self.definitions.items() if d.exported}

    def resolve(self, word: str, *, where: str) -> tuple[str, list[str], list[str]]:
        """`word` with the `$NAME`s the post defines written out: (word, names used, names left to the host).

        A credential's name the post does not define (`$HF_TOKEN`) becomes the secret `{{env:NAME}}` (and
        `HF_TOKEN=$HF_TOKEN`, passing it on under its own name, becomes `HF_TOKEN`: `-e HF_TOKEN`). A name left
        to the host stays `$NAME` here, for the caller's note; a recipe refuses it wherever it would reach the
        node (hgxkit.recipe.danger.expansion_problems: `recipe import`, loading, `recipe check`).

        Raises InputError for a name the post sets in a block or by a command substitution.
        """
        if "$" not in word:
            return word, [], []
        passed = _PASS_ON.fullmatch(word)
        name = passed.group(1) if passed and passed.group(1) == passed.group(2) else ""
        if name and name not in self.definitions and is_secret_name(name):
            return name, [], []  # `-e HF_TOKEN=$HF_TOKEN`: Docker's `-e HF_TOKEN`, a declared secret
        out: list[str] = []
        used: list[str] = []
        left: list[str] = []
        prefix = ""
        if word.startswith(EXPANDING_TILDE):
            prefix, word = EXPANDING_TILDE, word[len(EXPANDING_TILDE) :]
        for index, (text, expands) in enumerate(dollar_segments(word)):
            match = _NAME.match(text) if expands else None
            name = match.group(1) if match else ""
            definition = self.definitions.get(name) if name not in HOST_VARIABLES else None
            if not expands:
                out.append(text.replace("$", "$$"))
            elif definition is None and match and is_secret_name(match.group(1)):
                # A credential the post takes from its shell (`-e HF_TOKEN=$HF_TOKEN`): a declared secret, which
                # reaches the container through a root-only env file (hgxkit.recipe.secretenv), never a shell.
                out.append("{{env:" + match.group(1) + "}}")
            elif definition is None:
                out.append(text)
                if match and match.group(1) not in left:
                    left.append(match.group(1))
            else:
                self._usable(definition, where)
                value = definition.value
                if value.startswith(EXPANDING_TILDE) and (index or prefix or out):
                    value = "$HOME" + value[len(EXPANDING_TILDE) :]  # `~` expands only at a word's start
                out.append(value)
                used.append(definition.name)
        return prefix + "".join(out), used, left

    def _usable(self, definition: Definition, where: str) -> None:
        how = (
            f"inside an `{definition.in_block}` block"
            if definition.in_block
            else "by a command substitution"
            if definition.computed
            else None
        )
        if how:
            raise InputError(
                f"{where}: ${definition.name} is set {how} ({self.source}:{definition.line}), so the command has "
                f"no single value for it; write the value into the command"
            )


def _definitions(simple: Simple) -> list[tuple[Definition, bool]]:
    """Each `NAME=value` (or `export NAME`) of an assignment or export, and whether it gives a value."""
    words = simple.words[1:] if simple.kind == "export" else simple.words
    exported = simple.kind == "export"
    out = []
    for word in words:
        name, has_equals, value = word.text.partition("=")
        if word.is_operator or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            continue
        computed = simple.substitution is not None
        out.append((Definition(name, value, word.line, exported, simple.in_block, computed), bool(has_equals)))
    return out
