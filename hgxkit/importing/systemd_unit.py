"""A systemd unit in a post (`[Service]` with `ExecStart=`), read as the shell lines it runs.

A unit that starts a server (`ExecStart=/root/env/bin/vllm serve …`, or `ExecStart=/usr/bin/docker run …`) is
the same setup as those lines in a shell: `Environment=` assignments are exports, `WorkingDirectory=` a `cd`,
`ExecStart=` the command run by `exec` (its `-`, `@`, `+`, `!` prefixes dropped) with its continuation lines.
Every other line of the unit (section headers, `Description=`, `Restart=`, `ExecStartPre=`, `EnvironmentFile=`) is
blanked and set aside. Columns stay where the post has them, so a refusal's line and column are the post's.

Example:
    >>> lines, notes = unit_lines(("[Service]", 'Environment="A=1"', "ExecStart=/env/bin/vllm serve org/m"))
    >>> [line.strip() for line in lines]
    ['', 'export      "A=1"', 'exec      /env/bin/vllm serve org/m']
    >>> notes == [(1, NOTE)]
    True
"""

from __future__ import annotations

import re

NOTE = (
    "a systemd unit: read as the shell lines it runs (Environment= as exports, WorkingDirectory= as cd, ExecStart= "
    "as the command); its other keys set aside"
)
_SECTION = re.compile(r"^\s*\[(?:Unit|Service|Install)\]\s*$")
_KEY = re.compile(r"^(\s*)([A-Za-z][A-Za-z0-9]*)=")
# What each key becomes, padded to the key's width so columns stay: `Environment=` -> `export      `.
_DOCKER_PATH = re.compile(r"^\s*/(?:[\w.-]+/)*docker(?=\s)")
_AS_SHELL = {"Environment": "export", "WorkingDirectory": "cd", "ExecStart": "exec"}


def unit_lines(lines: tuple[str, ...]) -> tuple[tuple[str, ...], list[tuple[int, str]]]:
    """`lines` with each systemd unit that has `[Service]` and `ExecStart=` written as its shell lines, and a note
    at each unit's first line."""
    out, notes = list(lines), []
    index = 0
    while index < len(lines):
        if not _SECTION.match(lines[index]):
            index += 1
            continue
        end = _unit_end(lines, index)
        unit = lines[index:end]
        if any(line.strip() == "[Service]" for line in unit) and any(_key(line) == "ExecStart" for line in unit):
            out[index:end] = _as_shell(unit)
            notes.append((index + 1, NOTE))
        index = end
    return tuple(out), notes


def _key(line: str) -> str | None:
    match = _KEY.match(line)
    return match.group(2) if match else None


def _unit_end(lines: tuple[str, ...], start: int) -> int:
    """The index after a unit's last line: its sections, keys, comments, blank lines and continuations."""
    index, continued = start, False
    while index < len(lines):
        line = lines[index]
        body = line.strip()
        if not (continued or not body or body.startswith(("#", ";")) or _SECTION.match(line) or _key(line)):
            break
        continued = line.rstrip().endswith("\\")
        index += 1
    while index > start + 1 and not lines[index - 1].strip():
        index -= 1
    return index


def _as_shell(unit: tuple[str, ...]) -> list[str]:
    out, keep = [], False
    for line in unit:
        if keep:  # a continuation of the command
            out.append(line)
        else:
            match = _KEY.match(line)
            key = match.group(2) if match else None
            if match and key in _AS_SHELL:
                start, end = match.start(2), match.end()
                value = line[end:]
                if key == "ExecStart":
                    stripped = value.lstrip("-@+!:")
                    value = " " * (len(value) - len(stripped)) + stripped
                    # systemd wants an absolute path (`/usr/bin/docker run …`): the docker CLI as a post names it
                    value = _DOCKER_PATH.sub(lambda m: " " * (len(m.group()) - 6) + "docker", value, count=1)
                word = _AS_SHELL[key]
                out.append(line[:start] + word + " " * (end - start - len(word)) + value)
            else:
                out.append(line if line.strip().startswith("#") else " " * len(line))
            keep = key == "ExecStart"
        keep = keep and line.rstrip().endswith("\\")
    return out
