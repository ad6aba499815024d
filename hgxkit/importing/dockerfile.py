"""A Dockerfile that only says how to start its base image: read as the launch it runs in that image.

`FROM vllm/vllm-openai:latest` then `ENTRYPOINT python3 -m vllm.entrypoints.openai.api_server --model …` builds
nothing: the container is the FROM image running the ENTRYPOINT (with CMD's words after it, in exec form). So
the file reads as the shell lines that say the same: `docker pull IMAGE` (the image a bare launch runs in),
`export NAME=value` for each `ENV`, and the launch itself (a shell-form ENTRYPOINT is run by `/bin/sh -c`, so
its `${NAME:-default}`s expand as a shell's do; an exec form's words are quoted as they are). Each line changed
is a note. `CMD` alone in exec form on a server's own image whose entrypoint is the server (vllm/vllm-openai)
gives that entrypoint its arguments, so it reads as the entrypoint's launch with CMD's words. A Dockerfile that
builds its own image (`RUN`, `COPY`, `ADD`, several `FROM`s; a `WORKDIR` too, which would make the launch's
relative paths the image's) or leaves the command to another base image's entrypoint is refused naming the line:
what it runs is not in the post. Outside a Dockerfile, a line that is one exec-form ENTRYPOINT or CMD of a
server (a comment quoting its Dockerfile's last line) reads as that launch.

Example:
    >>> text, notes = as_shell("Dockerfile", 'FROM img:1\\nENV A=b\\nENTRYPOINT ["vllm", "serve", "org/m"]\\n')
    >>> text.splitlines()
    ['docker pull img:1', 'export A=b', 'vllm serve org/m']
"""

from __future__ import annotations

import json
import re
import shlex

from hgxkit.errors import InputError
from hgxkit.kinds import KINDS, image_matches

ENV_NOTE = "ENV read as an `export` (the container's environment)"
# Instructions that start a container of the FROM image as it is, or only describe it.
_KEPT = frozenset(
    {"FROM", "ENV", "ENTRYPOINT", "CMD", "EXPOSE", "LABEL", "ARG", "WORKDIR", "STOPSIGNAL", "HEALTHCHECK"}
)
# Instructions that make another image than the FROM one (WORKDIR too: relative paths would be the image's).
_BUILDS = frozenset({"RUN", "COPY", "ADD", "USER", "VOLUME", "SHELL", "ONBUILD", "WORKDIR"})
_INSTRUCTION = re.compile(r"^([A-Za-z]+)(?:[ \t]+(.*))?$")


def as_shell(name: str, text: str) -> tuple[str, list[tuple[int, str]]]:
    """`text` as shell lines when it is a Dockerfile (see the module docstring), with (line, note) for each line
    changed; any other text as it is, with no notes."""
    instructions = _instructions(text)
    if instructions is None:
        return _lone_launches(*_fenced_dockerfiles(name, text))
    return _launch(name, text, instructions)


_FENCE = re.compile(r"^[ \t]*(?:`{3,}|~{3,})")


def _fenced_dockerfiles(name: str, text: str) -> tuple[str, list[tuple[int, str]]]:
    """`text` with each fence that holds a whole Dockerfile which only starts its base image read as that launch
    (`_launch`), the notes at the post's lines; a fence of a Dockerfile that builds an image is left as written."""
    lines = text.split("\n")
    notes: list[tuple[int, str]] = []
    opens = [n for n, line in enumerate(lines) if _FENCE.match(line)]
    for start, end in zip(opens[::2], opens[1::2], strict=False):
        body = "\n".join(lines[start + 1 : end])
        instructions = _instructions(body)
        if instructions is None:
            continue
        try:
            shell, said = _launch(name, body, instructions)
        except InputError:
            continue
        lines[start + 1 : end] = shell.split("\n")
        notes += [(start + 1 + line, what) for line, what in said]
    return "\n".join(lines), notes


