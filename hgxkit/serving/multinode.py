"""Multi-node groups as pure decisions: which hosts form each group and in which rank order, the head's
address, what differs between the members, the spec hash of a whole group, and what a rollout does.

A recipe whose server spans `groups.nodes` hosts (`--nnodes N --node-rank {{rank}} --dist-init-addr
{{head}}:{{dist_port}}`) is served by N hosts together. Placement (knobs in hgxkit/knobs.py):

- `group_hosts` on a host (usually set for an inventory group): the group's host names in rank order, or the
  name of an inventory group whose hosts, in inventory order, are the ranks;
- otherwise every inventory host serving the recipe, in inventory order, N at a time (rank = position);
- the head is rank 0; its address is its `fabric_address` (the address the other nodes reach it at, not the
  SSH address), the rendezvous port the recipe's `groups.dist_port` unless the `dist_port` knob says otherwise.

Example:
    >>> placement = place_groups([Candidate("node1", address="10.0.0.1"), Candidate("node2", address="10.0.0.2")],
    ...                          nodes=2, dist_port=20000)
    >>> [(m.host, m.rank) for m in placement.groups[0].members], placement.groups[0].head.address
    ([('node1', 0), ('node2', 1)], '10.0.0.1')
    >>> group_spec_hash(["aaa", "bbb"]) != group_spec_hash(["aaa", "bbc"])
    True
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from hgxkit.problems import Problem
from hgxkit.recipe.render import render_recipe
from hgxkit.recipe.spec import Recipe
from hgxkit.serving.rollout import RunningContainer
from hgxkit.serving.router import WorkerHost

# An address to put into `--dist-init-addr`: a host name or an IPv4/IPv6 address, never shell syntax (the
# same words render.py accepts for `{{head}}`).
ADDRESS_RE = re.compile(r"[A-Za-z0-9_.-]{1,253}|\[?[0-9A-Fa-f:.]{2,45}\]?")


@dataclass(frozen=True)
class Candidate:
    """An inventory host that serves a recipe spanning nodes, as placement needs it.

    `group_hosts`: its `group_hosts` knob resolved to host names (None: not set); `address`: where the other
    nodes reach it (`fabric_address`, None when unknown).
    """

    name: str
    group_hosts: tuple[str, ...] | None = None
    address: str | None = None


@dataclass(frozen=True)
class Member:
    """One host of a multi-node group: its inventory name, its node rank (0 is the head), its fabric address."""

    host: str
    rank: int
    address: str


@dataclass(frozen=True)
class NodeGroup:
    """The hosts that serve one instance of a server spanning nodes, in rank order."""

    index: int
    members: tuple[Member, ...]
    dist_port: int | None

    @property
    def head(self) -> Member:
        return self.members[0]

    @property
    def hosts(self) -> list[str]:
        return [m.host for m in self.members]

    def member(self, host: str) -> Member | None:
        """The member running on inventory host `host` (None when it is not in this group)."""
        return next((m for m in self.members if m.host == host), None)

    def label(self) -> str:
        """`node1 (rank 0), node2 (rank 1)`, for messages."""
        return ", ".join(f"{m.host} (rank {m.rank})" for m in self.members)


@dataclass(frozen=True)
class Placement:
    """Every multi-node group of a run, and what stops placing them (one Problem each)."""

    groups: list[NodeGroup]
    problems: list[Problem] = field(default_factory=list)

    def group_of(self, host: str) -> NodeGroup | None:
        return next((g for g in self.groups if g.member(host)), None)


def place_groups(candidates: Sequence[Candidate], *, nodes: int, dist_port: int | None) -> Placement:
    """Form groups of `nodes` hosts: first the explicit `group_hosts` lists, then the remaining candidates in
    inventory order, `nodes` at a time.

    Problems: a list of the wrong length, naming a host that does not serve the recipe, a host in two lists,
    hosts left without a full group, a host without a fabric address.

    >>> bad = place_groups([Candidate("a", address="a"), Candidate("b", address="b"), Candidate("c", address="c")],
    ...                    nodes=2, dist_port=5000)
    >>> [g.hosts for g in bad.groups], bad.problems[0].code
    ([['a', 'b']], 'placement')
    """
    by_name = {c.name: c for c in candidates}
    problems: list[Problem] = []
    owner: dict[str, tuple[str, ...]] = {}  # host -> the accepted group_hosts list it is in
    lists: list[tuple[str, ...]] = []
    for candidate in candidates:
        wanted = candidate.group_hosts
        if wanted is None or wanted in lists:
            continue
        problem = _group_hosts_problem(candidate.name, wanted, nodes=nodes, by_name=by_name, owner=owner)
        if problem:
            problems.append(problem)
        else:
            lists.append(wanted)
            owner.update({h: wanted for h in wanted})
    problems += _disagreeing_lists(candidates, owner)
    rest = [c.name for c in candidates if c.name not in owner and c.group_hosts is None]
    full = len(rest) - len(rest) % nodes  # the rest in inventory order, `nodes` at a time
    chunks = [tuple(rest[i : i + nodes]) for i in range(0, full, nodes)]
    if rest[full:]:
        problems.append(_left_without_group(rest[full:], nodes))
    groups = [
        NodeGroup(index, _members(hosts, by_name, problems), dist_port) for index, hosts in enumerate([*lists, *chunks])
    ]
    return Placement(groups, problems)


def _group_hosts_problem(
    name: str,
    wanted: tuple[str, ...],
    *,
    nodes: int,
    by_name: Mapping[str, Candidate],
    owner: Mapping[str, tuple[str, ...]],
) -> Problem | None:
    """What is wrong with host `name`'s `group_hosts` list, the first thing found (None: it forms a group)."""
    if len(wanted) != nodes or len(set(wanted)) != len(wanted):
        return Problem(
            "placement",
            f"group_hosts of {name} lists {len(wanted)} host(s) "
            f"({', '.join(wanted) or 'none'}) but the server spans {nodes} distinct nodes",
            f"list exactly {nodes} host names, the head (rank 0) first",
        )
    if name not in wanted:
        found = f"group_hosts of {name} ({', '.join(wanted)}) does not list {name} itself"
        return Problem("placement", found, "set group_hosts only on the group's hosts")
    if unknown := [h for h in wanted if h not in by_name]:
        return Problem(
            "placement",
            f"group_hosts of {name} lists {', '.join(unknown)}, which is not an inventory host serving this recipe",
            "fix the host names, or give those hosts the same recipe",
        )
    if clash := [h for h in wanted if h in owner]:
        return Problem(
            "placement",
            f"{', '.join(clash)} is listed in two groups ({', '.join(owner[clash[0]])} and {', '.join(wanted)})",
            "give every host one group_hosts list",
        )
    return None


