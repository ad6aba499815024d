"""`recipe import --fill PLACEHOLDER=VALUE`: the value the importing person gives for a placeholder a post leaves.

Posts often write a value the reader must fill in: `/path/to/the/huggingface/home/on/this/node`, `<HEAD_NODE_IP>`,
`YOUR_MODEL`, `{your model dir}`, a Slurm script's `model=MODEL_PATH`. The import refuses each, naming it (a deploy
would run the placeholder). The person importing knows the value (where their weights are); `--fill` says it, once
per placeholder, and the post is read with every occurrence written out, as the poster asks the reader to do.
Nothing is guessed: the left side must be a placeholder of one of those shapes and must occur in the post (a typo
fills nothing, so it is refused); the value is one shell word without quoting, expansion or operators, so filling
it cannot change what the command's other words are. Each filled placeholder is a note naming its lines; the post
on disk is not changed.

An occurrence ends where a path or name ends: `/path/to/x` is filled in `/path/to/x:/m` and `/path/to/x/sub` but
not in `/path/to/xy`; an upper-case name is filled where it is a value, not as a variable (`$MODEL_PATH`) or the
name an assignment sets (`MODEL_PATH=…`).

Example:
    >>> fills = (parse_fill("/path/to/hf=/data/models/M"),)
    >>> texts, notes = fill_posts([("p.sh", "# say /path/to/hf\\ndocker run -v /path/to/hf:/m img")], fills)
    >>> texts[0][1].splitlines()[1], notes
    ('docker run -v /data/models/M:/m img', ['p.sh:1: /path/to/hf is /data/models/M (--fill), at line(s) 1, 2'])
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from hgxkit.errors import InputError
from hgxkit.importing.commands import PLACEHOLDER

# Values a post leaves for the reader to fill in: `YOUR_MODEL`, `/path/to/model` (a `$YOUR_…` is a variable),
# `{your model directory}` or a format string's field (`{path_to_model}`, `{node0_ip}:5000`, `{trained/model/path}`:
# a shell passes braces around one name as they are, and neither `${NAME}` nor a template's `{{ … }}` is one); a run
# of x standing for a value the poster hid (`--host xxxxxxx`, `x.x.x.x`).
BRACED = re.compile(
    r"(?<![$\w{])\{(?:(?:[Yy]our|YOUR|[Mm]y)\b[^{}\n\"']{0,60}|[A-Za-z][A-Za-z0-9]*(?:[_/-][A-Za-z0-9]+)*)\}(?!\})"
)
# An image's version left for the reader (NGC's docs: `nvcr.io/nvidia/sglang:xx.yy-py3`); a `-py3` may follow it.
_IMAGE_VERSION = r"(?:xx|XX)\.(?:yy|YY|xx|XX)(?:\.(?:zz|ZZ|xx|XX))?"
FILL_IN = re.compile(
    r"(?<![\w${])YOUR_\w+|(?<![\w.])/path/to/[^\s:,\"']*|(?<![\w.-])(?:x{4,}|X{4,}|x\.x\.x\.x)(?![\w.-])"
    # a template's token a script replaces (`sed s/__MODEL__/…/`)
    r"|(?<![\w$])__[A-Z][A-Z0-9_]*[A-Z0-9]__(?!\w)"
    # a path's folder left in brackets for the reader (`/[model dir]/Qwen3-32B`, `/[模型目录]/m`)
    r"|(?<=/)\[(?=[^\]]*[^\W\d_])[^\][\s/$\"',:]{1,40}\](?=/)"
    # an image's version or registry left for the reader (`nvcr.io/nvidia/sglang:xx.yy-py3`, `my-registry/sglang:1`)
    r"|(?<![\w.])" + _IMAGE_VERSION + r"(?![\w.])|(?<![\w.-])(?:my|your)[-_]?registry/"
)
BRACKETED = re.compile(r"\[(?=[^\]]*[^\W\d_])[^\][\n/$\"',:]{1,40}\]")  # FILL_IN's folder, as --fill names it
# Such a folder with a space in it (`/[model dir]/m`): a shell splits it into two words, so a command's lines are
# searched for it.
SPACED_FOLDER = re.compile(r"(?<=/)\[(?=[^\]\n]* )(?=[^\]]*[^\W\d_])[^\][\n/$\"',:]{1,40}\](?=/)")
# A value written as an upper-case name (a script's `model=MODEL_PATH`): left for the reader, not a repository.
NAMED_BLANK = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|MODEL")
# A value that stays one shell word with the meaning it is written with.
_PLAIN_VALUE = re.compile(r"[A-Za-z0-9_./:@%+,=-]+")


def fill_hint(placeholder: str) -> str:
    """The remedy a refusal of `placeholder` names: write it, or give it with --fill."""
    return f"write its value, or give it: --fill '{placeholder}=VALUE'"


def parse_fill(text: str) -> tuple[str, str]:
    """(placeholder, value) of one `--fill PLACEHOLDER=VALUE`; refused: a left side that is not a placeholder's
    shape, a value that is empty or not one plain shell word."""
    placeholder, equals, value = text.partition("=")
    shapes = (PLACEHOLDER, FILL_IN, BRACED, NAMED_BLANK, BRACKETED)
    if not equals or not any(shape.fullmatch(placeholder) for shape in shapes):
        raise InputError(
            f"--fill {text}: give PLACEHOLDER=VALUE, the placeholder as the post writes it "
            "(/path/to/…, <NAME>, YOUR_…, {your …}, MODEL_PATH) and its value"
        )
    if not _PLAIN_VALUE.fullmatch(value) or value.startswith("-"):
        raise InputError(
            f"--fill {text}: the value {value!r} must be one word of letters, digits and ./:@%+,=-_ "
            "(no spaces, quotes, $ or shell operators), not starting with -"
        )
    return placeholder, value


def occurrences(placeholder: str) -> re.Pattern[str]:
    """Where `placeholder` is written as a value in a post's text: an upper-case name not as a variable (`$NAME`,
    `${NAME}`) or the name an assignment sets (`NAME=…`)."""
    ends = r"(?![\w.-])" if placeholder[-1:].isalnum() or placeholder[-1:] in "_" else ""
    if re.fullmatch(_IMAGE_VERSION, placeholder):
        ends = r"(?![\w.])"  # the tag goes on after it: `xx.yy-py3`
    if NAMED_BLANK.fullmatch(placeholder):
        return re.compile(r"(?<![\w.$/{])" + re.escape(placeholder) + ends + "(?!=)")
    if BRACKETED.fullmatch(placeholder):  # a folder of a path, its `/` with it: the value is the folder's path
        return re.compile("/" + re.escape(placeholder) + "(?=/)")
    return re.compile(r"(?<![\w.$/])" + re.escape(placeholder) + ends)


def fill_posts(
    files: Sequence[tuple[str, str]], fills: Sequence[tuple[str, str]]
) -> tuple[list[tuple[str, str]], list[str]]:
    """The posts with every placeholder of `fills` written out, and one note per placeholder; refused: a
    placeholder given twice, or one no post has."""
    seen: set[str] = set()
    out = list(files)
    notes: list[str] = []
    for placeholder, value in fills:
        if placeholder in seen:
            raise InputError(f"--fill {placeholder}=…: given twice; give each placeholder once")
        seen.add(placeholder)
        pattern = occurrences(placeholder)
        places: list[tuple[str, list[int]]] = []
        for index, (name, text) in enumerate(out):
            lines = [n for n, line in enumerate(text.split("\n"), 1) if pattern.search(line)]
            if lines:
                places.append((name, lines))
                out[index] = (name, pattern.sub(lambda _, v=value: v, text))
        if not places:
            names = ", ".join(name for name, _ in files)
            raise InputError(
                f"--fill {placeholder}=…: {names} has no {placeholder}; give the placeholder as the "
                "post writes it (the import's refusal names it)"
            )
        for name, lines in places:
            shown = ", ".join(map(str, lines))
            notes.append(f"{name}:{lines[0]}: {placeholder} is {value} (--fill), at line(s) {shown}")
    return out, notes
