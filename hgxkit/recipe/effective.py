"""The address a recipe's server really listens on: its last `--host`, read through `sh -c '…'` wrappers.

A multi-node post often runs `sh -c 'exec sglang serve "$@" --host 0.0.0.0' sh --tp 8 --host 127.0.0.1`: the
recipe's own flags say 127.0.0.1, but the wrapper's program appends `--host 0.0.0.0`, and argparse keeps the
last one. So the wrapper's program is read as the container's shell reads it (`"$@"` is the recipe's
arguments), and every `--host` counts: the exposure policy takes a non-loopback one if any is there. A wrapper
whose program cannot be read (unbalanced quotes, a `--host` whose value is itself an expansion) is refused.

Example:
    >>> from hgxkit.importing.docker_run import import_docker_run
    >>> r = import_docker_run("docker run img sh -c 'exec sglang serve \\"$@\\" --host 0.0.0.0' sh --host 127.0.0.1")
    >>> effective_host(r)
    '0.0.0.0'
    >>> effective_host(import_docker_run("docker run img sglang serve --host 127.0.0.1 --tp 2"))
    '127.0.0.1'
"""

from __future__ import annotations

import posixpath

from hgxkit.errors import InputError
from hgxkit.netaddr import is_loopback
from hgxkit.recipe.shellwords import shell_value, split_words
from hgxkit.recipe.spec import Recipe

SHELLS = frozenset({"sh", "bash", "dash", "ash", "zsh", "ksh"})


def _command(recipe: Recipe) -> list[str]:
    """The container command as the container receives it: program then arguments, literal."""
    return [shell_value(word) for word in recipe.server.program] + [
        shell_value(word) for entry in recipe.server.args for word in entry
    ]


def wrapper_script(command: list[str]) -> tuple[str, list[str]] | None:
    """(program text, its positional words) of a `sh -c SCRIPT [$0 ARGS…]` container command, else None."""
    if not command or posixpath.basename(command[0]) not in SHELLS:
        return None
    for index, word in enumerate(command[1:], start=1):
        if word.startswith("-") and not word.startswith("--") and "c" in word[1:]:
            rest = command[index + 2 :]
            return (command[index + 1] if index + 1 < len(command) else ""), rest[1:]
    return None


def host_values(recipe: Recipe) -> list[str]:
    """Every `--host` value the server gets, in order (the wrapper's program read with `"$@"` as the args).

    Raises InputError for a wrapper whose program cannot be read."""
    stream = _command(recipe)
    wrapped = wrapper_script(stream)
    if wrapped is not None:
        script, args = wrapped
        try:
            words = split_words(script, source="server.command")
        except InputError as err:
            raise InputError(f"the server's sh -c program cannot be read ({err.message.lstrip(': ')})") from None
        stream = []
        for word in words:
            stream += args if word.text in ("$@", "$*") else [word.text]
        stream += args  # the words may reach the server other ways too ($1, a file): count them
    hosts = []
    for index, word in enumerate(stream):
        name, has_equals, inline = word.partition("=")
        if name != "--host":
            continue
        value = inline if has_equals else (stream[index + 1] if index + 1 < len(stream) else "")
        if wrapped is not None and "$" in value.replace("$$", ""):
            raise InputError(f"the server's sh -c program gives --host {shell_value(value)!r}, which its shell decides")
        hosts.append(shell_value(value))
    return hosts


def effective_host(recipe: Recipe) -> str:
    """The address the server listens on: a non-loopback `--host` of a wrapper, else the last `--host`, else
    the kind's default. Raises InputError for a wrapper that cannot be read (see `host_values`)."""
    hosts = host_values(recipe)
    if wrapper_script(_command(recipe)) is not None:
        public = [host for host in hosts if not is_loopback(host)]
        if public:
            return public[-1]
    return hosts[-1] if hosts else recipe.server.server_kind.default_host