def _disagreeing_lists(candidates: Sequence[Candidate], owner: Mapping[str, tuple[str, ...]]) -> list[Problem]:
    """A host in an accepted group whose own `group_hosts` names another list."""
    return [
        Problem(
            "placement",
            f"{c.name} is in group {', '.join(owner[c.name])} but its own group_hosts is {', '.join(c.group_hosts)}",
            "set the same group_hosts on every host of a group",
        )
        for c in candidates
        if c.name in owner and c.group_hosts is not None and c.group_hosts != owner[c.name]
    ]


def _left_without_group(left: list[str], nodes: int) -> Problem:
    return Problem(
        "placement",
        f"{', '.join(left)} serve(s) a recipe spanning {nodes} nodes but "
        f"{len(left)} host(s) are left without a full group",
        f"add hosts to make groups of {nodes}, or set group_hosts (the group's hosts in rank order)",
    )


def _members(hosts: tuple[str, ...], by_name: dict[str, Candidate], problems: list[Problem]) -> tuple[Member, ...]:
    """A group's hosts in rank order, each at its fabric address (a problem for one without a usable one)."""
    members = []
    for rank, name in enumerate(hosts):
        address = by_name[name].address
        if not address or not ADDRESS_RE.fullmatch(address):
            what = f"{address!r} is not a host name or address" if address else "is unknown"
            remedy = f"set fabric_address for {name}: the address the other nodes reach it at"
            problems.append(Problem("fabric-address", f"the fabric address of {name} {what}", remedy))
            address = name
        members.append(Member(name, rank, address))
    return tuple(members)


def group_spec_hash(rank_hashes: Sequence[str]) -> str:
    """One hash over every rank's container spec, in rank order: a change on any rank changes it, so the
    group is replaced as a unit (each rank's container carries it as its `hgxkit.spec` label)."""
    return hashlib.sha256(json.dumps(list(rank_hashes)).encode()).hexdigest()[:16]


# --- what differs between the members ---------------------------------------------------------------------


