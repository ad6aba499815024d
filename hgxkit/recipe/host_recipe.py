"""The recipe a host serves: its `recipe` knob resolved to a file, loaded and validated once per run.

Every role and deploy takes the recipe from `recipe_for(host)`; the knob itself (and its default, the seed
post's recipe) is in hgxkit/knobs.py.

Example:
    >>> recipe_path("recipes/deepseek-v4-flash-dspark-marlin.yaml").name
    'deepseek-v4-flash-dspark-marlin.yaml'
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pyinfra.api.exceptions import DeployError

from hgxkit.errors import HgxkitError
from hgxkit.knobs import knob
from hgxkit.recipe.read import load_recipe
from hgxkit.recipe.spec import Recipe

REPO_ROOT = Path(__file__).resolve().parents[2]


def recipe_path(value: str | None) -> Path:
    """Where the `recipe` knob points: as given (relative to the working directory), else relative to the
    hgxkit checkout (so `recipes/x.yaml` works from anywhere). Raises HgxkitError when unset."""
    if not value:
        raise HgxkitError(
            "no recipe: name one with --data recipe=recipes/FILE.yaml (or `recipe:` in the inventory); "
            "`hgxkit recipe import POST.txt -o recipes/FILE.yaml` makes one from a post"
        )
    path = Path(str(value))
    if path.is_absolute() or path.exists():
        return path
    in_checkout = REPO_ROOT / path
    return in_checkout if in_checkout.exists() else path


_LOADED: dict[tuple[str, int], Recipe] = {}


def recipe_for(host: Any) -> Recipe:
    """The recipe the `recipe` knob names for `host`, loaded and validated once per run (by path and mtime).

    Every role and deploy takes the recipe from here; errors become one-line `DeployError`s before any change.
    """
    try:
        path = recipe_path(knob(host, "recipe"))
        key = (str(path.resolve()), path.stat().st_mtime_ns if path.exists() else 0)
        if key not in _LOADED:
            _LOADED[key] = load_recipe(path)
        return _LOADED[key]
    except HgxkitError as err:
        raise DeployError(f"{host.name}: {err.message}") from None
