"""A Makefile in a post: its variables (`REPO := acme/x`) read as the shell's, its targets' recipes as shell lines.

Make expands `$(NAME)` (and `${NAME}`) from the file's own variables before a recipe line reaches the shell, so
`docker run $(REPO):$(VERSION)` runs the image those lines set, not a command substitution. Each definition line
becomes a shell assignment (`REPO=acme/x`) and each use of a defined name `${NAME}`, the same width as `$(NAME)`,
so columns stay where the post has them in the recipes. A post is taken for a Makefile when it defines a variable
at the margin, has a target line (`name:`) followed by a tab-indented recipe line, and a recipe uses a variable
it defines.

Example:
    >>> lines, notes = make_lines(("REPO := acme/x", "run:", "\\tdocker run $(REPO)"))
    >>> lines
    ('REPO=acme/x', 'run:', '\\tdocker run ${REPO}')
    >>> notes == [(1, NOTE)]
    True
"""

from __future__ import annotations

import re
import shlex

NOTE = "a Makefile: its variables (`NAME := value`) read as the shell's, its targets' recipes as shell lines"
_DEFINITION = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)[ \t]*(?:::=|:=|\?=|=)[ \t]*(.*?)[ \t]*$")
_TARGET = re.compile(r"^[A-Za-z0-9_.%/-]+(?:[ \t]+[A-Za-z0-9_.%/-]+)*[ \t]*:(?!=)")
_USE = re.compile(r"\$[({]([A-Za-z_][A-Za-z0-9_]*)[)}]")


def make_lines(lines: tuple[str, ...]) -> tuple[tuple[str, ...], list[tuple[int, str]]]:
    """`lines` with a Makefile's variables written as shell assignments and their uses in recipes as `${NAME}`,
    and a note at its first definition; unchanged where the post is no Makefile."""
    defined = {m.group(1): (i, m.group(2)) for i, line in enumerate(lines) if (m := _DEFINITION.match(line))}
    recipes = [
        i for i in range(1, len(lines)) if lines[i].startswith("\t") and _in_recipe(lines, i) and _USE.search(lines[i])
    ]
    used = {name for i in recipes for name in _USE.findall(lines[i])}
    # a target's recipe pasted without the file's variables (`L318B:` then `\tdocker run … $(CONTAINER)`): Make's
    # words all the same, its `$(NAME)`s left unset and named as such
    snippet = not defined and len(used) > 1
    if not recipes or not (used & set(defined) or snippet):
        return lines, []
    out = list(lines)
    for name, (index, value) in defined.items():
        out[index] = f"{name}={shlex.quote(_one_word(value)) if value else ''}"
    for index in _recipe_lines(lines, recipes):
        out[index] = _USE.sub(
            lambda m: "${" + m.group(1) + "}" if m.group(1) in defined or snippet else m.group(0), out[index]
        )
        out[index] = out[index].replace("$$", "$")  # Make's `$$` is a shell's `$`
    first = min((i for i, _ in defined.values()), default=recipes[0])
    return tuple(out), [(first + 1, NOTE)]


def _recipe_lines(lines: tuple[str, ...], recipes: list[int]) -> list[int]:
    """The recipe lines of the targets whose lines use a variable: every tab-indented line under each."""
    found: set[int] = set()
    for index in recipes:
        if index in found:  # a line of a target already walked
            continue
        at = index
        while at >= 0 and (lines[at].startswith("\t") or not lines[at].strip()):
            at -= 1
        end = at + 1
        while end < len(lines) and (lines[end].startswith("\t") or not lines[end].strip()):
            found.add(end)
            end += 1
    return sorted(found)


def _one_word(value: str) -> str:
    """A value Make pastes into a recipe line as the one word its shell reads there (`"org/m"` is org/m: the
    recipe's shell removes the quotes), else as it is written.

    >>> _one_word('"Qwen/Qwen2.5-7B-Instruct"'), _one_word("a b"), _one_word("'unclosed")
    ('Qwen/Qwen2.5-7B-Instruct', 'a b', "'unclosed")
    """
    try:
        words = shlex.split(value, comments=False)
    except ValueError:
        return value
    return words[0] if len(words) == 1 else value


def _in_recipe(lines: tuple[str, ...], index: int) -> bool:
    """True for a tab-indented line under a target line, past other recipe lines and blank lines."""
    at = index - 1
    while at >= 0 and (lines[at].startswith("\t") or not lines[at].strip()):
        at -= 1
    return at >= 0 and bool(_TARGET.match(lines[at])) and not _DEFINITION.match(lines[at])
