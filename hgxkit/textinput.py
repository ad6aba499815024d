"""Reading text a user hands hgxkit (a post, a recipe): regular files only, size checked before reading; and
cleaning text a server hands hgxkit before it reaches a terminal or a report.

A path may name a FIFO (which would hang the read), a device (`/dev/zero` reads until memory runs out) or a
file of gigabytes; each is refused in one line before a byte is read.

A server's answers (its version, model name, error bodies, what its benchmark client prints) are a stranger's
text: an escape sequence in them would move the cursor, retitle or clear the operator's terminal, forge lines
of hgxkit's own output, or (OSC 52) write the clipboard. `clean_text` is the one sanitiser every such string
goes through: it drops whole ESC sequences (CSI, OSC, DCS and the like, in their 7-bit and 8-bit forms), every
other C0 and C1 control, and the invisible Unicode that reorders or hides what is shown (bidi controls,
zero-width and tag characters, lone surrogates that would stop the print).

Example:
    >>> read_text_file("/dev/zero")
    Traceback (most recent call last):
    ...
    hgxkit.errors.InputError: /dev/zero: not a regular file (a character device); save the text to a file
    >>> clean_text("0.5.23\\x1b]0;owned\\x07\\x1b[2J\\nfake line\\u202e")
    '0.5.23 fake line'
"""

from __future__ import annotations

import json
import os
import re
import stat
from typing import Any, BinaryIO

from hgxkit.errors import InputError

# A post or recipe is a few KiB; the largest real one in the corpus is under 100 KiB.
MAX_TEXT_BYTES = 4 * 1024 * 1024

_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a directory",
}


def _decode(name: str, data: bytes, limit: int) -> str:
    if len(data) > limit:
        raise InputError(f"{name}: larger than {limit // (1024 * 1024)} MiB; a post or recipe is a few KiB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{name}: not UTF-8 text; save it as UTF-8") from None


def read_text_file(name: str, limit: int = MAX_TEXT_BYTES) -> str:
    """The UTF-8 text of the regular file `name`, refused in one line when it is anything else or too large."""
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; the type is checked on the open descriptor.
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as err:
        raise InputError(f"{name}: cannot read: {err.strerror}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        kind = _KINDS.get(stat.S_IFMT(info.st_mode), "not a file")
        raise InputError(f"{name}: not a regular file ({kind}); save the text to a file")
    with os.fdopen(fd, "rb") as handle:
        if info.st_size > limit:
            raise InputError(f"{name}: larger than {limit // (1024 * 1024)} MiB; a post or recipe is a few KiB")
        return _decode(name, handle.read(limit + 1), limit)


def read_text_stream(name: str, stream: BinaryIO, limit: int = MAX_TEXT_BYTES) -> str:
    """At most `limit` bytes of UTF-8 text from `stream` (standard input), refused when there is more."""
    return _decode(name, stream.read(limit + 1), limit)


# ESC sequences, whole: CSI (`ESC [` or 8-bit 0x9b) with its parameters and final byte; OSC, DCS, SOS, PM and
# APC (`ESC ]`, `ESC P`, … or 0x9d, 0x90, …) up to their terminator (BEL or ST) or the end of the text; any
# other ESC with its intermediate and final bytes. An unterminated one is dropped to the end, as a terminal
# would swallow it.
_ESCAPE_SEQUENCE = (
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[ -/]*[0-~]?"
)
# What is left that a terminal acts on or that hides text: C0, DEL, C1, soft hyphen, bidi marks, embeddings and
# isolates, zero-width characters, line and paragraph separators, BOM, interlinear annotations, lone
# surrogates, tag characters.
_INVISIBLE = (
    "[\x00-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb"
    "\ud800-\udfff\U000e0000-\U000e007f]"
)
_UNSAFE_RE = re.compile(f"{_ESCAPE_SEQUENCE}|{_INVISIBLE}")
_SPACES = frozenset("\t\n\r\x0b\x0c")


def clean_text(text: str, *, lines: bool = False) -> str:
    """`text` (a server's) as safe to print or archive: ESC sequences, controls and invisible characters
    dropped (module doc); tabs and line breaks become spaces, or stay where `lines` (multi-line text)."""

    def keep(match: re.Match[str]) -> str:
        found = match.group()
        if lines and found in ("\n", "\t"):
            return found
        return " " if found in _SPACES and not lines else ""

    return _UNSAFE_RE.sub(keep, text)


def clean_json(value: Any) -> Any:
    """`value` (parsed JSON from a server) with every string in it, keys too, cleaned (`clean_text`): a line break
    in a version or an error becomes a space, so it cannot start a line of its own in a report."""
    if isinstance(value, dict):
        return {clean_text(str(key)): clean_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [clean_json(item) for item in value]
    if isinstance(value, str):
        return clean_text(value)
    return value


def clean_json_text(text: str) -> str:
    """A server's JSON Lines (a benchmark client's output) or JSON document, every string cleaned value by
    value, so it still parses; other text is cleaned as lines of text."""
    lines = text.splitlines()
    try:
        parsed = [json.loads(line) if line.strip() else None for line in lines]
    except ValueError:
        try:
            return json.dumps(clean_json(json.loads(text)), indent=2) + "\n"
        except ValueError:
            return clean_text(text, lines=True)
    out = [json.dumps(clean_json(item)) if line.strip() else "" for line, item in zip(lines, parsed, strict=True)]
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")
