"""Schema versions of archived JSON: check one before reading it.

Example:
    >>> check_schema_version({"schema_version": 2}, (1, 2), "summary.json")
    2
"""

from __future__ import annotations

from typing import Any

from hgxkit.errors import InputError


def check_schema_version(data: Any, readable: tuple[int, ...], source: str) -> int:
    """The document's schema_version, or InputError naming the file when this hgxkit cannot read it."""
    if not isinstance(data, dict):
        raise InputError(f"{source}: not a JSON object; the archive file is damaged")
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise InputError(f"{source}: schema_version is {version!r}, not a number; the archive file is damaged")
    if version > max(readable):
        raise InputError(
            f"{source}: schema_version {version} is newer than this hgxkit reads (up to {max(readable)}); "
            "upgrade hgxkit to read it"
        )
    if version not in readable:
        raise InputError(f"{source}: unknown schema_version {version} (readable: {readable})")
    return version
