"""A GitHub Actions workflow (or composite action) in a post, read as the shell its steps' `run:` scripts are.

Its YAML around the scripts (`on:`, `jobs:`, `runs-on:`, `uses:`, `with:`, `env:`) is no shell: read as shell lines
it made a `nohup` line inside a `run: |` block look like a value broken by a line wrap. Each `run: |` block's body
and each one-line `run: CMD` stay where they are (columns kept); every other line of the file is blanked, with one
note. A `${{ … }}` expression in a script is then named by the word reader as what it is.

Example:
    >>> workflow = ("jobs:", "  t:", "    runs-on: x", "    steps:", "      - run: |", "          vllm serve m")
    >>> lines, notes = workflow_lines(workflow)
    >>> [line.strip() for line in lines], notes[0][0]
    (['', '', '', '', '', 'vllm serve m'], 1)
"""

from __future__ import annotations

import re

NOTE = "a GitHub Actions workflow: its steps' run: scripts read as the shell they run; its other keys set aside"
_TOP = re.compile(r"^(?:jobs|runs)[ \t]*:[ \t]*$")
_STEPS = re.compile(r"^[ \t]+steps[ \t]*:[ \t]*$")
_RUN = re.compile(r"^([ \t]*)(?:-[ \t]+)?run[ \t]*:[ \t]*(.*)$")
_BLOCK = re.compile(r"[|>][-+0-9]*[ \t]*(?:#.*)?")
_FENCE = re.compile(r"^[ \t]*(?:`{3,}|~{3,})")


def workflow_lines(lines: tuple[str, ...]) -> tuple[tuple[str, ...], list[tuple[int, str]]]:
    """`lines` of a post that is a workflow (a `jobs:` or `runs:` key at the margin and a `steps:` list) with
    only its `run:` scripts left, and a note at its first line; any other post as it is."""
    top = next((n for n, line in enumerate(lines) if _TOP.match(line)), None)
    if top is None or not any(_STEPS.match(line) for line in lines[top:]):
        return lines, []
    # the workflow's lines: its fence's (a post's other fences and prose are left to the shell scan), or the file
    first = next((n + 1 for n in range(top - 1, -1, -1) if _FENCE.match(lines[n])), 0)
    last = next((n for n in range(top + 1, len(lines)) if _FENCE.match(lines[n])), len(lines))
    out = [*lines[:first], *[""] * (last - first), *lines[last:]]
    index = first
    while index < last:
        found = _RUN.match(lines[index])
        index += 1
        if found is None:
            continue
        indent, value = len(found.group(1)), found.group(2)
        if not _BLOCK.fullmatch(value):  # `run: vllm serve …` on its line
            out[index - 1] = " " * found.start(2) + value
            continue
        while index < last and (not lines[index].strip() or _indent(lines[index]) > indent):
            out[index] = lines[index]
            index += 1
    return tuple(out), [(top + 1, NOTE)]


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))
