"""A post's prefill and decode commands on one node: the groups of one recipe, each side's flags its own.

A one-node prefill/decode post starts the prefill server on some GPUs and the decode server on others, then the
router between them. The two `docker run` commands differ in their GPUs, names, ports and the side flags
(`ServerKind.disaggregation`'s and the bootstrap port), and often in tuning flags of each side (a prefill's
`--enforce-eager`, a decode's `--max-num-seqs`); they join like GPU groups (hgxkit.importing.group_join), the side
flags and every flag the sides set differently go to each group's own arguments (`groups.server_args`), and on
the host's network the servers' own ports become `--port {{port}}` from `groups.port_base`. The router command is
not taken: the router is the deploy knob `router` (its PD arguments are written from the groups,
hgxkit.serving.router).

Example:
    >>> from hgxkit.recipe.server_args import ServerCommand
    >>> sides = [ServerCommand.from_words(["sglang", "serve", "--tp", "4", "--disaggregation-mode", m], "sglang")
    ...          for m in ("prefill", "decode")]
    >>> shared, own = split_side_flags(sides)
    >>> shared.args, own
    ((('--tp', '4'),), ((('--disaggregation-mode', 'prefill'),), (('--disaggregation-mode', 'decode'),)))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from hgxkit.errors import InputError
from hgxkit.kinds.base import ServerKind
from hgxkit.knobs import SHARED_DEFAULTS
from hgxkit.netaddr import is_loopback
from hgxkit.recipe.docker_options import canonical
from hgxkit.recipe.docker_parse import parse_option_words
from hgxkit.recipe.nodes import parallel_size
from hgxkit.recipe.server_args import ServerCommand
from hgxkit.recipe.spec import DockerSpec, Recipe

Own = tuple[tuple[tuple[str, ...], ...], ...]
EVERYWHERE = "0.0.0.0"


def side_flags(kind: ServerKind) -> frozenset[str]:
    """The flags in which a prefill command and a decode command of one split may differ (canonical)."""
    split = kind.prefill_decode
    if split is None or kind.disaggregation is None:
        return frozenset()
    return frozenset(f for f in (kind.disaggregation[0], split.bootstrap_flag) if f is not None)


def differing_flags(servers: Sequence[ServerCommand]) -> frozenset[str]:
    """The flags (canonical) whose entries are not the same in every command, but `--port` (the groups' ports
    come from `groups.port_base`)."""
    seen = [
        {(kind.canonical_flag(e[0].partition("=")[0]), e) for e in s.args if e[0].startswith("-")}
        for s in servers
        for kind in (s.server_kind,)
    ]
    every = set.intersection(*seen)
    return frozenset(flag for entries in seen for flag, entry in entries if (flag, entry) not in every) - {"--port"}


def split_side_flags(servers: Sequence[ServerCommand]) -> tuple[ServerCommand, Own]:
    """(the first command without its side flags and the flags the sides set differently, each command's entries
    of those): the shared server and `groups.server_args`."""
    flags = side_flags(servers[0].server_kind) | differing_flags(servers)

    def own(entry: tuple[str, ...], kind: ServerKind) -> bool:
        return kind.canonical_flag(entry[0].partition("=")[0]) in flags

    first = servers[0]
    shared = tuple(e for e in first.args if not own(e, first.server_kind))
    sides = tuple(tuple(e for e in s.args if own(e, s.server_kind)) for s in servers)
    return ServerCommand(first.program, shared, first.kind), sides


def join_sides(recipe: Recipe, servers: Sequence[ServerCommand], where: str) -> tuple[Recipe, list[str]]:
    """The joined groups' recipe with each command's side flags its group's own; on the host's network, the
    servers' differing `--port`s as `--port {{port}}` (InputError unless they are consecutive)."""
    assert recipe.groups is not None
    shared, own = split_side_flags(servers)
    written = sorted({e[0].partition("=")[0] for entries in own for e in entries})
    notes = [
        f"{where}: the prefill and the decode commands are groups of one recipe, each with its own "
        f"{', '.join(written)} (groups.server_args); the router between them comes from `--data router=true`, "
        "not the post's router command"
    ]
    joined = replace(
        recipe,
        server=_listening_on_the_node(shared, recipe, where, notes),
        groups=replace(recipe.groups, server_args=own),
    )
    return own_ports(joined, servers, where, notes, renumber=True)


def _listening_on_the_node(server: ServerCommand, recipe: Recipe, where: str, notes: list[str]) -> ServerCommand:
    """On the host's network, a server listening on one address of the poster's node (`--host 192.168.0.137`)
    listens on every address of the node it is deployed to: the posted address is not the inventory host's, and
    hgxkit's router reaches a one-node split's groups at 127.0.0.1 (a note)."""
    listen = server.flag("--host")
    if recipe.docker.last("--network") != "host" or listen is None or listen in (EVERYWHERE, "::"):
        return server
    if is_loopback(listen):
        return server
    kind = server.server_kind
    args = tuple(
        (name, EVERYWHERE) if kind.canonical_flag(name := e[0].partition("=")[0]) == "--host" else e
        for e in server.args
    )
    notes.append(
        f"{where}: the sides listen on --host {listen}, an address of the poster's node: --host {EVERYWHERE} on the "
        "node they are deployed to (hgxkit's router reaches a one-node split's groups at 127.0.0.1)"
    )
    return ServerCommand(server.program, args, server.kind)


