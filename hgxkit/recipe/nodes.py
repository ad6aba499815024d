"""A server spanning several hosts, imported from one rank's command (the others derived) or from all of them.

Every host runs the same command but for its rank, so the recipe keeps one command with placeholders filled
per host at render time: `--node-rank {{rank}}`; SGLang's `--dist-init-addr {{head}}:{{dist_port}}`; vLLM's
`--master-addr {{head}}` (and `--master-port {{dist_port}}`); vLLM's worker flag `--headless` is left to render,
which adds it on ranks >= 1. `groups.nodes` is the host count (`--nnodes`), `groups.size` the GPUs each host
gives (tp x pp x dp / nodes), `groups.dist_port` the rendezvous port on the head. The post's head address is
the poster's network; it is given again at deploy time.

Example:
    >>> from hgxkit.recipe.server_args import ServerCommand
    >>> server = ServerCommand.from_words(["python3", "-m", "sglang.launch_server", "--tp", "16", "--nnodes",
    ...     "2", "--node-rank", "1", "--dist-init-addr", "10.0.0.1:5000"], "sglang")
    >>> joined = join_ranks([server], where="p:1")
    >>> " ".join(joined.server.words()[3:])
    '--tp 16 --nnodes 2 --node-rank {{rank}} --dist-init-addr {{head}}:{{dist_port}}'
    >>> joined.groups.size, joined.groups.nodes, joined.groups.dist_port
    (8, 2, 5000)
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from hgxkit.errors import InputError
from hgxkit.kinds.base import RayCluster
from hgxkit.recipe.server_args import ServerCommand, is_flag
from hgxkit.recipe.spec import Grouping, Recipe

HGX_GPUS = 8  # GPUs of one HGX-H200 node


@dataclass(frozen=True)
class Joined:
    """The per-host command template and the grouping that spans the nodes."""

    server: ServerCommand
    groups: Grouping
    notes: tuple[str, ...]


def dp_hosts(server: ServerCommand) -> tuple[int, int] | None:
    """(DP size, DP ranks per host) of a command that spreads its data-parallel ranks over hosts (vLLM's
    `--data-parallel-size 4 --data-parallel-size-local 2`), or None.

    >>> dp_hosts(ServerCommand.from_words(["vllm", "serve", "m", "-dp", "4", "-dpl", "2"], "vllm"))
    (4, 2)
    """
    form = server.server_kind.dp_hosts
    local = server.flag(form.local_flag) if form else None
    size = server.flag(server.server_kind.dp_flag) or "1"
    if local is None or not local.isdigit() or not size.isdigit() or int(local) >= int(size):
        return None
    return int(size), int(local)


def rank_of(server: ServerCommand) -> int | None:
    """The node rank a command gives (`--node-rank R`; over DP hosts its start rank / ranks per host), or None."""
    kind = server.server_kind
    spread = dp_hosts(server)
    if spread is not None and kind.dp_hosts is not None:
        start = server.flag(kind.dp_hosts.start_flag) or "0"
        return int(start) // spread[1] if start.isdigit() and spread[1] and int(start) % spread[1] == 0 else None
    value = server.flag(kind.rank_flag)
    return int(value) if value is not None and value.isdigit() else None


def rank_flags(server: ServerCommand) -> set[str]:
    """The flags that may differ between the hosts' commands of one server spanning nodes."""
    kind = server.server_kind
    # over DP hosts the head's address may be spelt differently per host: it is given again per deploy
    spread = [kind.dp_hosts.start_flag, kind.dp_hosts.head_flag] if kind.dp_hosts and dp_hosts(server) else []
    return {kind.rank_flag, *kind.worker_flags, *spread}


def ray_cluster(recipe: Recipe) -> RayCluster | None:
    """The kind's Ray cluster when the recipe's server spans its nodes on one (`groups.nodes` > 1 and the kind's
    Ray backend flag, e.g. `--distributed-executor-backend ray`), else None."""
    ray = recipe.server.server_kind.ray
    if ray is None or recipe.node_count() < 2 or recipe.server.flag(ray.backend[0]) != ray.backend[1]:
        return None
    return ray


