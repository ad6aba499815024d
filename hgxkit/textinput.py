"""Reading text a user hands hgxkit (a post, a recipe): regular files only, size checked before reading.

A path may name a FIFO (which would hang the read), a device (`/dev/zero` reads until memory runs out) or a
file of gigabytes; each is refused in one line before a byte is read.

Example:
    >>> read_text_file("/dev/zero")
    Traceback (most recent call last):
    ...
    hgxkit.errors.InputError: /dev/zero: not a regular file (a character device); save the text to a file
"""

from __future__ import annotations

import os
import stat
from typing import BinaryIO

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
