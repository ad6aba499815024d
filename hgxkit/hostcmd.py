"""The one way hgxkit builds and runs a command on a host: every data value is quoted here, nowhere else.

A command is either an argv (`argv("docker", "rm", "-f", name)`: each word quoted) or a fixed shell text
written in hgxkit's source with named slots (`script("test -f {path} && echo yes || true", path=p)`: each
value quoted; a slot may also hold another command, which is inserted as it is). Recipe values, inventory
data, facts and anything a mirror or peer sent are only ever slot values or argv words, so no value can
become shell syntax. Both return pyinfra's `StringCommand`, which facts, operations (`server.shell`) and
`host.run_shell_command` take as they are.

Example:
    >>> str(argv("docker", "rm", "-f", "dsv4-0;touch /tmp/p"))
    "docker rm -f 'dsv4-0;touch /tmp/p'"
    >>> str(script("test -f {path} && echo present || true", path="/data/models/x y/config.json"))
    "test -f '/data/models/x y/config.json' && echo present || true"
    >>> str(script("{cmd} 2>&1", cmd=argv("docker", "logs", "--tail", "20", "c")))
    'docker logs --tail 20 c 2>&1'

On a host (pyinfra, execute time): `run = HostRunner(host); run(argv("nvidia-smi", "-L"))` gives stdout lines.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from string import Formatter
from typing import Any

from pyinfra.api import QuoteString, StringCommand
from pyinfra.api.arguments import CONNECTOR_ARGUMENT_KEYS, pop_global_arguments

Word = str | int | float


def argv(*words: Word) -> StringCommand:
    """A command from its words, each quoted for a POSIX shell (`shlex.quote`)."""
    for word in words:
        if not isinstance(word, str | int | float) or isinstance(word, bool):
            raise TypeError(f"argv words are strings or numbers, not {type(word).__name__}")
    return StringCommand(*(QuoteString(str(word)) for word in words))


def script(template: str, /, **values: Word | StringCommand | Sequence[Word]) -> StringCommand:
    """Fixed shell text (`template`, written in hgxkit's source) with `{name}` slots filled by quoted values.

    A value may be a word (quoted), a list of words (each quoted, joined by spaces) or a command built by
    `argv`/`script` (inserted as it is: it is already safe). `{{`/`}}` are literal braces.
    """
    bits: list[object] = []
    for literal, field, spec, conversion in Formatter().parse(template):
        if literal:
            bits.append(literal)
        if field is None:
            continue
        if spec or conversion or not field.isidentifier():
            raise ValueError(f"script slot {{{field}}}: use plain {{name}} slots only")
        if field not in values:
            raise KeyError(f"script slot {{{field}}} has no value")
        bits.append(_slot(values[field]))
    unused = set(values) - {f for _, f, _, _ in Formatter().parse(template) if f}
    if unused:
        raise KeyError(f"script values without a slot: {', '.join(sorted(unused))}")
    return StringCommand(*bits, _separator="")


def _slot(value: object) -> object:
    if isinstance(value, StringCommand):
        return value
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        return QuoteString(str(value))
    if isinstance(value, list | tuple):
        return StringCommand(*(QuoteString(str(_word(v))) for v in value))
    raise TypeError(f"script values are words, word lists or commands, not {type(value).__name__}")


def _word(value: object) -> Word:
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        return value
    raise TypeError(f"script list items are words, not {type(value).__name__}")


def variable(name: str) -> StringCommand:
    """A shell variable name for a `script` slot, inserted as it is (`{name}=…`, `"${name}"`); only
    `[A-Za-z_][A-Za-z0-9_]*` is accepted, so it can never carry shell syntax."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ValueError(f"{name!r} is not a shell variable name")
    return StringCommand(name)


def small_file(path: str) -> StringCommand:
    """Print a small text file (a record hgxkit wrote, a line of /proc) with the shell's own `read`: no `cat`
    process, which costs a node ~1 ms of CPU per read on every run. A missing file prints nothing and gives a
    non-zero status (redirect stderr around it, as for cat). Small files only: the shell reads a byte per system
    call, so a manifest or a log stays `cat`'s."""
    return script('while IFS= read -r line || [ -n "$line" ]; do printf \'%s\\n\' "$line"; done < {path}', path=path)


def text(command: StringCommand) -> str:
    """The command as the host's shell receives it (for scripts written to a file, e.g. a systemd unit's)."""
    return command.get_raw_value()


class HostRunner:
    """Runs `argv`/`script` commands on a pyinfra host now (execute time) with the host's connector arguments
    (`_sudo`, `_sudo_user`, … from inventory data), and returns their stdout lines.

    Example (inside a `python.call` callback):
        run = HostRunner(host)
        lines = run(argv("docker", "inspect", "-f", "{{.State.Running}}", name))
        ok, lines = run.status(script("systemctl is-active --quiet {unit}", unit=unit))
    """

    def __init__(self, host: Any) -> None:
        self.host = host

    def connector_arguments(self, **extra: Any) -> dict[str, Any]:
        """The connector arguments (`_sudo`, `_sudo_user`, …) the host's data gives, plus `extra`."""
        arguments, _ = pop_global_arguments(self.host.state, self.host, dict(extra))
        return {k: v for k, v in arguments.items() if k in CONNECTOR_ARGUMENT_KEYS}

    def status(self, command: StringCommand, **connector_arguments: Any) -> tuple[bool, list[str]]:
        """Run `command`; return (exit status 0, stdout lines)."""
        if not isinstance(command, StringCommand):
            raise TypeError("host commands are built with hgxkit.hostcmd.argv() or script(), never from a str")
        ok, output = self.host.run_shell_command(command, **self.connector_arguments(**connector_arguments))
        return bool(ok), list(output.stdout_lines)

    def __call__(self, command: StringCommand, **connector_arguments: Any) -> list[str]:
        """Run `command`; return its stdout lines whatever its exit status."""
        return self.status(command, **connector_arguments)[1]


class SecretLines(list):
    """Stdin lines (`_stdin=SecretLines([token])`) that print as `***`: pyinfra logs a command's arguments,
    `_stdin` included, with -vv, so a secret goes to a host only inside one of these.

    >>> str(SecretLines(["hf_xyz"])), f"{SecretLines(['hf_xyz'])}", repr(SecretLines(["hf_xyz"]))
    ('***', '***', '***')
    """

    def __repr__(self) -> str:
        return "***"

    __str__ = __repr__