def spans_nodes(server: ServerCommand) -> bool:
    """True when the command runs one server over several hosts (`--nnodes N`, N > 1, or DP ranks over hosts)."""
    value = server.flag(server.server_kind.nnodes_flag)
    return (value is not None and value.isdigit() and int(value) > 1) or dp_hosts(server) is not None


def parallel_size(server: ServerCommand, where: str) -> int:
    """`ServerCommand.parallel_size`, a size that is not a whole number refused with `where`."""
    try:
        return server.parallel_size()
    except ValueError as err:
        raise InputError(f"{where}: {err}") from None


def span_grouping(per_host: int, nnodes: int, port: int | None, notes: list[str], where: str) -> Grouping:
    """The GPU groups of one server over `nnodes` hosts taking `per_host` GPUs on each: groups of that size
    when it fills a node, else one group on GPUs 0..per_host-1 of each host (noted in `notes`). Every group over
    the same hosts meets at the recipe's one rendezvous port (`groups.dist_port`) and, on the host network a
    server over nodes runs on, binds the same server port: a second group on the node would collide.

    >>> span_grouping(1, 2, 20000, [], "p:1").explicit, span_grouping(8, 2, 20000, [], "p:1").size
    (((0,),), 8)
    """
    if nnodes < 2 or per_host >= HGX_GPUS:
        return Grouping(size=per_host, gpus_per_node=HGX_GPUS, nodes=nnodes, dist_port=port)
    gpus = tuple(range(per_host))
    notes.append(
        f"{where}: the server takes {per_host} GPU(s) on each of its {nnodes} hosts: one group, on GPU(s) "
        f"{','.join(map(str, gpus))} (a second group over the same hosts would need a rendezvous port of "
        "its own; groups.dist_port is one)"
    )
    return Grouping(explicit=(gpus,), gpus_per_node=HGX_GPUS, nodes=nnodes, dist_port=port)


def rank_left_to_hosts(server: ServerCommand, where: str) -> tuple[ServerCommand, str] | None:
    """The one command a post gives for all the hosts of a server over nodes, its rank a variable the post leaves
    to each host (`--node-rank $NODERANK`, set where each host is started), as rank 0's command, with the note
    that says so; None for any other command. Not for a scheduler's script, whose one command every node runs
    with the same environment (the caller asks; Slurm's own rank variables are read by `slurm`).

    >>> server = ServerCommand.from_words(["--tp", "16", "--nnodes", "2", "--node-rank", "$NODE_RANK"], "sglang")
    >>> ranked, note = rank_left_to_hosts(server, "p:1")
    >>> ranked.flag("--node-rank"), note[:66]
    ('0', 'p:1: --node-rank $NODE_RANK is the rank each host is given (one co')
    """
    kind = server.server_kind
    args = list(server.args)
    for index, entry in enumerate(args):
        flag, equals, inline = entry[0].partition("=")
        if not is_flag(entry[0]) or kind.canonical_flag(flag) != kind.rank_flag:
            continue
        held = inline if equals else (entry[1] if len(entry) > 1 else "")
        if not VARIABLE.fullmatch(held):
            return None
        args[index] = (f"{flag}=0",) if equals else (flag, "0", *entry[2:])
        nodes = server.flag(kind.nnodes_flag) or "?"
        note = (
            f"{where}: {flag} {held} is the rank each host is given (one command for {nodes} hosts): rank 0 is the "
            "command taken; hgxkit gives each host its own rank"
        )
        return ServerCommand(server.program, tuple(args), server.kind), note
    return None


