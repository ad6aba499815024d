"""The knob table and its one rule: shared knobs, a role's own knob outside its deploy, and the layering that
keeps the table below the recipe package (the recipe a host serves is loaded by hgxkit.recipe.host_recipe)."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

import pytest

from hgxkit.knobs import SEED_RECIPE, SHARED_DEFAULTS, knob, shared
from hgxkit.problems import Problem

ROOT = Path(__file__).resolve().parents[3]


def _host(**data: object) -> SimpleNamespace:
    return SimpleNamespace(name="node1", data=data)


def test_a_shared_knob_is_the_inventory_value_else_its_default() -> None:
    assert knob(_host(models_dir="/mnt/models"), "models_dir") == "/mnt/models"
    assert knob(_host(), "models_dir") == SHARED_DEFAULTS["models_dir"]
    assert knob(_host(recipe=None), "recipe") == SEED_RECIPE
    assert knob(_host(expected_gpu_count="7"), "expected_gpu_count") == 7  # `--data` strings are cast
    with pytest.raises(KeyError, match="not a shared knob: nope"):
        shared("nope")


def test_the_knob_table_imports_nothing_from_the_recipe_package() -> None:
    tree = ast.parse((ROOT / "hgxkit" / "knobs.py").read_text())
    imported = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module]
    imported += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert not [m for m in imported if m.startswith("hgxkit.")], imported


def test_a_problem_prints_code_found_and_remedy_and_keeps_where_and_level() -> None:
    problem = Problem("port-clash", "groups 0 and 1 publish host port 5000 twice", "give the port an X placeholder")
    assert str(problem) == "[port-clash] groups 0 and 1 publish host port 5000 twice; give the port an X placeholder"
    assert (problem.level, problem.where) == ("error", "")
    grammar = Problem("recipe-grammar", "'A;id' does not match", level="warning", where=("name",))
    assert str(grammar) == "[recipe-grammar] 'A;id' does not match" and grammar.where == ("name",)
