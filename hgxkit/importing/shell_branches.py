"""A launch script's branches resolved for one environment: straight-line shell text that a post reader takes.

A benchmark suite's script decides its server's flags in bash for each run: `if [[ $ISL -eq 1024 ]]; then … else
… fi`, arrays (`ARGS=(--tp "$TP")`, `ARGS+=(…)`, used as `"${ARGS[@]}"`), `${EP_SIZE:-1}`, `$(( … ))`. Given the
variables its runner sets for one run, `ShellScript.render` decides each `if`/`elif`/`else` (tests as
`hgxkit.importing.shell_values` decides them), and keeps the commands of the branches taken at their own lines and
columns, every other line blank: a line number of the result is the script's. What a post reader does not expand
itself is written out: an array, a value that splits into several words or none, arithmetic, `${X:-d}`; a
variable the runner sets and the text still names is assigned on line 1 (in place of the `#!` line). Nothing of
the script is run: what this subset cannot decide is refused with the file and line (`case`, loops, functions,
subshells, here-documents, a command substitution whose value a kept command uses, `exit` on the path taken),
except a branch that only echoes or calls set-aside commands, whichever way it goes (a guard on `$SLURM_JOB_ID`).

Set aside, each recorded as a `Call` with its words as they are there: the suite's functions the caller names
(`helpers`), `echo`/`printf`/`set`/`sleep`/`true`, `nvidia-smi`, `hf download` (the deploy places the model), the
suite's `source`d library; a run-time `pip install` too, with a note (an air-gapped node cannot run it).

Example:
    >>> script = "#!/bin/bash\\nARGS=(--tp \\"$TP\\")\\nif [[ $ISL -eq 1024 ]]; then\\n  N=512\\nelse\\n  N=256\\nfi\\n"
    >>> script += 'echo "starting"\\nvllm serve $MODEL "${ARGS[@]}" --max-num-seqs $N\\n'
    >>> rendered = ShellScript.parse(script, "s.sh").render({"TP": "8", "ISL": "8192", "MODEL": "org/m"})
    >>> for number, line in enumerate(rendered.text.split("\\n"), 1):
    ...     print(f"{number}: {line}") if line else None
    1: MODEL=org/m
    6:   N=256
    9: vllm serve $MODEL --tp 8 --max-num-seqs $N
    >>> [(call.line, call.name) for call in rendered.calls]
    [(8, 'echo')]
"""

from __future__ import annotations

import bisect
import re
import shlex
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from hgxkit.errors import InputError
from hgxkit.importing.shell_values import (
    Unknown,
    Value,
    closing,
    fields,
    names_in,
    segments,
    skip_double,
    test_value,
    text_value,
)

# Longest first: `&&` before `&`, `>>` before `>`.
_OPERATORS = (
    "&>>",
    "<<<",
    "<<-",
    "&&",
    "||",
    ";;",
    "|&",
    "<<",
    ">>",
    ">&",
    "<&",
    "&>",
    ">|",
    "<>",
    ";",
    "&",
    "|",
    "<",
    ">",
    "(",
    ")",
)
_REDIRECTS = frozenset({">", ">>", "<", ">&", "<&", "&>", "&>>", ">|", "<>", "<<<"})
_ENDS = frozenset({";", "&", "&&", "||", "|", "|&", ";;", ")"})
_ARRAY_START = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=$")
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\+?)=")
# Values a post reader takes as they are when a word names them: one word, nothing a shell would read.
_PLAIN = re.compile(r"[A-Za-z0-9_./:@%+,=-]+")
_REFUSED_WORDS = {
    "case": "`case`",
    "for": "a `for` loop",
    "while": "a `while` loop",
    "until": "an `until` loop",
    "select": "`select`",
    "function": "a function definition",
    "{": "a `{ … }` group",
    "((": "an arithmetic command",
}
_REFUSED_COMMANDS = frozenset(
    {"eval", "exec", "local", "declare", "typeset", "readonly", "unset", "trap", "shift", "read", "alias", "return"}
)
# Commands that print, wait or set shell options: nothing a server reads.
_SHELL_OUTPUT = frozenset({"echo", "printf", "set", "sleep", "true", ":", "wait"})
_MAX_DEPTH = 32
_RUN_TIME = "a value only running the script gives"