@dataclass(frozen=True)
class MemberState:
    """What must be equal on every member, read from its host (None: not there yet, e.g. a fresh node)."""

    host: str
    rank: int
    driver: str | None = None  # the installed NVIDIA driver package's version
    driver_loaded: str | None = None  # the loaded kernel module's version
    image_digest: str | None = None  # the digest the serving role recorded
    model_commit: str | None = None  # the commit of the placed model (its manifest)


# (label, MemberState attribute) in the order of the table.
COMPARED = (
    ("driver", "driver"),
    ("driver loaded", "driver_loaded"),
    ("image digest", "image_digest"),
    ("model commit", "model_commit"),
)


def member_differences(states: Sequence[MemberState]) -> list[str]:
    """Labels of the values that differ between members; a value a member does not have yet (None) is not
    compared (a fresh node gets them from this run).

    >>> member_differences([MemberState("a", 0, driver="580.105.08"), MemberState("b", 1, driver="580.95.05")])
    ['driver']
    >>> member_differences([MemberState("a", 0, image_digest="sha256:1"), MemberState("b", 1)])
    []
    """
    differ = []
    for label, attr in COMPARED:
        known = {getattr(s, attr) for s in states if getattr(s, attr) is not None}
        if len(known) > 1:
            differ.append(label)
    return differ


def difference_table(states: Sequence[MemberState], labels: Sequence[str]) -> str:
    """A plain-text table of the differing values, one column per member (`-`: not there yet).

    >>> print(difference_table([MemberState("node1", 0, driver="580.105.08"),
    ...                         MemberState("node2", 1, driver="580.95.05")], ["driver"]))
    value   node1 (rank 0)  node2 (rank 1)
    driver  580.105.08      580.95.05
    """
    attrs = dict(COMPARED)
    rows = [["value", *(f"{s.host} (rank {s.rank})" for s in states)]]
    for label in labels:
        rows.append([label, *(_short(getattr(s, attrs[label])) for s in states)])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows)


def _short(value: str | None) -> str:
    if value is None:
        return "-"
    return value[:19] if value.startswith("sha256:") else value


# --- the rollout decision ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class RankNow:
    """One member's serving containers now: the group's container (None: there is none), the copy a replace
    set aside (None: none), and other containers hgxkit manages there (groups the recipe does not have)."""

    host: str
    rank: int
    container: RunningContainer | None
    set_aside: RunningContainer | None = None
    others: tuple[RunningContainer, ...] = ()


Action = Literal["keep", "replace", "recover"]


@dataclass(frozen=True)
class GroupDecision:
    """What the rollout does with a multi-node group, and why (one line per rank that differs)."""

    action: Action
    reasons: list[str]
    stale: dict[str, list[RunningContainer]]

    @property
    def changes(self) -> bool:
        return self.action != "keep" or any(self.stale.values())


def ranks_now(
    current: Mapping[str, Sequence[RunningContainer]], group: NodeGroup, name: str, previous_suffix: str
) -> list[RankNow]:
    """Sort each member's managed containers (`current`, by host) into the group's, its set-aside copy, others."""
    out = []
    for member in group.members:
        found = list(current.get(member.host, ()))
        mine = next((c for c in found if c.name == name), None)
        aside = next((c for c in found if c.name == name + previous_suffix), None)
        others = tuple(c for c in found if c is not mine and c is not aside and not c.name.endswith(previous_suffix))
        out.append(RankNow(member.host, member.rank, mine, aside, others))
    return out


def decide_group(ranks: Sequence[RankNow], spec_hash: str) -> GroupDecision:
    """Keep the group when every rank runs a container with `spec_hash`; recover first when a replace was cut
    off (a set-aside copy is left on any member); otherwise replace every rank together.

    >>> up = RunningContainer("m", "id", "h1", 0, True)
    >>> decide_group([RankNow("a", 0, up), RankNow("b", 1, up)], "h1").action
    'keep'
    >>> decide_group([RankNow("a", 0, up), RankNow("b", 1, None)], "h1").reasons
    ['b (rank 1): no container']
    """
    stale = {r.host: list(r.others) for r in ranks if r.others}
    if any(r.set_aside for r in ranks):
        held = [f"{r.host} (rank {r.rank}): {r.set_aside.name} was set aside" for r in ranks if r.set_aside]
        return GroupDecision("recover", held, stale)
    reasons = []
    for r in ranks:
        where = f"{r.host} (rank {r.rank})"
        if r.container is None:
            reasons.append(f"{where}: no container")
        elif r.container.spec_hash != spec_hash:
            reasons.append(f"{where}: spec {r.container.spec_hash or 'unlabelled'} -> {spec_hash}")
        elif not r.container.running:
            reasons.append(f"{where}: not running")
    return GroupDecision("replace" if reasons else "keep", reasons, stale)


