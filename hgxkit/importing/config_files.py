"""A server's `--config FILE`: the engine reads options from a YAML file, which the container must hold.

vLLM (`vllm serve --config`) and SGLang (`--config`) read a flat mapping of long option names: each key becomes
`--key value`, a list `--key a b`, `true` the flag alone; the file's options go first, so the command line wins.
Where the post shows the file (a YAML fence whose first line is the comment `# FILE` or whose line above names
FILE, or a here-document `cat > FILE <<EOF`), its keys become the command's own flags, with a note: the recipe
then holds every setting and the node needs no file. Where it does not, and no mount brings the file in, the
import is refused naming the file: the server's settings, its model among them, are in a file hgxkit never sees.

Example:
    >>> from hgxkit.importing.post import read_post
    >>> post = read_post("p.md", "```yaml\\n# c.yaml\\nmodel: org/m\\nport: 9000\\n```\\n")
    >>> shown_files(post)
    {'c.yaml': (2, {'model': 'org/m', 'port': 9000})}
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Sequence
from typing import Any

import yaml

from hgxkit.errors import InputError
from hgxkit.importing.post import FENCE_RE, PostFile
from hgxkit.kinds import KINDS, program_of, python_program

CONFIG = "--config"
_NAME = r"[\w.@+-]+\.ya?ml"
# A comment line that names the file it heads (`# config.yaml`, `# configs/serve.yml`).
_HEADING = re.compile(rf"^\s*#\s*(?:\S*/)?({_NAME})\s*$")
# A line that writes a here-document into a file: `cat > f.yaml <<EOF`, `cat <<'EOF' > f.yaml`, `tee f.yaml <<EOF`.
_WRITES = re.compile(rf"(?:>\s*|\btee\s+(?:-a\s+)?)(?:\S*/)?({_NAME})\b")
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1")


def shown_files(post: PostFile) -> dict[str, tuple[int, Any]]:
    """The YAML files the post shows, by file name: (the line its text starts at, its loaded mapping)."""
    found: dict[str, tuple[int, Any]] = {}
    lines = post.lines
    for index, line in enumerate(lines):
        heredoc = _HEREDOC.search(line)
        if heredoc and (named := _WRITES.search(line)):
            end = next((i for i in range(index + 1, len(lines)) if lines[i].strip() == heredoc.group(2)), len(lines))
            _keep(found, named.group(1), index + 1, lines[index + 1 : end])
        opening = FENCE_RE.match(line.lstrip("> "))
        if opening is None or not post.fences[index] or (index and post.fences[index - 1] == post.fences[index]):
            continue
        end = next((i for i in range(index + 1, len(lines)) if post.fences[i] != post.fences[index]), len(lines))
        body = [b for b in lines[index + 1 : end] if not FENCE_RE.match(b.lstrip("> "))]
        first = next((b for b in body if b.strip()), "")
        heading = _HEADING.match(first)
        named = heading.group(1) if heading else _named_above(lines, index)
        if named is not None:
            _keep(found, named, index + 2, body)
    return found


def _named_above(lines: Sequence[str], fence: int) -> str | None:
    """The YAML file name the last non-blank line above a fence gives (`` `config.yaml` ``, `config.yaml:`)."""
    above = next((lines[i] for i in range(fence - 1, -1, -1) if lines[i].strip()), "")
    names = re.findall(rf"(?<![\w/.-])(?:\S*/)?({_NAME})(?![\w-])", above)
    return names[-1] if len(set(names)) == 1 else None


def _keep(found: dict[str, tuple[int, Any]], name: str, first: int, body: Sequence[str]) -> None:
    try:
        data = yaml.safe_load("\n".join(body))
    except yaml.YAMLError:
        return
    if isinstance(data, dict) and data and all(isinstance(key, str) for key in data):
        found.setdefault(name, (first, data))


def config_flags(data: dict[str, Any], kind: str | None) -> list[str]:
    """The flags a config file's mapping stands for, as the engine's parser reads them: `--key value`, a list
    `--key a b`, `true` the flag alone, `false` the option's `--no-` form where the engine has one (else nothing:
    the option stays at its default, off), a mapping as JSON."""
    server = KINDS.get(kind or "")
    flags: list[str] = []
    for key, value in data.items():
        flag = f"--{key}"
        if value is True:
            flags.append(flag)
        elif value is False:
            flags += [f"--no-{key}"] if server is not None and server.is_option(f"--no-{key}") else []
        elif isinstance(value, list):
            flags += [flag, *map(str, value)] if value else []
        elif isinstance(value, dict):
            flags += [flag, json.dumps(value, separators=(",", ":"))]
        elif value is not None:
            flags += [flag, str(value)]
    return flags


def configured(
    words: Sequence[str],
    kind: str | None,
    post: PostFile,
    where: str,
    notes: list[str],
    mounted: Sequence[str] | None = None,
) -> tuple[str, ...]:
    """`words` (a server command) with its `--config FILE` replaced by the flags of the file the post shows;
    unchanged where it has none, or where a file the post does not show is brought in: by a mount of a `docker run`
    (`mounted`: the container directories of its bind mounts), or as a bare launch's host file named by an
    absolute path (`mounted` None: the launch's host paths are mounted where they are named). InputError naming
    the file otherwise: the container would not have it."""
    at = next((i for i, w in enumerate(words) if w == CONFIG or w.startswith(f"{CONFIG}=")), None)
    if at is None:
        return tuple(words)
    joined = "=" in words[at]
    path = words[at].partition("=")[2] if joined else (words[at + 1] if at + 1 < len(words) else "")
    if mounted is not None and posixpath.isabs(path) and any(path.startswith(m.rstrip("/") + "/") for m in mounted):
        return tuple(words)
    shown = shown_files(post).get(posixpath.basename(path))
    if shown is None and mounted is None and posixpath.isabs(path):
        return tuple(words)  # a bare launch's host file, mounted where it is named (as a local model folder is)
    if shown is None:
        raise InputError(
            f"{where}: `{CONFIG} {path}` names a file the post does not show: the server reads its settings (its "
            "model among them) from it, and the container would not have it; paste the file's YAML in the post "
            "(a ```yaml fence headed `# " + (posixpath.basename(path) or "FILE") + "`), or write its settings as "
            "the command's flags"
        )
    line, data = shown
    rest = list(words[:at]) + list(words[at + (1 if joined else 2) :])
    given = {w.partition("=")[0] for w in rest if w.startswith("--")} | _positional_model(rest, kind)
    flags = _unless_given(config_flags(data, kind), given)
    notes.append(
        f"{where}: `{CONFIG} {path}` read from the file the post shows ({post.name}:{line}): its options are "
        f"written as the command's flags ({' '.join(flags) or 'none left'}), the command's own winning"
    )
    return tuple(rest[:at] + flags + rest[at:])


def _positional_model(words: Sequence[str], kind: str | None) -> set[str]:
    """{the model flag} where `words` give the model as the launch's positional argument (`vllm serve MODEL`),
    which wins over the file's `model` as the command line's flags do; else an empty set."""
    server = KINDS.get(kind or "")
    if server is None or not server.positional_model:
        return set()
    normal = python_program(words)
    program = program_of(normal, server.programs + server.deprecated_programs) or ()
    after = normal[len(program) :]
    return {server.model_flag} if after and not after[0].startswith("-") else set()


def _unless_given(flags: list[str], given: set[str]) -> list[str]:
    """`flags` less each option (with its values) the command line also gives."""
    kept: list[str] = []
    skipping = False
    for word in flags:
        if word.startswith("--"):
            skipping = word in given
        if not skipping:
            kept.append(word)
    return kept
