"""Undo what typography does to a pasted command before it is read: dashes, smart quotes, Unicode spaces.

Blogs, chat tools and word processors rewrite `--flag` as `—flag` (em dash), `–flag` (en dash) or `-—flag`,
quotes as `“ ”`/`‘ ’`, spaces as non-breaking or thin spaces, and slip zero-width characters in. A shell
would pass `—tensor_parallel_size` to the engine as a positional word, so a 32-GPU setup silently becomes a
one-GPU one. Only the commands' lines are touched (prose keeps its dashes), never after a comment's `#`. A
dash run that plainly starts an option becomes `--` (or `-`), paired smart quotes become plain ones, Unicode
spaces become spaces and zero-width characters go: each is a note naming its line. What cannot be read one way
only (a typographic dash inside a word or standing alone, a smart quote that does not pair) is refused naming
the line, the column and the fix. A `\\ # comment` line end (a backslash, a space, a comment: a shell reads an
escaped space and then ends the command) is read as the continuation the poster meant, with a note.

Example:
    >>> post = "vllm serve org/M \\u2014tensor_parallel_size 16 \\u2014-pipeline_parallel_size 2"
    >>> text, notes = normalise("p.md", post)
    >>> text
    'vllm serve org/M --tensor_parallel_size 16 --pipeline_parallel_size 2'
    >>> [line for line, _ in notes]
    [1]
"""

from __future__ import annotations

import re

from hgxkit.errors import InputError
from hgxkit.importing.post import find_commands, read_post

LONG_DASHES = "\u2014\u2013\u2015"  # em dash, en dash, horizontal bar: each what a `--` became
SHORT_DASHES = "\u2212\u2010\u2011\u2012"  # minus sign, hyphen, non-breaking hyphen, figure dash: each a `-`
DASHES = LONG_DASHES + SHORT_DASHES
UNICODE_SPACES = "\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000"
ZERO_WIDTH = "\u200b\u200c\u200d\u2060\ufeff"
DOUBLE_SMART = "\u201c\u201d\u201e"
SINGLE_SMART = "\u2018\u2019"
_SPECIAL = re.compile(f"[{DASHES}{UNICODE_SPACES}{ZERO_WIDTH}{DOUBLE_SMART}{SINGLE_SMART}]")
# A run of dashes that starts a word, then the option's name.
_OPTION = re.compile(f"(?:(?<=^)|(?<=[\\s\"'`]))([-{DASHES}]+)(?=[A-Za-z])")
# A comment in backticks among a continued command's lines (`` `# ===== part two =====` \\ ``): an inline comment
# idiom, which a shell expands to nothing.
_BACKTICK_COMMENT = re.compile(r"(?<!\S)`[ \t]*#[^`\n]*`(?=[ \t]*(?:\\[ \t]*)?$)", re.M)
_COMMENTED_CONTINUATION = re.compile(r"\\([ \t]+)(#.*)$")


def normalise(name: str, text: str) -> tuple[str, list[tuple[int, str]]]:
    """`text` with its commands' typography undone, and (line, note) for each line changed; raise InputError
    naming the line for what could be read more than one way."""
    text, notes = option_per_line(name, text)
    if not _SPECIAL.search(text) and "\\ " not in text and not _BACKTICK_COMMENT.search(text):
        return text, notes
    # Again until nothing changes: a repaired continuation makes the next line part of its command, to be read too.
    for _ in range(MAX_PASSES):
        post = read_post(name, text)
        lines = list(post.lines)
        for command in find_commands(post):
            numbers = range(command.first, command.last + 1)
            _pair_quotes(name, lines, post.clean, numbers, notes)
            for number in numbers:
                lines[number - 1] = _line(name, number, lines[number - 1], post.clean[number - 1], notes)
        repaired = "\n".join(lines)
        if repaired == text:
            break
        text = repaired
    return text, sorted(set(notes))


MAX_PASSES = 20  # each pass repairs at least one line; a command longer than this is left as its last pass read it

