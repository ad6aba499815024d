"""One judgement of a recipe for every path that consumes one: deploy, `recipe check`, export, bundle, verify.

A recipe is untrusted input. `judge` runs the whole policy once: the setup checks (hgxkit.recipe.check), the
docker-option policy (hgxkit.recipe.danger), who can reach the API (hgxkit.recipe.exposure) and the
`{{env:NAME}}` allowlist (hgxkit.recipe.secretenv), under the `Allowances` its consumer was given (the
inventory's allow-knobs on a node; flags of the same names on the command line). It returns the recipe as
`Judged`, or raises `Refused` naming every error. Consumers take a `Judged`, never a bare recipe, so a new one
inherits the policy; `recipe check` prints `findings`, the very list the node refuses on, so the two cannot
disagree. What an allowance let through travels with the judgement (`Judged.allowed_lines`), for exports to
carry visibly.

Example:
    >>> from hgxkit.recipe.read import load_recipe
    >>> judged = judge(load_recipe("recipes/deepseek-v4-flash-dspark-marlin.yaml"), Allowances(), 8)
    >>> judged.allowed_lines()
    []
    >>> try:
    ...     judge(judged.recipe, Allowances(bind_address="0.0.0.0"))
    ... except Refused as refused:
    ...     print(refused.problems[0].code)
    exposure
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from hgxkit.errors import InputError
from hgxkit.netaddr import is_loopback
from hgxkit.problems import Problem, problem_lines
from hgxkit.recipe.check import check_recipe
from hgxkit.recipe.danger import (
    DEFAULT_MODELS_DIR,
    Danger,
    PolicyContext,
    context_for,
    dangerous_options,
    judge_argv,
)
from hgxkit.recipe.exposure import exposure_problems, key_problems, recipe_exposure_problems
from hgxkit.recipe.secretenv import env_problems
from hgxkit.recipe.spec import Recipe


@dataclass(frozen=True)
class Allowances:
    """The allow-knobs a judgement runs under; each default is the inventory knob's default (hgxkit/knobs.py,
    roles/serve/defaults.py): loopback, no key, no dangerous option, the kind's own secret variables."""

    docker_options: tuple[str, ...] = ()  # allow_docker_options
    unauthenticated: bool = False  # allow_unauthenticated
    api_key: str | None = None  # api_key: None, or "auto" (hgxkit gives the server a key)
    bind_address: str = "127.0.0.1"  # bind_address
    env_allowlist: tuple[str, ...] | None = None  # recipe_env_allowlist (None: the kind's default)
    models_dirs: tuple[str, ...] = (DEFAULT_MODELS_DIR,)  # models_dir and model_dirs_allowed
    host_memory_bytes: int | None = None  # the node's RAM (None: the policy's default host)

    def context(self, recipe: Recipe) -> PolicyContext:
        """What the docker-option policy judges `recipe` against under these allowances."""
        return context_for(recipe, models_dirs=self.models_dirs, host_memory_bytes=self.host_memory_bytes)


def allowances_from_knobs(value: Callable[[str], Any], host_memory_bytes: int | None = None) -> Allowances:
    """The allowances an inventory gives: `value(name)` is the typed value of the knob `name` (hgxkit.knobs)."""
    dirs = [str(value("models_dir")), *(str(d) for d in (value("model_dirs_allowed") or []))]
    names = value("recipe_env_allowlist")
    return Allowances(
        docker_options=tuple(str(n) for n in value("allow_docker_options") or ()),
        unauthenticated=bool(value("allow_unauthenticated")),
        api_key=value("api_key"),
        bind_address=str(value("bind_address")),
        env_allowlist=tuple(str(n) for n in names) if names is not None else None,
        models_dirs=tuple(dirs),
        host_memory_bytes=host_memory_bytes,
    )


@dataclass(frozen=True)
class Judged:
    """A recipe that passed the judgement, with the allowances it passed under and what they let through."""

    recipe: Recipe
    allowances: Allowances
    warnings: tuple[Problem, ...] = ()
    allowed: tuple[Danger, ...] = ()  # dangerous options an allowance let through

    def allowed_lines(self) -> list[str]:
        """One line per danger an allowance let through, naming the allowance: for exports to carry."""
        lines = [f"allowed by allow_docker_options: {d.option}: {d.reason}" for d in self.allowed]
        if self.allowances.unauthenticated and not is_loopback(self.allowances.bind_address):
            lines.append(f"allowed by allow_unauthenticated: the API on {self.allowances.bind_address} takes no key")
        return lines


class Refused(InputError):
    """The recipe failed the judgement: every error, one line each, under a heading naming the recipe."""

    def __init__(self, recipe: Recipe, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        super().__init__(f"{recipe.path or recipe.name}: refused; nothing was changed:\n{problem_lines(problems)}")


def findings(recipe: Recipe, allowances: Allowances | None = None, total_gpus: int | None = None) -> list[Problem]:
    """Every error and warning of `recipe` under `allowances` on a node of `total_gpus` GPUs (None: the recipe's
    own count): what `recipe check` prints and the node refuses on."""
    return check_recipe(recipe, total_gpus) + policy_problems(recipe, allowances or Allowances())


def policy_problems(recipe: Recipe, allowances: Allowances) -> list[Problem]:
    """What the allowances decide: exposure, dangerous docker options, the recipe's `{{env:NAME}}` names."""
    allow, key = allowances.unauthenticated, allowances.api_key
    problems = exposure_problems(allowances.bind_address, key, allow)
    problems += recipe_exposure_problems(recipe, api_key=key, allow_unauthenticated=allow)
    problems += docker_option_problems(recipe, allowances.docker_options, allowances.context(recipe))
    problems += env_problems(recipe, allowances.env_allowlist)
    problems += key_problems(recipe, key)
    return problems


def judge(recipe: Recipe, allowances: Allowances | None = None, total_gpus: int | None = None) -> Judged:
    """`recipe` judged under `allowances` (module doc); `Refused` when any error is found."""
    allowances = allowances or Allowances()
    found = findings(recipe, allowances, total_gpus)
    errors = [p for p in found if p.level == "error"]
    if errors:
        raise Refused(recipe, errors)
    dangers = dangerous_options(recipe, allowances.context(recipe))
    allowed = tuple(d for d in dangers if d.allowed_by(allowances.docker_options))
    return Judged(recipe, allowances, tuple(p for p in found if p.level != "error"), allowed)


def docker_option_problems(
    recipe: Recipe, allowed: Sequence[str], context: PolicyContext | None = None
) -> list[Problem]:
    """Dangerous docker options (hgxkit.recipe.danger) the inventory has not allowed by name or class."""
    return [_option_problem(danger) for danger in dangerous_options(recipe, context) if not danger.allowed_by(allowed)]


def argv_problems(argv: Sequence[str], allowed: Sequence[str], context: PolicyContext | None = None) -> list[Problem]:
    """The same judgement on the literal argv the node is about to hand Docker (the last check before a start)."""
    return [_option_problem(danger) for danger in judge_argv(argv, context) if not danger.allowed_by(allowed)]


def _option_problem(danger: Danger) -> Problem:
    return Problem(
        "docker-option",
        f"{danger.option}: {danger.reason}",
        f'remove it, or if you trust this recipe with that, set allow_docker_options: ["{danger.name}"] in the '
        f"inventory (--allow-docker-option={danger.name} for recipe check and export)",
    )
