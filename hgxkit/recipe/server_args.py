"""The container command of a recipe: the server program and its flags, in original spelling.

Each engine's parser accepts aliases (SGLang `--tp`/`--tp-size`, vLLM `-tp`/`--tensor-parallel-size` and
`--x_y` for `--x-y`) and `--flag=value`; `ServerCommand.flag` looks a flag up under any of its spellings, for
the command's server kind (hgxkit/kinds/), so checks and diffs compare meaning.

Example:
    >>> cmd = ServerCommand.from_words(["sglang", "serve", "--tp", "4", "--trust-remote-code"])
    >>> cmd.flag("--tp-size"), cmd.has("--trust-remote-code")
    ('4', True)
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from hgxkit.kinds import DEFAULT_KIND, KINDS, ServerKind, launcher_prefixes

_NEGATIVE_NUMBER = re.compile(r"^-\d+(\.\d+)?$")


def canonical_flag(name: str, kind: str = DEFAULT_KIND) -> str:
    """The canonical spelling of a server flag for its engine (`--tp` -> `--tp-size`; vLLM `-tp`)."""
    return KINDS[kind].canonical_flag(name)


def is_flag(word: str) -> bool:
    """True for `--x`/`-x` words, false for values such as `-1`."""
    return word.startswith("-") and len(word) > 1 and not _NEGATIVE_NUMBER.match(word)


def group_args(words: Sequence[str]) -> list[tuple[str, ...]]:
    """Group flag words with the values that follow them: `--tp 4` is one entry, `--rm` another."""
    entries: list[list[str]] = []
    for word in words:
        if is_flag(word) or not entries or not is_flag(entries[-1][0]):
            entries.append([word])
        else:
            entries[-1].append(word)
    return [tuple(entry) for entry in entries]


def split_program(words: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Split a container command into the program (`sglang serve`, `python3 -m mod`) and its arguments."""
    # Launchers whose first words are the program, not flags (`sglang serve`); anything else is one program word.
    for prefix in launcher_prefixes():
        if tuple(words[: len(prefix)]) == prefix:
            return tuple(words[: len(prefix)]), tuple(words[len(prefix) :])
    if len(words) >= 3 and re.match(r"^python[0-9.]*$", words[0]) and words[1] == "-m":
        return tuple(words[:3]), tuple(words[3:])
    if len(words) >= 2 and words[0] == "-m":  # `--entrypoint python3 IMAGE -m MODULE …`: the interpreter's module
        return tuple(words[:2]), tuple(words[2:])
    if not words or is_flag(words[0]):
        return (), tuple(words)  # no program: the image's entrypoint takes these arguments
    return (words[0],), tuple(words[1:])


@dataclass(frozen=True)
class FlagUse:
    """One flag as the server sees it: canonical name, value (None for a switch), original words."""

    name: str
    value: str | None
    words: tuple[str, ...]


@dataclass(frozen=True)
class ServerCommand:
    """The container command: `program` words, then argument entries in original order and spelling, of a
    server of `kind` (see hgxkit/kinds/; `program` may be empty when the image's entrypoint is it)."""

    program: tuple[str, ...]
    args: tuple[tuple[str, ...], ...]
    kind: str = DEFAULT_KIND

    @classmethod
    def from_words(cls, words: Sequence[str], kind: str = DEFAULT_KIND) -> ServerCommand:
        """The container command `words` of a `kind` server; when the kind's image has the server as its
        entrypoint (vLLM) and the words start with no launch program, they are all its arguments; `-m MODULE`
        first (the image run with `--entrypoint python3`) is the program."""
        server = KINDS[kind]
        if server.image_entrypoint and not server.launches(words) and words[:1] != ["-m"]:
            return cls((), tuple(group_args(words)), kind)
        program, rest = split_program(words)
        return cls(program, tuple(group_args(rest)), kind)

    @property
    def server_kind(self) -> ServerKind:
        return KINDS[self.kind]

    def words(self) -> list[str]:
        """Every word of the command, program first."""
        out = list(self.program)
        for entry in self.args:
            out.extend(entry)
        return out

    def uses(self) -> Iterator[FlagUse]:
        """Each flag with its value, canonically spelled for the kind; a positional model after the launch
        program (`sglang serve M`, `vllm serve M`, or the vLLM image's entrypoint) counts as the model flag."""
        kind = self.server_kind
        for position, entry in enumerate(self.args):
            head = entry[0]
            if not is_flag(head):
                if position == 0 and kind.positional_model and (not self.program or kind.launches(self.program)):
                    yield FlagUse(kind.model_flag, head, entry)
                continue
            name, has_equals, inline = head.partition("=")
            if has_equals:
                value: str | None = inline
            elif len(entry) > 1:
                value = " ".join(entry[1:])
            else:
                value = None
            yield FlagUse(kind.canonical_flag(name), value, entry)

    def model_slot(self) -> bool:
        """True when the command launches a server that takes its model as a positional argument and gives none
        before its first flag nor by its model flag: a bare word among the flags may still be that model (where the
        flag names it, such a word would replace it, so it is no slot)."""
        kind = self.server_kind
        launched = kind.positional_model and (not self.program or kind.launches(self.program))
        named = any(use.name == kind.model_flag for use in self.uses())
        return launched and bool(self.args) and is_flag(self.args[0][0]) and not named

    def flag(self, name: str) -> str | None:
        """The value of the last use of `name` (any alias), or None when absent or a switch."""
        wanted = self.server_kind.canonical_flag(name)
        value = None
        for use in self.uses():
            if use.name == wanted:
                value = use.value
        return value

    def parallel_size(self) -> int:
        """GPUs one server uses over all its hosts: tp x pp x dp, dp not counted where SGLang runs DP attention
        inside the TP group. Raises ValueError naming a size that is not a whole number.

        Example:
            >>> ServerCommand.from_words(["vllm", "serve", "m", "-tp", "4", "-dp", "2"], "vllm").parallel_size()
            8
        """
        kind = self.server_kind
        sizes = []
        for flag in (kind.tp_flag, kind.pp_flag, kind.dp_flag):
            value = self.flag(flag)
            if value is not None and not (value.isascii() and value.isdigit()):
                raise ValueError(f"server {flag} {value!r} is not a whole number")
            sizes.append(int(value) if value is not None else 1)
        if kind.dp_in_tp_flag and self.has(kind.dp_in_tp_flag):
            sizes[2] = 1
        return sizes[0] * sizes[1] * sizes[2]

    def has(self, name: str) -> bool:
        """True when the flag `name` (any alias) appears at all."""
        wanted = self.server_kind.canonical_flag(name)
        return any(use.name == wanted for use in self.uses())
