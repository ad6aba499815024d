"""The side channel of a prefill/decode split's servers (vLLM's NIXL: `VLLM_NIXL_SIDE_CHANNEL_PORT`): a port that
every server of either side binds on its host, so two groups of one host need two, and why a recipe's do not.

The recipe names each group's port in the containers' environment, with the group's placeholders
(`-e VLLM_NIXL_SIDE_CHANNEL_PORT=560{{group}}`); a server with data parallelism binds port + DP rank for each
rank. A group that does not set it binds the kind's default (5600), so two such groups collide.

Example:
    >>> group_value("560{{group}}", 1, None)
    '5601'
"""

from __future__ import annotations

from collections.abc import Sequence

from hgxkit.problems import Problem
from hgxkit.recipe.server_args import ServerCommand
from hgxkit.recipe.spec import Recipe


def group_value(value: str, index: int, port: int | None) -> str:
    """An environment value as group `index` (listening on `port`) gets it: its placeholders filled."""
    return value.replace("{{group}}", str(index)).replace("{{port}}", "" if port is None else str(port))


def _ranks(server: ServerCommand) -> int:
    """The data-parallel ranks the server runs on its host (each binds its own side-channel port)."""
    kind = server.server_kind
    dp = server.flag(kind.dp_flag) or "1"
    return int(dp) if dp.isascii() and dp.isdigit() and int(dp) > 0 else 1


def side_channel_problems(recipe: Recipe, servers: Sequence[ServerCommand]) -> list[Problem]:
    """Two groups of one host on one side-channel port (the second cannot bind it and exits), or a value that is
    no port number, naming the groups and the variable; [] for a kind without a side channel."""
    split = recipe.server.server_kind.prefill_decode
    if split is None or split.side_channel is None:
        return []
    env = split.side_channel.env
    values = [s.value for s in recipe.docker.env() if s.name == env]
    written = values[-1] if values else None
    if values and written is None:
        return []  # taken from the host's environment at run time: not known here
    base = recipe.groups.port_base if recipe.groups is not None else None
    owners: dict[int, int] = {}
    problems: list[Problem] = []
    remedy = f"give each group its own: -e {env}={str(split.side_channel.default)[:-1]}{{{{group}}}}"
    for index, server in enumerate(servers):
        port = base + index if base is not None else None
        value = group_value(written, index, port) if written is not None else str(split.side_channel.default)
        if not (value.isascii() and value.isdigit() and 0 < int(value) < 65536):
            problems.append(Problem("pd-side-channel", f"group {index}: {env} {value!r} is not a port number", remedy))
            continue
        for rank in range(_ranks(server)):
            taken = int(value) + rank
            if taken in owners:
                problems.append(
                    Problem(
                        "pd-side-channel",
                        f"groups {owners[taken]} and {index} both bind port {taken} ({env}) on one host, so the "
                        "second exits",
                        remedy,
                    )
                )
                break
            owners[taken] = index
    return problems
