"""argparse options built from an engine's option table (`hgxkit.engines`), for the stand-ins' parsers.

One row per real argparse action (tools/gen_engine_options.py): the stand-ins parse a command line with the
options the real engine has, spelt, aliased, typed, defaulted and abbreviated as the real parser takes them. Each
engine passes its own value types (a row's type code) and its own actions for the kinds only it has.

Example:
    >>> import argparse
    >>> rows = [(("--tp-size", "--tensor-parallel-size"), (), "tp_size", "store", "int", None, None, 1, None, ())]
    >>> parser = add_table_options(argparse.ArgumentParser(), rows, lambda code: int)
    >>> parser.parse_args(["--tp", "4"]).tp_size
    4
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

ValueType = Callable[[str], Callable[[str], Any] | None]


class Bool(argparse.Action):
    """``--enable-x`` / ``--disable-x`` / ``--no-enable-x`` (and ``--x`` / ``--no-x``): one bool dest."""

    def __init__(self, option_strings: list[str], dest: str, negative: tuple[str, ...] = (), **kwargs: Any) -> None:
        kwargs.pop("nargs", None)
        super().__init__(option_strings, dest, nargs=0, **kwargs)
        self.negative = set(negative)

    def __call__(self, parser: argparse.ArgumentParser, ns: argparse.Namespace, values: Any, opt: Any = None) -> None:
        setattr(ns, self.dest, opt not in self.negative)


class ConstValue(argparse.Action):
    """A retired option that writes a fixed value to the option that replaced it, whatever it was given."""

    def __call__(self, parser: argparse.ArgumentParser, ns: argparse.Namespace, values: Any, opt: Any = None) -> None:
        setattr(ns, self.dest, self.const)


def add_table_options(
    parser: argparse.ArgumentParser,
    rows: Iterable[tuple[Any, ...]],
    value_type: ValueType,
    actions: Mapping[str, type[argparse.Action]] | None = None,
    positional: bool = True,
    required: Collection[str] = (),
) -> argparse.ArgumentParser:
    """Add every option of `rows` to `parser`: `value_type` turns a row's type code into argparse's `type`,
    `actions` holds the engine's own kinds (``lora``), `required` the dests the real parser requires; a positional
    row is added only when `positional`."""
    for shown, hidden, dest, kind, code, nargs, choices, default, const, negative in rows:
        if kind == "help":
            continue
        if default == argparse.SUPPRESS:
            default = argparse.SUPPRESS  # the identical object: argparse tests `is SUPPRESS`
        if not shown:
            if positional:
                parser.add_argument(dest, nargs=nargs, default=default)
            continue
        opts = [*shown, *hidden]
        kw: dict[str, Any] = {"dest": dest, "default": default}
        if dest in required:
            kw["required"] = True
        if kind == "bool":
            parser.add_argument(*opts, action=Bool, negative=negative, **kw)
        elif kind in ("store_true", "deprecated_true"):
            parser.add_argument(*opts, action="store_true", **kw)
        elif kind in (actions or {}):
            parser.add_argument(*opts, action=(actions or {})[kind], nargs=nargs, **kw)
        else:
            if kind == "append":
                kw["action"] = "append"
            if kind == "deprecated_const":
                kw.update(action=ConstValue, const=const)
            if nargs is not None:
                kw["nargs"] = nargs
            if const is not None and nargs == "?":
                kw["const"] = const
            typ = value_type(code)
            if typ is not None:
                kw["type"] = typ
            if choices is not None:
                kw["choices"] = list(choices)
            parser.add_argument(*opts, **kw)
    return parser


# Written into the image by `hgxkit sim image build --other-versions` (hgxkit/sim/standin/image.py): the tag of
# another engine version this stand-in stands for; empty or missing, the table's own version. Not under
# /etc/hgxkit-sim, which the simulated GPU runtime mounts over in a GPU container.
STANDS_FOR = Path("/usr/share/hgxkit-sim/stands-for")


def other_version() -> str:
    """The image of another engine version this stand-in stands for, or "" (its table's own version)."""
    try:
        return STANDS_FOR.read_text().strip()
    except OSError:
        return ""


def without_unread(argv: list[str], rows: Iterable[tuple[Any, ...]]) -> tuple[list[str], list[str]]:
    """`argv` without the long flags the table cannot read (no such option, or a prefix of several) and the
    value after each, and those flags: what an image of another version may take and the stand-in cannot judge.

    >>> rows = [(("--cuda-graph-max-bs-decode",), (), "a", "store", "int", None, None, 1, None, ()),
    ...         (("--cuda-graph-max-bs-prefill",), (), "b", "store", "int", None, None, 1, None, ()),
    ...         (("--tp-size",), (), "tp", "store", "int", None, None, 1, None, ())]
    >>> without_unread(["--tp", "8", "--cuda-graph-max-bs", "256", "--old=1"], rows)
    (['--tp', '8'], ['--cuda-graph-max-bs', '--old'])
    """
    names = {name for row in rows for group in (row[0], row[1], row[9]) for name in group if name.startswith("--")}
    kept: list[str] = []
    unread: list[str] = []
    skip_value = False
    for word in argv:
        if skip_value and not word.startswith("-"):  # the value of the flag before, unread with it
            skip_value = False
            continue
        name = word.partition("=")[0].partition(".")[0]
        readable = name in names or len([n for n in names if n.startswith(name)]) == 1
        skip_value = word.startswith("--") and word != "--" and not readable
        if skip_value:
            unread.append(name)
            skip_value = "=" not in word
        else:
            kept.append(word)
    return kept, unread