def join_ranks(servers: Sequence[ServerCommand], *, where: str) -> Joined:
    """One template for the given ranks' commands (already known to differ only by rank and worker flags)."""
    by_rank = sorted(servers, key=lambda s: rank_of(s) or 0)
    first = by_rank[0]
    kind = first.server_kind
    spread = dp_hosts(first)
    if spread is not None:
        return _join_dp_ranks(by_rank, spread, where)
    nnodes = int(first.flag(kind.nnodes_flag) or 1)
    ranks = [rank_of(s) for s in by_rank]
    if None in ranks:
        held = next((v for s in by_rank if (v := s.flag(kind.rank_flag)) is not None and not v.isdigit()), None)
        if held is not None:  # a rank held in a variable the post does not set (Slurm's are read by `slurm`)
            raise InputError(
                f"{where}: {kind.rank_flag} {held}: the rank is a variable the post does not set, "
                "so its value is unknown; write each host's rank (in a Slurm script: "
                "$SLURM_NODEID)"
            )
        raise InputError(f"{where}: --nnodes {nnodes} but no {kind.rank_flag}; give each host's rank")
    if any(r >= nnodes for r in ranks if r is not None):
        raise InputError(
            f"{where}: {kind.rank_flag} {max(r for r in ranks if r is not None)} is not below --nnodes {nnodes}"
        )
    notes = []
    missing = [r for r in range(nnodes) if r not in ranks]
    if missing:
        notes.append(
            f"{where}: the post gives rank(s) {', '.join(map(str, sorted(set(r for r in ranks if r is not None))))} of "
            f"{nnodes}; rank(s) {', '.join(map(str, missing))} run the same command with their own {kind.rank_flag}"
        )
    args, port, head = _template(first, where)
    total = parallel_size(first, where)
    if total % nnodes:
        raise InputError(f"{where}: tp x pp x dp = {total} GPUs do not split over --nnodes {nnodes} hosts")
    per_host = total // nnodes
    if per_host > HGX_GPUS:
        raise InputError(
            f"{where}: tp x pp x dp = {total} GPUs over {nnodes} hosts is {per_host} per host; an HGX-H200 node has "
            f"{HGX_GPUS}: use --nnodes {-(-total // HGX_GPUS)}"
        )
    if head:
        whose = "a value the post leaves to whoever runs it" if head.startswith("$") else "the poster's network"
        notes.append(f"{where}: the head address {head} is {whose}; it is given per deploy ({{{{head}}}})")
    groups = span_grouping(per_host, nnodes, port, notes, where)
    return Joined(ServerCommand(first.program, tuple(args), first.kind), groups, tuple(notes))


def _template(server: ServerCommand, where: str) -> tuple[list[tuple[str, ...]], int | None, str | None]:
    """The arguments with rank, head and port placeholders, worker flags dropped; the port and head given."""
    kind = server.server_kind
    args: list[tuple[str, ...]] = []
    port = kind.default_dist_port if kind.head_port_flag else None
    head = None
    for entry in server.args:
        flag, has_equals, inline = entry[0].partition("=")
        name = kind.canonical_flag(flag) if is_flag(entry[0]) else ""
        value = inline if has_equals else (entry[1] if len(entry) > 1 else "")
        if name in kind.worker_flags:
            continue
        if name == kind.rank_flag:
            entry = _with_value(entry, "{{rank}}")
        elif name == kind.head_flag and kind.head_port_flag is None:
            host, _, text = value.rpartition(":")
            if not host or not text.isdigit():
                raise InputError(f"{where}: {flag} {value!r} is not HOST:PORT; write the head's address and port")
            head, port = host, int(text)
            entry = _with_value(entry, "{{head}}:{{dist_port}}")
        elif name == kind.head_flag:
            head = value
            entry = _with_value(entry, "{{head}}")
        elif name == kind.head_port_flag and value.isdigit():
            port = int(value)
            entry = _with_value(entry, "{{dist_port}}")
        args.append(entry)
    if kind.head_port_flag is None and head is None:
        raise InputError(f"{where}: a server over several hosts needs {kind.head_flag} HOST:PORT (the head's address)")
    return args, port, head


def _with_value(entry: tuple[str, ...], value: str) -> tuple[str, ...]:
    flag, has_equals, _ = entry[0].partition("=")
    return (f"{flag}={value}",) if has_equals else (entry[0], value, *entry[2:])


