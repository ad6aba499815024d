"""Prefill/decode disaggregation on one node or laid over hosts: each group's side, read from its own server
command through its kind (`ServerKind.disaggregation`, `ServerKind.prefill_decode`), and what makes such a split
unsound.

A prefill group and a decode group differ in their own server arguments (`groups.server_args`, after the
server's). Neither serves a request alone: the router (`router: true`, roles/router) sends each request to
both with a bootstrap room, and the decode fetches the KV from the prefill's bootstrap server at the address the
router names, which is 127.0.0.1 on the router's own host: so the groups run with the host's network. Laid over
hosts (`groups.hosts`: the prefill on one node, the decode on another; hgxkit.serving.hostshare) the router names
each side by its node's address, so each server listens beyond loopback (`split_host_problems`). vLLM's (NIXL) is
alike: the router sends each request to the prefill first, and the decode pulls the KV from the side channel the
prefill's answer names (VLLM_NIXL_SIDE_CHANNEL_HOST, localhost by default), one port per server (`side_channel`).

Example:
    >>> from hgxkit.recipe.server_args import ServerCommand
    >>> side(ServerCommand.from_words(["sglang", "serve", "--disaggregation-mode", "decode"], "sglang"))
    'decode'
"""

from __future__ import annotations

import re

from hgxkit.errors import InputError
from hgxkit.kinds.base import ServerKind, json_key
from hgxkit.netaddr import is_loopback
from hgxkit.problems import Problem
from hgxkit.recipe.groups import plan_groups
from hgxkit.recipe.server_args import ServerCommand
from hgxkit.recipe.side_channel import side_channel_problems
from hgxkit.recipe.spec import Recipe

UNDEPLOYED = "one side"
ROUTER_REMEDY = "deploy with --data router=true (the router joins the prefill and decode groups)"


def group_server(recipe: Recipe, index: int) -> ServerCommand:
    """Group `index`'s server command: the server's arguments, then the group's own (`groups.server_args`)."""
    own = recipe.groups.server_args if recipe.groups is not None else None
    extra = own[index] if own is not None and index < len(own) else ()
    return ServerCommand(recipe.server.program, (*recipe.server.args, *extra), recipe.server.kind)


def side(server: ServerCommand) -> str | None:
    """'prefill' or 'decode' for one side of a split; UNDEPLOYED for one side of a split of a kind hgxkit does not
    deploy split yet; None for a server that does both."""
    kind = server.server_kind
    found = kind.disaggregation
    value = server.flag(found[0]) if found else None
    if found is None or value is None or not re.fullmatch(found[1], value):
        return None
    return kind.prefill_decode.role(value) if kind.prefill_decode is not None else UNDEPLOYED


def is_side(server: ServerCommand) -> bool:
    """Whether the server is one side of a split: it names a side (`side`), the prefill's bootstrap port, or the
    role that leaves its side to a router (vLLM's kv_both) with a transfer backend of the kind's split. kv_both with
    another connector (LMCache's, an offload's) is a server that does both, as vLLM runs it.

    Example:
        >>> is_side(ServerCommand.from_words(["vllm", "serve", "m", "--kv-transfer-config",
        ...     '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'], "vllm"))
        False
    """
    kind = server.server_kind
    split, found = kind.prefill_decode, kind.disaggregation
    if side(server) is not None:
        return True
    if split is None or found is None:
        return False
    if split.bootstrap_flag is not None and server.flag(split.bootstrap_flag) is not None:
        return True
    value = server.flag(found[0])
    if value is None or split.either is None or split.role_key is None:
        return False
    either = json_key(value, split.role_key) == split.either
    return either and split.backend(server.flag(split.backend_flag)) in split.backends


def group_count(recipe: Recipe, total_gpus: int | None) -> int:
    """The groups the recipe makes over its hosts (`groups.hosts`) of `total_gpus` each (1 without grouping)."""
    groups = recipe.groups
    if groups is None:
        return 1
    return host_group_count(recipe, total_gpus) * (groups.hosts or 1)


def host_group_count(recipe: Recipe, total_gpus: int | None) -> int:
    """The groups the recipe makes on one host of `total_gpus` (1 without grouping or a GPU count to plan on)."""
    groups = recipe.groups
    if groups is None:
        return 1
    if groups.explicit is not None:
        return len(groups.explicit)
    given = len(groups.server_args or ()) // (groups.hosts or 1)
    if (total_gpus or groups.gpus_per_node) is None:
        return given or 1
    try:
        return len(plan_groups(recipe, total_gpus=total_gpus, refuse_unsound=False) or []) or 1
    except InputError:  # a size that does not divide the node: the group checks name it
        return given or 1


def sides(recipe: Recipe, total_gpus: int | None = None) -> list[str | None]:
    """Each group's side, in group order."""
    return [side(group_server(recipe, index)) for index in range(group_count(recipe, total_gpus))]


def is_prefill_decode(recipe: Recipe, total_gpus: int | None = None) -> bool:
    """True when any group is one side of a split (the router must join them, verify goes through it)."""
    return any(sides(recipe, total_gpus))