# A line that is only options: `--port 8000`, `--served-model-name "glm4"`, `-tp 2` (no comment, no backslash).
_OPTION_LINE = re.compile(r"[ \t]*--?[A-Za-z][^#\\]*")


def option_per_line(name: str, text: str) -> tuple[str, list[tuple[int, str]]]:
    """`text` with a command that a rendered page shows one option per line, without the backslashes, read as one
    command: a launch on one line, then only lines that start with an option up to the paragraph's
    end (a blank line, the fence's end, the text's end). A line that starts with an option is no command of its
    own, so the lines can be read only one way; each such command is a note. Anything else after the launch (a
    word, prose) leaves the lines as they are, for the missing backslash to be refused naming the line.

    >>> text, notes = option_per_line("p", "vllm serve org/m\\n--port 8000\\n-tp 2\\n\\nthen")
    >>> text.splitlines()[:3], notes[0][0]
    (['vllm serve org/m \\\\', '--port 8000 \\\\', '-tp 2'], 1)
    """
    if re.search(r"\n[ \t]*-", text) is None:
        return text, []
    post = read_post(name, text)
    lines = list(post.lines)
    notes: list[tuple[int, str]] = []
    for command in find_commands(post):
        if command.unended is None or command.unended[0] != command.last + 1 or command.first != command.last:
            continue  # a command continued by backslashes that ends early lost one: refused naming the line
        last = command.last
        while last < len(lines) and post.fences[last] == post.fences[command.first - 1] and post.clean[last].strip():
            if not _OPTION_LINE.fullmatch(post.clean[last]) or not _same_but_span_end(post.clean[last], lines[last]):
                break
            last += 1
        else:
            if last == command.last:
                continue
            for index in range(command.last - 1, last - 1):
                lines[index] = lines[index].rstrip() + " \\"
            notes.append(
                (
                    command.first,
                    f"lines {command.first}-{last} are one command written one option per line without the "
                    "continuation backslashes (as a rendered page shows it): read as one command",
                )
            )
    return "\n".join(lines), notes


def _same_but_span_end(clean: str, line: str) -> bool:
    """True when a line reads as its cleaned form, but for the backtick that closes an inline code span over
    lines (prose around a span is blanked and would change the command)."""
    return clean.rstrip() == line.rstrip().removesuffix("`").rstrip()


def _shell_end(line: str, clean: str) -> int:
    """Where the line's shell text ends: at a comment's `#` (outside quotes), else at its end."""
    quote = ""
    for index, char in enumerate(line):
        if index < len(clean) and clean[index] != char:
            continue  # blanked: a prompt, a fence, prose around inline code
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1] in " \t"):
            return index
    return len(line)


def _line(name: str, number: int, line: str, clean: str, notes: list[tuple[int, str]]) -> str:
    # The shell text is what the cleaning kept (inline code, not the prose around it) up to a comment; the prose
    # before it is blanked here, so columns stay, and put back after.
    kept = clean.rstrip()
    start = len(kept) - len(kept.lstrip())
    end = min(_shell_end(line, clean), len(kept))
    head, shell, rest = line[:start], " " * start + line[start:end], line[end:]
    changed = []
    if any(c in shell for c in ZERO_WIDTH):
        shell = "".join(c for c in shell if c not in ZERO_WIDTH)
        changed.append("zero-width character(s) removed")
    if any(c in shell for c in UNICODE_SPACES):
        shell = "".join(" " if c in UNICODE_SPACES else c for c in shell)
        changed.append("non-breaking or other Unicode space(s) read as spaces")
    shell, dashes = _dashes(name, number, shell)
    if dashes:
        changed.append(f"typographic dash(es) read as option dashes: {', '.join(dashes)}")
    for note in changed:
        notes.append((number, note))
    line = head + shell[start:] + rest
    commented = _BACKTICK_COMMENT.search(line)
    if commented and commented.start() >= _shell_start(line):
        notes.append(
            (
                number,
                f"`{commented.group()[:40]}` read as nothing (a comment in backticks: a shell runs it as a command "
                "substitution that prints nothing)",
            )
        )
        line = line[: commented.start()] + " " * len(commented.group()) + line[commented.end() :]
    continued = _COMMENTED_CONTINUATION.search(line)
    if continued and continued.start() >= _shell_start(line):
        notes.append(
            (
                number,
                f"`\\ {continued.group(2)[:30]}` read as a line continuation (the comment dropped; a shell "
                "would read an escaped space, then end the command at the comment)",
            )
        )
        line = line[: continued.start() + 1]  # ends at the backslash: one note for it, the one above
    return line


