"""The archive holds none of the run's own secrets, with or without a prefix a pattern knows: a value that no
pattern of the scrubber finds (no `sk-`/`hf_` prefix, no `KEY=` before it, not in an `api_key` field) is masked
in every archived file only because write_run is given it as a known secret."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_results import PLANTED, archive_planted

from hgxkit.results.archive import write_report_html
from hgxkit.secrets import MASK, redact, redact_json_text

# 24 letters and digits, as a site's own API key may be: nothing marks it as a secret but being named one.
SECRET = "Qm7vT2xk9LpR4wZc8NbY3hJd"
LINE = f"served by {SECRET} today"


def archive(root: Path, where: set[str], secrets: list[str]) -> Path:
    return archive_planted(root, where, LINE, secrets, "note")


def holding(path: Path, value: str) -> list[str]:
    return [f for f in sorted(PLANTED) if value in (path / f).read_text()]


def test_no_pattern_of_the_scrubber_finds_this_secret() -> None:
    # The premise of the tests below: without the known value, the secret stays (so they test the known path).
    assert redact(LINE, []) == LINE
    doc = json.dumps({"completed": 10, "note": LINE}) + "\n"
    assert redact_json_text(doc, []) == doc
    assert redact(LINE, [SECRET]) == f"served by {MASK} today"


@pytest.mark.parametrize("kind", PLANTED)
def test_a_known_secret_no_pattern_finds_is_masked_in_each_archived_file(tmp_path: Path, kind: str) -> None:
    path = archive(tmp_path, {kind}, [SECRET])
    assert holding(path, SECRET) == []
    assert MASK in (path / kind).read_text()  # the planted input did reach this file, masked
    json.loads((path / "raw" / "5000.jsonl").read_text())  # the client's JSONL stays parseable


def test_the_archive_holds_none_of_the_runs_own_secrets_anywhere(tmp_path: Path) -> None:
    path = archive(tmp_path, set(PLANTED), [SECRET])
    assert holding(path, SECRET) == []
    assert all(MASK in (path / f).read_text() for f in PLANTED)
    rewritten = write_report_html(path, secrets=[SECRET])  # `results report --html` writes it again
    assert SECRET not in rewritten.read_text()


def test_the_same_run_without_the_known_secret_would_leak_it_everywhere(tmp_path: Path) -> None:
    # The control: the masking above is the known-secrets path's doing, file by file.
    path = archive(tmp_path, set(PLANTED), [])
    assert holding(path, SECRET) == sorted(PLANTED)
