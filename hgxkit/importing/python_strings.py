"""A serving launch a post builds in Python (`subprocess.Popen("vllm serve …", shell=True)`, a list of argv
strings, a command written as implicitly joined literals) read as the shell command it runs.

A fence that parses as Python is no shell, so the shell scan finds nothing in it; where one of its string
constants (Python joins adjacent literals into one) or a list or tuple of string constants is an engine's launch,
that command stands on the line where it starts and the fence's other lines are blanked (their Python is
nothing a shell runs), with a note.

Example:
    >>> lines = ["```", "import subprocess", "cmd = (", '    "vllm serve org/m "', '    "--tp 2"', ")", "```"]
    >>> clean, notes = launches_in_python(lines, [0, 1, 1, 1, 1, 1, 0], list(lines))
    >>> [line.strip() for line in clean[1:6]], notes[0][0]
    (['', '', 'vllm serve org/m --tp 2', '', ''], 4)
"""

from __future__ import annotations

import ast
import shlex
import textwrap
from collections.abc import Sequence

from hgxkit.kinds import KINDS

NOTE = "the launch is read from the post's Python string literals (the command its subprocess call runs)"


def launches_in_python(
    lines: Sequence[str], fences: Sequence[int], clean: list[str]
) -> tuple[list[str], list[tuple[int, str]]]:
    """`clean` with each Python fence that builds a launch rewritten as that launch (see the module docstring), and
    a note per launch (1-based line, text)."""
    out, notes = list(clean), []
    for fence in sorted(set(fences) - {0}):
        body = [n for n, f in enumerate(fences) if f == fence and clean[n].strip()]
        if not body:
            continue
        found = _launch(textwrap.dedent("\n".join(lines[n] for n in range(body[0], body[-1] + 1))))
        if found is None:
            continue
        line, command = found
        for n in range(body[0], body[-1] + 1):
            out[n] = ""
        out[body[0] + line - 1] = command
        notes.append((body[0] + line, NOTE))
    return out, notes


def _launch(source: str) -> tuple[int, str] | None:
    """(1-based line within `source`, the command) of the first string constant, or list of them, that is an
    engine's launch; None when `source` is no Python or holds none."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # a hostile nesting is no Python to read either
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            words, command = node.value.split(), " ".join(node.value.split())
        elif isinstance(node, (ast.List, ast.Tuple)) and node.elts and all(_is_text(e) for e in node.elts):
            words = [e.value for e in node.elts]  # type: ignore[attr-defined]
            command = shlex.join(words)
        else:
            continue
        if any(kind.launches(words[i:]) for kind in KINDS.values() for i in range(min(len(words), 4))):
            return node.lineno, command
    return None


def _is_text(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)
