"""docs/layout.md's map of the code is what tools/modmap.py makes from the tree: every package and module, each
with the first sentence of its docstring. A moved module or a changed docstring fails here until it is
regenerated."""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("modmap", ROOT / "tools" / "modmap.py")
assert _spec and _spec.loader
modmap = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(modmap)


def test_the_layout_page_map_is_what_the_tree_gives() -> None:
    assert modmap.PAGE == ROOT / "docs" / "layout.md"
    found = modmap.current(modmap.PAGE.read_text())
    assert found is not None, f"docs/layout.md lost its map markers ({modmap.BEGIN!r} … {modmap.END!r})"
    assert found == modmap.generate(), (
        f"docs/layout.md's map differs from the tree: run `{modmap.COMMAND}` (or `make map`)"
    )


def test_the_check_fails_on_a_stale_map_and_the_rewrite_fixes_it(tmp_path: Path, monkeypatch, capsys) -> None:
    page = tmp_path / "layout.md"
    page.write_text(f"# Layout\n\n{modmap.BEGIN}\n- `gone.py` — A module that moved.\n{modmap.END}\n")
    monkeypatch.setattr(modmap, "PAGE", page)
    monkeypatch.setattr(modmap, "generate", functools.cache(modmap.generate))  # the tree is the same in every call
    assert modmap.main(["--check"]) == 1
    assert f"run `{modmap.COMMAND}`" in capsys.readouterr().err
    assert modmap.main([]) == 0
    assert modmap.main(["--check"]) == 0
    assert page.read_text().startswith("# Layout\n\n") and modmap.current(page.read_text()) == modmap.generate()


def test_every_package_and_module_is_on_the_map() -> None:
    section = modmap.generate()
    for top in modmap.TOPS:
        for path in (ROOT / top).rglob("*.py"):
            rel = path.relative_to(ROOT).as_posix()
            shown = rel.removesuffix("__init__.py") if path.name == "__init__.py" else rel
            assert f"`{shown}`" in section, rel


def test_a_summary_is_the_first_sentence_of_the_docstring(tmp_path: Path) -> None:
    cases = {
        '"""One line.\n\nMore."""': "One line.",
        '"""Starts here and\ngoes on. Then more\nlines."""': "Starts here and goes on.",
        '"""Two: sentences. In one line\nand a second."""': "Two: sentences. In one line and a second.",
        "x = 1": "",
    }
    for source, expected in cases.items():
        (tmp_path / "m.py").write_text(source + "\n")
        assert modmap.summary(tmp_path / "m.py") == expected, source
