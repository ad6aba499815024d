"""Errors that the CLI turns into one line on stderr and a non-zero exit status."""

from __future__ import annotations


class HgxkitError(Exception):
    """A user-facing error: the message is one line naming the file, key or token and what to do.

    `exit_code` follows the Unix convention the CLI promises: 2 for bad input (usage, parse and
    validation errors), 1 for a failure while doing the work.
    """

    exit_code = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InputError(HgxkitError):
    """Bad input: a malformed command, recipe or argument. Nothing was changed anywhere."""

    exit_code = 2