def _launch(name: str, text: str, instructions: list[tuple[int, str, int, str]]) -> tuple[str, list[tuple[int, str]]]:
    """A Dockerfile's `text` as the shell lines of its launch (see the module docstring), with a note per line."""
    lines = text.split("\n")
    notes: list[tuple[int, str]] = []
    froms = [i for i in instructions if i[1] == "FROM"]
    entrypoint = next((i for i in reversed(instructions) if i[1] == "ENTRYPOINT"), None)
    command = next((i for i in reversed(instructions) if i[1] == "CMD"), None)
    for first, keyword, _, _ in instructions:
        if keyword in _BUILDS or (keyword == "FROM" and len(froms) > 1):
            base = _base(instructions)
            raise InputError(
                f"{name}:{first}: the Dockerfile changes its base image ({keyword}), {base}, so what runs is an "
                "image it builds, which a node cannot pull: build and push it, then give --image REF with the "
                "`docker run` that starts it"
            )
    served = _served_by(_base(instructions)) if entrypoint is None and command is not None else None
    if entrypoint is None and (served is None or command is None or _exec(command[3]) is None):
        where = command[0] if command else froms[0][0]
        raise InputError(
            f"{name}:{where}: the Dockerfile gives no ENTRYPOINT, so its base image's own entrypoint decides what "
            "runs; give the `docker run` it amounts to"
        )
    for first, keyword, last, value in instructions:
        if keyword == "FROM":
            lines[first - 1] = shlex.join(["docker", "pull", value.split()[0]])  # read, never run
            notes.append((first, f"FROM {value.split()[0]}: the image the Dockerfile's entrypoint runs in"))
        elif keyword == "ENV":
            lines[first - 1] = " ".join(["export", _env(value)])  # the ENV words as written, read by the import
            notes.append((first, ENV_NOTE))
        elif served is not None and command is not None and (first, keyword) == command[:2]:
            lines[first - 1 : last] = [f"{shlex.join(served)} {_exec(value)}"] + [""] * (last - first)
            notes.append((first, f"CMD read as the arguments of the FROM image's entrypoint, `{' '.join(served)}`"))
        elif entrypoint is not None and (first, keyword) == entrypoint[:2]:
            launch = _exec(value)
            if launch is not None and command is not None and _exec(command[3]) is not None:
                launch += " " + str(_exec(command[3]))  # CMD's words are the exec-form entrypoint's arguments
            if launch is None:  # the shell form: its lines as written, past the keyword
                lines[first - 1] = re.sub(r"^\s*ENTRYPOINT\s+", "", lines[first - 1], flags=re.IGNORECASE)
                for number in range(first + 1, last + 1):
                    if lines[number - 1].lstrip().startswith("#"):  # Docker drops it; the instruction goes on
                        lines[number - 1] = lines[number - 1][: -len(lines[number - 1].lstrip())] + "\\"
                        notes.append((number, "a comment line inside ENTRYPOINT, dropped as Docker drops it"))
            else:
                lines[first - 1 : last] = [launch] + [""] * (last - first)
            notes.append((first, "ENTRYPOINT read as the launch (the FROM image runs it; nothing else is built)"))
        else:
            lines[first - 1 : last] = ["# " + line for line in lines[first - 1 : last]]
    return "\n".join(lines), notes


# A line that is one exec-form ENTRYPOINT or CMD instruction, outside a Dockerfile (a comment quoting it).
_LONE_EXEC = re.compile(r"^\s*(?:ENTRYPOINT|CMD)\s+(\[.*\])\s*$", re.IGNORECASE)


