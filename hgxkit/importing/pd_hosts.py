"""A post's prefill and decode commands on different nodes: one recipe laid over hosts, a side on each.

The commonest two-node split post starts the prefill on node A with `--host A`, the decode on node B with
`--host B`, and a router naming both. The listen addresses say where each side runs: every side names an IP
address of its own (not loopback, not every address), so each is a node's. Where the sides listen on every
address (`--host 0.0.0.0`, as SGLang's docs run them), the post's router command says it: its `--prefill` and
`--decode` URLs name each side's node, matched to the side by its port (`router_addresses`). Such commands are
one recipe laid over as many hosts as there are sides (`groups.hosts`, hgxkit.serving.hostshare), one group per
host: the posted addresses are the poster's nodes, not the inventory's, so each side listens on 0.0.0.0 and the
router reaches it at its host's fabric address. The sides' flags that differ become each group's own
(`groups.server_args`, as on one node: hgxkit.importing.pd_join), each group runs on the GPUs its command
names (its device list, else the first tp x pp x dp), and its port is `groups.port_base` + its position.

A kind whose decode reaches its prefill through an address only the node's environment gives (vLLM's NIXL side
channel, `PrefillDecode.side_channel`) is not laid over hosts yet: refused by name.

Example:
    >>> from hgxkit.recipe.server_args import ServerCommand
    >>> sides = [ServerCommand.from_words(["sglang", "serve", "--host", h, "--disaggregation-mode", m], "sglang")
    ...          for h, m in (("10.0.0.1", "prefill"), ("10.0.0.2", "decode"))]
    >>> node_addresses(sides)
    ['10.0.0.1', '10.0.0.2']
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Sequence
from dataclasses import replace
from urllib.parse import urlsplit

from hgxkit.errors import InputError
from hgxkit.importing.pd_join import EVERYWHERE, split_side_flags
from hgxkit.recipe.diff import Difference, diff_recipes
from hgxkit.recipe.docker_options import canonical
from hgxkit.recipe.docker_parse import parse_option_words
from hgxkit.recipe.groups import gpu_ids_from_spec
from hgxkit.recipe.nodes import HGX_GPUS, parallel_size, spans_nodes
from hgxkit.recipe.pd import shared_flags, side
from hgxkit.recipe.server_args import ServerCommand
from hgxkit.recipe.spec import DockerSpec, Grouping, Recipe

# The flags of a PD router command (SGLang's router and mini_lb, vllm-router) that name each side's URLs.
_ROUTER_SIDES = {
    "--prefill": "prefill",
    "--decode": "decode",
    # the production stack's router (vllm_router.app --enable-pd)
    "--static-prefill-backends": "prefill",
    "--static-decode-backends": "decode",
}
# An address a node listens on as written in a post: an IPv4 or IPv6 address, or a host name.
_HOST_NAME = re.compile(r"[0-9A-Za-z][0-9A-Za-z.:-]*")
# Docker options each host's container sets anew: its GPUs, and, on the host's network, no published port.
_PER_HOST = frozenset({"--gpus", "--publish", "--network", "--net"})


def node_addresses_possible(servers: Sequence[ServerCommand]) -> bool:
    """True when the commands are the sides of one split: a prefill and a decode at least, nothing else."""
    found = [side(s) for s in servers]
    return len(servers) >= 2 and None not in found and not {"prefill", "decode"} - set(found)


def node_addresses(servers: Sequence[ServerCommand]) -> list[str] | None:
    """Each side's listen address when the commands are the sides of one split (a prefill and a decode at least)
    and each listens on an address of its own node (an IP address or a host name; no loopback, no 0.0.0.0, no
    variable, no two alike); else None."""
    if not node_addresses_possible(servers):
        return None
    addresses = [s.flag("--host") or "" for s in servers]
    if len(set(addresses)) < len(addresses) or not all(_HOST_NAME.fullmatch(a) for a in addresses):
        return None
    return None if any(_loopback(a) for a in addresses) else addresses


def router_addresses(servers: Sequence[ServerCommand], words: Sequence[str]) -> list[str] | None:
    """Each side's node as a posted router command names it: the host of the `--prefill` or `--decode` URL on the
    port the side listens on (the k-th side on a port takes the k-th such URL), when the sides' hosts are all
    different and none is loopback; None otherwise, or for a command that is no such router.

    >>> from hgxkit.recipe.server_args import ServerCommand
    >>> sides = [ServerCommand.from_words(["sglang", "serve", "--port", p, "--disaggregation-mode", m], "sglang")
    ...          for p, m in (("30000", "prefill"), ("30001", "decode"))]
    >>> router_addresses(sides, ["r", "--prefill", "http://a:30000", "8998", "--decode", "http://b:30001"])
    ['a', 'b']
    """
    urls = _router_urls(words)
    if urls is None:
        return None
    taken: set[tuple[str, int, str]] = set()
    addresses = []
    for server in servers:
        role, port = side(server), server.flag("--port") or str(server.server_kind.default_port)
        found = next((u for u in urls if (u[0], str(u[1])) == (role, port) and u not in taken), None)
        if found is None:
            return None
        taken.add(found)
        addresses.append(found[2])
    if len(set(addresses)) < len(addresses) or any(_loopback(a) for a in addresses):
        return None
    return addresses


def posted_router(commands: Sequence[tuple[str, Sequence[str]]]) -> str | None:
    """Where the first prefill/decode router command among (where, words) `commands` is (one naming URLs of both
    sides); None when there is none."""
    return next((where for where, words in commands if _router_urls(words) is not None), None)


def _router_urls(words: Sequence[str]) -> list[tuple[str, int, str]] | None:
    """(side, port, host) of every `--prefill`/`--decode` URL of a router command (a value may list several,
    comma-separated); None for a command that names no URL of both sides."""
    found = []
    role = None
    for word in words:
        flag, equals, rest = word.partition("=")
        if word.startswith("-"):
            role = _ROUTER_SIDES.get(flag)
            if not equals:
                continue
            word = rest
        for url in word.split(",") if role else ():
            parts = urlsplit(url)
            if parts.scheme and parts.hostname and parts.port:
                found.append((role, parts.port, parts.hostname))
    return found if {r for r, _, _ in found} == {"prefill", "decode"} else None


def _loopback(host: str) -> bool:
    """True for an address no other node reaches this one at (or none at all)."""
    if not host:
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host == "localhost"
    return ip.is_loopback or ip.is_unspecified


def over_hosts(
    recipes: Sequence[Recipe], at: Sequence[str], where: str, commands: Sequence[tuple[str, Sequence[str]]] = ()
) -> tuple[list[Recipe], str] | None:
    """The sides' recipes each listening everywhere, and the note that lays them over hosts, when each command
    runs on a node of its own (`node_addresses`, else a posted router command among `commands`, (where, words)
    pairs, that names them: `router_addresses`); None when they are not such a split. InputError for a kind not
    laid over hosts yet, a side spanning nodes, or commands that differ where one recipe cannot hold it."""
    servers = [r.server for r in recipes]
    kind = servers[0].server_kind
    if node_addresses_possible(servers) and any(spans_nodes(s) for s in servers):
        assert kind.disaggregation is not None
        raise InputError(
            f"{where}: {kind.disaggregation[0]}: a prefill/decode split whose sides each span nodes is not "
            "deployed yet: hgxkit deploys one node's prefill and decode groups, or a split laid over hosts one side "
            "per node"
        )
    found = _nodes(recipes, commands)
    if found is None:
        return None
    addresses, said = found
    split = kind.prefill_decode
    assert split is not None
    if split.side_channel is not None:
        raise InputError(
            f"{where}: the prefill and decode run on different nodes ({', '.join(addresses)}): a "
            f"{kind.title} split laid over hosts, which hgxkit does not deploy yet (its decode reaches the prefill "
            f"at {split.side_channel.env.replace('PORT', 'HOST')}, each node's own address); serve both sides on "
            "one node"
        )
    for recipe, place in zip(recipes[1:], at[1:], strict=True):
        _one_recipe(recipes[0], recipe, (at[0], place), where)
    shown = "; ".join(f"{side(s)} at {a} ({p})" for s, a, p in zip(servers, addresses, at, strict=True))
    note = (
        f"{where}: each side {said} ({shown}): one recipe laid over {len(servers)} "
        f"hosts (groups.hosts), one side per host in the inventory's order; each listens on {EVERYWHERE} and the "
        "router reaches it at its host's fabric address (the posted addresses are not kept)"
    )
    return [_listening_everywhere(r) for r in recipes], note


def _nodes(recipes: Sequence[Recipe], commands: Sequence[tuple[str, Sequence[str]]]) -> tuple[list[str], str] | None:
    """Each side's node and what says so: its listen address, the side-channel host its environment sets (each
    node's own address), or the posted router's URL for it; None when nothing puts the sides on different nodes."""
    servers = [r.server for r in recipes]
    if not node_addresses_possible(servers):
        return None
    addresses = node_addresses(servers)
    if addresses is not None:
        return addresses, "listens on its own node's address"
    split = servers[0].server_kind.prefill_decode
    if split is not None and split.side_channel is not None:
        variable = split.side_channel.env.replace("PORT", "HOST")
        hosts = [next((e.value for e in r.docker.env() if e.name == variable), None) or "" for r in recipes]
        if len(set(hosts)) == len(hosts) and not any(_loopback(h) or "$" in h for h in hosts):
            return hosts, f"sets {variable} to its own node's address"
    for router, words in commands:
        addresses = router_addresses(servers, words)
        if addresses is not None:
            return addresses, f"is on its own node, as the router ({router}) names it"
    return None


def _one_recipe(first: Recipe, other: Recipe, at: tuple[str, str], where: str) -> None:
    """Refuse what two sides on their own hosts differ in that one recipe cannot hold: the flags hgxkit reads
    from server.args alone, the GPUs, the image, the environment or any other docker option."""
    kind = first.server.server_kind
    shared = shared_flags(kind) - {"--host", "--port"}
    kept: list[Difference] = []
    for found in diff_recipes(first, other):
        if found.area == "server" and found.key != "(program)" and found.key not in shared:
            continue  # a side's own flag, or where it listens
        if found.area == "docker" and canonical(found.key) in {"--publish", "--name"}:
            continue
        kept.append(found)
    if kept:
        shown = "; ".join(f"{d.area} {d.key}: {d.a} ({at[0]}) vs {d.b} ({at[1]})" for d in kept[:2])
        raise InputError(
            f"{where}: the prefill and decode commands on their nodes differ in {shown}, which one recipe laid over "
            "hosts gives every host alike; give both sides the same"
        )


def _listening_everywhere(recipe: Recipe) -> Recipe:
    server = recipe.server
    kind = server.server_kind
    names = [entry[0].partition("=")[0] for entry in server.args]
    args = tuple(
        (name, EVERYWHERE) if kind.canonical_flag(name) == "--host" else entry
        for name, entry in zip(names, server.args, strict=True)
    )
    return replace(recipe, server=ServerCommand(server.program, args, server.kind))


def join_hosts(recipe: Recipe, recipes: Sequence[Recipe], where: str) -> tuple[Recipe, list[str]]:
    """The first side's recipe laid over a host per side: one group per host on the GPUs its command names, on the
    host's network, listening on `groups.port_base` + its position, each side's own flags its group's."""
    servers = [r.server for r in recipes]
    shared, own = split_side_flags(servers)
    gpus = gpu_ids_from_spec(recipe.docker.last("--gpus")) or list(range(parallel_size(recipe.server, where)))
    ports = [s.flag("--port") or str(s.server_kind.default_port) for s in servers]
    first = int(ports[0]) if ports[0].isascii() and ports[0].isdigit() else recipe.server.server_kind.default_port
    args = tuple(("--port", "{{port}}") if e[0].partition("=")[0] == "--port" else e for e in shared.args)
    if not any(e[0].partition("=")[0] == "--port" for e in shared.args):
        args += (("--port", "{{port}}"),)
    names = [n for n in (r.docker.last("--name") for r in recipes) if n]
    template = (os.path.commonprefix(names) or "group-") + "{{group}}" if names else None  # noqa: RUF071
    dropped = _PER_HOST | ({"--name"} if template else set())
    entries = [e for e in recipe.docker.entries if not any(canonical(u.option.name) in dropped for u in e.uses)]
    named = ["--name", "{{name}}"] if template else []
    entries += parse_option_words(["--gpus", '"device={{gpus}}"', "--network=host", *named], source=where)
    grouping = Grouping(
        explicit=(tuple(gpus),),
        gpus_per_node=HGX_GPUS,
        port_base=first,
        name_template=template,
        hosts=len(servers),
        server_args=own,
    )
    written = sorted({e[0].partition("=")[0] for entries_ in own for e in entries_})
    notes = [
        f"{where}: each host runs one group on GPUs {','.join(map(str, gpus))} (the GPUs its command uses), on the "
        f"host's network, listening on port {first} + its position (posted: {', '.join(ports)}); each side's "
        f"{', '.join(written)} is its group's own (groups.server_args); the router between them comes from "
        "`--data router=true`, not the post's router command",
        f"{where}: each side listens on every address of its host for the router and the other host; each host's "
        "API key would be its own, and the router passes one, so serve it on a private network with "
        "`--data allow_unauthenticated=true`",
    ]
    if template:
        notes.append(f"{where}: container names {', '.join(names)} become {template}")
    return replace(
        recipe,
        docker=DockerSpec(recipe.docker.invocation, tuple(entries)),
        server=ServerCommand(shared.program, args, shared.kind),
        groups=grouping,
    ), notes
