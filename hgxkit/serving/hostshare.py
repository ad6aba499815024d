"""A recipe laid over hosts (`groups.hosts`, a prefill group on one node and a decode group on another) as pure
decisions: which host runs which of the recipe's groups, at which address the others reach it.

The hosts serving the recipe are taken `groups.hosts` at a time, as a multi-node group's ranks are
(hgxkit.serving.multinode.place_groups: inventory order, or `group_hosts`; each at its `fabric_address`): the host
at position k runs the groups planned on its GPUs numbered from k x (groups per host), so its `{{group}}`, port,
container name and `groups.server_args` entry are the k-th host's share. The router reaches every group at its
host's address, its own host's too: SGLang's decode fetches the KV from the bootstrap port of the prefill URL the
router names, so 127.0.0.1 would point the decode at itself.

Example:
    >>> from hgxkit.serving.multinode import Candidate
    >>> shares, problems = share_hosts([Candidate("node1", address="10.0.0.1"), Candidate("node2", address="10.0.0.2")],
    ...                                hosts=2, per_host=1)
    >>> [(s.host, s.groups, s.address) for s in shares], problems
    ([('node1', (0,), '10.0.0.1'), ('node2', (1,), '10.0.0.2')], [])
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from hgxkit.problems import Problem
from hgxkit.serving.multinode import Candidate, place_groups


@dataclass(frozen=True)
class HostShare:
    """One host's share of a recipe laid over hosts: its position among them, its address, its groups."""

    host: str
    position: int
    address: str
    groups: tuple[int, ...]

    @property
    def first_group(self) -> int:
        return self.groups[0] if self.groups else 0


def share_hosts(candidates: Sequence[Candidate], *, hosts: int, per_host: int) -> tuple[list[HostShare], list[Problem]]:
    """Each candidate's share: `hosts` at a time, position k running groups k x per_host .. (k+1) x per_host - 1.

    Problems (placement's): hosts left without a full set, a `group_hosts` list of the wrong length, a host without
    a fabric address.

    >>> shares, problems = share_hosts([Candidate("a", address="a")], hosts=2, per_host=1)
    >>> shares, problems[0].code
    ([], 'placement')
    """
    placement = place_groups(candidates, nodes=hosts, dist_port=None)
    shares = [
        HostShare(m.host, m.rank, m.address, tuple(range(m.rank * per_host, (m.rank + 1) * per_host)))
        for g in placement.groups
        for m in g.members
    ]
    return shares, list(placement.problems)


def share_of(shares: Sequence[HostShare], host: str) -> HostShare | None:
    """`host`'s share (None when it has none).

    >>> share_of([HostShare("b", 1, "b", (1,))], "b").first_group
    1
    """
    return next((s for s in shares if s.host == host), None)


@dataclass(frozen=True)
class BootstrapReach:
    """A connection a split laid over hosts needs: the decode groups of `decode_host` fetch the KV through the
    bootstrap server of prefill group `group` on `prefill_host`, at that host's address (the one the router names)."""

    decode_host: str
    prefill_host: str
    group: int
    address: str
    port: int


def bootstrap_reaches(
    shares: Sequence[HostShare], prefills: Mapping[int, int], decodes: Collection[int]
) -> list[BootstrapReach]:
    """Each host with a decode group, to each prefill group's bootstrap port on another host (the router pairs any
    prefill with any decode). `prefills`: prefill group -> its bootstrap port; `decodes`: the decode groups. A
    prefill on the decode's own host is left out: its address is the host's own.

    >>> shares = [HostShare("n1", 0, "10.0.0.1", (0,)), HostShare("n2", 1, "10.0.0.2", (1,))]
    >>> bootstrap_reaches(shares, {0: 8998}, {1})
    [BootstrapReach(decode_host='n2', prefill_host='n1', group=0, address='10.0.0.1', port=8998)]
    """
    return [
        BootstrapReach(d.host, p.host, group, p.address, prefills[group])
        for d in shares
        if any(g in decodes for g in d.groups)
        for p in shares
        if p.host != d.host
        for group in p.groups
        if group in prefills
    ]
