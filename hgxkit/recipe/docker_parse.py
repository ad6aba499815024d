"""Parse a posted `docker run` command into option entries, the image, and the container command.

Parsing follows Docker's own flag parser (pflag, interspersed off): options until the first word that is not
an option, which is the image; everything after the image belongs to the container, untouched. Each option
entry keeps the exact words it was written as (`--ipc=host`, `--shm-size 32g`, `-dit`), so rendering gives
back the original command token for token.

Example:
    >>> run = parse_docker_run("docker run --rm -it --gpus all img:1 serve --tp 4")
    >>> run.image, run.command
    ('img:1', ('serve', '--tp', '4'))
    >>> [use.option.name for entry in run.entries for use in entry.uses]
    ['--rm', '--interactive', '--tty', '--gpus']
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hgxkit.errors import InputError
from hgxkit.recipe.docker_options import DockerOption, lookup_long, lookup_short
from hgxkit.recipe.shellwords import Word, split_words
from hgxkit.secrets import redact

_BOOL_VALUES = frozenset({"true", "false", "1", "0", "t", "f", "True", "False", "TRUE", "FALSE"})


@dataclass(frozen=True)
class OptionUse:
    """One option as Docker sees it, with its value (None for a boolean given without `=value`)."""

    option: DockerOption
    value: str | None


@dataclass(frozen=True)
class OptionEntry:
    """Consecutive words that form one or more options: `--name x`, `--ipc=host`, `-dit`, `-p 80:80`."""

    words: tuple[str, ...]
    uses: tuple[OptionUse, ...]

    @classmethod
    def long(cls, name: str, value: str | None = None) -> OptionEntry:
        """A new entry `--name value` (or the switch `--name`), e.g. `OptionEntry.long("--label", "a=b")`."""
        option = lookup_long(name)
        if option is None:
            raise ValueError(f"{name} is not a docker run option")
        words = (name,) if value is None else (name, value)
        return cls(words, (OptionUse(option, value),))

    def with_value(self, use_index: int, new_value: str) -> OptionEntry:
        """This entry with one option's value replaced; the value always ends the entry's last word."""
        old = self.uses[use_index].value or ""
        last = self.words[-1]
        if not last.endswith(old):  # pragma: no cover - guarded by the parser's construction of entries
            raise AssertionError(f"value {old!r} is not at the end of {last!r}")
        words = (*self.words[:-1], last[: len(last) - len(old)] + new_value)
        uses = list(self.uses)
        uses[use_index] = OptionUse(uses[use_index].option, new_value)
        return OptionEntry(words, tuple(uses))


@dataclass(frozen=True)
class ParsedRun:
    """A `docker run` command split into its parts, each in original spelling and order."""

    invocation: tuple[str, ...]
    entries: tuple[OptionEntry, ...]
    image: str
    command: tuple[str, ...]

    def argv(self) -> list[str]:
        """The words a shell would pass for this command."""
        words = list(self.invocation)
        for entry in self.entries:
            words.extend(entry.words)
        words.append(self.image)
        words.extend(self.command)
        return words


class _Cursor:
    """Walks the words of one command, naming positions in errors."""

    def __init__(self, words: Sequence[Word], source: str, first_index: int = 1) -> None:
        self.words = words
        self.source = source
        self.first_index = first_index
        self.pos = 0

    def error(self, word: Word | None, problem: str) -> InputError:
        if word is None:
            return InputError(f"{self.source}: {problem}")
        index = self.words.index(word) + self.first_index
        shown = redact(word.text)
        return InputError(f"{self.source}: token {index} {shown!r} ({word.where()}): {problem}")


def parse_docker_run(text: str, *, source: str = "<input>") -> ParsedRun:
    """Parse one `docker run` command as people post it; raise `InputError` naming the bad token."""
    return parse_run_words(split_words(text, source=source), source=source)


def parse_run_words(words: Sequence[Word], *, source: str = "<input>") -> ParsedRun:
    """Parse the lexed words of one `docker run` command (positions are kept for errors)."""
    for word in words:
        if word.is_operator:
            cursor = _Cursor(words, source)
            raise cursor.error(
                word,
                "shell operator; import one plain `docker run` command (drop pipes, `&&`, redirections, `$(…)`)",
            )
    if not words:
        raise InputError(f"{source}: empty input; paste a `docker run …` command")
    cursor = _Cursor(words, source)
    invocation = _read_invocation(cursor)
    entries = _read_entries(cursor, stop_at_positional=True)
    if cursor.pos >= len(words):
        last = words[-1]
        raise cursor.error(last, "missing image after the docker options; add the image to run")
    image = words[cursor.pos].text
    command = tuple(word.text for word in words[cursor.pos + 1 :])
    return ParsedRun(invocation, tuple(entries), image, command)


def parse_option_words(words: Sequence[str], *, source: str) -> tuple[OptionEntry, ...]:
    """Parse words that must all be docker options (one `docker.options` item of a recipe)."""
    cursor = _Cursor([Word(text, 1, 1, False) for text in words], source)
    entries = _read_entries(cursor, stop_at_positional=False)
    return tuple(entries)


def _read_invocation(cursor: _Cursor) -> tuple[str, ...]:
    words = cursor.words
    texts = [word.text for word in words]
    start = 0
    while start < len(texts) and texts[start] in ("sudo", "-E"):
        start += 1
    if texts[start : start + 2] == ["docker", "run"]:
        end = start + 2
    elif texts[start : start + 3] == ["docker", "container", "run"]:
        end = start + 3
    else:
        raise cursor.error(
            words[min(start, len(words) - 1)],
            "not a `docker run` command; the input must start with `docker run` (or `docker container run`)",
        )
    cursor.pos = end
    # `sudo` is how the poster ran it, not part of the setup: the recipe keeps `docker run` only.
    return tuple(texts[start:end])


def _read_entries(cursor: _Cursor, *, stop_at_positional: bool) -> list[OptionEntry]:
    entries: list[OptionEntry] = []
    words = cursor.words
    while cursor.pos < len(words):
        word = words[cursor.pos]
        text = word.text
        if text == "--" and not word.quoted:
            entries.append(OptionEntry(("--",), ()))
            cursor.pos += 1
            if stop_at_positional:
                return entries
            continue
        if text.startswith("--") and len(text) > 2:
            entries.append(_read_long(cursor, word))
        elif text.startswith("-") and len(text) > 1:
            entries.append(_read_short_cluster(cursor, word))
        elif stop_at_positional:
            return entries
        else:
            raise cursor.error(word, "not a docker option; each `docker.options` item must be options only")
    return entries


def _read_long(cursor: _Cursor, word: Word) -> OptionEntry:
    name, has_equals, inline = word.text.partition("=")
    option = lookup_long(name)
    if option is None:
        raise cursor.error(word, "unknown docker run option; check its spelling against `docker run --help`")
    cursor.pos += 1
    if not option.takes_value:
        if has_equals and inline not in _BOOL_VALUES:
            raise cursor.error(word, f"{name} is a switch; give it no value or =true/=false")
        return OptionEntry((word.text,), (OptionUse(option, inline if has_equals else None),))
    if has_equals:
        return OptionEntry((word.text,), (OptionUse(option, inline),))
    value_word = _take_value(cursor, word, option)
    return OptionEntry((word.text, value_word.text), (OptionUse(option, value_word.text),))


def _read_short_cluster(cursor: _Cursor, word: Word) -> OptionEntry:
    text = word.text
    uses: list[OptionUse] = []
    cursor.pos += 1
    index = 1
    while index < len(text):
        letter = text[index]
        option = lookup_short(letter)
        if option is None:
            raise cursor.error(
                word, f"unknown docker run option -{letter}; check its spelling against `docker run --help`"
            )
        index += 1
        if not option.takes_value:
            uses.append(OptionUse(option, None))
            continue
        rest = text[index:]
        if rest.startswith("=") and len(rest) > 1:  # pflag: `-h=x` is x, but `-h=` alone is the value "="
            rest = rest[1:]
        if rest:
            uses.append(OptionUse(option, rest))
            return OptionEntry((text,), tuple(uses))
        value_word = _take_value(cursor, word, option)
        uses.append(OptionUse(option, value_word.text))
        return OptionEntry((text, value_word.text), tuple(uses))
    return OptionEntry((text,), tuple(uses))


def _take_value(cursor: _Cursor, word: Word, option: DockerOption) -> Word:
    if cursor.pos >= len(cursor.words):
        raise cursor.error(word, f"{option.name} is missing its value")
    value_word = cursor.words[cursor.pos]
    name = value_word.text.partition("=")[0]
    if not value_word.quoted and name.startswith("--") and lookup_long(name) is not None:
        raise cursor.error(word, f"{option.name} is missing its value (the next word {name} is an option)")
    cursor.pos += 1
    return value_word
