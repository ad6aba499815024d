"""Render a recipe back into the exact `docker run` commands, one per GPU group.

Example:
    >>> from hgxkit.recipe.loader import load_recipe
    >>> groups = render_recipe(load_recipe("recipes/deepseek-v4-flash-dspark-marlin.yaml"), total_gpus=8)
    >>> [(g.name, g.gpus, g.port) for g in groups]
    [('deepseek-v4-flash-0', [0, 1, 2, 3], 5000), ('deepseek-v4-flash-1', [4, 5, 6, 7], 5001)]
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from hgxkit.errors import InputError
from hgxkit.recipe.groups import group_problems, plan_gpu_groups
from hgxkit.recipe.model import ENV_REF_RE, Recipe
from hgxkit.recipe.shellwords import LITERAL_DOLLAR, quote_word, shell_value

SecretMode = Literal["reference", "resolve"]


@dataclass(frozen=True)
class RenderedGroup:
    """One container of a recipe: its group index, name, GPUs, host port and full argv."""

    group: int
    name: str | None
    gpus: list[int] | None
    port: int | None
    lines: list[list[str]]
    env_refs: list[str] = field(default_factory=list)

    @property
    def argv(self) -> list[str]:
        """Every word in order, in the lexer's notation (a literal dollar sign is `$$`; see shellwords)."""
        return [word for line in self.lines for word in line]

    @property
    def shell_argv(self) -> list[str]:
        """Every word as a shell splitter shows it: `$NAME` unexpanded, literal dollar signs as one `$`."""
        return [shell_value(word) for word in self.argv]

    def to_json(self) -> dict[str, object]:
        return {
            "group": self.group,
            "name": self.name,
            "gpus": self.gpus,
            "port": self.port,
            "argv": self.shell_argv,
        }

    def shell(self) -> str:
        """The command as a person would post it: one option per line, continued with backslashes."""
        return " \\\n    ".join(" ".join(quote_word(word) for word in line) for line in self.lines if line)


def resolve_groups(
    recipe: Recipe, *, total_gpus: int | None = None, groups: list[tuple[int, ...]] | None = None
) -> list[tuple[int, ...]] | None:
    """The GPU groups to render: explicit `groups`, the recipe's own, or planned over `total_gpus`.

    Returns None for a recipe without grouping (one command, rendered as written).
    """
    where = recipe.path or recipe.name
    if recipe.groups is None:
        if groups is not None and len(groups) > 1:
            raise InputError(
                f"{where}: the recipe has no GPU grouping (no X placeholders); it renders one command"
            )
        return None
    if groups is not None:
        planned = groups
    elif recipe.groups.explicit is not None:
        planned = list(recipe.groups.explicit)
    else:
        total = total_gpus if total_gpus is not None else recipe.groups.gpus_per_node
        if total is None:
            raise InputError(
                f'{where}: how many GPUs? pass --gpus N (e.g. --gpus 8) or --groups "0,1,2,3;4,5,6,7"'
            )
        assert recipe.groups.size is not None  # loader guarantees size or explicit
        try:
            planned = plan_gpu_groups(group_size=recipe.groups.size, total_gpus=total)
        except InputError as err:
            raise InputError(f"{where}: {err.message}") from None
    problems = group_problems(planned, total_gpus)
    if problems:
        raise InputError(f"{where}: {problems[0]}; fix the GPU groups")
    return planned


def render_recipe(
    recipe: Recipe,
    *,
    total_gpus: int | None = None,
    groups: list[tuple[int, ...]] | None = None,
    secrets: SecretMode = "reference",
    environ: Mapping[str, str] | None = None,
) -> list[RenderedGroup]:
    """Render one `RenderedGroup` per GPU group (one in all for a recipe without grouping).

    `secrets="reference"` leaves `${NAME}` in place of each `{{env:NAME}}` (safe to print);
    `secrets="resolve"` substitutes the value from `environ` (for running the command, never for output).
    """
    planned = resolve_groups(recipe, total_gpus=total_gpus, groups=groups)
    env = os.environ if environ is None else environ
    template: list[list[str]] = [
        list(recipe.docker.invocation),
        *(list(entry.words) for entry in recipe.docker.entries),
        [recipe.image.pinned()],
        list(recipe.server.program),
        *(list(entry) for entry in recipe.server.args),
    ]
    if planned is None:
        return [_ungrouped(recipe, _fill(template, {}, secrets, env, recipe))]
    rendered = []
    assert recipe.groups is not None
    for index, gpu_ids in enumerate(planned):
        name = (recipe.groups.name_template or "").replace("{{group}}", str(index)) or None
        port = recipe.groups.port_base + index if recipe.groups.port_base is not None else None
        values = {
            "{{group}}": str(index),
            "{{gpus}}": ",".join(str(gpu) for gpu in gpu_ids),
            "{{name}}": name or "",
            "{{port}}": str(port) if port is not None else "",
        }
        lines = _fill(template, values, secrets, env, recipe)
        rendered.append(RenderedGroup(index, name, list(gpu_ids), port, lines, recipe.env_refs()))
    return rendered


def _fill(
    template: list[list[str]],
    values: dict[str, str],
    secrets: SecretMode,
    env: Mapping[str, str],
    recipe: Recipe,
) -> list[list[str]]:
    return [[_substitute(word, values, secrets, env, recipe) for word in line] for line in template]


def _substitute(
    word: str, values: dict[str, str], secrets: SecretMode, env: Mapping[str, str], recipe: Recipe
) -> str:
    for placeholder, value in values.items():
        word = word.replace(placeholder, value)

    def env_value(match: re.Match[str]) -> str:
        name = match.group(1)
        if secrets == "reference":
            return "${" + name + "}"
        if name not in env:
            raise InputError(
                f"{recipe.path or recipe.name}: {{{{env:{name}}}}} needs ${name}; export it first"
            )
        return env[name].replace("$", LITERAL_DOLLAR)  # a value is passed as it is, never expanded

    return ENV_REF_RE.sub(env_value, word)


def _ungrouped(recipe: Recipe, lines: list[list[str]]) -> RenderedGroup:
    gpus_value = recipe.docker.last("--gpus")
    gpus = None
    if gpus_value:
        spec = gpus_value.strip("\"'")
        ids = spec.split("device=", 1)[1] if "device=" in spec else ""
        if ids and all(part.strip().isdigit() for part in ids.split(",")):
            gpus = [int(part) for part in ids.split(",")]
    port = None
    for mapping in recipe.docker.ports():
        if mapping.host_port.isdigit():
            port = int(mapping.host_port)
            break
    return RenderedGroup(0, recipe.docker.last("--name"), gpus, port, lines, recipe.env_refs())
