"""The test tree itself: pytest's default (rootdir-relative "prepend") import mode needs every test module to
have a basename of its own, or collection stops with "import file mismatch" (it did, twice, in CI)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[2]


def test_no_two_test_modules_share_a_basename() -> None:
    names = Counter(path.name for path in TESTS.rglob("test_*.py"))
    shared = sorted(name for name, count in names.items() if count > 1)
    assert shared == [], f"test modules with the same basename in two folders (rename one): {shared}"
