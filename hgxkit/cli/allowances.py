"""The recipe judgement's allowances as command-line flags: the inventory knobs of the same names.

`recipe check`, `recipe export` and `bundle create` judge a recipe the way a node with these knobs would
(hgxkit.recipe.judge), so each takes the allowances a node would be given, and defaults to a node's defaults.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser()
    >>> allowance_options(parser)
    >>> allowances(parser.parse_args(["--allow-docker-option", "--privileged"])).docker_options
    ('--privileged',)
"""

from __future__ import annotations

import argparse

from hgxkit.recipe.danger import DEFAULT_MODELS_DIR
from hgxkit.recipe.judge import Allowances


def allowance_options(parser: argparse.ArgumentParser, *, bind: bool = True) -> None:
    """Add the allowance flags (each the inventory knob of the same name) to `parser`."""
    group = parser.add_argument_group("allowances (the node's knobs of the same names; default: a node's default)")
    group.add_argument(
        "--allow-docker-option",
        action="append",
        default=[],
        metavar="NAME",
        help="allow_docker_options: a dangerous docker option the node allows, by danger name, option or class "
        "(repeat for more; a name that starts with dashes after `=`: --allow-docker-option=--privileged)",
    )
    group.add_argument(
        "--allow-unauthenticated",
        action="store_true",
        help="allow_unauthenticated: serve beyond loopback without an API key",
    )
    group.add_argument("--api-key", choices=["auto"], help="api_key: auto (the node gives the server a key)")
    if bind:
        group.add_argument("--bind", default="127.0.0.1", help="bind_address (default: 127.0.0.1)")
    group.add_argument(
        "--env-allowlist",
        action="append",
        metavar="NAME",
        help="recipe_env_allowlist: a name {{env:NAME}} may take (repeat; default: HF_TOKEN and the kind's key)",
    )
    group.add_argument(
        "--models-dir",
        action="append",
        metavar="DIR",
        help=f"models_dir and model_dirs_allowed: where mounts may come from (repeat; default: {DEFAULT_MODELS_DIR})",
    )


def allowances(args: argparse.Namespace, *, api_key: str | None = None) -> Allowances:
    """The allowances the flags name; `api_key` stands for `--api-key` when a consumer supplies the key itself."""
    return Allowances(
        docker_options=tuple(args.allow_docker_option),
        unauthenticated=bool(args.allow_unauthenticated),
        api_key=args.api_key or api_key,
        bind_address=getattr(args, "bind", "127.0.0.1"),
        env_allowlist=tuple(args.env_allowlist) if args.env_allowlist else None,
        models_dirs=tuple(args.models_dir or (DEFAULT_MODELS_DIR,)),
    )
