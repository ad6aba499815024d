"""Who can reach a recipe's API: an address beyond loopback needs an API key or an explicit allowance.

Example:
    >>> [p.code for p in exposure_problems("0.0.0.0", None, False)]
    ['exposure']
    >>> exposure_problems("127.0.0.1", None, False)
    []
"""

from __future__ import annotations

from hgxkit.errors import InputError
from hgxkit.netaddr import is_loopback
from hgxkit.problems import Problem
from hgxkit.recipe.effective import effective_host
from hgxkit.recipe.spec import Recipe

_TRUE = frozenset({"true", "1", "t", "True", "TRUE"})


def exposure_problems(bind_address: str, api_key: str | None, allow_unauthenticated: bool) -> list[Problem]:
    """Binding beyond loopback needs an API key or an explicit `allow_unauthenticated: true`.

    `api_key` is None or "auto"; any other value (a key pasted into the inventory) is refused, because the
    roles would not pass it to the server, and a key kept in an inventory ends up in version control.
    """
    if api_key not in (None, "auto"):
        return [
            Problem(
                "api_key",
                f"api_key is set to a value other than auto ({len(str(api_key))} characters, not shown)",
                "set api_key: auto (a key is generated on the host, root-only) or remove it",
            )
        ]
    if is_loopback(bind_address) or api_key or allow_unauthenticated:
        return []
    return [
        Problem(
            "exposure",
            f"bind_address {bind_address} publishes the API beyond this host without an API key",
            "set api_key: auto (a key is generated and kept root-only on the host), bind 127.0.0.1, "
            "or set allow_unauthenticated: true",
        )
    ]


def recipe_exposure_problems(recipe: Recipe, *, api_key: str | None, allow_unauthenticated: bool) -> list[Problem]:
    """Exposure the recipe itself causes, whatever `bind_address` says: `-P` (`--publish-all`, `=true` too)
    publishes every exposed port on every interface; with `--network host` no port is published, the server's
    effective `--host` is what binds (hgxkit.recipe.effective: through `sh -c` wrappers too; the kind's default
    when absent: SGLang 127.0.0.1, vLLM all interfaces)."""
    problems = []
    if any(value is None or value in _TRUE for value in recipe.docker.values("--publish-all")):
        problems.append(
            Problem(
                "exposure",
                "-P publishes every exposed port on every interface, whatever bind_address says",
                "publish the server's port with -p instead",
            )
        )
    if recipe.docker.last("--network") == "host" and not (api_key or allow_unauthenticated or own_key(recipe)):
        kind = recipe.server.server_kind
        try:
            host = effective_host(recipe)
        except InputError as err:
            return [
                *problems,
                Problem(
                    "exposure",
                    f"{err.message}, so who can reach the API is not known",
                    "write the server's flags without a sh -c wrapper",
                ),
            ]
        if not is_loopback(host):
            problems.append(
                Problem(
                    "exposure",
                    f"--network host with the server listening on {host} (--host, or {kind.title}'s default) "
                    "opens the API on every interface without an API key",
                    "set api_key: auto, add --host 127.0.0.1 to the server, or set allow_unauthenticated: true",
                )
            )
    return problems


def own_key(recipe: Recipe) -> bool:
    """The recipe gives its server a key itself: the kind's `--api-key` flag, or its key variable (`-e
    VLLM_API_KEY=...`); both can only come from the operator's environment (hgxkit.recipe.secretenv)."""
    kind = recipe.server.server_kind
    return recipe.server.has("--api-key") or bool(
        kind.api_key_env and any(e.name == kind.api_key_env for e in recipe.docker.env())
    )


def key_problems(recipe: Recipe, api_key: str | None) -> list[Problem]:
    """`api_key: auto` for a kind that takes its key in `--config` (SGLang), with a recipe that brings its own key
    or its own `--config`: one of the two would be lost."""
    kind = recipe.server.server_kind
    if api_key != "auto" or kind.api_key_env is not None:
        return []
    problems = []
    if recipe.server.has("--api-key"):
        problems.append(
            Problem(
                "api_key",
                f"api_key: auto passes the key in {kind.title}'s --config, and the recipe brings its own --api-key",
                "drop one of them",
            )
        )
    if recipe.server.has("--config"):
        problems.append(
            Problem(
                "api_key",
                f"api_key: auto passes the key in {kind.title}'s --config, and the recipe has its own --config",
                "move the recipe's --config settings into flags",
            )
        )
    return problems