def _join_dp_ranks(servers: Sequence[ServerCommand], spread: tuple[int, int], where: str) -> Joined:
    """One template for the hosts of a server whose data-parallel ranks are spread over them: `--headless` and
    the start rank are left to render (ranks >= 1 get them), the head's address and RPC port become `{{head}}`
    and `{{dist_port}}`."""
    first = servers[0]
    kind = first.server_kind
    form = kind.dp_hosts
    assert form is not None
    size, local = spread
    if local < 1:
        raise InputError(
            f"{where}: {form.local_flag} {local} (a host that runs only the API server) is not imported: "
            f"every host of a group runs the same share of the {size} ranks"
        )
    if size % local:
        raise InputError(
            f"{where}: {kind.dp_flag} {size} is not a multiple of {form.local_flag} {local}: every host "
            "of a group runs the same share of the ranks"
        )
    nnodes = size // local
    for server in servers:
        start = server.flag(form.start_flag) or "0"
        if not start.isdigit() or int(start) % local or int(start) >= size:
            raise InputError(
                f"{where}: {form.start_flag} {start} is not a multiple of {form.local_flag} {local} "
                f"below {kind.dp_flag} {size}; host k starts at rank k x {local}"
            )
    ranks = sorted({rank_of(s) or 0 for s in servers})
    notes = []
    missing = [r for r in range(nnodes) if r not in ranks]
    if missing:
        notes.append(
            f"{where}: the post gives host(s) {', '.join(map(str, ranks))} of {nnodes}; host(s) "
            f"{', '.join(map(str, missing))} run the same command from rank k x {local} "
            f"({form.start_flag})"
        )
    args: list[tuple[str, ...]] = []
    port, head = form.default_port, None
    for entry in first.args:
        flag, has_equals, inline = entry[0].partition("=")
        name = kind.canonical_flag(flag) if is_flag(entry[0]) else ""
        value = inline if has_equals else (entry[1] if len(entry) > 1 else "")
        if name in kind.worker_flags or name == form.start_flag:
            continue
        if name == form.head_flag:
            head = _address(value, flag, where)
            entry = _with_value(entry, "{{head}}")
        elif name == form.port_flag:
            if VARIABLE.fullmatch(value):
                notes.append(
                    f"{where}: {flag} {value} is a variable the post leaves to the reader; the port is "
                    f"{kind.title}'s default {port} (groups.dist_port)"
                )
            elif not value.isdigit() or not 0 < int(value) < 65536:
                raise InputError(f"{where}: {flag} {value!r} is not a port number; write the head's RPC port")
            else:
                port = int(value)
            entry = _with_value(entry, "{{dist_port}}")
        args.append(entry)
    if head is None:
        raise InputError(
            f"{where}: data parallelism over {nnodes} hosts needs {form.head_flag} (the head's address "
            "every host reaches)"
        )
    if not any(kind.canonical_flag(e[0].partition("=")[0]) == form.port_flag for e in args):
        args.append((form.port_flag, "{{dist_port}}"))
        notes.append(f"{where}: {form.port_flag} {port} ({kind.title}'s default) written out, as every host needs it")
    per_host = parallel_size(first, where) // nnodes
    if per_host > HGX_GPUS:
        raise InputError(
            f"{where}: {local} local rank(s) x tp x pp = {per_host} GPUs per host; an HGX-H200 node has {HGX_GPUS}"
        )
    notes.append(
        f"{where}: {kind.dp_flag} {size} over {nnodes} hosts, {local} rank(s) each; the head address {head} "
        "is the poster's network; it is given per deploy ({{head}})"
    )
    groups = span_grouping(per_host, nnodes, port, notes, where)
    return Joined(ServerCommand(first.program, tuple(args), first.kind), groups, tuple(notes))


# A head address the import can read: a host name, an IPv4/IPv6 address, or one variable standing for it
# (`$MASTER_IP`: hgxkit gives the address per deploy anyway); not an expression (`$(hostname -I)`, `$A:$B`).
_ADDRESS = re.compile(r"[A-Za-z0-9_.-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\]|[0-9A-Fa-f.]*:[0-9A-Fa-f.]*:[0-9A-Fa-f:.]{0,41}")
VARIABLE = re.compile(r"\$(?:[A-Za-z_]\w*|\{[A-Za-z_]\w*\})")


def readable_address(value: str) -> bool:
    """True for a head address the import can read (see `_ADDRESS`, `VARIABLE`)."""
    return bool(_ADDRESS.fullmatch(value) or VARIABLE.fullmatch(value))


def _address(value: str, flag: str, where: str) -> str:
    """The head address a command gives, refused when it is an expression the import cannot read."""
    if not readable_address(value):
        raise InputError(
            f"{where}: {flag} {value!r} is not a host name or address (a shell expression the import "
            "cannot read); write the head's address: hgxkit gives it again per deploy"
        )
    return value
