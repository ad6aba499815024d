"""A Podman Quadlet unit (a `.container` file: `[Container]` with `Image=`) in a post, read as the `podman run`
that systemd runs for it.

Quadlet writes the container's options as keys: `Image=` the image, `Exec=` the arguments after it (the image's
entrypoint runs them), `PodmanArgs=` options as written, and one key per common option (`PublishPort=` is `-p`,
`Volume=` `-v`, `Environment=` `-e` per assignment, `AddDevice=` `--device`, …). `Secret=NAME,type=env,target=VAR`
hands the container the secret as VAR, which is `-e VAR` taken from the environment. The unit's other keys
(`User=`, `Label=`, health checks) and sections (`[Unit]`, `[Service]`, `[Install]`) are set aside with one note.

The command is written on the `[Container]` section's own lines, continued with backslashes: the header becomes
`podman run`, each option key its option, every other line a bare continuation, and the section's last line
takes the image and the `Exec=` arguments after its own option (options come before the image).

Example:
    >>> unit = ("[Container]", "Image=vllm/vllm-openai:latest", "PublishPort=8000:8000", "Exec=--model org/m")
    >>> lines, notes = quadlet_lines(unit)
    >>> [line.strip() for line in lines]
    ['podman run \\\\', '\\\\', '-p 8000:8000 \\\\', 'vllm/vllm-openai:latest --model org/m']
    >>> notes[0][0]
    1
"""

from __future__ import annotations

import re
import shlex

NOTE = (
    "a Podman Quadlet unit: its [Container] keys read as the `podman run` systemd runs (Image= the image, Exec= "
    "its arguments, PodmanArgs= as written, PublishPort=, Volume=, Environment=, AddDevice= and the like as their "
    "options); its other keys and sections set aside"
)
_SECTION = re.compile(r"^\s*\[([A-Za-z]+)\]\s*$")
_KEY = re.compile(r"^\s*([A-Za-z][A-Za-z0-9]*)[ \t]*=[ \t]*(.*?)\s*$")
# Quadlet's keys that are one `podman run` option each, with a value.
_OPTIONS = {
    "PublishPort": "-p",
    "Volume": "-v",
    "AddDevice": "--device",
    "ContainerName": "--name",
    "Network": "--network",
    "ShmSize": "--shm-size",
    "EnvironmentFile": "--env-file",
    "Entrypoint": "--entrypoint",
    "HostName": "--hostname",
    "Ulimit": "--ulimit",
    "Tmpfs": "--tmpfs",
    "Mount": "--mount",
    "WorkingDir": "--workdir",
}


def quadlet_lines(lines: tuple[str, ...]) -> tuple[tuple[str, ...], list[tuple[int, str]]]:
    """`lines` with each Quadlet unit's `[Container]` section written as its `podman run` and the unit's other
    lines blanked, and a note at the section's first line; a post with no such section as it is."""
    out, notes = list(lines), []
    for start in [n for n, line in enumerate(lines) if _section(line) == "Container"]:
        end = _section_end(lines, start)
        keys = [(n, m.group(1), m.group(2)) for n in range(start + 1, end) if (m := _KEY.match(lines[n]))]
        image = next((value for _, key, value in keys if key == "Image"), None)
        if not image:
            continue
        for index in _unit_span(lines, start):
            out[index] = ""
        out[start] = "podman run \\"
        for index in range(start + 1, end):
            out[index] = "  \\"
        for index, key, value in keys:
            words = _option_words(key, value)
            if words:
                out[index] = "  " + shlex.join(words) + " \\"
        exec_args = next((value for _, key, value in keys if key == "Exec"), "")
        tail = out[end - 1].removesuffix("\\").rstrip() if end - 1 > start else ""
        out[end - 1] = f"{tail or ' '} {image} {exec_args}".rstrip()
        notes.append((start + 1, NOTE))
    return tuple(out), notes


def _section(line: str) -> str | None:
    match = _SECTION.match(line)
    return match.group(1) if match else None


def _section_end(lines: tuple[str, ...], start: int) -> int:
    """The index after the section's last key: before the next section, trailing blank and comment lines left."""
    end = next((n for n in range(start + 1, len(lines)) if _section(lines[n]) or not _unit_line(lines[n])), len(lines))
    while end > start + 1 and not _KEY.match(lines[end - 1]):
        end -= 1
    return end


def _unit_span(lines: tuple[str, ...], start: int) -> range:
    """The unit's lines around its `[Container]` section: its other sections, keys, comments and blank lines."""
    first = start
    while first > 0 and _unit_line(lines[first - 1]):
        first -= 1
    while first < start and not (_section(lines[first]) or lines[first].lstrip().startswith(("#", ";"))):
        first += 1  # a blank line or a key before the unit's first section is the post's, not the unit's
    last = start + 1
    while last < len(lines) and _unit_line(lines[last]):
        last += 1
    return range(first, last)


def _unit_line(line: str) -> bool:
    body = line.strip()
    return not body or body.startswith(("#", ";")) or bool(_section(line) or _KEY.match(line))


def _option_words(key: str, value: str) -> list[str]:
    """The `podman run` words of one Quadlet key (none for the image, the arguments and keys set aside)."""
    if key in _OPTIONS:
        return [_OPTIONS[key], value]
    if key == "PodmanArgs":
        return _split(value)
    if key == "Environment":
        return [word for assignment in _split(value) for word in ("-e", assignment)]
    if key == "Secret":
        fields = dict(part.partition("=")[::2] for part in value.split(",")[1:])
        return ["-e", fields.get("target") or value.split(",")[0]] if fields.get("type") == "env" else []
    return []


def _split(value: str) -> list[str]:
    """A key's words as systemd splits them; a value whose quotes do not close is kept as one word, for the shell
    reader to refuse where the post has it."""
    try:
        return shlex.split(value)
    except ValueError:
        return [value]
