"""Split a pasted shell command into words the way a POSIX shell would, keeping each word's position.

Forum posts mangle commands: line continuations, the "collapsed" form where every `\\` + newline became
`\\` + space on one line, tabs, CRLF, smart quotes, a leading `$ ` prompt. `split_words` undoes those and
returns `Word`s with their line and column so that errors can point at the offending token.

Example:
    >>> [w.text for w in split_words("docker run -d \\\\ --gpus '\\"device=0,1\\"' img")]
    ['docker', 'run', '-d', '--gpus', '"device=0,1"', 'img']

Dollar signs: a word's text keeps `$NAME` / `${NAME}` wherever the shell that runs the command would expand
it (unquoted or in double quotes), and writes a dollar sign the shell would pass on literally (single-quoted,
backslash-escaped, or followed by nothing expandable) as `$$`. `quote_word` turns both back into shell
syntax, so `'$PORT'` stays unexpanded on the host and `"$HOME"` stays expanded; `shell_value` gives the word
as a shell splitter (`shlex`) would show it.

    >>> [w.text for w in split_words("sh -c 'echo $PORT' $HOME")]
    ['sh', '-c', 'echo $$PORT', '$HOME']

Tildes: an unquoted `~` or `~user` that starts a word and ends at a `/` or at the word's end is the host's
home directory (dash and bash expand it there, and nowhere else in an argument); the word's text writes it
as `$~` (`EXPANDING_TILDE`), and `quote_word` renders it unquoted, so `-v ~/.cache:/c` stays `~/.cache` on
the host. Any other tilde is an ordinary character.

    >>> [w.text for w in split_words("-v ~/.cache:/c '~/x' a~b")], quote_word("$~/.cache:/c")
    (['-v', '$~/.cache:/c', '~/x', 'a~b'], '~/.cache:/c')

Command substitution is refused wherever it is written: `$(…)` and backticks, quoted, escaped or not. A
single-quoted or escaped backtick is literal on the host, but the word reaches a shell again (`sh -c` in the
container, a health check, a script that echoes it), and a recipe is untrusted input: no form of it may carry
a command. Parameter expansions are kept only in their plain forms `$NAME`, `${NAME}`, `$1`, `$#`…: those with
operators (`${X:-word}`, `${X:=word}`, `${X#pat}`, `${X?msg}`) are refused, because their `word` is itself
expanded (command substitution, nested expansions), `:=` assigns on the host and `?` exits it; keeping them
would mean quoting text this lexer does not parse. A post's import alone keeps `${X:-word}` with a plain word
and `${X:+words}` (`split_words(defaults=True)`), and writes out or drops them before anything reaches a recipe.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hgxkit.errors import InputError
from hgxkit.secrets import redact

# Characters that start shell syntax we do not import (pipelines, lists, redirections, subshells).
SHELL_OPERATOR_CHARS = frozenset("|&;<>()`")
SMART_QUOTES = {"\u201c": '"', "\u201d": '"', "\u201e": '"', "\u2018": "'", "\u2019": "'"}
# Inside double quotes a backslash only escapes these (POSIX); before anything else it stays literal.
DQUOTE_ESCAPABLE = frozenset('$`"\\\n')
# A `$` the shell expands is followed by one of these; any other `$` is an ordinary character.
EXPANSION_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789{@*#?!-")
LITERAL_DOLLAR = "$$"
EXPANDING_TILDE = "$~"
# An unquoted tilde-prefix at a word's start: `~` or `~user`, then `/`, a blank, an operator or the end.
_TILDE_PREFIX = re.compile(r"~[A-Za-z0-9._-]*(?=/|[ \t\n|&;<>()`]|$)")
_TILDE_USER = re.compile(r"[A-Za-z0-9._-]*")
_DQUOTE_SAFE_SEGMENT = re.compile(r"[^\"\\`$]*")
# The expansions a recipe keeps: `$NAME`, `${NAME}`, `$1`, `${10}` and the one-character specials.
PLAIN_EXPANSION_RE = re.compile(r"\$(?:\{(?:[A-Za-z_][A-Za-z0-9_]*|[0-9]+)\}|[A-Za-z_][A-Za-z0-9_]*|[0-9@*#?!-])")
# `${NAME:-word}` / `${NAME-word}` with a word of plain characters and `$NAME`s: what a post's reader writes out.
# `${NAME:+words}`: the words where NAME is set, nothing where it is not; an import keeps it whole to drop it (see
# hgxkit.importing.reading), never to write it into a recipe.
ALTERNATE_EXPANSION_RE = re.compile(
    r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?P<op>:?\+)"
    r"(?P<word>(?:[^{}$`\\]|\$[A-Za-z_][A-Za-z0-9_]*|\$\{[A-Za-z_][A-Za-z0-9_]*\})*)\}"
)
DEFAULT_EXPANSION_RE = re.compile(
    r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*|[1-9])(?P<op>:?-)"
    r"(?P<word>(?:[^{}$'\"\\`\s()|&;<>]|\$[A-Za-z_][A-Za-z0-9_]*|\$\{[A-Za-z_][A-Za-z0-9_]*\}"
    # a quoted piece of plain text (`${MODEL:-"org/m"}`), which the shell takes without its quotes
    r"|\"[^\"$`\\\n{}]*\"|'[^'$\n{}]*')*)\}"
)
_QUOTED_PIECE = re.compile(r"\"([^\"]*)\"|'([^']*)'")


def default_word(match: re.Match[str]) -> str:
    """The word of a `DEFAULT_EXPANSION_RE` match as the shell gives it: its quoted pieces without their quotes.

    >>> default_word(DEFAULT_EXPANSION_RE.match('${M:-"org/m"}'))
    'org/m'
    """
    return _QUOTED_PIECE.sub(lambda m: m.group(1) if m.group(1) is not None else m.group(2), match["word"])


@dataclass(frozen=True)
class Word:
    """One shell word: its text after quote removal, where it started, and whether any part was quoted."""

    text: str
    line: int
    column: int
    quoted: bool
    is_operator: bool = False

    def where(self) -> str:
        """Human position, e.g. `line 1, column 42`."""
        return f"line {self.line}, column {self.column}"


def normalize_paste(text: str) -> str:
    """Undo what copy-paste does to a command: CRLF line ends, smart quotes, a leading `$ ` prompt."""
    text = text.replace("\r\n", "\n")
    if not any(quote in text for quote in "'\""):
        # A paste through a rich-text editor turns every quote into a smart one; if no plain quote is
        # left, the smart ones were the quoting. Otherwise they are literal text and stay.
        for smart, plain in SMART_QUOTES.items():
            text = text.replace(smart, plain)
    stripped = text.lstrip()
    if stripped[:2] in ("$ ", "# ") or stripped[:2] == "$\t":
        # Replace the prompt with spaces so columns still match the original paste.
        offset = len(text) - len(stripped)
        text = text[:offset] + "  " + stripped[2:]
    return text


class _Scanner:
    """Character cursor that tracks line and column (both 1-based)."""

    def __init__(self, text: str, line: int = 1) -> None:
        self.text = text
        self.pos = 0
        self.line = line
        self.column = 1
        self.defaults = False  # `${NAME:-word}` kept (see split_words)

    def peek(self, ahead: int = 0) -> str:
        index = self.pos + ahead
        return self.text[index] if index < len(self.text) else ""

    def take(self) -> str:
        char = self.text[self.pos]
        self.pos += 1
        if char == "\n":
            self.line += 1
            self.column = 1
        else:
            self.column += 1
        return char

    def at_end(self) -> bool:
        return self.pos >= len(self.text)


def split_words(text: str, *, source: str = "<input>", first_line: int = 1, defaults: bool = False) -> list[Word]:
    """Split `text` into shell words; raise `InputError` on an unbalanced quote.

    Shell operators outside quotes (`|`, `&&`, `;`, `>`, `$(`…) come back as words with
    `is_operator=True`, so the caller can refuse them with their position. `first_line` is the line number
    of the text's first line (a command taken out of a longer post). `defaults` keeps `${NAME:-word}` and
    `${NAME-word}` whose word is plain text and `$NAME`s (`DEFAULT_EXPANSION_RE`) for a reader that writes them
    out (a post's import); a recipe never holds one.
    """
    scanner = _Scanner(normalize_paste(text), first_line)
    scanner.defaults = defaults
    words: list[Word] = []
    word = _PendingWord()
    while not scanner.at_end():
        char = scanner.peek()
        if char in " \t\n":
            word.finish(words)
            scanner.take()
            continue
        if char == "\\":
            _read_backslash(scanner, word, source)
            continue
        if char == "#" and word.start is None:
            while not scanner.at_end() and scanner.peek() != "\n":
                scanner.take()
            continue
        if char in SHELL_OPERATOR_CHARS or (char == "$" and scanner.peek(1) == "("):
            word.finish(words)
            words.append(_read_operator(scanner))
            continue
        if word.start is None:
            word.begin(scanner)
            if char == "~" and _TILDE_PREFIX.match(scanner.text, scanner.pos):
                scanner.take()
                word.buffer.append(EXPANDING_TILDE)
                continue
        if char == "'":
            _read_single_quoted(scanner, word.buffer, source)
            word.quoted = True
        elif char == "$" and scanner.peek(1) in ("'", '"'):
            # bash's `$'…'` (backslash escapes decoded) and `$"…"` (a translated string, read as "…"): the `$`
            # belongs to the quoting, never to the value
            scanner.take()
            if scanner.peek() == "'":
                _read_single_quoted(scanner, word.buffer, source, escapes=True)
            else:
                _read_double_quoted(scanner, word.buffer, source)
            word.quoted = True
        elif char == '"':
            _read_double_quoted(scanner, word.buffer, source)
            word.quoted = True
        elif char == "$":
            word.buffer.append(_read_dollar(scanner, source, in_double_quotes=False))
        else:
            word.buffer.append(scanner.take())
    word.finish(words)
    return words


class _PendingWord:
    """The word being read: its text so far, where it started (None: between words), whether any part is quoted."""

    def __init__(self) -> None:
        self.buffer: list[str] = []
        self.start: tuple[int, int] | None = None
        self.quoted = False

    def begin(self, scanner: _Scanner) -> None:
        """Start the word at the scanner's position, unless one is already started."""
        if self.start is None:
            self.start = (scanner.line, scanner.column)

    def finish(self, words: list[Word]) -> None:
        """Append the word to `words` (nothing between words) and start afresh."""
        if self.start is not None:
            words.append(Word("".join(self.buffer), self.start[0], self.start[1], self.quoted))
        self.buffer, self.start, self.quoted = [], None, False


def _read_backslash(scanner: _Scanner, word: _PendingWord, source: str) -> None:
    """A backslash outside quotes: a line continuation, a lone separator between words, or an escaped character."""
    nxt = scanner.peek(1)
    if nxt == "\n":
        scanner.take()
        scanner.take()
        return
    if nxt == "" and word.start is not None:
        # `word\` at the very end: the shell would wait for the rest of a continued line (or keep a stray
        # backslash). Either way the command is cut off, so say where.
        raise InputError(
            f"{source}: line {scanner.line}, column {scanner.column}: the text ends with a backslash "
            "(a command cut off after a continuation?); give the whole command or remove the backslash"
        )
    if word.start is None and nxt in (" ", "\t", ""):
        # The collapsed continuation `a \ b`: a lone backslash between words separates them.
        scanner.take()
        return
    word.begin(scanner)
    _refuse_substitution(scanner, source, offset=1)
    scanner.take()
    escaped = scanner.take()
    word.buffer.append(LITERAL_DOLLAR if escaped == "$" else escaped)
    word.quoted = True


def _read_operator(scanner: _Scanner) -> Word:
    """A shell operator at the scanner (`|`, `||`, `&&`, `>>`, `;`, `$(`…), as a word that says it is one."""
    line, column = scanner.line, scanner.column
    op = scanner.take()
    while scanner.peek() in SHELL_OPERATOR_CHARS and scanner.peek() and op in ("|", "&", ">", "<"):
        op += scanner.take()
    if op == "$":
        op += scanner.take()
    return Word(op, line, column, False, is_operator=True)


# `sh -c "sh -c "…`: a wrapper written twice, whose second quote closes the first.
_NESTED_WRAPPER = re.compile(r'(?<![\w-])((?:ba|z)?sh +-c) +"((?:ba|z)?sh +-c) +"')


def _opening(scanner: _Scanner, source: str, kind: str) -> InputError:
    """Take an opening quote; the error to raise if it is never closed."""
    start = scanner.text.rfind("\n", 0, scanner.pos) + 1
    nested = _NESTED_WRAPPER.search(scanner.text, start, scanner.pos) if kind == "double" else None
    remedy = (
        f"the quote after `{nested.group(1)}` at column {nested.start() - start + 1} is closed by the one after "
        f"the `{nested.group(2)}` inside it (a wrapper written twice, its inner quotes not escaped); write it once"
        if nested
        else "close it or remove it"
    )
    error = InputError(
        f"{source}: unbalanced {kind} quote opened at line {scanner.line}, column {scanner.column}; {remedy}"
    )
    scanner.take()
    return error


def _read_single_quoted(scanner: _Scanner, buffer: list[str], source: str, *, escapes: bool = False) -> None:
    """`'…'` (or, with `escapes`, bash's `$'…'` after its `$`: backslash escapes decoded, `\\n`, `\\'`, `\\xHH`,
    octal …; an escape bash does not know keeps its backslash, as bash does)."""
    opened = _opening(scanner, source, "single")
    while True:
        if scanner.at_end():
            raise opened
        _refuse_substitution(scanner, source)
        line, column = scanner.line, scanner.column
        char = scanner.take()
        if char == "'":
            return
        if escapes and char == "\\" and not scanner.at_end():
            char = _ansi_c_escape(scanner, source, line, column)
        buffer.append(LITERAL_DOLLAR if char == "$" else char)


_ANSI_C_ESCAPES = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_ANSI_C_ESCAPES |= {"v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}
_ANSI_C_CODE = re.compile(r"x[0-9A-Fa-f]{1,2}|u[0-9A-Fa-f]{1,4}|U[0-9A-Fa-f]{1,8}|[0-7]{1,3}")


def _ansi_c_escape(scanner: _Scanner, source: str, line: int, column: int) -> str:
    """The character a `$'…'` escape after its backslash stands for; a NUL, a surrogate or a code point past
    U+10FFFF is refused (no argv can carry it)."""
    if scanner.peek() in _ANSI_C_ESCAPES:
        return _ANSI_C_ESCAPES[scanner.take()]
    code = _ANSI_C_CODE.match(scanner.text, scanner.pos)
    if code is None:
        return "\\"
    digits = code.group()
    for _ in digits:
        scanner.take()
    value = int(digits, 8) if digits[0].isdigit() else int(digits[1:], 16)
    if value == 0 or 0xD800 <= value <= 0xDFFF or value > 0x10FFFF:
        raise InputError(
            f"{source}: line {line}, column {column}: `\\{digits}` in $'…' is not a character a command line can "
            "hold; write the value without it"
        )
    return chr(value)


def _read_double_quoted(scanner: _Scanner, buffer: list[str], source: str) -> None:
    opened = _opening(scanner, source, "double")
    while True:
        if scanner.at_end():
            raise opened
        char = scanner.peek()
        if char == '"':
            scanner.take()
            return
        if char == "$":
            buffer.append(_read_dollar(scanner, source, in_double_quotes=True))
            continue
        if char == "`":
            raise InputError(
                f"{source}: command substitution (`) at line {scanner.line}, column {scanner.column} is not "
                "imported; replace it by its value"
            )
        if char == "\\":
            _refuse_substitution(scanner, source, offset=1)
        scanner.take()
        if char == "\\" and scanner.peek() in DQUOTE_ESCAPABLE and not scanner.at_end():
            escaped = scanner.take()
            if escaped != "\n":
                buffer.append(LITERAL_DOLLAR if escaped == "$" else escaped)
            continue
        buffer.append(char)


def _refuse_substitution(scanner: _Scanner, source: str, offset: int = 0) -> None:
    """Refuse a backtick or `$(` at `offset` characters ahead, even where the shell would take it literally."""
    index = scanner.pos + offset
    text = scanner.text
    if index >= len(text) or not (text[index] == "`" or text.startswith("$(", index)):
        return
    what = "command substitution (`)" if text[index] == "`" else "command substitution ($(…))"
    line = scanner.line
    column = scanner.column + offset  # the characters skipped are on this line (a backslash, nothing else)
    raise InputError(
        f"{source}: {what} at line {line}, column {column} is not imported, quoted or not; replace it by its value"
    )


def _substitution_shown(text: str, start: int) -> str:
    """What a refusal adds, ` (`$(…)`, the value of FLAG)`: the substitution starting at `start` as written (to its
    closing parenthesis on that line, shortened past 60 characters) and the flag it is the value of, where the word
    before it on its line is one; so a refusal names what the user wrote, not only where."""
    end = text.find(")", start)
    line_end = text.find("\n", start)
    if end < 0 or (0 <= line_end < end):
        return ""
    written = text[start : end + 1]
    written = written if len(written) <= 60 else written[:57] + "…"
    before = text[text.rfind("\n", 0, start) + 1 : start].rstrip("\"' ")
    word = before.split()[-1] if before.split() else ""
    flag = word.rstrip("=") if word.startswith("-") and "=" not in word.rstrip("=") else ""
    return f" (`{written}`, the value of {flag})" if flag else f" (`{written}`)"


def _read_dollar(scanner: _Scanner, source: str, *, in_double_quotes: bool) -> str:
    """One `$` where the shell may expand it: the expansion's text, or `$$` if the dollar is literal."""
    line, column = scanner.line, scanner.column
    start = scanner.pos
    scanner.take()
    nxt = scanner.peek()
    if nxt == "$" or (nxt == "(" and in_double_quotes):
        what = "the shell's process ID ($$)" if nxt == "$" else "command substitution ($(…))"
        shown = _substitution_shown(scanner.text, start) if nxt == "(" else ""
        raise InputError(
            f"{source}: {what} at line {line}, column {column} is not imported{shown}; replace it by its value"
        )
    if nxt == "{":
        return _read_braced(scanner, source, line, column)
    if nxt and nxt in EXPANSION_START:
        return "$"
    return LITERAL_DOLLAR


def _read_braced(scanner: _Scanner, source: str, line: int, column: int) -> str:
    """`${NAME}` after its `$`: taken whole; an unclosed one or one with an operator is refused (but for a
    default the scanner keeps, see split_words)."""
    default = None
    if scanner.defaults:
        default = DEFAULT_EXPANSION_RE.match(scanner.text, scanner.pos - 1)
        default = default or ALTERNATE_EXPANSION_RE.match(scanner.text, scanner.pos - 1)
    if default is not None:
        for _ in range(default.end() - scanner.pos):
            scanner.take()
        return default.group()
    close = scanner.text.find("}", scanner.pos)
    if scanner.text.startswith("{{", scanner.pos) and (end := scanner.text.find("}}", scanner.pos)) >= 0:
        shown = redact(scanner.text[scanner.pos - 1 : end + 2][:60])
        raise InputError(
            f"{source}: {shown!r} at line {line}, column {column} is a GitHub Actions expression (the workflow "
            "fills it in before a shell runs the step): write its value instead"
        )
    expansion = "$" + scanner.text[scanner.pos : close + 1 if close >= 0 else len(scanner.text)]
    if close < 0 or not PLAIN_EXPANSION_RE.fullmatch(expansion):
        shown = redact(expansion if len(expansion) <= 40 else expansion[:39] + "…")
        problem = "is never closed" if close < 0 else "has an operator"
        raise InputError(
            f"{source}: parameter expansion {shown!r} at line {line}, column {column} {problem}; only plain "
            "$NAME or ${NAME} is imported (operators run and assign on the host): write the value instead"
        )
    for _ in range(close - scanner.pos + 1):
        scanner.take()
    return expansion


def dollar_segments(text: str) -> list[tuple[str, bool]]:
    """Split a word's text into `(value, expands)` runs: literal text, and `$NAME` / `${…}` expansions.

    Example:
        >>> dollar_segments("a$$b:$HOME/${X}")
        [('a$b:', False), ('$HOME', True), ('/', False), ('${X}', True)]
    """
    segments: list[tuple[str, bool]] = []
    literal: list[str] = []
    i = 0
    while i < len(text):
        if text.startswith(LITERAL_DOLLAR, i):
            literal.append("$")
            i += 2
            continue
        match = PLAIN_EXPANSION_RE.match(text, i) if text[i] == "$" else None
        if match:
            end = match.end()
            if literal:
                segments.append(("".join(literal), False))
                literal = []
            segments.append((text[i:end], True))
            i = end
            continue
        literal.append(text[i])
        i += 1
    if literal:
        segments.append(("".join(literal), False))
    return segments


def shell_value(text: str) -> str:
    """The word as a shell splitter shows it: expansions and `~` unexpanded, `$$` back to one literal `$`."""
    if text.startswith(EXPANDING_TILDE):
        return "~" + shell_value(text[len(EXPANDING_TILDE) :])
    return "".join(value for value, _ in dollar_segments(text)) if "$" in text else text


def quote_word(word: str) -> str:
    """Quote one word for a POSIX shell: expansions stay expandable and literal dollars stay literal.

    Example:
        >>> quote_word("echo $$PORT"), quote_word("$HOME/x"), quote_word("a b")
        ("'echo $PORT'", '"$HOME/x"', "'a b'")
    """
    if word.startswith(EXPANDING_TILDE):
        return _quote_tilde(word[len(EXPANDING_TILDE) :])
    if word and all(c.isalnum() or c in "@%+=:,./-_" for c in word):
        return word
    if "$" not in word:
        return _single_quote(word)
    segments = dollar_segments(word)
    if not any(expands for _, expands in segments):
        return _single_quote(shell_value(word))
    if all(expands or _DQUOTE_SAFE_SEGMENT.fullmatch(value) for value, expands in segments):
        return f'"{word}"'  # only expansions and text that means the same inside double quotes
    return "".join(f'"{value}"' if expands else _single_quote(value) for value, expands in segments)


def _quote_tilde(rest: str) -> str:
    """`~user/rest` with the tilde-prefix and its slash unquoted (a quoted slash would stop the expansion)."""
    user = _TILDE_USER.match(rest).group()  # type: ignore[union-attr]  # matches the empty string at least
    after = rest[len(user) :]
    if not after:
        return "~" + user
    if after.startswith("/"):
        return "~" + user + "/" + (quote_word(after[1:]) if after[1:] else "")
    return _single_quote("~" + user) + quote_word(after)  # not a tilde-prefix after all: literal text


def _single_quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def join_words(words: list[str]) -> str:
    """Inverse of `split_words` for plain words: a command line a shell splits back into `words`."""
    return " ".join(quote_word(word) for word in words)
