"""A small YAML subset for ``vllm serve --config FILE.yaml`` in a python3-only image (no PyYAML there).

Supported: block mappings nested by indentation, block lists of scalars (``- item``), flow collections written
as JSON (``[1, 2]``, ``{"a": 1}``), scalars (ints, floats, ``true/false/yes/no``, ``null/~``, quoted or plain
strings) and ``#`` comments. That covers vLLM's config files (flat ``key: value`` plus nested
``speculative-config:`` blocks). Anything else raises ``ValueError`` naming the line.

Example:
    >>> load("port: 8001\\nspeculative-config:\\n  method: mtp\\n  num_speculative_tokens: 3\\n")
    {'port': 8001, 'speculative-config': {'method': 'mtp', 'num_speculative_tokens': 3}}
"""

from __future__ import annotations

import json
import re
from typing import Any

_INT = re.compile(r"[-+]?\d+")
_FLOAT = re.compile(r"[-+]?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?")


def scalar(text: str) -> Any:
    """One YAML scalar (or a JSON flow collection)."""
    text = text.strip()
    if not text or text in ("~", "null", "Null", "NULL"):
        return None
    if text in ("true", "True", "TRUE", "yes", "Yes", "on", "On"):
        return True
    if text in ("false", "False", "FALSE", "no", "No", "off", "Off"):
        return False
    if text[0] in "[{":
        return json.loads(text)
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return json.loads(text) if text[0] == '"' else text[1:-1].replace("''", "'")
    if _INT.fullmatch(text):
        return int(text)
    if _FLOAT.fullmatch(text):
        return float(text)
    return text


def _strip_comment(line: str) -> str:
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i].rstrip()
    return line.rstrip()


def load(text: str) -> Any:
    """Parse `text` (see the module doc for the subset)."""
    lines = [(n, _strip_comment(raw)) for n, raw in enumerate(text.splitlines(), 1)]
    lines = [(n, line) for n, line in lines if line.strip() and line.strip() != "---"]
    value, end = _block(lines, 0, 0)
    if end != len(lines):
        raise ValueError(f"YAML line {lines[end][0]}: unexpected indentation")
    return value


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _block(lines: list[tuple[int, str]], i: int, indent: int) -> tuple[Any, int]:
    if i >= len(lines):
        return None, i
    if lines[i][1].strip().startswith("- "):
        out_list: list[Any] = []
        while i < len(lines) and _indent(lines[i][1]) == indent and lines[i][1].strip().startswith("- "):
            out_list.append(scalar(lines[i][1].strip()[2:]))
            i += 1
        return out_list, i
    out: dict[str, Any] = {}
    while i < len(lines) and _indent(lines[i][1]) == indent:
        number, line = lines[i]
        key, sep, rest = line.strip().partition(":")
        if not sep:
            raise ValueError(f"YAML line {number}: expected 'key: value'")
        key = str(scalar(key))
        i += 1
        if rest.strip():
            out[key] = scalar(rest)
        elif i < len(lines) and _indent(lines[i][1]) > indent:
            out[key], i = _block(lines, i, _indent(lines[i][1]))
        elif i < len(lines) and _indent(lines[i][1]) == indent and lines[i][1].strip().startswith("- "):
            out[key], i = _block(lines, i, indent)
        else:
            out[key] = None
    return out, i