@dataclass(frozen=True)
class Token:
    """One token of the script: a `word`, an `op`erator, a `newline`, an `ionum` (the 2 of `2>&1`), or an
    `array` assignment (`NAME=(…)`, its elements in `items`); offsets into the script's text."""

    kind: str
    text: str
    start: int
    end: int
    items: tuple[Token, ...] = ()


@dataclass
class _Simple:
    tokens: list[Token]
    start: int
    end: int
    background: bool = False


@dataclass
class _Pipeline:
    parts: list[_Node]
    ops: list[str]  # `&&`, `||`, `|` between the parts
    negated: bool
    start: int
    end: int


@dataclass
class _If:
    arms: list[tuple[list[_Node], list[_Node]]]  # (condition, body) of `if` and each `elif`
    orelse: list[_Node] | None
    start: int
    end: int


_Node = _Simple | _Pipeline | _If


@dataclass(frozen=True)
class Call:
    """A command set aside: its name, line, and its words as they are there (None: not known before it runs)."""

    name: str
    line: int
    words: tuple[str | None, ...]


@dataclass(frozen=True)
class Rendered:
    """The script for one environment: straight-line text, the commands set aside, notes."""

    text: str
    calls: tuple[Call, ...]
    notes: tuple[str, ...]


@dataclass
class ShellScript:
    """A script parsed once, rendered for each environment."""

    name: str
    text: str
    nodes: list[_Node]
    line_starts: list[int] = field(default_factory=list)

    @classmethod
    def parse(cls, text: str, name: str) -> ShellScript:
        """Read `text` (the script `name`); InputError naming the line of what this subset does not read."""
        script = cls(name, text, [], [0] + [m.end() for m in re.finditer("\n", text)])
        parser = _Parser(_lex(text, script), script)
        script.nodes = parser.statements(frozenset(), 0)
        return script

    def line(self, offset: int) -> int:
        """The 1-based line of `offset`."""
        return bisect.bisect_right(self.line_starts, offset)

    def refuse(self, offset: int, what: str) -> InputError:
        return InputError(
            f"{self.name}:{self.line(offset)}: {what}; hgxkit reads a launch script without running it (if/elif/"
            "else on [[ ]] or [ ] tests, arrays, ${X:-d}, $((…))): import the command it runs as a post instead"
        )

    def render(self, env: Mapping[str, Value], helpers: Collection[str] = (), library: str = "") -> Rendered:
        """The straight-line text for `env` (the variables the runner sets): `helpers` (the suite's functions)
        and a `source` of `library` are set aside."""
        run = _Run(self, env, frozenset(helpers), library)
        run.walk(self.nodes)
        return Rendered(run.assemble(), tuple(run.calls), tuple(run.notes))


def _lex(text: str, script: ShellScript) -> list[Token]:
    tokens: list[Token] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char in " \t\r":
            index += 1
        elif char == "\\" and text[index + 1 : index + 2] == "\n":
            index += 2
        elif char == "\n":
            tokens.append(Token("newline", "\n", index, index + 1))
            index += 1
        elif char == "#":
            newline = text.find("\n", index)
            index = len(text) if newline < 0 else newline
        elif text.startswith("((", index) and (not tokens or tokens[-1].kind in ("newline", "op")):
            raise script.refuse(index, "an arithmetic command `(( … ))`")
        elif (op := next((o for o in _OPERATORS if text.startswith(o, index)), None)) is not None:
            tokens.append(Token("op", op, index, index + len(op)))
            index += len(op)
        else:
            end = _word_end(text, index, script)
            word = text[index:end]
            if text[end : end + 1] == "(" and _ARRAY_START.match(word):
                items, close = _array_items(text, end + 1, script)
                tokens.append(Token("array", text[index : close + 1], index, close + 1, items))
                index = close + 1
                continue
            kind = "ionum" if word.isdigit() and text[end : end + 1] in ("<", ">") else "word"
            tokens.append(Token(kind, word, index, end))
            index = end
    return tokens


