"""Environment variables that name the host's network interfaces or RDMA devices (NCCL, Gloo, TP, UCX): they
work only in a container on the host's network, where those interfaces exist.

A container on Docker's bridge network has `lo` and `eth0` only, so `NCCL_SOCKET_IFNAME=bond0` there makes
NCCL fail at init; an exclusion list (`^lo,docker`) or `eth…`/`lo` names what a bridge container has.

Example:
    >>> host_interface_settings([("NCCL_SOCKET_IFNAME", "bond0"), ("GLOO_SOCKET_IFNAME", "eth0"),
    ...                          ("NCCL_SOCKET_IFNAME", "^lo,docker0"), ("NCCL_DEBUG", "INFO")])
    [('NCCL_SOCKET_IFNAME', 'bond0')]
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# The variables, each naming interfaces (or `mlx5_0:1` RDMA devices) of the host.
NETWORK_ENV = frozenset(
    {"NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME", "NCCL_IB_HCA", "UCX_NET_DEVICES"}
)
# What a bridge-network container has: its loopback and its one veth end (`eth0`).
_BRIDGE_INTERFACES = re.compile(r"^=?(?:lo|eth\d*)$")
# An RDMA device, with its port: `mlx5_0`, `mlx5_0:1`, `bnxt_re0`, `irdma1:1`.
_RDMA_DEVICE = re.compile(r"^(?:mlx\d+_\d+|bnxt_re\d+|irdma\d+|efa_?\d+|hfi\d+_\d+|rdma\d+)(?::\d+)?$")


def host_interface_settings(
    settings: Iterable[tuple[str, str | None]], *, spanning: bool = True
) -> list[tuple[str, str]]:
    """The (name, value) settings among `settings` that name a host interface a bridge container lacks. A server
    on one node (`spanning` False) reaches no other host, so RDMA devices (`NCCL_IB_HCA=mlx5_0`, a Slurm site's
    settings for jobs over nodes) name nothing it uses: only interface names count there."""
    out = []
    for name, value in settings:
        if name not in NETWORK_ENV or not value or value.startswith("^") or "$" in value:
            continue
        parts = [part.strip() for part in value.split(",")]
        if all(_BRIDGE_INTERFACES.match(part) for part in parts):
            continue
        if not spanning and all(_RDMA_DEVICE.match(part.lstrip("=")) for part in parts):
            continue
        out.append((name, value))
    return out
