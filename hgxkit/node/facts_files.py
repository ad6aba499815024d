"""pyinfra facts about files on a node: a small file's text or JSON (hgxkit's records), whether a path is a
file, and where a path really leads (symlinks resolved).

Example (in a deploy):
    from hgxkit.node.facts_files import JsonFile
    host.get_fact(JsonFile, path="/var/lib/hgxkit/serve/image.json")  # a dict, or None when absent
"""

from __future__ import annotations

import json

from pyinfra.api import FactBase, StringCommand

from hgxkit.hostcmd import script, small_file

_ABSENT = "##hgxkit-absent"


class FileText(FactBase[str | None]):
    """A text file's content, or None when it does not exist (for small config and record files)."""

    def command(self, path: str) -> StringCommand:
        return script("if [ -f {path} ]; then cat {path}; else echo {absent}; fi", path=path, absent=_ABSENT)

    def process(self, output: list[str]) -> str | None:
        text = "\n".join(output)
        return None if text.strip() == _ABSENT else text


class JsonFile(FactBase[dict | None]):
    """A JSON object file (a record hgxkit wrote), or None when it is absent or not a JSON object.

    Example: `host.get_fact(JsonFile, path="/var/lib/hgxkit/serve/image.json")`
    """

    def command(self, path: str) -> StringCommand:
        return FileText().command(path)

    def process(self, output: list[str]) -> dict | None:
        text = FileText().process(output)
        try:
            data = json.loads(text) if text else None
        except json.JSONDecodeError:
            return None
        return data if isinstance(data, dict) else None


class RecordFile(JsonFile):
    """`JsonFile` for a record of hgxkit's own (a few hundred bytes, e.g. the image record), read by the shell
    without a `cat` process (`hostcmd.small_file`): it is read on every run."""

    def command(self, path: str) -> StringCommand:
        return script(
            "if [ -f {path} ]; then {read}; else echo {absent}; fi", path=path, read=small_file(path), absent=_ABSENT
        )


class IsFile(FactBase[bool]):
    """True when `path` is a regular file (read-only; e.g. a model's config.json)."""

    def command(self, path: str) -> StringCommand:
        return script("if [ -f {path} ]; then echo yes; else echo no; fi", path=path)

    def process(self, output: list[str]) -> bool:
        return output[-1:] == ["yes"]


class RealPath(FactBase[str | None]):
    """`path` with every symlink resolved on the node (`realpath -m`: the path need not exist yet).

    An absolute path to a folder that exists is resolved by the shell's own `cd -P` and `pwd -P` (what realpath
    prints for it, without starting a program: a no-op re-run reads two of these); anything else by `realpath -m`
    (dash's `cd ''` stays where it is, so an empty or relative path never takes the shell's way)."""

    def command(self, path: str) -> StringCommand:
        return script(
            "{{ case {path} in /*) ( CDPATH= cd -P -- {path} 2>/dev/null && pwd -P ) ;; *) false ;; esac; }} "
            "|| realpath -m -- {path} 2>/dev/null || true",
            path=path,
        )

    def process(self, output: list[str]) -> str | None:
        return output[-1].strip() if output and output[-1].startswith("/") else None
