"""Fixtures of the verify tests: a local tokenizer directory, as an operator passes it to `verify --endpoint`."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture()
def tokenizer(tmp_path: Path) -> str:
    """A local tokenizer directory, as an operator passes it with --tokenizer."""
    folder = tmp_path / "tokenizer-src"
    folder.mkdir()
    (folder / "tokenizer.json").write_text("{}")
    return str(folder)