def _word_end(text: str, index: int, script: ShellScript) -> int:
    """The end of the word starting at `index` (quotes, escapes and expansions are part of it)."""
    start = index
    while index < len(text):
        char = text[index]
        if char in " \t\r\n;&|<>()":
            return index
        if char == "\\":
            index += 2
        elif char == "'":
            close = text.find("'", index + 1)
            if close < 0:
                raise script.refuse(index, "a single quote that is never closed")
            index = close + 1
        elif char == '"':
            index = skip_double(text, index + 1)
            if index > len(text):
                raise script.refuse(index - 1, "a double quote that is never closed")
        elif char == "`":
            close = text.find("`", index + 1)
            if close < 0:
                raise script.refuse(index, "a backtick that is never closed")
            index = close + 1
        elif char == "$" and text[index + 1 : index + 2] in ("(", "{"):
            index = closing(text, index + 1, text[index + 1], ")" if text[index + 1] == "(" else "}") + 1
        else:
            index += 1
    return index if index > start else start + 1


def _array_items(text: str, index: int, script: ShellScript) -> tuple[tuple[Token, ...], int]:
    """The elements of `NAME=(…)` from `index` (after its parenthesis), and the index of its `)`."""
    items = []
    while index < len(text):
        char = text[index]
        if char in " \t\r\n":
            index += 1
        elif char == "\\" and text[index + 1 : index + 2] == "\n":
            index += 2
        elif char == "#":
            newline = text.find("\n", index)
            index = len(text) if newline < 0 else newline
        elif char == ")":
            return tuple(items), index
        elif char in ";&|<>(":
            raise script.refuse(index, f"{char!r} inside an array's parentheses")
        else:
            end = _word_end(text, index, script)
            items.append(Token("word", text[index:end], index, end))
            index = end
    raise script.refuse(index - 1, "an array whose parenthesis is never closed")


