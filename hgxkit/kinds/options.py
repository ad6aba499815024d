"""Whether an engine's argument parser knows a flag, from the option tables read from the real engines.

Each table (`hgxkit.engines.vllm_serve`: vLLM 0.33.0; `hgxkit.engines.sglang_serve`: SGLang 0.5.23) is read from
the engine's real parser by tools/gen_engine_options.py; the stand-ins parse with the same tables. A flag is
looked up the way that parser reads it: `=value` is split off, and argparse's prefix abbreviations hold
(`--max-model` is `--max-model-len`; a prefix of two options is ambiguous and refused). vLLM's parser also turns
underscores before the first `.` into dashes and reads `--key.sub value` as a key of `--key`; SGLang's plain
argparse does neither. Single-dash words (`-tp`, `-O3`) are not looked up. A table only judges an image that
runs its version: the official image at `latest`, untagged, or tagged with that version; another version's
options are not known here, and a flag the table lacks is then said to be unchecked, not refused. Each flag's
value count is judged by its nargs (`value_count`): a flag that takes a value given none, or one of a single value
given more words than the positional model can take; on another version only a flag that ends the command with no
value is judged (a cut copy), by its full name, as the table's options seldom turn from a value to a switch.

Example:
    >>> VLLM_OPTIONS.unknown_option("--log-requests"), VLLM_OPTIONS.unknown_option("--max_model_len=4k")
    ('no such option', None)
    >>> SGLANG_OPTIONS.unknown_option("--tp"), SGLANG_OPTIONS.unknown_option("--max_running_requests")
    (None, 'no such option')
    >>> SGLANG_OPTIONS.applies("lmsysorg/sglang:v0.5.23-cu129"), SGLANG_OPTIONS.applies("lmsysorg/sglang:v0.4.9")
    (True, False)
    >>> SGLANG_OPTIONS.nearest("--enable-metric")
    '--enable-metrics'
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from hgxkit.imageref import image_version, repository


def _vllm_rows() -> tuple[Any, ...]:
    from hgxkit.engines.vllm_serve import SERVE_OPTIONS  # facts about 0.33's CLI, no engine code

    return SERVE_OPTIONS


def _sglang_rows() -> tuple[Any, ...]:
    from hgxkit.engines.sglang_serve import SERVE_OPTIONS  # facts about 0.5.23's CLI, no engine code

    return SERVE_OPTIONS


def _vllm_config_choices() -> dict[str, tuple[str, ...]]:
    from hgxkit.engines.vllm_serve import CONFIG_CHOICES  # what 0.33's config checks after parsing

    return CONFIG_CHOICES


def _vllm_config_keys() -> dict[str, tuple[str, tuple[str, ...], str]]:
    from hgxkit.engines.vllm_serve import CONFIG_KEY_CHOICES  # the KV connectors 0.33's factory registers

    return CONFIG_KEY_CHOICES


# Value types a choice is compared after: argparse converts the word, then checks it is in the list.
_COMPARED = {"str": str, "opt:str": str, "int": str, "lower_underscore": lambda w: w.lower().replace("-", "_")}


@cache
def _choices(
    rows: Callable[[], tuple[Any, ...]], config: Callable[[], dict[str, tuple[str, ...]]] | None
) -> dict[str, tuple[tuple[str, ...], str, str]]:
    """Each option string whose value must be one of a list -> (the list, the value type code, the option's long
    name): argparse's choices (of a type the word is compared after), and the values the engine's config checks
    after parsing (`config`, the table module's CONFIG_CHOICES: vLLM's quantization methods)."""
    found: dict[str, tuple[tuple[str, ...], str, str]] = {}
    for row in rows():
        if row[6] is not None and row[4] in _COMPARED:
            listed = tuple(str(choice) for choice in row[6] if choice is not None)
            found |= {name: (listed, row[4], row[0][0]) for name in (*row[0], *row[1])}
    for name, listed in (config() if config else {}).items():
        row = next(row for row in rows() if name in row[0])
        found |= {alias: (tuple(listed), "str", name) for alias in (*row[0], *row[1])}
    return found


@cache
def _names(rows: Callable[[], tuple[Any, ...]]) -> frozenset[str]:
    """Every option string of a table: shown, hidden and negative (`--no-x`)."""
    return frozenset(name for row in rows() for group in (row[0], row[1], row[9]) for name in group)


@cache
def _nargs(rows: Callable[[], tuple[Any, ...]]) -> dict[str, Any]:
    """Each option string of a table with its nargs (0: a switch, which takes no value)."""
    return {name: row[5] for row in rows() for group in (row[0], row[1], row[9]) for name in group}


@cache
def _positional(rows: Callable[[], tuple[Any, ...]]) -> bool:
    """True when the table's parser has a positional argument (a row of no option string: vLLM's `model_tag`),
    which argparse fills from a bare word wherever it falls between options."""
    return any(not row[0] and not row[1] for row in rows())


def _arity(nargs: Any) -> tuple[int, int | None]:
    """(fewest, most) values an option of argparse's `nargs` takes; most None: no limit (`*`, `+`)."""
    if nargs is None:
        return 1, 1
    if nargs in ("?", "*", "+"):
        return int(nargs == "+"), 1 if nargs == "?" else None
    return int(nargs), int(nargs)


