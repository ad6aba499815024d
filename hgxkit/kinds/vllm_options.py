"""Whether vLLM's `vllm serve` parser knows a flag, from the one option table hgxkit has: vLLM 0.33's.

The table (`hgxkit.engines.vllm_serve`) is read from vLLM 0.33.0's real parser; the vLLM stand-in parses
with it and tests/unit/sim/test_vllm_stub_args.py checks it against the real one. A flag is looked up the way that
parser reads it: underscores before the first `.` are dashes, `--key.sub value` sets a key of `--key`, `=value`
is split off, and argparse's prefix abbreviations hold (`--max-model` is `--max-model-len`; a prefix of two
options is ambiguous and refused). Single-dash words (`-tp`, `-O3`) are not looked up. The table is only
applied to an image that runs 0.33: the official image at `latest`, untagged or tagged 0.33.x; another version's
options are not known here, and a flag 0.33 lacks is then said to be unchecked, not refused.

Example:
    >>> unknown_option("--log-requests"), unknown_option("--max_model_len=4k"), unknown_option("--max-model")
    ('no such option', None, None)
    >>> table_applies("vllm/vllm-openai:latest"), table_applies("vllm/vllm-openai:v0.33.1"), \
table_applies("vllm/vllm-openai:v0.9.2")
    (True, True, False)
"""

from __future__ import annotations

from functools import cache

from hgxkit.imageref import image_version, repository

TABLE_VERSION = (0, 33)
TABLE_TITLE = "vLLM 0.33"
_IMAGES = ("vllm/vllm-openai", "docker.io/vllm/vllm-openai")


@cache
def _names() -> frozenset[str]:
    from hgxkit.engines.vllm_serve import SERVE_OPTIONS  # facts about 0.33's CLI, no engine code

    return frozenset(name for row in SERVE_OPTIONS for group in (row[0], row[1], row[9]) for name in group)


def table_applies(image: str) -> bool:
    """True when `image` runs the vLLM whose option table hgxkit has (the official image, 0.33 or `latest`)."""
    if repository(image).lower() not in _IMAGES:
        return False
    tag = image.split("@", 1)[0][len(repository(image)) + 1 :]
    version = image_version(image)
    if version is None:  # `latest` or untagged is today's engine, 0.33; a bare digest could be any version
        return tag == "latest" or (tag == "" and "@" not in image)
    return version[:2] == TABLE_VERSION


def unknown_option(word: str) -> str | None:
    """Why vLLM 0.33's parser refuses the flag `word` (`no such option`, or `ambiguous: it could match …`);
    None when it takes it or `word` is not a long flag."""
    if not word.startswith("--") or word == "--":
        return None
    name = word.partition("=")[0]
    head = name[2:].partition(".")[0]
    name = "--" + head.replace("_", "-")
    names = _names()
    if name in names:
        return None
    matches = sorted(n for n in names if n.startswith(name))
    if len(matches) == 1:
        return None
    if matches:
        return f"ambiguous: it could match {', '.join(matches)}"
    return "no such option"
