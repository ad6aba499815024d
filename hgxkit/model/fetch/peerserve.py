"""The one thing a peer key may run on this host: `peer-serve`, answering a read of a host below."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
from typing import Any

from hgxkit.model import core

_STATE_SPLIT = "--hgxkit-result--"


def peer_serve(local_dir: str, state_dir: str, request: list[str], out: Any = None) -> int:
    """Answer one read of a host below this one over SSH: the forced command of its key in authorized_keys
    (`restrict,from=...,command="... peer-serve --dir D --state-dir S"`), so that key can do nothing else.

    `request` is the verb and its words (from SSH_ORIGINAL_COMMAND, whatever the client put before them):
    `state` (the manifest or journal, then the last result), `serve` (this host's fleet server: port and secret),
    `tail OFFSET NAME` (a file of the copy from byte OFFSET: only a name the manifest or journal lists, opened as
    a regular file reached with no symlink followed). Everything is read only; the exit status is 2 on a refusal."""
    out = out if out is not None else sys.stdout.buffer
    name = core.model_name(local_dir)
    words = list(request)
    while len(words) >= 2 and words[0] in ("--dir", "--state-dir"):
        words = words[2:]
    verb = words[0] if words else ""

    def state_text(path: str) -> str:
        with contextlib.suppress(OSError):
            dfd = os.open(os.path.dirname(path), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                fd = core.open_regular(dfd, os.path.basename(path))
            finally:
                os.close(dfd)
            with os.fdopen(fd, "rb") as f:
                return f.read(1 << 20).decode(errors="replace")
        return ""

    def listing() -> str:
        for rel in (core.MANIFEST_NAME, core.JOURNAL_PATH):
            with contextlib.suppress(OSError, ValueError):
                return core.read_under(local_dir, rel)
        return ""

    if verb == "state" and len(words) == 1:
        result = state_text(os.path.join(state_dir, f"{name}.result.json"))
        out.write(f"{listing()}\n{_STATE_SPLIT}\n{result}".encode())
        return 0
    if verb == "serve" and len(words) == 1:
        out.write(state_text(os.path.join(state_dir, f"{name}.serve.json")).encode())
        return 0
    if verb == "tail" and len(words) == 3 and words[1].isdigit() and core.name_problem(words[2]) is None:
        try:
            listed = {str(f.get("path")) for f in json.loads(listing() or "{}").get("files") or []}
        except (ValueError, AttributeError):
            listed = set()
        if words[2] in listed:
            try:
                with core.parent_of(local_dir, words[2]) as (dfd, base):
                    fd = core.open_regular(dfd, base)
            except (OSError, ValueError):
                print(f"hgxkit peer-serve: {words[2]} is not a regular file of {local_dir}", file=sys.stderr)
                return 2
            with os.fdopen(fd, "rb") as f:
                f.seek(int(words[1]))
                shutil.copyfileobj(f, out, core.BUFFER)
            out.flush()
            return 0
    print(
        f"hgxkit peer-serve: refused {' '.join(words)[:200]!r}: not one of state, serve, tail OFFSET NAME "
        f"(a verified file of {local_dir})",
        file=sys.stderr,
    )
    return 2
