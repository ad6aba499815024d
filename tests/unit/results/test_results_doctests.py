"""The usage examples in the docstrings of hgxkit/results/*.py run and print what they say."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest
from test_results import ROOT

import hgxkit.results

MODULES = sorted(m.name for m in pkgutil.iter_modules(hgxkit.results.__path__, "hgxkit.results."))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # examples read tests/fixtures/... relative to the repository
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
