"""The usage examples in the docstrings of hgxkit/recipe/**/*.py run and print what they say."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
from pathlib import Path

import pytest

import hgxkit.recipe

ROOT = Path(__file__).resolve().parents[3]
MODULES = sorted(m.name for m in pkgutil.walk_packages(hgxkit.recipe.__path__, "hgxkit.recipe."))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # examples read recipes/… relative to the repository
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
