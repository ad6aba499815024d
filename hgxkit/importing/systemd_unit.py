"""A systemd unit (`[Service]` with `ExecStart=`) or a supervisord program (`[program:NAME]` with `command=`) in a
post, read as the shell lines it runs.

A unit that starts a server (`ExecStart=/root/env/bin/vllm serve …`, or `ExecStart=/usr/bin/docker run …`) is
the same setup as those lines in a shell: `Environment=` assignments are exports, `WorkingDirectory=` a `cd`,
`ExecStart=` the command run by `exec` (its `-`, `@`, `+`, `!` prefixes dropped) with its continuation lines.
Every other line of the unit (section headers, `Description=`, `Restart=`, `ExecStartPre=`, `EnvironmentFile=`) is
blanked and set aside. A supervisord program is read the same way: `command=` the command, `environment=`
(`A="1",B="2"`) exports, `directory=` a `cd`, its other keys (`autostart=`, `stdout_logfile=`, …) set aside.
Columns stay where the post has them, so a refusal's line and column are the post's.

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
SUPERVISOR_NOTE = (
    "a supervisord program: read as the shell lines it runs (environment= as exports, directory= as cd, command= "
    "as the command); its other keys set aside"
)
_SECTION = re.compile(r"^\s*\[(?:Unit|Service|Install|program:[^\]]+)\]\s*$")
_KEY = re.compile(r"^(\s*)([A-Za-z][A-Za-z0-9_]*)[ \t]*=")
_DOCKER_PATH = re.compile(r"^\s*/(?:[\w.-]+/)*docker(?=\s)")
# What each key becomes, padded to the key's width so columns stay: `Environment=` -> `export      `; the key
# that holds the command; the section that makes a file of that kind; its note.
_SYSTEMD = ({"Environment": "export", "WorkingDirectory": "cd", "ExecStart": "exec"}, "ExecStart", NOTE)
_SUPERVISOR = ({"environment": "export", "directory": "cd", "command": "exec"}, "command", SUPERVISOR_NOTE)
HEREDOC_NOTE = "an unquoted here-document writes the unit: each line-ending `\\\\` is the one backslash it writes"
_HEREDOC_OPEN = re.compile(r"<<-?[ \t]*(['\"]?)([A-Za-z_][\w-]*)\1[ \t]*(?:[;&|>].*)?$")
# supervisord's `environment=A="1",B="2"`: the commas between pairs, which a shell's `export` reads as spaces.
_PAIR_COMMA = re.compile(r",(?=\s*[A-Za-z_]\w*=)")


def unit_lines(lines: tuple[str, ...]) -> tuple[tuple[str, ...], list[tuple[int, str]]]:
    """`lines` with each systemd unit that has `[Service]` and `ExecStart=`, and each supervisord program with
    `command=`, written as its shell lines, and a note at each one's first line."""
    out, notes = list(lines), []
    index = 0
    while index < len(lines):
        if not _SECTION.match(lines[index]):
            index += 1
            continue
        end = _unit_end(lines, index)
        unit = lines[index:end]
        if _in_unquoted_heredoc(lines, index):  # the file the shell writes: a line's `\\` is one backslash there
            unit = tuple(re.sub(r"\\\\[ \t]*$", lambda m: " \\" + m.group()[2:], line) for line in unit)
            notes.append((index + 1, HEREDOC_NOTE))
        supervisor = any(line.strip().startswith("[program:") for line in unit)
        shape = _SUPERVISOR if supervisor else _SYSTEMD
        keys, command, note = shape
        if (supervisor or any(line.strip() == "[Service]" for line in unit)) and any(
            _key(line) == command for line in unit
        ):
            out[index:end] = _settings_first(_as_shell(unit, keys, command), keys[command])
            notes.append((index + 1, note))
        index = end
    return tuple(out), notes


def _in_unquoted_heredoc(lines: tuple[str, ...], index: int) -> bool:
    """True when line `index` is in the body of a here-document whose delimiter is not quoted (`cat > u << SVC`):
    the shell writes the file with `\\\\` as one backslash and the post's `$NAME`s expanded."""
    for at in range(index - 1, -1, -1):
        opened = _HEREDOC_OPEN.search(lines[at])
        if opened:
            return not opened.group(1) and all(line.strip() != opened.group(2) for line in lines[at + 1 : index])
    return False


def _settings_first(shell: list[str], run: str) -> list[str]:
    """`shell` (a unit's lines as shell lines) with each export or cd written after the command moved into a blank
    line above it: the unit sets them whatever their order, a shell only for what follows."""
    starts = [i for i, line in enumerate(shell) if line.lstrip().startswith(run + " ")]
    if not starts:
        return shell
    end = starts[0]
    while end + 1 < len(shell) and shell[end].rstrip().endswith("\\"):
        end += 1
    free = [i for i in range(starts[0]) if not shell[i].strip()]
    out = list(shell)
    for i in range(end + 1, len(shell)):
        if free and re.match(r"\s*(?:export|cd)\s", shell[i]):
            out[free.pop(0)], out[i] = shell[i], " " * len(shell[i])
    return out


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


def _as_shell(unit: tuple[str, ...], keys: dict[str, str], command: str) -> list[str]:
    out, keep = [], False
    for line in unit:
        if keep:  # a continuation of the command
            out.append(line)
        else:
            match = _KEY.match(line)
            key = match.group(2) if match else None
            if match and key in keys:
                start, end = match.start(2), match.end()
                value = line[end:]
                if key == "ExecStart":
                    stripped = value.lstrip("-@+!:")
                    value = " " * (len(value) - len(stripped)) + stripped
                if key == command:
                    # systemd wants an absolute path (`/usr/bin/docker run …`): the docker CLI as a post names it
                    value = _DOCKER_PATH.sub(lambda m: " " * (len(m.group()) - 6) + "docker", value, count=1)
                if key == "environment":
                    value = _PAIR_COMMA.sub(" ", value)
                word = keys[key]
                out.append(line[:start] + word + " " * (end - start - len(word)) + value)
            else:
                out.append(line if line.strip().startswith("#") else " " * len(line))
            keep = key == command
        keep = keep and line.rstrip().endswith("\\")
    return out
