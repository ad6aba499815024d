"""`NAME=$(COMMAND)` and ``NAME=`COMMAND` ``: a variable set by a command substitution, read as one assignment.

A shell runs COMMAND when the line runs, on the poster's host; its output is not in the post. So the variable has
no value an import can write (`TP=$(nvidia-smi --list-gpus | wc -l)` is as many GPUs as that host has), and a
server that uses it is refused where it does (hgxkit.importing.variables), naming the substitution as written,
never the words of COMMAND taken as a value or as commands of their own (a pipe inside `$(…)` is COMMAND's). The
one substitution whose output a post does say is the GPU count in a Slurm job: `nvidia-smi` lists the GPUs the
job was given (hgxkit.importing.slurm writes the `#SBATCH` count in, with a note). And one whose COMMAND is what
the post sets up, `CID=$(docker run -d …)`, runs it: that `docker run` is the post's, the variable only its ID.

Example:
    >>> from hgxkit.importing.commands import simple_commands
    >>> from hgxkit.importing.post import find_commands, read_post
    >>> post = read_post("p", "W=`nvidia-smi -L | wc -l`\\nvllm serve org/m --tensor-parallel-size $W")
    >>> simples = SUBSTITUTED.rewrite(post, simple_commands(find_commands(post)))
    >>> [(s.kind, s.texts) for s in simples]
    [('assign', ['W=`nvidia-smi -L | wc -l`']), ('server', ['vllm', 'serve', 'org/m', '--tensor-parallel-size', '$W'])]
    >>> counts_gpus(simples[0])
    True
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from hgxkit.errors import InputError
from hgxkit.importing.commands import Simple, simple_commands
from hgxkit.importing.post import Command, PostFile
from hgxkit.recipe.shellwords import Word, split_words

# COMMAND's own parentheses nest up to three deep (jq's `select(startswith("10."))` inside `$(…)`): a line whose
# substitution the pattern could not close would be left to the shell scan, which cannot read it.
_NESTED = r"(?:[^()]|\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\))*"
_LINE = re.compile(
    r"^\s*(?P<export>export\s+)?(?P<name>[A-Za-z_]\w*)=(?P<q>[\"']?)"
    rf"(?P<sub>\$\((?P<inner>{_NESTED})\)|`(?P<ticked>[^`]*)`)(?P=q)\s*(?:#.*)?$"
)
# What a substitution's output is where the post says nothing of it, for the refusal to tell the user.
_MEANING = {"pwd": "the directory the post is run from, which it does not say"}
# Commands whose output is the number of GPUs the host (or the job) lets the process see.
_GPU_COUNT = re.compile(
    r"\s*nvidia-smi\s+(?:--list-gpus|-L|--query-gpu=\w+\s+--format=csv,noheader)\s*\|\s*(?:wc\s+-l|grep\s+-c\s+\S+)\s*"
)


class _Substituted:
    """The script rewrite that reads each whole-line `NAME=$(…)` as one assignment (see the module docstring)."""

    name = "command substitution"

    def rewrite(self, post: PostFile, simples: list[Simple]) -> list[Simple]:
        lines = {n: m for n, line in enumerate(post.clean, 1) if (m := _line(line, post.lines[n - 1]))}
        if not lines:
            return simples
        # what the shell scan made of the line (the pipe's commands inside `$(…)`, an assignment without its
        # substitution, or with it in pieces) gives way to the one assignment that keeps it as written
        kept = [s for s in simples if s.command.first not in lines]
        for number, match in lines.items():
            kind = "export" if match["export"] else "assign"
            column = match.start("name") + 1
            word = Word(f"{match['name']}={match['sub']}", number, column, False)
            opening = Word(
                match["sub"][:2] if match["inner"] is not None else "`", number, match.start("sub") + 1, False, True
            )
            words = (Word("export", number, match.start("export") + 1, False), word) if match["export"] else (word,)
            kept.append(Simple(Command(post, number, number, words), kind, words, substitution=opening))
            kept += _started(post, number, match)
        return sorted(kept, key=lambda s: s.command.first)


SUBSTITUTED = _Substituted()


def _started(post: PostFile, number: int, match: re.Match[str]) -> list[Simple]:
    """The container a `CID=$(docker run -d …)` starts: the shell runs the command inside to take its output (the
    container's ID), so the `docker run` is a command of the post like any other; [] for any other substitution."""
    inner = match["inner"]
    if inner is None or not re.match(r"\s*(?:sudo\s+)?docker\s+run\b", inner):
        return []
    offset = match.start("inner")
    try:
        words = [replace(w, column=w.column + offset) for w in split_words(inner, source=post.name, first_line=number)]
    except InputError:
        return []
    started = [s for s in simple_commands([Command(post, number, number, tuple(words))]) if s.kind == "docker-run"]
    notes = (f"{post.name}:{number}: `$(docker run …)` starts the container (${match['name']} is only its ID)",)
    return [replace(s, notes=(*s.notes, *notes)) for s in started]


def _line(clean: str, written: str) -> re.Match[str] | None:
    """The assignment a line makes from a substitution: read from the clean line, or from the line as written
    where reading it as Markdown took ``NAME=`COMMAND` `` for prose around inline code (the clean line keeps only
    COMMAND)."""
    match = _LINE.match(clean)
    if match is None and (match := _LINE.match(written)) is not None:
        return match if match["ticked"] is not None and clean.strip() == match["ticked"].strip() else None
    return match


def counts_gpus(simple: Simple) -> bool:
    """True when `simple` sets a variable to the GPU count `nvidia-smi` lists (`$(nvidia-smi --list-gpus | wc -l)`)."""
    if simple.substitution is None or simple.kind not in ("assign", "export"):
        return False
    _, _, value = simple.words[-1].text.partition("=")
    inner = value[2:-1] if value.startswith("$(") else value[1:-1]
    return _GPU_COUNT.fullmatch(inner) is not None and value[-1:] in (")", "`")


def with_count(simple: Simple, count: int, why: str) -> Simple:
    """`simple` (a GPU-count substitution) as `NAME=count`, with a note saying where the count comes from."""
    name, _, value = simple.words[-1].text.partition("=")
    word = replace(simple.words[-1], text=f"{name}={count}")
    note = f"{simple.where()}: ${name} is {count}: `{value}` counts the GPUs {why}"
    return replace(simple, words=(*simple.words[:-1], word), substitution=None, notes=(*simple.notes, note))


def owner_of(words: Sequence[Word], index: int) -> str:
    """` (the value of FLAG)` for the flag or option a word belongs to, else ` (an argument of PROGRAM)`."""
    word = words[index].text
    if word.startswith("-") and "=" in word:
        return f" (the value of {word.split('=', 1)[0]})"
    before = next((w.text for w in reversed(words[:index]) if not w.is_operator), "")
    if before.startswith("-"):
        return f" (the value of {before.split('=', 1)[0]})"
    return f" (an argument of {words[0].text})" if words else ""


def written_at(line: str, column: int) -> str:
    """The command substitution starting at `column` (1-based) of `line`, as written: `$(…)` to the parenthesis
    that closes it, or `` `…` `` to the next backtick; to the line's end where it does not close on the line.

    Example:
        >>> written_at("  -v $(pwd):/w $(a (b) c)", 6), written_at("x `pwd`/m", 3)
        ('$(pwd)', '`pwd`')
    """
    start = column - 1
    if line.startswith("`", start):
        end = line.find("`", start + 1)
        return line[start:] if end < 0 else line[start : end + 1]
    depth = 0
    for index in range(start + 1, len(line)):
        depth += {"(": 1, ")": -1}.get(line[index], 0)
        if depth == 0:
            return line[start : index + 1]
    return line[start:]


def substituted_word(simple: Simple, words: Sequence[Word]) -> InputError | None:
    """The refusal of a command whose words hold a command substitution (`$(…)` or backticks inside a word, not a
    whole-line assignment): its output is the host's at run time, so it is named as written, with the flag it is
    the value of and what it stands for where that is known, never shown as the scanner's `$(` token."""
    index = next(
        (n for n, w in enumerate(words) if w.is_operator and w.text != "(" and w.text.lstrip("$") in ("(", "`")), None
    )
    if index is None:
        return None
    word = words[index]
    post = simple.command.post
    written = written_at(post.clean[word.line - 1], word.column)
    shown = written if len(written) <= 60 else written[:57] + "…"
    shown = shown if shown.startswith("`") else f"`{shown}`"  # backticks already mark it as code
    inner = written.strip("$()`").strip()
    meaning = f": {_MEANING[inner]}" if inner in _MEANING else ""
    place = f"{post.name}: line {word.line}, column {word.column}"
    return InputError(
        f"{place}: {shown}{owner_of(words, index)} is a command substitution, run by the shell where the post "
        f"runs{meaning}; the import does not run it: write its value into the command"
    )
