"""The rollout plan: which serving containers stay untouched, which are replaced (one group at a time), and
which are removed because their group left the recipe. Containers are matched by name and spec hash.

Example:
    >>> plan_rollout([RunningContainer("m-0", "id0", "abc", 0, True)], []).remove[0].name
    'm-0'
"""

from __future__ import annotations

from dataclasses import dataclass

from hgxkit.serving.containers import ContainerSpec


@dataclass(frozen=True)
class RunningContainer:
    """A serving container hgxkit manages on the host, from `docker inspect` (see serving.facts)."""

    name: str
    container_id: str
    spec_hash: str | None
    group: int | None
    running: bool
    started_at: str | None = None
    port: int | None = None  # the host port it serves on (its hgxkit.port label; None for older containers)


@dataclass(frozen=True)
class Rollout:
    """What to do: groups to (re)create one at a time, containers to remove, and what stays untouched."""

    replace: list[ContainerSpec]
    remove: list[RunningContainer]
    keep: list[RunningContainer]

    @property
    def changes(self) -> bool:
        return bool(self.replace or self.remove)


def plan_rollout(current: list[RunningContainer], desired: list[ContainerSpec]) -> Rollout:
    """Compare running containers with the desired specs by name and spec hash."""
    by_name = {c.name: c for c in current}
    replace, keep = [], []
    for spec in desired:
        running = by_name.get(spec.name)
        if running and running.spec_hash == spec.spec_hash and running.running:
            keep.append(running)
        else:
            replace.append(spec)
    wanted = {spec.name for spec in desired}
    remove = [c for c in current if c.name not in wanted]
    return Rollout(replace, remove, keep)