class _Parser:
    """Statements, and-or lists, pipelines, `if` and simple commands; any other compound command is refused."""

    def __init__(self, tokens: list[Token], script: ShellScript) -> None:
        self.tokens, self.script, self.index = tokens, script, 0

    def _peek(self) -> Token | None:
        return self.tokens[self.index] if self.index < len(self.tokens) else None

    def _is(self, kind: str, *texts: str) -> bool:
        token = self._peek()
        return token is not None and token.kind == kind and (not texts or token.text in texts)

    def _skip_newlines(self) -> None:
        while self._is("newline"):
            self.index += 1

    def statements(self, stops: frozenset[str], depth: int) -> list[_Node]:
        nodes: list[_Node] = []
        while True:
            while self._is("newline") or self._is("op", ";"):
                self.index += 1
            token = self._peek()
            if token is None:
                if stops:
                    raise self.script.refuse(len(self.script.text) - 1, f"the script ends before {sorted(stops)[0]}")
                return nodes
            if token.kind == "word" and token.text in stops:
                return nodes
            node = self._and_or(depth)
            if self._is("op", "&") and isinstance(node, _Simple):
                node.background, node.end = True, self.tokens[self.index].end
                self.index += 1
            elif self._is("op", "&"):
                raise self.script.refuse(node.start, "a compound command run in the background")
            elif not (
                self._peek() is None
                or self._is("newline")
                or self._is("op", ";")
                or (bool(stops) and self._is("word", *stops))
            ):
                raise self.script.refuse(self.tokens[self.index].start, f"{self.tokens[self.index].text!r} here")
            nodes.append(node)

    def _and_or(self, depth: int) -> _Node:
        first = self._pipeline(depth)
        parts, ops = [first], []
        while self._is("op", "&&", "||"):
            ops.append(self.tokens[self.index].text)
            self.index += 1
            self._skip_newlines()
            parts.append(self._pipeline(depth))
        if len(parts) == 1:
            return first
        return _Pipeline(parts, ops, False, parts[0].start, parts[-1].end)

    def _pipeline(self, depth: int) -> _Node:
        negated = self._is("word", "!")
        start = self._peek().start if negated else 0  # type: ignore[union-attr]
        self.index += negated
        parts, ops = [self._command(depth)], []
        while self._is("op", "|", "|&"):
            ops.append(self.tokens[self.index].text)
            self.index += 1
            self._skip_newlines()
            parts.append(self._command(depth))
        if len(parts) == 1 and not negated:
            return parts[0]
        return _Pipeline(parts, ops, negated, start if negated else parts[0].start, parts[-1].end)

    def _command(self, depth: int) -> _Node:
        token = self._peek()
        if token is None:
            raise self.script.refuse(len(self.script.text) - 1, "a command missing at the end")
        if depth > _MAX_DEPTH:
            raise self.script.refuse(token.start, f"`if` nested deeper than {_MAX_DEPTH}")
        if token.kind == "word" and token.text == "if":
            return self._if(depth)
        if token.kind == "word" and token.text in _REFUSED_WORDS:
            raise self.script.refuse(token.start, _REFUSED_WORDS[token.text])
        if token.kind == "word" and token.text in ("then", "elif", "else", "fi", "do", "done", "esac", "}"):
            raise self.script.refuse(token.start, f"{token.text!r} without its `if`")
        if token.kind == "op" and token.text == "(":
            raise self.script.refuse(token.start, "a subshell `( … )`")
        if token.kind == "op":
            raise self.script.refuse(token.start, f"{token.text!r} where a command should be")
        return self._simple()

    def _if(self, depth: int) -> _If:
        start = self.tokens[self.index].start
        arms = []
        orelse = None
        keyword = "if"
        while keyword in ("if", "elif"):
            self.index += 1
            condition = self.statements(frozenset({"then"}), depth + 1)
            self.index += 1
            body = self.statements(frozenset({"elif", "else", "fi"}), depth + 1)
            arms.append((condition, body))
            keyword = self.tokens[self.index].text
        if keyword == "else":
            self.index += 1
            orelse = self.statements(frozenset({"fi"}), depth + 1)
        end = self.tokens[self.index].end
        self.index += 1
        return _If(arms, orelse, start, end)

    def _simple(self) -> _Simple:
        tokens: list[Token] = []
        test = self._is("word", "[[")
        while (token := self._peek()) is not None and token.kind != "newline":
            if test:  # `[[ … ]]` holds && || ( ) < > of its own
                tokens.append(token)
                self.index += 1
                test = token.text != "]]" or token.kind != "word"
                continue
            if token.kind == "op" and token.text in _ENDS:
                break
            if token.kind == "op" and token.text == "(":
                raise self.script.refuse(token.start, "a function definition or subshell")
            if token.kind == "op" and token.text in ("<<", "<<-"):
                raise self.script.refuse(token.start, "a here-document")
            tokens.append(token)
            self.index += 1
            if token.kind == "op" and token.text in _REDIRECTS:
                target = self._peek()
                if target is None or target.kind != "word":
                    raise self.script.refuse(token.start, f"{token.text!r} without a target")
                tokens.append(target)
                self.index += 1
        if test:
            raise self.script.refuse(tokens[0].start, "`[[` without its `]]`")
        return _Simple(tokens, tokens[0].start, tokens[-1].end)


def _command_words(simple: _Simple) -> tuple[list[Token], list[Token]]:
    """(assignments before the command, the command's own words) of a simple command, redirections left out."""
    prefix: list[Token] = []
    words: list[Token] = []
    skip = False
    for token in simple.tokens:
        if skip:
            skip = False
            continue
        if token.kind == "op" and token.text in _REDIRECTS:
            skip = True
        elif token.kind in ("op", "ionum"):
            continue
        elif not words and (token.kind == "array" or _ASSIGNMENT.match(token.text)):
            prefix.append(token)
        else:
            words.append(token)
    return prefix, words


