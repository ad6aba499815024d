"""What a result file of another benchmark tool holds, and the helpers its readers share: points, numbers, lines.

A *point* is one benchmark run a file reports: the settings the file states (input and output length,
concurrency, request rate, request count; None where it says nothing), its numbers under the recipe's metric
keys and in the recipe's units (ms, tok/s, req/s, s), and where it was read (`FILE:LINE`, what a reference cell's
`sources` hold). Line numbers of JSON values come from walking the text with the standard decoder.

Example:
    >>> text = '{"benchmarks": [\\n  {"a": 1},\\n  {"b": 2}\\n]}'
    >>> [line_of(text, offset) for offset in array_offsets(text, member_offsets(text, 0)["benchmarks"])]
    [2, 3]
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")


@dataclass(frozen=True)
class Point:
    """One run a result file reports: its settings as the file states them, its numbers in recipe units."""

    where: str  # for messages: `rows.json row 12`
    source: str  # `FILE:LINE` for a reference cell's sources
    metrics: dict[str, float | int]
    input_len: int | None = None
    output_len: int | None = None
    concurrency: int | None = None
    request_rate: float | None = None
    num_prompts: int | None = None
    # Published rows: who ran it (hardware, framework, precision, run_url, date, image …) and how the server was
    # split (tp, ep, dp_attention), to pick the rows of one setup.
    identity: dict[str, str] = field(default_factory=dict)
    parallel: dict[str, int | bool] = field(default_factory=dict)

    def settings(self) -> str:
        """The settings the file states, for messages: `input 8192, output 1024, concurrency 4`."""
        named = (
            ("input", self.input_len),
            ("output", self.output_len),
            ("concurrency", self.concurrency),
            ("rate", self.request_rate),
            ("requests", self.num_prompts),
        )
        said = [f"{name} {value:g}" for name, value in named if value is not None]
        return ", ".join(said) or "no settings"


@dataclass(frozen=True)
class ResultFile:
    """A result file read: its format, the tool and version that wrote it, what its metrics mean, its points."""

    name: str
    format: str  # AIPerf, GenAI-Perf, GuideLLM, InferenceX rows, result blocks
    tool: str  # `AIPerf 0.8.0`
    definitions: str  # how the tool's metrics were mapped, for the reference's notes
    points: list[Point]
    notes: list[str] = field(default_factory=list)


def count_or_none(value: object) -> int | None:
    """A positive whole number from a file (`4`, `4.0`, `"4"`), or None for anything else (`inf`, `not set`)."""
    number = number_or_none(value)
    if number is None or number <= 0 or number != int(number):
        return None
    return int(number)


def rate_or_none(value: object) -> float | None:
    """A finite positive request rate, or None (`inf` means every request at once: no rate)."""
    number = number_or_none(value)
    return number if number is not None and number > 0 else None


def number_or_none(value: object) -> float | None:
    """A finite number from JSON (numbers, or numbers written as strings, as old GenAI-Perf did), else None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.replace(",", ""))
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


def dig(data: object, *keys: str | int) -> Any:
    """`data[k1][k2]…`, or None where a level is missing or not a container."""
    for key in keys:
        if isinstance(data, dict) and isinstance(key, str):
            data = data.get(key)
        elif isinstance(data, list) and isinstance(key, int) and -len(data) <= key < len(data):
            data = data[key]
        else:
            return None
    return data


def file_label(name: str) -> str:
    """The file's name as a reference's `sources` write it (no directory, no `:`)."""
    return PurePath(name).name.replace(":", "_")[:200] or "result"


def line_of(text: str, offset: int) -> int:
    """The 1-based line of `offset` in `text`."""
    return text.count("\n", 0, offset) + 1


def member_offsets(text: str, start: int) -> dict[str, int]:
    """Where each member's value starts in the JSON object that opens at `text[start]` (valid JSON)."""
    offsets: dict[str, int] = {}
    pos = _SPACE.match(text, start + 1).end()  # type: ignore[union-attr]
    while text[pos] != "}":
        key, pos = _DECODER.raw_decode(text, pos)
        pos = _SPACE.match(text, pos).end() + 1  # type: ignore[union-attr]  # past ':'
        pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
        offsets.setdefault(key, pos)
        _, pos = _DECODER.raw_decode(text, pos)
        pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
        if text[pos] == ",":
            pos = _SPACE.match(text, pos + 1).end()  # type: ignore[union-attr]
    return offsets


def array_offsets(text: str, start: int) -> list[int]:
    """Where each element starts in the JSON array that opens at `text[start]` (valid JSON)."""
    offsets = []
    pos = _SPACE.match(text, start + 1).end()  # type: ignore[union-attr]
    while text[pos] != "]":
        offsets.append(pos)
        _, pos = _DECODER.raw_decode(text, pos)
        pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
        if text[pos] == ",":
            pos = _SPACE.match(text, pos + 1).end()  # type: ignore[union-attr]
    return offsets


def json_start(text: str) -> int:
    """Where the document's top-level value starts."""
    return _SPACE.match(text).end()  # type: ignore[union-attr]
