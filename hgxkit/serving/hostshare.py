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

from collections.abc import Sequence
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
