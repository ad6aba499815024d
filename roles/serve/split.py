"""A prefill/decode split laid over hosts (`groups.hosts`): before anything changes on any node, each host with a
decode group opens a TCP connection to the bootstrap port of every prefill group on another host, at the address
the router will name for it (that host's `fabric_address`), as the decode does for every request it completes.

Nothing may be listening there yet (the first run starts the prefill later), so a short-lived listener stands in
for the prefill on its host, as the multi-node preflight does for a head; where the port is held already, it must
be by a container hgxkit serves (a re-run: the prefill answers itself), else the prefill could not bind it.
hgxkit.serving.hostshare.bootstrap_reaches decides which connections the split needs.

Example (deploys/reproduce.py, before bring-up):
    from roles.serve.split import split_preflight
    split_preflight()
"""

from __future__ import annotations

from typing import Any

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.api.output import echo

from hgxkit.hostcmd import HostRunner
from hgxkit.planfacts import plan_fact
from hgxkit.problems import Problem, refuse
from hgxkit.recipe.host_recipe import recipe_for
from hgxkit.serving.facts import ListeningPorts, ManagedContainers
from hgxkit.serving.groupcmd import listener_command, reach_command
from hgxkit.serving.hostshare import BootstrapReach, bootstrap_reaches
from hgxkit.serving.nodegroups import member_host, split_shares
from hgxkit.serving.router import group_sides
from hgxkit.serving.steps import total_gpus_for
from roles.serve.defaults import DEFAULTS, ServeKnobs


@deploy("hgxkit split preflight", data_defaults=DEFAULTS)
def split_preflight() -> None:
    """Plan time: this host's decode groups reach each prefill's bootstrap port on the split's other hosts.
    Nothing for a recipe not laid over hosts, a split whose kind has no bootstrap port, or a host without a
    decode group."""
    shares, problems = split_shares(host, total_gpus_for(host))
    heading = f"split preflight failed on {host.name}; nothing was changed on any node"
    refuse(heading, problems)
    groups = [g for share in shares for g in share.groups]
    sides = dict(zip(groups, group_sides(recipe_for(host), groups), strict=True))
    prefills = {
        g: one.bootstrap_port for g, one in sides.items() if one and one.role == "prefill" and one.bootstrap_port
    }
    decodes = {g for g, one in sides.items() if one and one.role == "decode"}
    reaches = [r for r in bootstrap_reaches(shares, prefills, decodes) if r.decode_host == host.name]
    timeout = int(ServeKnobs.from_host(host).multinode_reach_timeout)
    refuse(heading, [p for r in reaches for p in _reach_problems(r, timeout)])
    for r in reaches:
        echo(
            f"[{host.name}] prefill/decode split: the decode reaches prefill group {r.group} on {r.prefill_host} at "
            f"{r.address}:{r.port} (its bootstrap port)"
        )


def _in_run(h: Any) -> bool:
    return h in host.state.activated_hosts and h not in host.state.failed_hosts


def _reach_problems(reach: BootstrapReach, timeout: int) -> list[Problem]:
    """[] when this host opens a TCP connection to the prefill's bootstrap port; the listener stands in for a
    prefill not running yet."""
    prefill = member_host(host, reach.prefill_host)
    where = f"{reach.address}:{reach.port}"
    key = f"fabric_address of {reach.prefill_host}"
    if _in_run(prefill):
        held = reach.port in plan_fact(prefill, ListeningPorts)
        if held and not any(c.running for c in plan_fact(prefill, ManagedContainers)):
            return [
                Problem(
                    "pd-bootstrap-port",
                    f"bootstrap port {reach.port} of prefill group {reach.group} on {reach.prefill_host} is in use "
                    "by something hgxkit does not run",
                    "stop what listens there, or give the prefill group its own bootstrap port in groups.server_args",
                )
            ]
        if not held:
            ok, said = HostRunner(prefill).status(listener_command(reach.port, 10 + timeout, 1))
            if not ok or "listening" not in said:
                return [
                    Problem(
                        "pd-bootstrap-port",
                        f"could not listen on bootstrap port {reach.port} on {reach.prefill_host} "
                        f"({' '.join(said)[-200:] or 'no output'})",
                        "free the port, or give the prefill group its own bootstrap port in groups.server_args",
                    )
                ]
    ok, _ = HostRunner(host).status(reach_command(reach.address, reach.port, timeout))
    if ok:
        return []
    absent = "" if _in_run(prefill) else f" ({reach.prefill_host} is not in this run, so nothing stood in for it)"
    return [
        Problem(
            "pd-bootstrap-reach",
            f"{host.name} (decode) cannot reach prefill group {reach.group} on {reach.prefill_host} at {where}, its "
            f"bootstrap port, within {timeout} s{absent}",
            f"open TCP {reach.port} from {host.name} to {reach.prefill_host}, or set {key} to an address "
            f"{host.name} reaches",
        )
    ]
