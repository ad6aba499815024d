"""Shell variables a post sets (`model=org/name`, `export HF_HOME=/data/hf`) and the `$NAME`s they resolve.

The posts are read as one shell session, in order: a definition reaches every later command, whichever fence
(or, of several files imported together, whichever later file) it is in, as a reader pasting them into one
shell would; a name set only after a command is unset there. A value is expanded when it is set
(`HF_HOME=$WORK/hf` holds WORK's value at that line), and `${NAME:-word}` / `${NAME-word}` give the word where
the post leaves NAME unset (empty, for `:-`). A later definition of the same name replaces it, so a page listing
variants, each with its own `export` lines, gives each variant its own. A definition made inside `if`/`for`,
or by a command substitution (or one expanded from such a definition), has no single value: a server that
uses it is refused, naming the line.

Example:
    >>> from hgxkit.importing.commands import simple_commands
    >>> from hgxkit.importing.post import find_commands, read_post
    >>> post = read_post("p", "W=/s\\nmodel=org/m\\nexport HF_HOME=$W/hf\\nvllm serve $model --port $PORT")
    >>> simple = simple_commands(find_commands(post))
    >>> scope = Scope.before(simple, simple[-1])
    >>> scope.resolve("$model", where="p:4"), scope.exported()["HF_HOME"].value
    (('org/m', ['model'], []), '/s/hf')
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from hgxkit.errors import InputError
from hgxkit.importing.commands import Simple, simple_index
from hgxkit.recipe.shellwords import DEFAULT_EXPANSION_RE, EXPANDING_TILDE, default_word, dollar_segments
from hgxkit.secrets import is_secret_name

_NAME = re.compile(r"^\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?$")
_PASS_ON = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")
# Variables every host has: never the post's to define.
HOST_VARIABLES = frozenset({"HOME", "PWD", "USER", "PATH", "HOSTNAME", "SHELL", "UID"})
# A value longer than this once expanded (`A=$B$B`, `B=$C$C`, …) is not written out: it doubles per line.
_MAX_VALUE = 8192


@dataclass(frozen=True)
class Definition:
    """`NAME=value`: the value in lexer notation with the names set before it written out (`written`: as the
    post wrote it), where, and how it was set."""

    name: str
    value: str
    line: int
    exported: bool
    in_block: str | None  # set inside `if`/`for`: no single value
    computed: bool  # set by a command substitution
    written: str = ""
    file: str = ""  # the post it is set in
    unusable: Definition | None = None  # the definition without a single value that its value expands

    def at(self, post: str) -> str:
        """`line N`, or `FILE:N` for a definition of another file than `post`."""
        return f"line {self.line}" if self.file == post else f"{self.file}:{self.line}, an earlier file of the import"


class Scope:
    """The definitions that reach one command."""

    def __init__(self, definitions: dict[str, Definition], source: str) -> None:
        self.definitions = definitions
        self.source = source

    @classmethod
    def before(cls, simples: Sequence[Simple], target: Simple) -> Scope:
        """Definitions that reach `target` (see the module docstring)."""
        index = simple_index(simples)  # one pass over a post: a scan per command would be quadratic
        end = index.position.get(id(target), len(simples))
        found: dict[str, Definition] = {}
        for position, definitions in _expanded(simples):
            if position >= end:
                break
            found.update(definitions)
        return cls(found, target.command.post.name)

    def exported(self) -> dict[str, Definition]:
        """Exported definitions: the environment of a command run in this shell."""
        return {name: d for name, d in self.definitions.items() if d.exported}

    def defaults(self, word: str) -> list[tuple[str, str]]:
        """(NAME, word) of each `${NAME:-word}` in `word` whose default is taken (the post leaves NAME unset)."""
        return [(m["name"], default_word(m)) for m in DEFAULT_EXPANSION_RE.finditer(word) if self._defaulted(m)]

    def resolve(self, word: str, *, where: str) -> tuple[str, list[str], list[str]]:
        """`word` with the `$NAME`s the post defines written out: (word, names used, names left to the host).

        A credential's name the post does not define (`$HF_TOKEN`) becomes the secret `{{env:NAME}}` (and
        `HF_TOKEN=$HF_TOKEN`, passing it on under its own name, becomes `HF_TOKEN`: `-e HF_TOKEN`). A name left
        to the host stays `$NAME` here, for the caller's note; a recipe refuses it wherever it would reach the
        node (hgxkit.recipe.danger.expansion_problems: `recipe import`, loading, `recipe check`).

        Raises InputError for a name the post sets in a block or by a command substitution.
        """
        word = DEFAULT_EXPANSION_RE.sub(self._chosen, word)
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
                left += [n for n in _names(value) if n not in left and n not in HOST_VARIABLES]
        return prefix + "".join(out), used, left

    def _defaulted(self, match: re.Match[str]) -> bool:
        name = match["name"]
        if name in HOST_VARIABLES or (name not in self.definitions and is_secret_name(name)):
            return False  # the host's own (`$HOME`), or a credential the host gives
        definition = self.definitions.get(name)
        return definition is None or (match["op"] == ":-" and definition.value == "")

    def _chosen(self, match: re.Match[str]) -> str:
        """`${NAME:-word}` as the shell would expand it here: the default word, or `${NAME}`."""
        return default_word(match) if self._defaulted(match) else "${" + match["name"] + "}"

    def _usable(self, definition: Definition, where: str) -> None:
        root = definition.unusable or definition
        how = (
            f"inside an `{root.in_block}` block"
            if root.in_block
            else "by a command substitution"
            if root.computed
            else None
        )
        if how:
            if root.computed and root.written.startswith("$(("):  # arithmetic: the host's values at run time
                how = f"by the arithmetic expansion `{root.written}`"
            elif root.computed and root.written.startswith("$("):  # the substitution as written, never its words
                how = f"by the command substitution `{root.written}`"
            elif root.computed and root.written.startswith("`"):
                how = f"by the command substitution `{root.written.strip('`')}` (in backticks)"
            through = f" (${definition.name} is set from it)" if root is not definition else ""
            raise InputError(
                f"{where}: ${root.name} is set {how} ({root.file or self.source}:{root.line}){through}, so the "
                "command has no single value for it; write the value into the command"
            )


def set_after(simples: Sequence[Simple], target: Simple, name: str) -> Definition | None:
    """The first definition of `name` after `target`, which a shell has not run yet when it runs `target`."""
    end = simple_index(simples).position.get(id(target), len(simples))
    return next((made[name] for position, made in _expanded(simples) if position > end and name in made), None)


def _names(value: str) -> list[str]:
    """The `$NAME`s left in a value."""
    return [m.group(1) for text, expands in dollar_segments(value) if expands and (m := _NAME.match(text))]


_LAST: list[tuple[Sequence[Simple], int, list[tuple[int, dict[str, Definition]]]]] = []


def _expanded(simples: Sequence[Simple]) -> list[tuple[int, dict[str, Definition]]]:
    """(position, the definitions it makes, values expanded) of every assignment and export of `simples`, in
    order; made once per list (like `simple_index`), as every command of a post asks."""
    if _LAST and _LAST[0][0] is simples and _LAST[0][1] == len(simples):
        return _LAST[0][2]
    running: dict[str, Definition] = {}
    out: list[tuple[int, dict[str, Definition]]] = []
    for position in simple_index(simples).definitions:
        made: dict[str, Definition] = {}
        for definition, has_value in _definitions(simples[position]):
            if has_value:
                made[definition.name] = _expand(definition, running)
            elif definition.name in running:  # `export NAME`: an earlier definition goes to the environment
                made[definition.name] = replace(running[definition.name], exported=True)
        running.update(made)
        out.append((position, made))
    _LAST[:] = [(simples, len(simples), out)]
    return out


def _expand(definition: Definition, known: dict[str, Definition]) -> Definition:
    """`definition` with the names set before it written out in its value, as the shell does when the line runs."""
    try:
        value, _, _ = Scope(known, definition.file).resolve(definition.written, where="")
    except InputError:  # it expands a definition without a single value: so has it
        names = DEFAULT_EXPANSION_RE.sub(lambda m: "${" + m["name"] + "}", definition.written)
        roots = [
            d.unusable or d for n in _names(names) if (d := known.get(n)) and (d.unusable or d.in_block or d.computed)
        ]
        return replace(definition, unusable=roots[0])
    if len(value) > _MAX_VALUE:
        raise InputError(
            f"{definition.file}:{definition.line}: ${definition.name} expands to more than {_MAX_VALUE} characters; "
            "write its value"
        )
    return replace(definition, value=value)


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
        post = simple.command.post.name
        out.append(
            (
                Definition(name, value, word.line, exported, simple.in_block, computed, value, post),
                bool(has_equals),
            )
        )
    return out
