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
import re
import shlex
import textwrap
from collections.abc import Sequence

from hgxkit.importing.program_apps import app_line
from hgxkit.kinds import KINDS

NOTE = "the launch is read from the post's Python string literals (the command its subprocess call runs)"


def launches_in_python(
    lines: Sequence[str], fences: Sequence[int], clean: list[str]
) -> tuple[list[str], list[tuple[int, str]]]:
    """`clean` with each Python fence (or a post that is one Python file) that builds a launch rewritten as that
    launch (see the module docstring), and a note per launch (1-based line, text)."""
    out, notes = list(clean), []
    for body, lists_only in _regions(lines, fences, clean):
        found = _launch(textwrap.dedent("\n".join(lines[n] for n in range(body[0], body[-1] + 1))), lists_only)
        if found is None or found[2]:
            continue
        line, command, _ = found
        for n in range(body[0], body[-1] + 1):
            out[n] = ""
        out[body[0] + line - 1] = command
        notes.append((body[0] + line, NOTE))
    return out, notes


def computed_launch(name: str, lines: Sequence[str], fences: Sequence[int], clean: Sequence[str]) -> str | None:
    """The refusal of a launch list holding Python values (`["vllm", "serve", model, "--port", str(port)]`),
    naming them: the program computes them, so the post does not say what runs; None where there is none."""
    for body, lists_only in _regions(lines, fences, clean):
        found = _launch(textwrap.dedent("\n".join(lines[n] for n in range(body[0], body[-1] + 1))), lists_only)
        if found is not None and found[2]:
            return (
                f"{name}:{body[0] + found[0]}: the launch is a Python list whose {', '.join(found[2])} the program "
                "computes (its arguments and variables), so the post does not say their values; write the command "
                "with its values"
            )
    return None


def _regions(lines: Sequence[str], fences: Sequence[int], clean: Sequence[str]) -> list[tuple[list[int], bool]]:
    """The (0-based) lines of each Python region, and whether only its lists are read: each fence's non-blank
    lines, or a whole post with no fence that imports a module and is no app (program_apps names those), whose
    string launches the shell scan reads where they start a line."""
    if not any(fences) and _IMPORT.search("\n".join(lines)) and app_line(lines) is None:
        return [([n for n, line in enumerate(lines) if line.strip()], True)]
    bodies = (
        [n for n, f in enumerate(fences) if f == fence and clean[n].strip()] for fence in sorted(set(fences) - {0})
    )
    return [(body, False) for body in bodies if body]


# A Python file's sign: an import at a line's start (a shell post never parses as Python with one).
_IMPORT = re.compile(r"^(?:import|from) [A-Za-z_][\w.]*", re.M)


def _launch(source: str, lists_only: bool = False) -> tuple[int, str, list[str]] | None:
    """(1-based line within `source`, the command, the Python values it holds) of the first string constant (not
    with `lists_only`), or list of them, that is an engine's launch; None when `source` is no Python or holds none."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # a hostile nesting is no Python to read either
        return None
    for node in ast.walk(tree):
        computed: list[str] = []
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and not lists_only:
            words, command = node.value.split(), " ".join(node.value.split())
        elif isinstance(node, (ast.List, ast.Tuple)) and node.elts and _is_text(node.elts[0]):
            words = [e.value if _is_text(e) else "VALUE" for e in node.elts]  # type: ignore[attr-defined]
            computed = [f"`{ast.unparse(e)[:40]}`" for e in node.elts if not _is_text(e)]
            command = shlex.join(words)
        else:
            continue
        if any(kind.launches(words[i:]) for kind in KINDS.values() for i in range(min(len(words), 4))):
            return node.lineno, command, computed
    return None


def _is_text(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)
