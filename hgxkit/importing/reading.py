"""What the importer has read of the posts so far: the state every source format's `take` writes into.

A format (see `formats`) claims a simple command and takes it: a possible server becomes a `Candidate`, a
`docker run IMAGE bash` a `Container` later bare commands run in, a benchmark client command a `Bench`, and
everything it leaves is a `Report` line saying why.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from hgxkit.errors import InputError
from hgxkit.importing.commands import Simple
from hgxkit.importing.outcome import Report
from hgxkit.importing.variables import Scope, set_after
from hgxkit.recipe.docker_parse import ParsedRun
from hgxkit.recipe.shellwords import ALTERNATE_EXPANSION_RE, Word, shell_value
from hgxkit.secrets import is_secret_name

_ARGUMENT_DEFAULT = re.compile(r"\$\{([1-9]):?-")  # `${1:-org/m}`: a script argument's default
_LONE_NAME = re.compile(r"\$(?:(?P<bare>[A-Za-z_]\w*)|\{(?P<braced>[A-Za-z_]\w*)\})")

# `source FILE` / `. FILE` at a line's start: the file a shell reads its variables from
_SOURCED = re.compile(r"\s*(?:source|\.)\s+(?P<file>\S.*?)\s*$")

Bench = tuple[Simple, str, list[str]]  # a client command: where it is, the client, its words from the program on


@dataclass(frozen=True)
class Container:
    """A `docker run IMAGE bash` the post opens to run commands in."""

    simple: Simple
    run: ParsedRun


@dataclass
class Candidate:
    """A command that may be the server: what it is, its parsed run, or why it cannot be."""

    simple: Simple
    role: str  # server | engine | unknown | broken | refused (a document's serving part it cannot import)
    kind: str | None = None  # a supported kind's name, or an unsupported engine's name
    run: ParsedRun | None = None  # `docker run` commands
    error: InputError | None = None
    context: Container | None = None  # the interactive container a bare launch runs in
    words: list[str] | None = None  # the container command to keep (after unwrapping `bash -c`)
    notes: list[str] = field(default_factory=list)
    number: int = 0  # its number among the post's serving commands (what --pick takes)
    on_ray: bool = False  # a `docker run` server in the Ray head's own container (the reading's cluster)

    def where(self) -> str:
        return self.simple.where()


@dataclass
class Reading:
    """The simple commands of every post and what the formats took from them."""

    simples: Sequence[Simple]
    kind: str | None = None  # `--kind`: the server kind the person importing names
    notes: list[str] = field(default_factory=list)
    report: list[Report] = field(default_factory=list)
    servers: list[Candidate] = field(default_factory=list)
    containers: list[Container] = field(default_factory=list)
    benches: list[Bench] = field(default_factory=list)  # client commands, plain, by `docker exec` or `docker run`
    built: dict[str, str] = field(default_factory=dict)  # image tag -> where `docker build` made it
    aliases: dict[str, tuple[str, str]] = field(default_factory=dict)  # `docker tag SRC DST`: DST -> (SRC, where)
    pulled: list[tuple[str, str, str]] = field(default_factory=list)  # `docker pull`: (image, where, comment above)
    unset: dict[str, list[tuple[str, int]]] = field(default_factory=dict)  # $NAME used, not set -> where
    later: dict[str, str] = field(default_factory=dict)  # $NAME used before the post sets it -> where it is set
    cluster: list[Any] = field(default_factory=list)  # a Ray cluster's starts (vllm_multinode.RayNode) or errors
    # an engine image's container that runs a script instead of a launch: (where, image, the program as written)
    scripted: list[tuple[str, str, str]] = field(default_factory=list)

    def said(self, simple: Simple, action: str, what: str, into: str = "") -> None:
        """Report what was done with `simple`."""
        self.report.append(Report(simple.span(), action, what, into))

    def container_before(self, simple: Simple) -> Container | None:
        """The interactive container the post opened last before `simple` in the same file."""
        post = simple.command.post
        before = [
            c for c in self.containers if c.simple.command.post is post and c.simple.first_line < simple.first_line
        ]
        return before[-1] if before else None

    def resolved(self, simple: Simple, words: Sequence[Word] | None = None) -> list[Word]:
        """The command's words (or `words` of it: its environment prefix) with the `$NAME`s the post sets written
        out (a note per name)."""
        scope = Scope.before(self.simples, simple)
        post = simple.command.post.name
        words = simple.words if words is None else words
        out = []
        for index, word in enumerate(words):
            if self._alternate_dropped(word, scope, post):
                continue
            try:
                text, used, left = scope.resolve(word.text, where=f"{post}:{word.line}")
            except InputError:
                text = self._computed_listen_address(words, index, scope, post)
                if text is None:
                    raise
                used, left = [], []
            for name in used:
                definition = scope.definitions[name]
                written = (
                    "" if definition.written == definition.value else f", written {shell_value(definition.written)}"
                )
                if argument := _ARGUMENT_DEFAULT.search(definition.written):
                    written += f": the default of the script's argument ${argument[1]}, which the post does not give"
                self.notes.append(
                    f"{post}:{word.line}: ${name} is the post's {name}={shell_value(definition.value)} "
                    f"({definition.at(post)}{written})"
                )
            for name, default in scope.defaults(word.text):
                self.notes.append(
                    f"{post}:{word.line}: the post does not set {name}, so its default {shell_value(default)} is "
                    f"taken (a shell that has {name} set would use that)"
                )
            for name in left:
                lines = self.unset.setdefault(name, [])
                if (post, word.line) not in lines:
                    lines.append((post, word.line))
                self._set_later(name, simple)
            if used and not word.quoted and _LONE_NAME.fullmatch(word.text):
                # `$EXTRA_ARGS` unquoted: the shell splits its value into words, and an empty one gives none
                out += [Word(part, word.line, word.column, False, False) for part in text.split()]
                continue
            out.append(Word(text, word.line, word.column, word.quoted, word.is_operator))
        return _angled_secrets(out)

    def _computed_listen_address(self, words: Sequence[Word], index: int, scope: Scope, post: str) -> str | None:
        """`--host $NAME` (or `--host=$NAME`) where the post sets NAME by a command substitution (`$(hostname -i)`):
        an address of the post's host, which the container does not have, so its server listens on 0.0.0.0 and its
        port is published on the node (what a written address gets, `bare_launch._listen`); None otherwise."""
        word = words[index]
        flag, equals, value = word.text.partition("=") if word.text.startswith("--host=") else ("", "", word.text)
        if not flag and (index == 0 or words[index - 1].text != "--host"):
            return None
        match = _LONE_NAME.fullmatch(value)
        definition = scope.definitions.get(match["bare"] or match["braced"]) if match else None
        root = definition and (definition.unusable or definition)
        if not root or not root.computed or root.in_block:
            return None
        self.notes.append(
            f"{post}:{word.line}: --host {value} became 0.0.0.0 (${root.name} is set by `{root.written}`, an address "
            "of the post's host, which the node's container does not have: the server listens on every interface)"
        )
        return f"{flag}{equals}0.0.0.0"

    def _alternate_dropped(self, word: Word, scope: Scope, post: str) -> bool:
        """True for a whole word `${NAME:+words}` whose NAME the post leaves unset: a shell expands it to nothing,
        so it is no argument (a note); one whose NAME the post sets is refused (its words would need splitting)."""
        match = ALTERNATE_EXPANSION_RE.fullmatch(word.text) if not word.quoted else None
        if match is None:
            return False
        if match["name"] in scope.definitions:
            raise InputError(
                f"{post}: line {word.line}, column {word.column}: {word.text} gives words because the post sets "
                f"{match['name']}; write those words instead"
            )
        self.notes.append(
            f"{post}:{word.line}: {word.text} gives nothing: the post does not set {match['name']} (a shell that has "
            f"it set would add {match['word'].strip()})"
        )
        return True

    def _set_later(self, name: str, simple: Simple) -> None:
        """Remember where the post sets `name` after `simple` uses it unset (a shell reads it unset there)."""
        found = self.later.get(name) or set_after(self.simples, simple, name)
        if found is not None:
            self.later[name] = found if isinstance(found, str) else found.at(simple.command.post.name)


def sourced_before(simple: Simple) -> str:
    """` (the post sources FILE at line N, which it does not include)` for the files its post sources above
    `simple`, else empty: a variable the post does not set may be set there, so a refusal naming the variable
    names the file too."""
    post = simple.command.post
    found = []
    for number, line in enumerate(post.clean[: simple.first_line - 1], start=1):
        match = _SOURCED.match(line)
        if match:
            name = posixpath.basename(match["file"].strip("\"'")) or match["file"]
            found.append(f"{name} at line {number}")
    if not found:
        return ""
    return f" (the post sources {', '.join(found)}, which it does not include)"


def _angled_secrets(words: list[Word]) -> list[Word]:
    """A secret's `NAME=<placeholder>` as one word (`-e HF_TOKEN=<your_hf_token>`): a page's stand-in for the value,
    which a shell would read as redirections; the secret is taken from the environment as any other value is."""
    out: list[Word] = []
    at = 0
    while at < len(words):
        word, shape = words[at], [w.is_operator for w in words[at + 1 : at + 4]]
        inner = words[at + 1 : at + 4]
        if (
            not word.is_operator
            and word.text.endswith("=")
            and is_secret_name(word.text[:-1])
            and shape == [True, False, True]
            and [inner[0].text, inner[2].text] == ["<", ">"]
        ):
            out.append(replace(word, text=f"{word.text}<{inner[1].text}>"))
            at += 4
            continue
        out.append(word)
        at += 1
    return out
