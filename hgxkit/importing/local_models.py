"""Local model directories a post ties to a Hub repo: `hf download ORG/NAME --local-dir DIR` (or
`huggingface-cli download`) makes a later `vllm serve DIR` that repo's copy, not a guess.

Example:
    >>> download_ties(["huggingface-cli download openai/gpt-oss-120b --local-dir gpt-oss-120b/"])
    {'gpt-oss-120b': 'openai/gpt-oss-120b'}
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable

_DOWNLOAD = re.compile(
    r"\b(?:huggingface-cli|hf)\s+download\s+([A-Za-z0-9][\w.-]*/[\w.-]+)\b(?=[^\n]*?--local-dir[= ]+[\"']?([^\s\"']+))"
)


def download_ties(lines: Iterable[str]) -> dict[str, str]:
    """{directory name: repo} for each download into a local directory in `lines` (a later one wins)."""
    ties: dict[str, str] = {}
    for line in lines:
        for match in _DOWNLOAD.finditer(line):
            ties[posixpath.basename(posixpath.normpath(match.group(2)))] = match.group(1)
    return ties
