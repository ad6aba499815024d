"""A failed deploy reads like an answer: one block per host (what failed, the cause, the remedy), no traceback.

pyinfra runs a `python.call` callback and, when it raises, logs Python's traceback and `Unexpected error in
Python callback: DeployError(...)` (pyinfra/api/operations.py). `install()` (called by every deploy file)
wraps pyinfra's callback runner so that hgxkit's own errors (`DeployError`, `HgxkitError`) fail the host's
operation the way a failed command does: the answer is logged once, the host fails, the run exits 1, and the
blocks are repeated at the end of the output. At `-vv` and more pyinfra's traceback comes back unchanged.
Any other exception is a bug, and keeps its traceback.

Example:
    >>> print(failure_block("node1", RunFailure("group 0 (dsv4-0) did not start", ["docker: Error\\x1b[0m"],
    ...                                         "fix the cause and run again")))
    node1: group 0 (dsv4-0) did not start
      cause:
        docker: Error\\x1b[0m
      remedy: fix the cause and run again
"""

from __future__ import annotations

import atexit
import sys
from collections.abc import Sequence
from typing import Any

from pyinfra.api.exceptions import DeployError

from hgxkit.errors import HgxkitError

_FAILURES: list[str] = []
_INSTALLED: list[bool] = []


class RunFailure(DeployError):
    """A deploy step failed on a host: `what` failed, the `cause` (the tool's own error or log lines), the `remedy`."""

    def __init__(self, what: str, cause: Sequence[str] | str, remedy: str) -> None:
        self.what = what
        self.cause = [cause] if isinstance(cause, str) else list(cause)
        self.remedy = remedy
        # escaped here too: at -vv pyinfra prints this message in its traceback, past failure_block
        super().__init__(escape_control(f"{what}: {'; '.join(self.cause)}; {remedy}"))


def escape_control(text: str) -> str:
    """`text` with control characters (ESC, CR, BEL, …) written as `\\xNN`; tabs stay tabs."""
    return "".join(c if c == "\t" or c.isprintable() else f"\\x{ord(c):02x}" for c in text)


def failure_block(host_name: str, error: BaseException) -> str:
    """The block for one host: `host: what`, the cause lines (control characters escaped), the remedy."""
    if isinstance(error, RunFailure):
        lines = [f"{host_name}: {escape_control(error.what)}", "  cause:"]
        lines += [f"    {escape_control(line)}" for line in error.cause or ["(no output)"]]
        lines.append(f"  remedy: {escape_control(error.remedy)}")
        return "\n".join(lines)
    message = error.message if isinstance(error, HgxkitError) else str(error)
    first, *rest = message.splitlines() or [""]
    prefix = "" if first.startswith(f"{host_name}:") else f"{host_name}: "
    return "\n".join([prefix + escape_control(first), *(escape_control(line) for line in rest)])


def install() -> None:
    """Make hgxkit's errors in pyinfra callbacks fail the host with an answer instead of a traceback (once)."""
    if _INSTALLED:
        return
    from pyinfra.api.command import FunctionCommand

    original = FunctionCommand.execute

    def execute(self: Any, state: Any, host: Any, connector_arguments: Any) -> Any:
        try:
            return original(self, state, host, connector_arguments)
        except (DeployError, HgxkitError) as error:
            if getattr(state, "print_input", False):  # -vv: pyinfra's own report, traceback included
                raise
            report(host.name, error)
            return False  # a failed command: pyinfra fails the host and the run exits 1

    FunctionCommand.execute = execute  # type: ignore[method-assign]
    atexit.register(_summary)
    _INSTALLED.append(True)


def report(host_name: str, error: BaseException) -> None:
    """Log the failure block now and keep it for the summary at the end of the run."""
    from pyinfra import logger

    block = failure_block(host_name, error)
    _FAILURES.append(block)
    logger.error(block)


def _summary() -> None:
    if _FAILURES:
        print(f"\nhgxkit: the run failed on {len(_FAILURES)} host(s):", file=sys.stderr)
        print("\n\n".join(_FAILURES), file=sys.stderr)