def recovery_action(ranks: Sequence[RankNow], spec_hash: str, head_healthy: bool) -> Literal["finish", "rollback"]:
    """After a cut-off replace: keep the new containers when every rank runs `spec_hash` and rank 0 answers its
    health check (then only the set-aside copies go), else put the set-aside copies back on every member.

    >>> new = RunningContainer("m", "id", "h2", 0, True)
    >>> old = RunningContainer("m-hgxkit-previous", "id0", "h1", 0, False)
    >>> recovery_action([RankNow("a", 0, new, old), RankNow("b", 1, None, old)], "h2", True)
    'rollback'
    """
    complete = all(r.container and r.container.running and r.container.spec_hash == spec_hash for r in ranks)
    return "finish" if complete and head_healthy else "rollback"


@dataclass(frozen=True)
class RankHealth:
    """One rank's container while the group starts: its state (`running`, `exited`, `missing`, …), restarts,
    and its last log line."""

    host: str
    rank: int
    state: str
    restarts: int = 0
    last_log: str = ""

    @property
    def failed(self) -> bool:
        return self.state != "running" or self.restarts > 0

    def line(self) -> str:
        """`rank 1 on node2: running; last log: …`"""
        log = f"; last log: {self.last_log[:160]}" if self.last_log else ""
        restarts = f" ({self.restarts} restarts)" if self.restarts else ""
        return f"rank {self.rank} on {self.host}: {self.state}{restarts}{log}"


def parse_rank_health(host: str, rank: int, lines: Sequence[str]) -> RankHealth:
    """A member's `rank_status` output (state and restart count, then the last log line) -> RankHealth.

    >>> parse_rank_health("node2", 1, ["exited 0", "Init parallel begin."]).line()
    'rank 1 on node2: exited; last log: Init parallel begin.'
    """
    first = (lines[0] if lines else "missing").split()
    state = first[0] if first else "missing"
    restarts = int(first[1]) if len(first) > 1 and first[1].isdigit() else 0
    return RankHealth(host, rank, state, restarts, " ".join(lines[1:]).strip())


def failed_ranks(health: Sequence[RankHealth]) -> list[str]:
    """One line per rank whose container is not running (or restarted), naming its host.

    >>> failed_ranks([RankHealth("node1", 0, "running"), RankHealth("node2", 1, "missing")])
    ['rank 1 on node2: missing']
    """
    return [h.line() for h in health if h.failed]


def head_worker(recipe: Recipe, group: NodeGroup, *, bind_address: str, api_key: bool) -> WorkerHost:
    """The router's view of a multi-node group: one worker, its rank 0, at the head's fabric address (ranks >= 1
    run SGLang's dummy health server, which answers 200 whatever happens: never a worker). With `--network
    host` the server's own `--host` and `--port` are what bind; otherwise its published port on `bind_address`.

    >>> from hgxkit.importing.docker_run import import_docker_run
    >>> recipe = import_docker_run("docker run --network host --gpus all img python3 -m sglang.launch_server "
    ...     "--model-path /m --tp 16 --nnodes 2 --node-rank 0 --dist-init-addr 10.0.0.1:5000 --host 0.0.0.0 "
    ...     "--port 40000")
    >>> group = NodeGroup(0, (Member("n1", 0, "10.0.0.1"), Member("n2", 1, "10.0.0.2")), 5000)
    >>> head_worker(recipe, group, bind_address="127.0.0.1", api_key=False)
    WorkerHost(name='n1', address='10.0.0.1', bind_address='0.0.0.0', ports=[40000], api_key=False)
    """
    kind = recipe.server.server_kind
    if recipe.docker.last("--network") == "host":
        port = int(recipe.server.flag("--port") or kind.default_port)
        listen = recipe.server.flag("--host") or kind.default_host
    else:
        port = render_recipe(recipe, rank=0, head=group.head.address)[0].port or kind.default_port
        listen = bind_address
    return WorkerHost(group.head.host, group.head.address, listen, [port], api_key)