class _Run:
    """One walk of the script for one environment: the pieces kept, the calls set aside, the notes."""

    def __init__(self, script: ShellScript, env: Mapping[str, Value], helpers: frozenset[str], library: str) -> None:
        self.script, self.helpers, self.library = script, helpers, library
        self.given = dict(env)
        self.env: dict[str, Value] = dict(env)
        self.computed: dict[str, str] = {}  # name -> why its value is known only when the script runs
        self.pieces: list[tuple[int, str]] = []  # (offset, text) of each command kept
        self.named: set[str] = set()  # runner variables the kept text names as $NAME
        self.calls: list[Call] = []
        self.notes: list[str] = []

    def where(self, offset: int) -> str:
        return f"{self.script.name}:{self.script.line(offset)}"

    def walk(self, nodes: list[_Node]) -> None:
        for node in nodes:
            if isinstance(node, _If):
                self._if(node)
            elif isinstance(node, _Pipeline):
                if not self._inert([node]):
                    raise self.script.refuse(node.start, "commands joined by && || or | whose exit status decides")
                for part in node.parts:  # each set aside (a test or an `exit` there is a guard, not a step)
                    names = [w.text for w in _command_words(part)[1][:1]] if isinstance(part, _Simple) else []
                    if names not in (["exit"], ["[["], ["["], ["test"], ["false"]):
                        self.walk([part])
            else:
                self._simple(node)

    # --- if/elif/else ---

    def _if(self, node: _If) -> None:
        for condition, body in node.arms:
            try:
                taken = self._condition(condition)
            except Unknown as unknown:
                branches = [b for _, b in node.arms] + ([node.orelse] if node.orelse else [])
                if all(self._inert(b) for b in branches):
                    self.calls.append(Call("if", self.script.line(node.start), ()))
                    return
                raise self.script.refuse(
                    condition[0].start if condition else node.start,
                    f"which branch runs depends on {unknown.why}",
                ) from None
            if taken:
                self.walk(body)
                return
        if node.orelse:
            self.walk(node.orelse)

    def _condition(self, nodes: list[_Node]) -> bool:
        if len(nodes) != 1:
            raise Unknown("the condition", "a condition of several commands")
        return self._decide(nodes[0])

    def _decide(self, node: _Node) -> bool:
        if isinstance(node, _Pipeline):
            if "|" in node.ops or "|&" in node.ops:
                raise Unknown("a pipeline", "a pipeline's exit status")
            value = self._decide(node.parts[0])
            for op, part in zip(node.ops, node.parts[1:], strict=True):
                if (op == "&&") == value:
                    value = self._decide(part)
            return not value if node.negated else value
        if isinstance(node, _If):
            raise Unknown("an if", "an `if` inside a condition")
        words = [t.text for t in node.tokens]
        if words and words[0] in ("[[", "[", "test"):
            return test_value(words, self.env)
        if words in (["true"], [":"]):
            return True
        if words == ["false"]:
            return False
        raise Unknown(words[0] if words else "", f"what `{' '.join(words[:3])}` returns when it runs")

    def _inert(self, nodes: list[_Node]) -> bool:
        """True when running `nodes` would change nothing kept: set-aside commands, tests, `exit` (a guard)."""
        for node in nodes:
            if isinstance(node, _If):
                branches = [b for _, b in node.arms] + ([node.orelse] if node.orelse else [])
                if not all(self._inert(b) for b in branches):
                    return False
            elif isinstance(node, _Pipeline):
                if not self._inert(node.parts):
                    return False
            else:
                prefix, words = _command_words(node)
                name = words[0].text if words else ""
                if prefix or not (self._aside(words) or name in ("exit", "[[", "[", "test", "false")):
                    return False
        return True

    # --- simple commands ---

    def _aside(self, words: list[Token]) -> str | None:
        """Why the command `words` is set aside, or None when it is kept."""
        texts = [w.text for w in words]
        name = texts[0] if texts else ""
        if name in self.helpers:
            return "the suite's function"
        if name in _SHELL_OUTPUT:
            return "shell output"
        if name in ("source", ".") and self.library and any(self.library in t for t in texts[1:]):
            return "the suite's library"
        if name == "nvidia-smi":
            return "a GPU listing"
        if texts[:2] in (["hf", "download"], ["huggingface-cli", "download"]):
            return "a model download (the deploy places the model)"
        if _installs(texts):
            return "install"
        return None

    def _simple(self, node: _Simple) -> None:
        prefix, words = _command_words(node)
        if not words:
            self._assignments(node, prefix)
            return
        name = words[0].text
        line = self.script.line(node.start)
        why = self._aside(words)
        if why is not None:
            self.calls.append(Call(name, line, tuple(w for t in words[1:] for w in self._lenient(t))))
            if why == "install":
                shown = " ".join(t.text for t in words)
                self.notes.append(
                    f"{self.where(node.start)}: `{shown}` installs packages when the script runs; an air-gapped node "
                    "cannot run it, and the recipe does not: bake them into the image"
                )
            return
        if name in ("exit", "return"):
            raise self.script.refuse(node.start, f"`{name}` stops the script on the path this run takes")
        if name in _REFUSED_COMMANDS or name in ("source", "."):
            raise self.script.refuse(node.start, f"`{name}`")
        if name == "export":
            self._export(node, words)
            return
        self._keep(node)

    def _lenient(self, token: Token) -> list[str | None]:
        try:
            return list(fields(token.text, self.env))
        except Unknown:
            return [None]

    def _assignments(self, node: _Simple, prefix: list[Token]) -> None:
        shown: list[str] = []
        for token in prefix:
            if token.kind == "array":
                self._array(token)
                continue
            match = _ASSIGNMENT.match(token.text)
            assert match is not None
            name, raw = match.group(1), token.text[match.end() :]
            value = self._value(name, raw, token, append=bool(match.group(2)))
            if value is None:  # a value of the host's: kept as written, for the post reader
                shown.append(token.text)
            elif name not in self.computed and _PLAIN.fullmatch(value):  # any other value is written where used
                shown.append(_assign(name, value, self.script, token))
        if shown:
            self.pieces.append((node.start, " ".join(shown)))

    def _value(self, name: str, raw: str, token: Token, *, append: bool) -> str | None:
        """The value `NAME=raw` sets (kept in the environment); None when it depends on a host's variable."""
        computed = [n for n in names_in(raw) if n in self.computed]
        self.computed.pop(name, None)
        try:
            value = text_value(raw, self.env)
        except Unknown as unknown:
            self.env.pop(name, None)
            if computed or not unknown.what.startswith("$") or unknown.what[1:2] in "!?$#@*-0123456789(":
                origin = self.computed[computed[0]] if computed else unknown.what
                self.computed[name] = f"${name}, set at line {self.script.line(token.start)} from {origin}"
                return ""
            self.named.update(n for n in names_in(raw) if n in self.given)
            return None
        previous = self.env.get(name, "")
        value = (previous if isinstance(previous, str) else " ".join(previous)) + value if append else value
        self.env[name] = value
        return value

    def _array(self, token: Token) -> None:
        name, append = token.text.split("=", 1)[0].rstrip("+"), "+=(" in token.text
        try:
            items = tuple(f for item in token.items for f in fields(item.text, self.env))
        except Unknown as unknown:
            self.env.pop(name, None)
            self.computed[name] = f"${{{name}[@]}}, set at line {self.script.line(token.start)} from {unknown.what}"
            return
        previous = self.env.get(name, ()) if append else ()
        self.env[name] = (previous if isinstance(previous, tuple) else (previous,)) + items
        self.computed.pop(name, None)

    def _export(self, node: _Simple, words: list[Token]) -> None:
        shown = ["export"]
        for token in words[1:]:
            match = _ASSIGNMENT.match(token.text)
            if token.text.startswith("-"):
                raise self.script.refuse(token.start, f"`export {token.text}`")
            if match is None:
                value = self.env.get(token.text)
                shown.append(_assign(token.text, value, self.script, token) if isinstance(value, str) else token.text)
                continue
            name = match.group(1)
            value = self._value(name, token.text[match.end() :], token, append=bool(match.group(2)))
            if name in self.computed:
                raise self.script.refuse(token.start, f"`export {name}` uses {self.computed[name]}, {_RUN_TIME}")
            shown.append(token.text if value is None else _assign(name, value, self.script, token))
        self.pieces.append((node.start, " ".join(shown)))

    def _keep(self, node: _Simple) -> None:
        """Keep a command as written, each word the post reader cannot expand itself written out."""
        text = self.script.text
        replaced: list[tuple[int, int, str]] = []
        redirected = False
        for token in node.tokens:
            if token.kind in ("op", "ionum"):
                redirected = token.kind == "op" and token.text in _REDIRECTS
                continue
            replacement = self._word(token, target=redirected)
            redirected = False
            if replacement is not None:
                replaced.append((token.start, token.end, replacement))
        out, position = [], node.start
        for start, end, replacement in replaced:
            out += [text[position:start], replacement]
            position = end
        out.append(text[position : node.end])
        self.pieces.append((node.start, "".join(out)))

    def _word(self, token: Token, *, target: bool) -> str | None:
        """The text to write in place of a kept word; None to keep it as written."""
        match = _ASSIGNMENT.match(token.text) if token.kind == "word" else None
        raw = token.text[match.end() :] if match else token.text
        if token.kind == "array":
            raise self.script.refuse(token.start, "an array assignment before a command")
        written_out = False
        for segment in segments(raw):
            name = segment.text
            if segment.kind in ("command", "special", "unsupported") or name in self.computed:
                if target:
                    return None  # where the server's output goes: the post reader drops it
                uses = self.computed.get(name, name)
                raise self.script.refuse(token.start, f"`{token.text}` uses {uses}, {_RUN_TIME}")
            if segment.kind in ("arith", "array") or segment.op:
                written_out = True
            elif segment.kind == "param":
                value = self.env.get(name)
                written_out |= value is not None and not (isinstance(value, str) and _PLAIN.fullmatch(value))
        if not written_out:
            self.named.update(n for n in names_in(raw) if n in self.given and self.env.get(n) == self.given[n])
            return None
        try:
            if match:
                return _assign(match.group(1), text_value(raw, self.env), self.script, token)
            values = fields(raw, self.env)
        except Unknown as unknown:
            if target:
                return None
            raise self.script.refuse(token.start, f"`{token.text}` needs {unknown.why}") from None
        return " ".join(_quoted(v, self.script, token) for v in values)

    def assemble(self) -> str:
        """The kept pieces at their lines and columns; the runner's variables the text names, on line 1."""
        lines = [""] * len(self.script.line_starts)
        for offset, text in sorted(self.pieces):
            line = self.script.line(offset) - 1
            column = offset - self.script.line_starts[line]
            for number, chunk in enumerate(text.split("\n")):
                at = line + number
                if number:
                    lines[at] += chunk
                elif lines[at].strip():
                    lines[at] += (" " if lines[at].rstrip().endswith("&") else "; ") + chunk
                else:
                    lines[at] = " " * column + chunk
        given = [_assign(n, v, self.script, None) for n, v in self.given.items() if n in self.named]
        if given:
            head = "; ".join(given)
            lines[0] = head + ("; " + lines[0].lstrip() if lines[0].strip() else "")
        return "\n".join(line.rstrip() for line in lines)


def _installs(texts: list[str]) -> bool:
    """True for `pip install …`, `pip3 install …`, `python3 -m pip install …`, `uv pip install …`."""
    for index, word in enumerate(texts):
        if word in ("pip", "pip3") or re.fullmatch(r"pip3?\.\d+", word):
            return "install" in texts[index + 1 :] and (index == 0 or texts[index - 1] in ("-m", "uv"))
    return False


def _quoted(value: str, script: ShellScript, token: Token | None) -> str:
    if "\n" in value:
        offset = token.start if token else 0
        raise script.refuse(offset, "a value over several lines written into a command")
    return shlex.quote(value)


def _assign(name: str, value: str | None, script: ShellScript, token: Token | None) -> str:
    """`NAME=value` as a post reader takes it (the text is read, never run)."""
    return name + "=" + _quoted(value or "", script, token)