def _lone_launches(text: str, notes: list[tuple[int, str]] | None = None) -> tuple[str, list[tuple[int, str]]]:
    """`text` with each line that is an exec-form ENTRYPOINT or CMD launching a server
    (`ENTRYPOINT ["python3", "-m", "vllm.entrypoints.openai.api_server", …]`, no FROM around it) written as that
    launch's shell line, a note each: it is the command the post runs, so what it lacks (its model) is said.

    Example:
        >>> _lone_launches('It works:\\nENTRYPOINT ["vllm", "serve", "--port", "8000"]\\n')
        ('It works:\\nvllm serve --port 8000\\n', [(2, 'an exec-form ENTRYPOINT of a server, read as its launch')])
    """
    lines = text.split("\n")
    notes = list(notes or [])
    for number, line in enumerate(lines, 1):
        matched = _LONE_EXEC.match(line)
        launch = _exec(matched.group(1)) if matched else None
        if matched is None or launch is None or not any(k.launches(shlex.split(launch)) for k in KINDS.values()):
            continue
        lines[number - 1] = launch
        keyword = line.split()[0].upper()
        notes.append((number, f"an exec-form {keyword} of a server, read as its launch"))
    return "\n".join(lines), notes


def _served_by(image: str) -> tuple[str, ...] | None:
    """The entrypoint of `image` when it is a server's own image whose entrypoint is the server (an exec-form CMD
    is then that server's arguments); None for any other image."""
    kind = next((k for k in KINDS.values() if k.image_entrypoint and image_matches(image, k.images)), None)
    return kind.image_entrypoint if kind is not None else None


def _instructions(text: str) -> list[tuple[int, str, int, str]] | None:
    """(first line, KEYWORD, last line, value) of each instruction, or None when `text` is not a Dockerfile: its
    first instruction is FROM and every one is a Dockerfile keyword (continuation lines, comments, blank lines)."""
    found: list[tuple[int, str, int, str]] = []
    lines = text.split("\n")
    index = 0
    while index < len(lines):
        line = lines[index].strip()
        index += 1
        if not line or line.startswith("#"):
            continue
        match = _INSTRUCTION.match(line)
        keyword = match.group(1).upper() if match else ""
        if keyword not in _KEPT | _BUILDS or (not found and keyword not in ("FROM", "ARG")):
            return None
        first = index
        while lines[index - 1].rstrip().endswith("\\") and index < len(lines):
            index += 1
            while index < len(lines) and lines[index - 1].lstrip().startswith("#"):
                index += 1  # Docker drops a comment line inside an instruction; the instruction goes on
        value = (match.group(2) or "") if match else ""
        rest = [line for line in lines[first:index] if not line.lstrip().startswith("#")]
        found.append((first, keyword, index, value if index == first else "\n".join([value, *rest])))
    return found if any(i[1] == "FROM" for i in found) else None


def _base(instructions: list[tuple[int, str, int, str]]) -> str:
    """The first FROM image, its `${NAME}`s given the defaults of the ARGs before it."""
    defaults: dict[str, str] = {}
    for _, keyword, _, value in instructions:
        if keyword == "ARG" and "=" in value:
            name, _, default = value.strip().partition("=")
            defaults[name] = default.strip('"')
        elif keyword == "FROM":
            return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: defaults.get(m[1] or m[2], m[0]), value.split()[0])
    return ""


def _exec(value: str) -> str | None:
    """An exec-form value (`["vllm", "serve", "m"]`) as one shell line, quoted; None for the shell form."""
    if not value.lstrip().startswith("["):
        return None
    try:
        words = json.loads(value)
    except json.JSONDecodeError:
        return None
    if not isinstance(words, list):
        return None
    if len(words) == 3 and _SHELL.fullmatch(str(words[0])) and re.fullmatch(r"-[a-z]*c", str(words[1])):
        return str(words[2])  # `["bash", "-lc", "CMD …"]`: the shell runs CMD, its variables from the ENV lines
    return shlex.join(str(word) for word in words)


_SHELL = re.compile(r"(?:/usr)?(?:/bin/)?(?:ba)?sh")


def _env(value: str) -> str:
    """`ENV NAME value` (the old form) or `ENV NAME=value …` as `export`'s words."""
    parts = value.split(None, 1)
    if parts and "=" not in parts[0] and len(parts) == 2:
        return f"{parts[0]}={shlex.quote(parts[1])}"
    return value