def own_ports(
    recipe: Recipe, servers: Sequence[ServerCommand], where: str, notes: list[str], *, renumber: bool = False
) -> tuple[Recipe, list[str]]:
    """The joined groups' recipe where, on the host's network, the servers listen on ports of their own: their
    `--port`s as `--port {{port}}` from `groups.port_base` (InputError unless they are consecutive, or with
    `renumber`, the sides of a split, which clients reach through hgxkit's router, told the groups' ports: from
    the first's, with a note); in a bridge container each listens on the first's port, only the published host
    ports differ (a note)."""
    assert recipe.groups is not None
    ports = [s.flag("--port") for s in servers]
    if len(set(ports)) < 2:
        return recipe, notes
    if recipe.docker.last("--network") != "host":
        notes.append(
            f"{where}: every group's server listens on {recipe.server.flag('--port')} in its own container; the "
            "groups' host ports differ"
        )
        return recipe, notes
    numbers = [int(p) if p and p.isdigit() else None for p in ports]
    first = numbers[0]
    consecutive = [first + i for i in range(len(numbers))] if first is not None else []
    if renumber and first is not None and None not in numbers and numbers != consecutive:
        notes.append(
            f"{where}: the servers listen on ports {', '.join(map(str, ports))}; groups listen on port_base + group "
            f"index, so {', '.join(map(str, consecutive))} (hgxkit's router is told each group's port; the post's "
            "router or proxy command is not taken)"
        )
    elif first is None or numbers != consecutive:
        raise InputError(
            f"{where}: on the host's network the servers listen on ports {', '.join(map(str, ports))}; groups "
            "listen on port_base + group index, so give them consecutive ports"
        )
    shared = recipe.server
    args = tuple(("--port", "{{port}}") if e[0].partition("=")[0] == "--port" else e for e in shared.args)
    notes.append(f"{where}: each group listens on its own port on the host's network: --port {{{{port}}}} from {first}")
    groups = replace(recipe.groups, port_base=first)
    return replace(recipe, server=ServerCommand(shared.program, args, shared.kind), groups=groups), notes


def first_gpus_as_devices(recipes: Sequence[Recipe], where: str) -> tuple[list[Recipe], str] | None:
    """A split's sides that each see every GPU (`--gpus all`) and pick their own by the kind's first-GPU flag
    (SGLang's `--base-gpu-id`; unset is 0), as the same GPUs given as each side's `--gpus '"device=…"'` and the
    flag dropped (in its container a side's GPUs are numbered from 0), with the note; None for commands that
    choose their GPUs otherwise, or that are no split."""
    kind = recipes[0].server.server_kind
    flag = kind.first_gpu_flag
    sides = side_flags(kind)
    if flag is None or not any(r.server.flag(f) for r in recipes for f in sides):
        return None
    firsts = [r.server.flag(flag) or "0" for r in recipes]
    if any(r.docker.last("--gpus") != "all" for r in recipes) or len(set(firsts)) < len(firsts):
        return None
    if not all(f.isascii() and f.isdigit() for f in firsts):
        return None
    written, shown = [], []
    for recipe, first in zip(recipes, firsts, strict=True):
        ids = ",".join(str(int(first) + i) for i in range(parallel_size(recipe.server, where)))
        shown.append(f"{flag} {first}: {ids}")
        entries = [e for e in recipe.docker.entries if not any(canonical(u.option.name) == "--gpus" for u in e.uses)]
        entries = [*parse_option_words(["--gpus", f'"device={ids}"'], source=where), *entries]
        args = tuple(e for e in recipe.server.args if kind.canonical_flag(e[0].partition("=")[0]) != flag)
        server = ServerCommand(recipe.server.program, args, recipe.server.kind)
        written.append(replace(recipe, docker=DockerSpec(recipe.docker.invocation, tuple(entries)), server=server))
    note = (
        f"{where}: each side sees every GPU (--gpus all) and {flag} picks its first ({'; '.join(shown)}): each "
        f"side's GPUs given as its --gpus '\"device=…\"', {flag} dropped (its container numbers them from 0)"
    )
    return written, note


def router_port_note(recipe: Recipe, where: str) -> list[str]:
    """A note when the split's groups listen on the router's default port (SGLang's docs put a side on 30000,
    the router's own default): the router needs another, given with `router_port` (the router role refuses the
    clash before any change).

    >>> from hgxkit.recipe.read import load_recipe
    >>> pd = load_recipe("tests/fixtures/pd/dspark-pd-one-node.yaml")
    >>> router_port_note(replace(pd, groups=replace(pd.groups, port_base=30000)), "post:1")[0][-54:]
    'add `--data router_port=30002` to `--data router=true`'
    """
    groups = recipe.groups
    if groups is None or groups.port_base is None or not groups.server_args:
        return []
    ports = range(groups.port_base, groups.port_base + len(groups.server_args))
    router = int(SHARED_DEFAULTS["router_port"])
    if router not in ports:
        return []
    return [
        f"{where}: the groups listen on ports {ports[0]}-{ports[-1]}, which hold the router's default port {router}: "
        f"add `--data router_port={ports[-1] + 1}` to `--data router=true`"
    ]