def pd_router_problem(recipe: Recipe) -> Problem:
    """A split deployed without the router (a deploy knob, so the serving role asks it before changing a host)."""
    return Problem(
        "pd-router",
        f"{recipe.path or recipe.name} splits prefill and decode over its groups, which answer no request without "
        "the router between them, and router is false",
        ROUTER_REMEDY,
    )


def pd_key_problem(recipe: Recipe) -> Problem | None:
    """A split served with an API key (`api_key`) whose kind's router cannot front keyed groups
    (`PDRouter.keyless`), so the serving role refuses it before changing a host; None when its router can.

    >>> from hgxkit.recipe.read import load_recipe
    >>> pd_key_problem(load_recipe("tests/fixtures/pd/vllm-pd-one-node.yaml")).code
    'pd-router-key'
    """
    split = recipe.server.server_kind.prefill_decode
    reason = split.router.keyless if split is not None else None
    if reason is None:
        return None
    return Problem(
        "pd-router-key",
        f"{recipe.path or recipe.name} splits prefill and decode behind {reason}",
        "serve the split without api_key, its router on 127.0.0.1 (router_bind_address) or a trusted network",
    )


def bootstrap_port(server: ServerCommand) -> str | None:
    """The prefill's bootstrap port as its command gives it, else the kind's default; None for a kind whose
    prefill has no bootstrap port (vLLM's NIXL names its side channel in each answer instead)."""
    split = server.server_kind.prefill_decode
    assert split is not None
    if split.bootstrap_flag is None:
        return None
    return server.flag(split.bootstrap_flag) or str(split.default_bootstrap_port)


def side_words(server: ServerCommand, role: str) -> str:
    """How a group's own arguments name `role` ('prefill' or 'decode'), for a remedy.

    >>> side_words(ServerCommand.from_words(["vllm", "serve"], "vllm"), "decode")
    'kv_role kv_consumer in --kv-transfer-config'
    """
    kind = server.server_kind
    split = kind.prefill_decode
    assert split is not None and kind.disaggregation is not None
    value = split.prefill if role == "prefill" else split.decode
    if split.role_key:
        return f"{split.role_key} {value} in {kind.disaggregation[0]}"
    return f"{kind.disaggregation[0]} {value}"


def pd_problems(recipe: Recipe, total_gpus: int | None) -> list[Problem]:
    """Why the recipe's prefill/decode split cannot serve on one node: one error line each, naming the group and
    the remedy; [] for a recipe without a split."""
    servers = [group_server(recipe, index) for index in range(group_count(recipe, total_gpus))]
    found = [side(server) for server in servers]
    if not any(found):
        return []
    kind = recipe.server.server_kind
    flag = kind.disaggregation[0] if kind.disaggregation else ""
    if UNDEPLOYED in found:
        group = found.index(UNDEPLOYED)
        return [
            Problem(
                "pd-kind",
                f"group {group} is one side of a prefill/decode split ({flag}), which hgxkit does not deploy for "
                f"{kind.title} yet",
                f"serve both phases in every group (without {flag})",
            )
        ]
    per_host = host_group_count(recipe, total_gpus)
    problems = _own_arg_problems(recipe, len(servers))
    problems += split_host_problems(recipe)
    for have, lack in (("prefill", "decode"), ("decode", "prefill")):
        if have in found and lack not in found:
            group = found.index(have)
            problems.append(
                Problem(
                    "pd-split",
                    f"group {group} is a {have} server but no group is a {lack} server, so no request completes",
                    f"give another group {side_words(servers[group], lack)} in groups.server_args",
                )
            )
    problems += _bootstrap_problems(servers, found, per_host)
    problems += _backend_problems(servers, found)
    problems += side_channel_problems(recipe, servers)
    port = recipe.server.flag("--port") or ""
    if recipe.docker.last("--network") == "host" and len(servers) > 1 and "{{port}}" not in port:
        problems.append(
            Problem(
                "pd-port",
                f"every group's server listens on port {port or recipe.server.server_kind.default_port} of the "
                "host's network, so only the first starts",
                "give each its own: --port {{port}} (groups.port_base)",
            )
        )
    if recipe.docker.last("--network") != "host":
        problems.append(_network_problem(servers[0]))
    return problems


