"""Files hgxkit writes on a host, written atomically: to a temporary name beside the target, then renamed,
so a reader (dockerd reading daemon.json, the next run reading a record) never sees half a file, and an
interrupted write leaves the old file in place.

Plan time (an operation, only when the content differs):
    put_text(name="Docker daemon.json", path="/etc/docker/daemon.json", text=new_text, current=old_text)
Execute time (inside a `python.call` callback):
    write_text(HostRunner(host), "/var/lib/hgxkit/serve/image.json", json.dumps(record) + "\\n")
"""

from __future__ import annotations

import importlib.util
import posixpath

from pyinfra.api import StringCommand
from pyinfra.operations import server

from hgxkit.hostcmd import HostRunner, script


def program_text(module: str) -> str:
    """The source of `module`, a standard-library-only program that a host runs (fed to its python3), read from
    its file: importing it would load what only the host uses (http.client, urllib.request) on every run."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(module)
    with open(spec.origin, encoding="utf-8") as handle:
        return handle.read()


def write_command(path: str, mode: str = "0644") -> StringCommand:
    """The command that writes stdin to `path` atomically with `mode` (its directory is created, 0700 when new:
    the umask is 077 until the file's own mode is set)."""
    if not (len(mode) == 4 and set(mode) <= set("01234567")):
        raise ValueError(f"file mode {mode!r}: use four octal digits, e.g. 0644")
    tmp = f"{path}.hgxkit-tmp"
    # The temporary name is fixed, so an interrupted write leaves one file that the next write replaces; it is
    # removed first (rm never follows a link), then created with `set -C` (a regular file or a dangling link that
    # appears there in between makes the write fail), so a symlink sitting at that name never redirects the write.
    return script(
        "umask 077 && mkdir -p {dir} && rm -f {tmp} && ( set -C && cat > {tmp} ) && chmod {mode} {tmp} && "
        "mv -f {tmp} {path}",
        dir=posixpath.dirname(path) or "/",
        tmp=tmp,
        mode=mode,
        path=path,
    )


def put_text(*, name: str, path: str, text: str, current: str | None, mode: str = "0644"):  # -> OperationMeta
    """An operation writing `text` to `path` atomically, or none when `current` (the file's content now,
    from the FileText fact) already equals it. Returns the operation (for `_if`), or None."""
    if current is not None and current.rstrip("\n") == text.rstrip("\n"):
        return None
    return server.shell(name=name, commands=[write_command(path, mode)], _stdin=text)


def write_text(run: HostRunner, path: str, text: str, mode: str = "0644") -> bool:
    """Write `text` to `path` atomically now (execute time); True when it worked."""
    ok, _ = run.status(write_command(path, mode), _stdin=text)
    return ok
