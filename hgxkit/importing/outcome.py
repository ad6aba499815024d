"""What an import hands out: the recipe, every note, and an account of every line of the posts it read.

`Report` lines say what was done with a command or a printed block (`took`, `read`, `checked`, `skipped`);
`LineAccount` says it per line of each file, so that every line has one fate: `taken` into a recipe field,
`changed` (taken, with the notes naming that line), `read` (a variable, a number checked against others) or
`set aside` with the reason (prose, output, a fence, a command that is not the server).

Example:
    >>> from hgxkit.importing.post import read_post
    >>> post = read_post("p.md", "Run:\\n```\\nvllm serve org/m\\n```")
    >>> lines = account_lines([post], [], [Report("p.md:3", "took", "`vllm serve`", into="server")], ["p.md:3: x"])
    >>> for account in lines:
    ...     print(account.shown())
    p.md:1: set aside (prose, comments or output)
    p.md:2: set aside (a Markdown code fence)
    p.md:3: changed -> server (`vllm serve`)
    p.md:4: set aside (a Markdown code fence)
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from hgxkit.errors import InputError
from hgxkit.importing.commands import Simple
from hgxkit.importing.post import FENCE_RE, PostFile
from hgxkit.recipe.danger import dangerous_options
from hgxkit.recipe.engine_start import engine_refusal
from hgxkit.recipe.network_env import host_interface_settings
from hgxkit.recipe.shellwords import EXPANDING_TILDE
from hgxkit.recipe.spec import Recipe
from hgxkit.recipe.validate import format_path, recipe_problems
from hgxkit.secrets import redact

# `FILE:LINE: …` or `FILE:FIRST-LAST: …`, the place a note or report names (FILE may hold colons).
_WHERE = re.compile(r"^(?P<file>.+?):(?P<first>\d+)(?:-(?P<last>\d+))?(?::|$)")
# `FILE: line N, column C: …`, the place a refusal names most precisely.
_LINE_COLUMN = re.compile(r"^(?P<file>.+?): line (?P<line>\d+), column (?P<column>\d+):")
# `FILE: WHAT at line N, column C …`, as the shell-word reader names a word it does not import.
_WORD_AT = re.compile(r"^(?P<file>.+?): [^:]*? at line (?P<line>\d+), column (?P<column>\d+)\b")
# The version of `ledger_json`'s shape; raise it when a key changes meaning or goes away.
LEDGER_SCHEMA_VERSION = 1
# Which report action gives a line its fate, strongest first: a line taken stays taken.
_FATES = {"took": "taken", "read": "read", "checked": "read", "skipped": "set aside"}
_STRENGTH = ("took", "read", "checked", "skipped")


@dataclass(frozen=True)
class Report:
    """One line of what `recipe import` did with a part of the post: `took`, `read`, `checked` or `skipped`."""

    where: str  # FILE:LINE or FILE:FIRST-LAST
    action: str
    what: str
    into: str = ""  # the recipe field(s) a `took` line went into

    def __post_init__(self) -> None:
        # A `~` the shell expands is a marker in the words (`shellwords.EXPANDING_TILDE`); said as written.
        object.__setattr__(self, "what", self.what.replace(EXPANDING_TILDE, "~"))

    def line(self) -> str:
        return f"{self.where}: {self.action} {self.what}"


@dataclass(frozen=True)
class LineAccount:
    """One line of a post and what happened to it."""

    file: str  # the path as given
    line: int  # 1-based
    text: str  # as written
    fate: str  # taken | changed | read | set aside (| refused: the line a refusal names)
    into: str = ""  # the recipe field(s) it went into (taken, changed)
    why: str = ""  # what was done with it, or why it was set aside
    notes: tuple[str, ...] = ()  # the import's notes that name this line

    def shown(self) -> str:
        where = f" -> {self.into}" if self.into else ""
        return f"{self.file}:{self.line}: {self.fate}{where}{f' ({self.why})' if self.why else ''}"


@dataclass(frozen=True)
class ImportOutcome:
    """The recipe, what the importer had to change or could not capture, and the account of every line read."""

    recipe: Recipe
    notes: tuple[str, ...]
    report: tuple[Report, ...] = ()
    lines: tuple[LineAccount, ...] = ()
    # Parts of the post the recipe would hold but does not (a benchmark command with a placeholder, the results
    # printed under it), each with why and how to bring it in: `recipe import` exits 3 when there is one.
    set_aside: tuple[str, ...] = ()


class ImportRefused(InputError):
    """A refusal, with where it is (file, line, column) and the account of the lines read before it."""

    def __init__(self, message: str, lines: tuple[LineAccount, ...], texts: dict[str, tuple[str, ...]]) -> None:
        super().__init__(message)
        self.place = refusal_place(message, texts)
        if self.place is not None:  # the line refused is the one fate that is not the account's usual
            file, number, _ = self.place
            lines = tuple(
                replace(a, fate="refused", into="", why=message) if (a.file, a.line) == (file, number) else a
                for a in lines
            )
        self.lines = lines


def refusal_place(message: str, texts: dict[str, tuple[str, ...]]) -> tuple[str, int, int] | None:
    """(file, line, column) a refusal names: as written (`FILE: line N, column C:`, or the shell-word reader's
    `FILE: WHAT at line N, column C`), else its `FILE:LINE` with
    the column where the line's command starts (`texts`: each file's lines with prose and prompts blanked);
    None where it names no line."""
    match = _LINE_COLUMN.match(message)
    if match is None and (word := _WORD_AT.match(message)) is not None and word.group("file") in texts:
        match = word
    if match:
        return match.group("file"), int(match.group("line")), int(match.group("column"))
    found = place(message)
    if found is None or found[0] not in texts:
        return None
    lines = texts[found[0]]
    text = lines[found[1] - 1] if 0 < found[1] <= len(lines) else ""
    return found[0], found[1], len(text) - len(text.lstrip()) + 1 if text.strip() else 1


def ledger_json(outcome: ImportOutcome | None, refused: ImportRefused | None = None) -> dict:
    """The account as JSON: every line with its fate, the notes, and the refusal with its place (if refused)."""
    lines = outcome.lines if outcome is not None else refused.lines if refused is not None else ()
    out: dict = {
        "schema_version": LEDGER_SCHEMA_VERSION,
        "imported": outcome is not None,
        "lines": [
            {
                "file": a.file,
                "line": a.line,
                "text": a.text,
                "fate": a.fate,
                "into": a.into,
                "why": a.why,
                "notes": list(a.notes),
            }
            for a in lines
        ],
        "notes": list(outcome.notes) if outcome is not None else [],
        "set_aside": list(outcome.set_aside) if outcome is not None else [],
    }
    if refused is not None:
        file, line, column = refused.place or (None, None, None)
        out["refusal"] = {"message": refused.message, "file": file, "line": line, "column": column}
    return out


def explained(outcome: ImportOutcome | None, refused: ImportRefused | None = None) -> list[str]:
    """The account as text, a line per post line (`FILE:N: fate -> field (why)`), the refusal last."""
    lines = outcome.lines if outcome is not None else refused.lines if refused is not None else ()
    out = [account.shown() for account in lines]
    if refused is not None:
        file, line, column = refused.place or ("", 0, 0)
        at = f"{file}:{line}:{column}: " if file else ""
        out.append(f"{at}refused: {refused.message}")
    return out


def finish(
    recipe: Recipe,
    notes: list[str],
    source: str,
    report: tuple[Report, ...] = (),
    lines: tuple[LineAccount, ...] = (),
) -> ImportOutcome:
    """Check every field of an imported recipe; add notes on host inputs and dangerous options."""
    problems = recipe_problems(recipe)
    if problems:
        # Key paths of the recipe this command would become (its docker.options[i] is the i-th option entry).
        first = problems[0]
        raise InputError(f"{source}: {format_path(first.where)}: {first.message}")
    refusal = engine_refusal(recipe)
    if refusal:  # imported means deployable: a recipe its engine would not start is refused, by name
        raise InputError(f"{source}: the engine would refuse: {refusal.reason}")
    notes.extend(recipe.host_inputs())
    for danger in dangerous_options(recipe):
        notes.append(
            f"dangerous option {danger.option}: {danger.reason}; `recipe check` reports it as an error and the "
            f'node refuses it unless allow_docker_options lists "{danger.name}"'
        )
    if recipe.docker.last("--network") != "host":
        env = ((e.name, e.value) for e in recipe.docker.env())
        for name, value in host_interface_settings(env, spanning=recipe.node_count() > 1):
            notes.append(
                f"{source}: -e {name}={value} names a host network interface the container (bridge network) does "
                "not have; `recipe check` reports it as an error: add --network host or drop it"
            )
    # What the importer says is shown, logged and written as JSON: a secret the post holds is masked once, here.
    shown = tuple(replace(line, what=redact(line.what)) for line in report)
    return ImportOutcome(recipe, tuple(dict.fromkeys(redact(note) for note in notes)), shown, lines)


def place(where: str) -> tuple[str, int, int] | None:
    """(file, first line, last line) of a `FILE:LINE[-LAST]` place at the start of `where`, else None."""
    match = _WHERE.match(where)
    if match is None:
        return None
    first = int(match.group("first"))
    return match.group("file"), first, int(match.group("last") or first)


def account_lines(
    posts: Sequence[PostFile], simples: Sequence[Simple], report: Sequence[Report], notes: Sequence[str]
) -> tuple[LineAccount, ...]:
    """Every line of `posts` with its fate: from the report lines that name it (the strongest action wins),
    else the command it is part of, a fence, a blank line, or prose; a taken line some note names is `changed`."""
    said: dict[tuple[str, int], Report] = {}
    for entry in sorted(report, key=lambda r: _STRENGTH.index(r.action) if r.action in _STRENGTH else 9):
        found = place(entry.where)
        if found is not None:
            for line in range(found[1], found[2] + 1):
                said.setdefault((found[0], line), entry)
    noted: dict[tuple[str, int], list[str]] = {}
    for note in notes:
        found = place(note)
        if found is not None:
            for line in range(found[1], found[2] + 1):
                noted.setdefault((found[0], line), []).append(note)
    commands: dict[tuple[str, int], Simple] = {}
    for simple in simples:
        command = simple.command
        for line in range(command.first, command.last + 1):
            commands.setdefault((command.post.name, line), simple)
    out = []
    for post in posts:
        for number, text in enumerate(post.written or post.lines, 1):
            key = (post.name, number)
            notes = tuple(redact(note) for note in noted.get(key, ()))
            out.append(_account(post, number, redact(text), said.get(key), commands.get(key), notes))
    return tuple(out)


def _account(
    post: PostFile, number: int, text: str, entry: Report | None, simple: Simple | None, notes: tuple[str, ...]
) -> LineAccount:
    if entry is not None and entry.action in _FATES:
        fate = _FATES[entry.action]
        if fate == "taken" and notes:
            fate = "changed"
        return LineAccount(
            post.name, number, text, fate, entry.into if fate in ("taken", "changed") else "", entry.what, notes
        )
    if simple is not None and text.strip():
        why = f"part of the command at {simple.where()}, not taken"
        return LineAccount(post.name, number, text, "set aside", why=why, notes=notes)
    if not text.strip():
        return LineAccount(post.name, number, text, "set aside", why="a blank line")
    if FENCE_RE.match(text.lstrip("> \t")) and not post.clean[number - 1].strip():
        return LineAccount(post.name, number, text, "set aside", why="a Markdown code fence", notes=notes)
    return LineAccount(post.name, number, text, "set aside", why="prose, comments or output", notes=notes)