def _split_json(word: str) -> bool:
    """True when `word` opens a JSON value (`{`, `[`), which the shell split into words where it was not quoted."""
    return word[:1] in ("{", "[")


@dataclass(frozen=True)
class OptionTable:
    """One engine's option table and how its parser spells flags."""

    engine: str  # as messages name it: `vLLM`
    version: tuple[int, ...]  # the versions it judges: an image tag whose version starts with these numbers
    images: tuple[str, ...]  # the official image's repositories
    rows: Callable[[], tuple[Any, ...]]  # the table's rows (hgxkit/engines/*_serve.py), loaded when first asked
    program: str  # what exits on an unknown flag, for the message
    underscores_are_dashes: bool = False  # `--max_model_len` is `--max-model-len` (before the first `.`)
    dotted_keys: bool = False  # `--key.sub value` sets a key of `--key`
    config_choices: Callable[[], dict[str, tuple[str, ...]]] | None = None  # values the config checks (`_choices`)
    # JSON options whose key names an entry of the engine's registry (`_key_choice`)
    config_keys: Callable[[], dict[str, tuple[str, tuple[str, ...], str]]] | None = None

    @property
    def title(self) -> str:
        """`vLLM 0.33`: the engine and the versions the table judges."""
        return f"{self.engine} {'.'.join(map(str, self.version))}"

    def applies(self, image: str) -> bool:
        """True when `image` runs the version this table was read from (the official image, that version or
        `latest`)."""
        if repository(image).lower() not in self.images:
            return False
        tag = image.split("@", 1)[0][len(repository(image)) + 1 :]
        version = image_version(image)
        if version is None:  # `latest` or untagged is today's engine, the table's; a bare digest could be any
            return tag == "latest" or (tag == "" and "@" not in image)
        return version[: len(self.version)] == self.version

    def lookup(self, word: str) -> str:
        """The option name the parser looks `word` up by (`--max_model_len=4k` -> `--max-model-len` for vLLM)."""
        name = word.partition("=")[0]
        if self.dotted_keys:
            name = name.partition(".")[0]
        if self.underscores_are_dashes:
            name = "--" + name[2:].replace("_", "-")
        return name

    def is_option(self, word: str) -> bool:
        """True when the long flag `word` is one of the table's options in full (`ServerKind.is_option`)."""
        return word.startswith("--") and self.lookup(word) in _names(self.rows)

    def started(self, word: str) -> tuple[str, ...]:
        """The options the long flag `word` is only the start of (`--disable-hybr`, `--kv-c`), in order; none
        where `word` is an option in full or the start of none. `ServerKind.option_started`."""
        name = self.lookup(word)
        if not word.startswith("--") or name in _names(self.rows):
            return ()
        return tuple(sorted(n for n in _names(self.rows) if n.startswith(name)))

    def unknown_option(self, word: str) -> str | None:
        """Why the parser refuses the flag `word` (`no such option`, or `ambiguous: it could match …`); None
        when it takes it or `word` is not a long flag."""
        if not word.startswith("--") or word == "--":
            return None
        matches = self.matches(word)
        if len(matches) == 1:
            return None
        if matches:
            return f"ambiguous: it could match {', '.join(matches)}"
        return "no such option"

    def matches(self, word: str) -> list[str]:
        """The options the long flag `word` names: itself, or those it is a prefix of, sorted."""
        name = self.lookup(word)
        names = _names(self.rows)
        return [name] if name in names else sorted(n for n in names if n.startswith(name))

    def nearest(self, word: str) -> str | None:
        """The table's option closest to the flag `word` in spelling, or None when none is close."""
        # 0.8: a typo's or a rename's likeness (`--enable-chuncked-prefill`, `--log-requests`), not a removed
        # option's to an unrelated one (`--enable-reasoning` is not `--enable-prefix-caching`)
        found = difflib.get_close_matches(self.lookup(word), sorted(_names(self.rows)), n=1, cutoff=0.8)
        return found[0] if found else None

    def unknown_flags(self, words: Sequence[str], image: str) -> tuple[str, str] | None:
        """The flags this table lacks, on an image that runs its version: (the first, the reason naming them all,
        as argparse's `unrecognized arguments` does once it has read the rest). `ServerKind.unknown_flags`."""
        if not self.applies(image):
            return None
        found = [(w.partition("=")[0], why) for w in words if (why := self.unknown_option(w))]
        if not found:
            return None
        names = ", ".join(f"`{name}`" for name, _ in found)
        odd = [f"{name} is {why}" for name, why in found if why != "no such option"]
        said = "; ".join(odd) if odd else f"{self.program} exits with `unrecognized arguments`"
        near = [(name, hint) for name, why in found if why == "no such option" and (hint := self.nearest(name))]
        if near:  # a typo's or a rename's way out
            said += "; the nearest " + (
                f"option is `{near[0][1]}`"
                if len(found) == 1
                else "options are " + ", ".join(f"`{hint}` for `{name}`" for name, hint in near)
            )
        verb, them = ("is not an option", "it") if len(found) == 1 else ("are not options", "them")
        return found[0][0], (
            f"{names} {verb} of {self.title} (the image {image}; {said}): remove {them}, or pin an "
            f"image that has {them} (import with --image REF)"
        )

    def switch_value(self, uses: Sequence[Sequence[str]], image: str) -> tuple[str, str] | None:
        """The first value written after a switch (a flag of no value: `--enforce_eager true`), on an image that
        runs this table's version: (the value, the reason with its remedy). argparse ends the switch there, so the
        value is a positional argument: `vllm serve` reads it as the model, SGLang exits on it."""
        if not self.applies(image):
            return None
        for words in uses:
            head = words[0] if words else ""
            matches = self.matches(head) if head.startswith("--") and "=" not in head else []
            if len(words) < 2 or len(matches) != 1 or _nargs(self.rows).get(matches[0]) != 0:
                continue
            value = words[1]
            return value, (
                f"`{head}` is a switch of {self.title} (it takes no value), so `{value}` after it is a positional "
                f"argument to {self.program}, not the switch's value: drop `{value}` (a switch is off unless given)"
            )
        return None

    def value_choice(self, uses: Sequence[Sequence[str]], image: str) -> tuple[str, str] | None:
        """The first value outside its option's list (argparse's `invalid choice`, or a value the engine's config
        refuses: vLLM's `Unknown quantization method`), on an image that runs this table's version: (the flag, the
        reason with its remedy), or None. Values the shell writes in (`$`) are left alone.

        Example:
            >>> VLLM_OPTIONS.value_choice([("-q", "slimquant_marlin")], "vllm/vllm-openai:latest")[0]
            '-q'
            >>> VLLM_OPTIONS.value_choice([("--dtype=half",), ("-q", "fp8")], "vllm/vllm-openai:latest") is None
            True
        """
        if not self.applies(image):
            return None
        listed = _choices(self.rows, self.config_choices)
        for words in uses:
            keyed = self._key_choice(words, image)
            if keyed is not None:
                return keyed
            head = words[0] if words else ""
            name, equals, glued = head.partition("=")
            matches = [name] if name in listed else self.matches(name) if name.startswith("--") else []
            if len(matches) != 1 or matches[0] not in listed:
                continue
            choices, code, long = listed[matches[0]]
            several = _nargs(self.rows)[matches[0]] in ("+", "*")
            for value in [glued] if equals else list(words[1:] if several else words[1:2]):
                if "$" not in value and _COMPARED[code](value) not in choices:
                    shown = ", ".join(choices[:12]) + (", …" if len(choices) > 12 else "")
                    return head, (
                        f"`{name} {value}`: {value} is not a value of {long} in {self.title} (the image "
                        f"{image}; one of {shown}), so {self.program} exits on it; write one of them, or pin an image "
                        "that has it (import with --image REF)"
                    )
        return None

    def _key_choice(self, words: Sequence[str], image: str) -> tuple[str, str] | None:
        """A JSON option's key naming what the engine's registry lacks (vLLM's `Unsupported connector type`), where
        the object names no module of its own: (the flag, the reason with its remedy), or None.

        Example:
            >>> VLLM_OPTIONS._key_choice(["--kv-transfer-config", '{"kv_connector":"X"}'], "vllm/vllm-openai")[1][:59]
            '`--kv-transfer-config`: kv_connector X is not registered in'
        """
        head = words[0] if words else ""
        name, equals, glued = head.partition("=")
        keys = self.config_keys() if self.config_keys else {}
        if self.lookup(name) not in keys or not (equals or len(words) > 1):
            return None
        key, names, module_key = keys[self.lookup(name)]
        try:
            value = json.loads(glued if equals else words[1])
        except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth: not this check's to say
            return None
        found = value.get(key) if isinstance(value, dict) else None
        if not isinstance(found, str) or found in names or value.get(module_key):
            return None
        shown = ", ".join(names)
        return head, (
            f"`{name}`: {key} {found} is not registered in {self.title} (the image {image}; one of {shown}), so "
            f"{self.program} exits on it: it comes with another build; pin an image that has it (import with "
            f"--image REF), or name the module that defines it ({module_key})"
        )

    def value_count(self, uses: Sequence[Sequence[str]], image: str, model_slot: bool) -> tuple[str, str] | None:
        """The first flag given a count of values its nargs refuses: (the flag, the reason with its remedy), or None.
        A flag that takes a value given none (the command ends, or another flag follows), argparse's `expected one
        argument`; a flag of one value followed by more bare words, which argparse reads as positional arguments:
        `model_slot` says the command gives no positional model yet, so on a table with a positional one such word
        is the model. Judged on an image that runs this table's version; on another, only a flag that ends the
        command with no value (`ServerKind.value_count`). `--key.sub` words of a dotted-key parser are left to it,
        and so are bare words holding `$`, which the shell writes in (flags, maybe).

        Example:
            >>> SGLANG_OPTIONS.value_count([("--tp", "8"), ("--port",)], "lmsysorg/sglang:latest", False)[0]
            '--port'
            >>> VLLM_OPTIONS.value_count([("--port", "8000", "org/m")], "vllm/vllm-openai:latest", True) is None
            True
        """
        judged = self.applies(image)
        slot = model_slot and _positional(self.rows)
        for at, words in enumerate(uses):
            head = words[0] if words else ""
            nargs = self._nargs_of(head, judged)
            if nargs is None:
                continue
            fewest, most = _arity(nargs[0])
            has_value = "=" in head or len(words) > 1
            last = at == len(uses) - 1
            if fewest and not has_value and (judged or last):
                return head, self._no_value(head, nargs[0], None if last else uses[at + 1][0], image)
            extra = list(words[1:] if "=" in head else words[2:])
            if not judged or most != 1 or nargs[0] is not None or not extra or any("$" in w for w in extra):
                continue
            value = head.partition("=")[2] if "=" in head else words[1]
            if slot and len(extra) == 1 and not _split_json(value):
                slot = False  # the positional model, which argparse takes between options
                continue
            return head, self._extra_value(head.partition("=")[0], value, extra)
        return None

    def _nargs_of(self, head: str, judged: bool) -> tuple[Any] | None:
        """(nargs,) of the long flag `head` as the parser reads it (any unique prefix where the table `judged` the
        image, the full name only where not); None for a word it does not judge."""
        if not head.startswith("--") or (self.dotted_keys and "." in head.partition("=")[0]):
            return None
        matches = self.matches(head) if judged else [n for n in [self.lookup(head)] if n in _names(self.rows)]
        return (_nargs(self.rows)[matches[0]],) if len(matches) == 1 else None

    def _extra_value(self, flag: str, value: str, extra: Sequence[str]) -> str:
        """Why a flag of one value followed by the bare words `extra` after its `value` is refused, and the way out."""
        if _split_json(value):
            return (
                f"`{flag}` takes one value, but the shell splits this one into {len(extra) + 1} words "
                f"(`{' '.join([value, *extra])}` unquoted), so `{extra[0]}` is a positional argument to "
                f"{self.program}, which exits on it; quote the JSON ('{{...}}')"
            )
        return (
            f"`{flag}` takes one value, so `{extra[0]}` after `{value}` is a positional argument to {self.program}, "
            "which exits on it; quote the value if the words are one, or drop the rest"
        )

    def _no_value(self, head: str, nargs: Any, following: str | None, image: str) -> str:
        """Why a flag that takes a value (argparse's `nargs`) given none is refused, and the way out; `following`
        is the next word, None where the command ends."""
        where = f"the next word, `{following}`, is a flag" if following else "it ends there: the copy may be cut"
        version = "" if self.applies(image) else f" in {self.title} (the image {image} runs another version)"
        expected = {None: "one argument", "+": "at least one argument"}.get(nargs, f"{nargs} arguments")
        return (
            f"`{head}` takes a value{version} and the command gives none ({where}), so {self.program} exits with "
            f"`expected {expected}`; give its value (the whole command), or drop `{head}`"
        )

    def unchecked_flag(self, word: str, image: str) -> str | None:
        """A flag this table would refuse, on an image that runs another version: not refused (that version may
        have it), said in a note. `ServerKind.unchecked_flag`."""
        if self.applies(image) or not self.unknown_option(word):
            return None
        name = word.partition("=")[0]
        matches = self.matches(word)
        judged = f"finds it ambiguous (it could match {', '.join(matches)})" if matches else "has no such option"
        return (
            f"`{name}` was not checked: {self.title} {judged}, and the image {image} runs another "
            f"{self.engine}, whose options hgxkit does not have"
        )


VLLM_OPTIONS = OptionTable(
    engine="vLLM",
    version=(0, 33),  # the table is 0.33.0's; 0.33's patch releases keep its options
    images=("vllm/vllm-openai", "docker.io/vllm/vllm-openai"),
    rows=_vllm_rows,
    config_choices=_vllm_config_choices,
    config_keys=_vllm_config_keys,
    program="`vllm serve`",
    underscores_are_dashes=True,
    dotted_keys=True,
)
SGLANG_OPTIONS = OptionTable(
    engine="SGLang",
    version=(0, 5, 23),  # SGLang's third number is its release: 0.5.22 and 0.5.24 have other options
    images=("lmsysorg/sglang", "docker.io/lmsysorg/sglang"),
    rows=_sglang_rows,
    program="the server",
)
