"""The directory a post's `cd` lines leave its shell in, and a `docker run`'s relative host paths based on it.

`cd /srv/app` then `docker run --env-file docker.env -v ./cache:/cache …`: Docker reads `docker.env` and
mounts `./cache` relative to the directory the command runs in, which the recipe cannot know, so the paths
are written out from the post's `cd` (each a note). A `cd` to a relative or home directory leaves the base
unknown; the paths stay as posted and `recipe check` reports them.

Example:
    >>> from hgxkit.importing.commands import simple_commands
    >>> from hgxkit.importing.post import find_commands, read_post
    >>> simples = simple_commands(find_commands(read_post("p", "cd /srv/app\\ncd deploy\\ndocker run img")))
    >>> directory_before(simples, simples[-1])
    ('/srv/app/deploy', 'p:2')
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from dataclasses import replace

from hgxkit.importing.commands import Simple, simple_index
from hgxkit.recipe.docker_options import canonical
from hgxkit.recipe.docker_parse import ParsedRun
from hgxkit.recipe.shellwords import shell_value

# Options whose value is a host file the docker client reads, relative to where it runs.
_HOST_FILES = ("--env-file", "--label-file")


def directory_before(simples: Sequence[Simple], simple: Simple) -> tuple[str | None, str | None]:
    """(the absolute directory the post's `cd` lines before `simple` leave its file's shell in, or None when
    unknown; where the last `cd` is, or None when there is none)."""
    cwd: str | None = None
    where: str | None = None
    index = simple_index(simples)
    end = index.position.get(id(simple), len(simples))
    for position in index.cds:
        if position >= end:
            break
        other = simples[position]
        if other.command.post is not simple.command.post or other.in_block:
            continue
        where = other.where()
        target = shell_value(other.texts[1]) if len(other.texts) == 2 else ""
        if target.startswith("/"):
            cwd = posixpath.normpath(target)
        elif target and cwd is not None and not target.startswith(("~", "$", "-")):
            cwd = posixpath.normpath(posixpath.join(cwd, target))
        else:
            cwd = None  # `cd`, `cd ~`, `cd $DIR`, `cd -`, or relative to an unknown directory
    return cwd, where


def based_run(run: ParsedRun, cwd: str, cd_where: str, where: str, notes: list[str]) -> ParsedRun:
    """`run` with its relative host paths (`-v ./x:/y`, `-v sub/dir:/y`, `--env-file docker.env`) written out
    from `cwd`; a `-v name:/y` with no slash is a named volume and stays."""
    entries = []
    for entry in run.entries:
        for index, use in enumerate(entry.uses):
            name = canonical(use.option.name)
            value = use.value or ""
            new = None
            if name == "--volume" and ":" in value:
                source, rest = value.split(":", 1)
                if _relative(source) and ("/" in source or source.startswith(".")):
                    new = f"{_join(cwd, source)}:{rest}"
            elif name in _HOST_FILES and _relative(value):
                new = _join(cwd, value)
            if new is not None:
                notes.append(
                    f"{where}: {use.option.name} {value} is relative to the directory the post's `cd` "
                    f"({cd_where}) leaves: {new}"
                )
                entry = entry.with_value(index, new)
        entries.append(entry)
    return replace(run, entries=tuple(entries))


def _relative(path: str) -> bool:
    return bool(path) and not path.startswith(("/", "~", "$", "{{"))


def _join(cwd: str, path: str) -> str:
    return posixpath.normpath(posixpath.join(cwd, shell_value(path)))
