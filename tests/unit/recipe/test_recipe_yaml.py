"""The recipe reader's two YAML parsers: libyaml's events under the Python composer give the nodes the Python
loader gives (what hgxkit/recipe/read.py builds a recipe from: tags, values, structure and start lines), and
whatever libyaml refuses is refused in the Python loader's words."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from hgxkit.errors import InputError
from hgxkit.recipe import read

ROOT = Path(__file__).resolve().parents[3]
# Files that are hostile on purpose (an alias bomb, bytes that are not UTF-8): tests/unit/recipe/test_hostile_recipes.py.
HOSTILE = ("alias-bomb", "binary", "utf16-bom")


def _yaml_files() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "*.yaml", "*.yml"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return [name for name in listed if not any(word in name for word in HOSTILE)]


def _shape(node: yaml.Node) -> tuple:
    """What the reader reads of a node: libyaml spells a plain scalar's style '' and a block collection's
    flow_style False where PyYAML has None, and ends a document a line apart; the reader reads none of those."""
    where = (node.tag, node.start_mark.line, node.start_mark.column)
    if isinstance(node, yaml.ScalarNode):
        return ("scalar", *where, node.value, node.style or None)
    if isinstance(node, yaml.SequenceNode):
        return ("sequence", *where, tuple(_shape(item) for item in node.value))
    return ("mapping", *where, tuple((_shape(k), _shape(v)) for k, v in node.value))


def _python(text: str) -> yaml.Node | None:
    loader = read._RecipeYamlLoader(text)
    try:
        return loader.get_single_node()
    finally:
        loader.dispose()


@pytest.mark.parametrize("name", _yaml_files())
def test_libyaml_events_compose_the_nodes_the_python_loader_does(name: str) -> None:
    if not read._FAST:
        why = "PyYAML without libyaml: the reader composes in Python alone"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {why} (PyPI's PyYAML wheels carry libyaml)")
        pytest.skip(why)
    text = (ROOT / name).read_text(encoding="utf-8")
    try:
        python = _python(text)
    except yaml.YAMLError:  # not one recipe-like document (a Kubernetes file of several): both refuse it
        with pytest.raises(yaml.YAMLError):
            read._fast_compose(text)
        return
    fast = read._fast_compose(text)
    assert (fast is None) == (python is None)
    if fast is not None:
        assert _shape(fast) == _shape(python)


@pytest.mark.parametrize(
    "text",
    ["a: *x\n", "a: 1\n---\nb: 2\n", "a: \x85b\n", "[" * 40 + "]" * 40 + "\n", "a: [1, 2\n", "a: 1\n  b: 2\n"],
)
def test_what_libyaml_refuses_is_refused_in_the_python_loaders_words(text: str) -> None:
    with pytest.raises(yaml.YAMLError) as python:
        _python(text)
    with pytest.raises(InputError) as refused:
        read._compose(text, "r.yaml")
    assert refused.value.message == read._yaml_error(python.value, text, "r.yaml").message
