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

from collections.abc import Sequence
from dataclasses import dataclass

from hgxkit.errors import InputError
from hgxkit.recipe.model import Grouping
from hgxkit.recipe.server_args import ServerCommand, is_flag

HGX_GPUS = 8  # GPUs of one HGX-H200 node


@dataclass(frozen=True)
class Joined:
    """The per-host command template and the grouping that spans the nodes."""

    server: ServerCommand
    groups: Grouping
    notes: tuple[str, ...]


def rank_of(server: ServerCommand) -> int | None:
    """The node rank a command gives (`--node-rank R`), or None."""
    value = server.flag(server.server_kind.rank_flag)
    return int(value) if value is not None and value.isdigit() else None


def spans_nodes(server: ServerCommand) -> bool:
    """True when the command runs one server over several hosts (`--nnodes N`, N > 1)."""
    value = server.flag(server.server_kind.nnodes_flag)
    return value is not None and value.isdigit() and int(value) > 1


def parallel_size(server: ServerCommand, where: str) -> int:
    """`ServerCommand.parallel_size`, a size that is not a whole number refused with `where`."""
    try:
        return server.parallel_size()
    except ValueError as err:
        raise InputError(f"{where}: {err}") from None


def join_ranks(servers: Sequence[ServerCommand], *, where: str) -> Joined:
    """One template for the given ranks' commands (already known to differ only by rank and worker flags)."""
    by_rank = sorted(servers, key=lambda s: rank_of(s) or 0)
    first = by_rank[0]
    kind = first.server_kind
    nnodes = int(first.flag(kind.nnodes_flag) or 1)
    ranks = [rank_of(s) for s in by_rank]
    if None in ranks:
        held = next((v for s in by_rank if (v := s.flag(kind.rank_flag)) is not None and not v.isdigit()), None)
        if held is not None:  # a rank held in a variable the post does not set (Slurm's are read by `slurm`)
            raise InputError(f"{where}: {kind.rank_flag} {held}: the rank is a variable the post does not set, "
                             "so its value is unknown; write each host's rank (in a Slurm script: "
                             "$SLURM_NODEID)")  # fmt: skip
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
        notes.append(f"{where}: the head address {head} is the poster's network; it is given per deploy ({{{{head}}}})")
    groups = Grouping(size=per_host, gpus_per_node=HGX_GPUS, nodes=nnodes, dist_port=port)
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