def _shell_start(line: str) -> int:
    return len(line) - len(line.lstrip())


def _dashes(name: str, number: int, shell: str) -> tuple[str, list[str]]:
    """`shell` with each option-starting dash run written as ASCII, and what was rewritten; a typographic dash
    anywhere else is refused."""
    rewritten: list[str] = []
    out: list[str] = []
    last = 0
    for match in _OPTION.finditer(shell):
        run = match.group(1)
        if not any(c in DASHES for c in run):
            continue
        longs = sum(c in LONG_DASHES for c in run)
        if longs > 1 or len(run) > 2 or (longs == 0 and len(run) > 2):
            _refuse(name, number, match.start() + 1, run, "a dash run that is not one option's dashes")
        ascii_run = "--" if longs else "-" * len(run)
        word = re.match(r"\S*", shell[match.start() :]).group()  # type: ignore[union-attr]
        rewritten.append(f"{word} -> {ascii_run}{word[len(run) :]}")
        out.append(shell[last : match.start()] + ascii_run)
        last = match.end()
    result = "".join(out) + shell[last:]
    quoted = _quoted(result)
    stray = next((i for i, c in enumerate(result) if c in DASHES and i not in quoted), None)
    if stray is not None:
        word = re.search(r"\S*$", result[: stray + 1]).group() + re.match(r"\S*", result[stray + 1 :]).group()  # type: ignore[union-attr]
        column = _column(shell, result[stray], stray)
        _refuse(name, number, column, word, "a typographic dash inside a value or standing alone")
    return result, rewritten


def _quoted(line: str) -> set[int]:
    """Indices of `line` inside a quoted string: text the shell passes as written (an `echo`'s message with its
    dashes), which no reading of the command's words depends on.

    >>> sorted(_quoted('echo "a — b" x'))
    [6, 7, 8, 9, 10]
    """
    inside, quote = set(), None
    for index, char in enumerate(line):
        if quote is None and char in "\"'":
            quote = char
        elif char == quote:
            quote = None
        elif quote is not None:
            inside.add(index)
    return inside


def _column(shell: str, char: str, index: int) -> int:
    """1-based column in the original line of the first `char` (the rewrite may have shifted it)."""
    found = shell.find(char)
    return (found if found >= 0 else index) + 1


def _refuse(name: str, number: int, column: int, word: str, what: str) -> None:
    raise InputError(
        f"{name}: line {number}, column {column}: {word!r} holds {what} (typography a web page or editor "
        "applied): type the characters the command had (- or --) and import again"
    )


def _pair_quotes(
    name: str, lines: list[str], clean: tuple[str, ...], numbers: range, notes: list[tuple[int, str]]
) -> None:
    """Replace the command's smart quotes by plain ones where they pair (opening then closing); refuse one that
    does not."""
    for smart, plain in ((DOUBLE_SMART, '"'), (SINGLE_SMART, "'")):
        places = [
            (number, index)
            for number in numbers
            for index, char in enumerate(lines[number - 1][: _shell_end(lines[number - 1], clean[number - 1])])
            if char in smart
        ]
        if not places:
            continue
        if len(places) % 2:
            number, index = places[-1]
            raise InputError(
                f"{name}: line {number}, column {index + 1}: the smart quote {lines[number - 1][index]} does not "
                f"pair with another: type plain quotes ({plain}) where the command had them and import again"
            )
        for number, index in places:
            line = lines[number - 1]
            lines[number - 1] = line[:index] + plain + line[index + 1 :]
        for number in sorted({n for n, _ in places}):
            notes.append((number, f"smart quotes read as plain {plain} quotes"))
