"""Multi-node groups as this pyinfra run sees them: the inventory's hosts turned into placement candidates
(hgxkit/serving/multinode.py decides), the members' pyinfra Hosts, and what must be equal on every member,
read through facts. Used by the serving, verify and router roles.

Example (in a deploy, for the current host):
    from hgxkit.serving.nodegroups import group_for
    group, problems = group_for(host)          # None for a recipe served on one node
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pyinfra.api.exceptions import DeployError

from hgxkit.knobs import knob
from hgxkit.node.facts_apt import InstalledPackages
from hgxkit.node.facts_driver import NvidiaLoadedModule
from hgxkit.node.facts_files import FileText, JsonFile, RecordFile
from hgxkit.problems import Problem
from hgxkit.recipe.host_recipe import recipe_for, recipe_path
from hgxkit.recipe.pd import host_group_count
from hgxkit.recipe.spec import Recipe
from hgxkit.serving.hostshare import HostShare, share_hosts, share_of
from hgxkit.serving.image import RECORD_NAME, recorded_digest
from hgxkit.serving.multinode import Candidate, MemberState, NodeGroup, place_groups

DRIVER_PATTERNS = "nvidia-open cuda-drivers nvidia-driver"


def spanning_recipe(h: Any) -> Recipe:
    """`h`'s recipe with the `dist_port` knob applied (the recipe's `groups.dist_port` unless it is set)."""
    recipe = recipe_for(h)
    port = knob(h, "dist_port")
    if port is None or recipe.node_count() < 2:
        return recipe
    if recipe.groups is None or not str(port).isdigit() or not 0 < int(port) < 65536:
        raise DeployError(f"{h.name}: dist_port {port!r} needs a TCP port (1-65535) and a recipe with groups.nodes")
    return replace(recipe, groups=replace(recipe.groups, dist_port=int(port)))


def _group_hosts(h: Any) -> tuple[str, ...] | None:
    """The `group_hosts` knob as host names: a list as given, an inventory group's hosts in inventory order."""
    value = knob(h, "group_hosts")
    if value is None:
        return None
    if isinstance(value, str):
        members = h.inventory.get_group(value, default=None)
        if members is None:
            raise DeployError(
                f"{h.name}: group_hosts {value!r} is neither a list of hosts nor an inventory group; "
                "set it to the group's host names in rank order (rank 0 first)"
            )
        return tuple(m.name for m in members)
    return tuple(str(v) for v in value)


def fabric_address(h: Any) -> str | None:
    """Where the other nodes reach `h`: `fabric_address`, else `model_peer_address` (None when neither)."""
    value = knob(h, "fabric_address") or h.data.get("model_peer_address")
    return str(value) if value else None


def candidates(h: Any) -> list[Candidate]:
    """Every inventory host serving the same recipe file as `h`, in inventory order."""
    mine = recipe_path(knob(h, "recipe")).resolve()
    return [
        Candidate(other.name, _group_hosts(other), fabric_address(other))
        for other in h.inventory
        if recipe_path(knob(other, "recipe")).resolve() == mine
    ]


def group_for(h: Any) -> tuple[NodeGroup | None, list[Problem]]:
    """`h`'s multi-node group (None when its recipe runs on one node) and the placement's problems."""
    recipe = spanning_recipe(h)
    nodes = recipe.node_count()
    if nodes < 2:
        return None, []
    port = recipe.groups.dist_port if recipe.groups is not None else None
    placement = place_groups(candidates(h), nodes=nodes, dist_port=port)
    group = placement.group_of(h.name)
    problems = list(placement.problems)
    if group is None and not problems:
        problems.append(Problem("placement", f"{h.name} is in no multi-node group", "set group_hosts"))
    return group, problems


def split_shares(h: Any, total_gpus: int | None) -> tuple[list[HostShare], list[Problem]]:
    """Every host's share of `h`'s recipe laid over hosts (`groups.hosts`, hgxkit.serving.hostshare; [] for a
    recipe every host serves whole) and the placement's problems; `total_gpus`: the GPUs of each host."""
    recipe = recipe_for(h)
    hosts = recipe.groups.host_count if recipe.groups is not None else 1
    if hosts < 2:
        return [], []
    return share_hosts(candidates(h), hosts=hosts, per_host=host_group_count(recipe, total_gpus))


def share_for(h: Any, total_gpus: int | None) -> tuple[HostShare | None, list[Problem]]:
    """`h`'s share of a recipe laid over hosts (`split_shares`; None for a recipe every host serves whole) and the
    placement's problems."""
    recipe = recipe_for(h)
    if (recipe.groups.host_count if recipe.groups is not None else 1) < 2:
        return None, []
    shares, problems = split_shares(h, total_gpus)
    share = share_of(shares, h.name)
    if share is None and not problems:
        problems.append(Problem("placement", f"{h.name} has no share of the groups", "set group_hosts"))
    return share, problems


def member_host(h: Any, name: str) -> Any:
    """The pyinfra Host of group member `name` (same inventory as `h`)."""
    return h.inventory.get_host(name)


def run_problems(h: Any, group: NodeGroup) -> list[Problem]:
    """Members this run cannot act on: outside `--limit`, not connected, or failed earlier in the run. A group
    is deployed as a unit, so all its hosts must be in the run."""
    state = h.state
    problems = []
    for member in group.members:
        other = member_host(h, member.host)
        if other not in state.activated_hosts:
            problems.append(
                Problem(
                    "group-member",
                    f"{member.host} (rank {member.rank}) of the group "
                    f"{', '.join(group.hosts)} is not in this run (--limit, or not connected)",
                    "run all hosts of the group together",
                )
            )
        elif other in state.failed_hosts:
            problems.append(
                Problem(
                    "group-member",
                    f"{member.host} (rank {member.rank}) failed earlier in this run",
                    "fix it and run again; the group was not changed",
                )
            )
    return problems


def member_state(h: Any, recipe: Recipe, rank: int) -> MemberState:
    """What must be equal on every member, read from `h` (installed and loaded driver, recorded image digest,
    placed model commit)."""
    installed = h.get_fact(InstalledPackages, patterns=DRIVER_PATTERNS)
    driver = next((v.split("-")[0] for _, v in sorted(installed.items())), None)
    record = h.get_fact(RecordFile, path=f"{knob(h, 'serve_state_dir')}/{RECORD_NAME}")
    commit = None
    if recipe.model.local_dir:
        manifest = h.get_fact(JsonFile, path=f"{recipe.model.local_dir}/.hgxkit-manifest.json") or {}
        commit = manifest.get("commit") or manifest.get("revision_commit")
    return MemberState(
        host=h.name,
        rank=rank,
        driver=driver,
        driver_loaded=h.get_fact(NvidiaLoadedModule),
        image_digest=recorded_digest(record, recipe.image.reference),
        model_commit=str(commit) if commit else None,
    )


def manifest_text(h: Any, recipe: Recipe) -> str | None:
    """The placed model's manifest on `h` (for the fingerprint's model record)."""
    if not recipe.model.local_dir:
        return None
    return h.get_fact(FileText, path=f"{recipe.model.local_dir}/.hgxkit-manifest.json")
