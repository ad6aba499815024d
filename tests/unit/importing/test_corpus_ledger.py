"""The line account (every line's fate; an imported post's text with its secrets masked, and its server's lines
taken) and the lost-backslash property over the WHOLE corpus: tests/fixtures/posts and
tests/fixtures/posts/formats, imported and refused posts alike (test_import_ledger.py's property test samples
the first directory; test_post_formats.py accounts only the imported formats files)."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest
from test_import_ledger import _recipe, share
from test_post_corpus import ENTRIES, PICKS, POSTS
from test_post_formats import ENTRIES as FORMAT_ENTRIES
from test_post_formats import FORMATS

from hgxkit.importing.importer import ImportOptions, import_post
from hgxkit.importing.outcome import ImportRefused
from hgxkit.recipe.spec import Recipe
from hgxkit.secrets import redact

# (file, path, pick) of every corpus post, both directories.
CORPUS = [(e["file"], POSTS / e["file"], PICKS.get(n)) for n, e in sorted(ENTRIES.items())] + [
    (name, FORMATS / name, e.get("pick")) for name, e in sorted(FORMAT_ENTRIES.items())
]
FATES = {"taken", "changed", "set aside", "read", "refused"}


def test_the_corpus_covers_both_directories() -> None:
    on_disk = {p.name for p in POSTS.glob("*.txt")} | {p.name for p in FORMATS.iterdir() if p.name != "index.yaml"}
    assert {name for name, _, _ in CORPUS} == on_disk
    assert len(CORPUS) == len(ENTRIES) + len(FORMAT_ENTRIES)


@pytest.mark.parametrize(("name", "path", "pick"), CORPUS, ids=[c[0][:40] for c in CORPUS])
def test_every_line_of_every_post_is_accounted(name: str, path: Path, pick: int | None) -> None:
    text = path.read_text()
    try:
        outcome = import_post([(name, text)], ImportOptions(pick=pick))
    except ImportRefused as refused:
        lines = refused.lines
    else:
        lines = outcome.lines
        written = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        assert [(a.file, a.text) for a in lines] == [(name, redact(t)) for t in written]  # a secret in it masked
        assert all(a.into for a in lines if a.fate in ("taken", "changed"))
        server = [r.where.rsplit(":", 1)[1].split("-") for r in outcome.report if "(the server" in r.what]
        taken = {n for first, *last in server for n in range(int(first), int((last or [first])[0]) + 1)}
        assert all(lines[n - 1].fate in ("taken", "changed") for n in taken)
    assert [a.line for a in lines] == list(range(1, len(text.split("\n")) + 1))
    assert {a.fate for a in lines} <= FATES
    unexplained = [a.line for a in lines if a.fate == "set aside" and not a.why]
    assert unexplained == [], "a line set aside says why"


@cache
def _posted(index: int) -> Recipe | None:
    name, path, pick = FORMAT_CASES[index]
    return _recipe(name, path.read_text(), pick)


FORMAT_CASES = [c for c in CORPUS if c[1].parent == FORMATS]
FORMAT_SITES = [
    (index, m.start())
    for index, (_, path, _) in enumerate(FORMAT_CASES)
    for m in re.finditer(r"\\[ \t]*\n", path.read_text())
]


def test_every_lost_backslash_of_the_formats_corpus_refuses_or_changes_nothing() -> None:
    assert len(FORMAT_SITES) > 50
    different = []
    for index, offset in share(FORMAT_SITES):  # a tenth per commit; `make corpus` checks all
        name, path, pick = FORMAT_CASES[index]
        text = path.read_text()
        mutated = _recipe(name, text[:offset] + text[offset + 1 :], pick)
        if mutated is not None and mutated != _posted(index):
            different.append((name, text[:offset].count("\n") + 1))
    assert different == []