def split_host_problems(recipe: Recipe) -> list[Problem]:
    """Why a split cannot be laid over hosts (`groups.hosts`: each host runs its share of the groups in turn): groups
    that each span nodes, and a server that listens on loopback
    (the router on one host and the decode on another reach each side's server and bootstrap port at its node's
    address); [] for a split on one node or one that can be laid over its hosts.

    >>> from hgxkit.recipe.read import load_recipe
    >>> split_host_problems(load_recipe("tests/fixtures/pd/dspark-pd-two-nodes.yaml"))
    []
    """
    groups = recipe.groups
    problems = []
    if recipe.node_count() > 1:
        problems.append(
            Problem(
                "pd-nodes",
                "a prefill/decode split whose groups each span nodes (groups.nodes) is not deployed yet",
                "drop groups.nodes; to put the sides on different nodes, set groups.hosts",
            )
        )
    hosts = groups.host_count if groups is not None else 1
    if hosts < 2 or groups is None:
        return problems
    split = recipe.server.server_kind.prefill_decode
    if split is not None and split.side_channel is not None:
        problems.append(
            Problem(
                "pd-hosts",
                f"the decode pulls the KV from the side channel at {split.side_channel.env.replace('PORT', 'HOST')}, "
                f"which would have to be each node's own address: a {recipe.server.server_kind.title} split laid "
                "over hosts is not deployed yet",
                "drop groups.hosts (serve both sides on one node)",
            )
        )
    listen = recipe.server.flag("--host")
    if listen is None or is_loopback(listen):
        problems.append(
            Problem(
                "pd-reach",
                f"the split is laid over {hosts} hosts, but its servers listen on {listen or 'the default'} "
                "(loopback): the router and the other host's groups reach each side's server and bootstrap port "
                "at its node's address",
                "set --host 0.0.0.0 (or the nodes' fabric address) in server.args",
            )
        )
    return problems


def _network_problem(server: ServerCommand) -> Problem:
    """A split off the host's network: the decode reaches the prefill at an address of the host."""
    split = server.server_kind.prefill_decode
    assert split is not None
    where = "bootstrap port at the address the router gives (127.0.0.1 on its host)"
    if split.side_channel is not None:
        where = f"side channel at the host the prefill names ({split.side_channel.env.replace('PORT', 'HOST')})"
    return Problem(
        "pd-network",
        f"the decode groups fetch the KV from the prefill's {where}, which a container's own network does not reach",
        "run the groups with --network host (and --port {{port}})",
    )


def _backend_problems(servers: list[ServerCommand], found: list[str | None]) -> list[Problem]:
    """A side whose KV transfer backend is not one a deployment is known to work with."""
    problems = []
    for index, (server, role) in enumerate(zip(servers, found, strict=True)):
        split = server.server_kind.prefill_decode
        assert split is not None
        backend = split.backend(server.flag(split.backend_flag)) if role else ""
        if role and backend not in split.backends:
            name = f"{split.backend_key} " if split.backend_key else f"{split.backend_flag} "
            problems.append(
                Problem(
                    "pd-backend",
                    f"{role} group {index}: {name}{backend or 'unset'} is not a transfer backend hgxkit deploys a "
                    f"split over",
                    f"use {' or '.join(split.backends)}",
                )
            )
    return problems


def _bootstrap_problems(servers: list[ServerCommand], found: list[str | None], per_host: int) -> list[Problem]:
    """Two prefill groups of one host (`per_host` groups each, in turn) on one bootstrap port: the second cannot
    bind it."""
    problems = []
    seen: dict[tuple[int, str], int] = {}
    for index, (server, role) in enumerate(zip(servers, found, strict=True)):
        port = bootstrap_port(server) if role == "prefill" else None
        split = server.server_kind.prefill_decode
        if port is None or split is None or split.bootstrap_flag is None:
            continue
        if not (port.isdigit() and 0 < int(port) < 65536):
            problems.append(
                Problem(
                    "pd-bootstrap",
                    f"prefill group {index}: {split.bootstrap_flag} {port!r} is not a port number",
                    f"give {split.bootstrap_flag} a port from 1 to 65535 in groups.server_args",
                )
            )
            continue
        where = (index // max(per_host, 1), port)
        if where in seen:
            problems.append(
                Problem(
                    "pd-bootstrap",
                    f"prefill groups {seen[where]} and {index} both open bootstrap port {port} on one host",
                    f"give group {index} its own {split.bootstrap_flag} in groups.server_args",
                )
            )
        seen.setdefault(where, index)
    return problems


def shared_flags(kind: ServerKind) -> frozenset[str]:
    """The flags hgxkit reads from server.args alone, never a group's own: the GPUs a group needs (parallel
    sizes), the model and its served name, where it listens."""
    return frozenset(
        f
        for f in (kind.tp_flag, kind.pp_flag, kind.dp_flag, kind.model_flag, "--served-model-name", "--host", "--port")
        if f
    )


def _own_arg_problems(recipe: Recipe, count: int) -> list[Problem]:
    """`groups.server_args` one entry per group, and none of the flags hgxkit reads from server.args alone
    (the GPUs a group needs, the model and its served name, where it listens)."""
    own = recipe.groups.server_args if recipe.groups is not None else None
    if own is None:
        return []
    problems = []
    if len(own) != count:
        problems.append(
            Problem(
                "pd-groups",
                f"groups.server_args has {len(own)} entries but the recipe makes {count} groups",
                "give one list of server arguments per group",
            )
        )
    shared = shared_flags(recipe.server.server_kind)
    for index, entries in enumerate(own):
        server = ServerCommand((), entries, recipe.server.kind)
        for use in server.uses():
            if use.name in shared:
                problems.append(
                    Problem(
                        "pd-groups",
                        f"group {index} sets {use.words[0]} in groups.server_args, which hgxkit reads from "
                        "server.args for every group",
                        f"move {use.words[0]} to server.args",
                    )
                )
    return problems
