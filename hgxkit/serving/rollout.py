"""The rollout plan: which serving containers stay untouched, which are replaced (one group at a time), and
which are removed because their group left the recipe. Containers are matched by name and spec hash.

`group_actions` says it per group, as the serve role names its operations at plan time (so `pyinfra --dry`
shows them): keep, start, replace with the settings that differ, remove. The settings a running container was
started with come from its spec record (`spec_record`, written on the node when the container started; the
containers' own `docker inspect` is never read for its command, which can hold secrets).

Example:
    >>> plan_rollout([RunningContainer("m-0", "id0", "abc", 0, True)], []).remove[0].name
    'm-0'
    >>> old = {"kind": "sglang", "image": "i", "options": ["-d"], "server": ["sglang", "serve", "--tp", "4"]}
    >>> spec_difference(old, {**old, "server": ["sglang", "serve", "--tp-size", "8", "--enable-metrics"]})
    '--tp-size 4 -> 8; --enable-metrics (absent) -> on'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from hgxkit.kinds import KINDS
from hgxkit.recipe.docker_options import canonical
from hgxkit.recipe.server_args import ServerCommand
from hgxkit.serving.containers import ContainerSpec

ABSENT = "(absent)"


@dataclass(frozen=True)
class RunningContainer:
    """A serving container hgxkit manages on the host, from `docker ps` (see serving.facts; `started_at` only where
    it came from `docker inspect`: the monitoring exporters)."""

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


def spec_record(spec: ContainerSpec, kind: str) -> dict[str, Any]:
    """What a container was started with, as a person reads it (secrets as `${NAME}` references), kept on the
    node beside it so a later plan can say which settings differ: image, docker options (hgxkit's labels left
    out: they only repeat the spec's hash), the server's words, its kind."""
    rendered = spec.rendered
    options = [
        " ".join(e.words) for e in rendered.options if not all(canonical(u.option.name) == "--label" for u in e.uses)
    ]
    return {"kind": kind, "image": rendered.image, "options": options, "server": rendered.server_argv}


def _flags(record: Mapping[str, Any]) -> dict[str, str]:
    kind = str(record.get("kind") or "")
    words = [str(w) for w in record.get("server") or []]
    if kind not in KINDS:
        return {" ".join(words): "on"} if words else {}
    command = ServerCommand.from_words(words, kind)
    flags = {use.name: "on" if use.value is None else use.value for use in command.uses()}
    if command.program:
        flags = {"(program)": " ".join(command.program), **flags}
    return flags


def spec_difference(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    """The settings that differ between two spec records, one `what old -> new` each, `; `-joined."""
    out = []
    if old.get("image") != new.get("image"):
        out.append(f"image {old.get('image')} -> {new.get('image')}")
    old_flags, new_flags = _flags(old), _flags(new)
    for flag in dict.fromkeys([*old_flags, *new_flags]):
        a, b = old_flags.get(flag, ABSENT), new_flags.get(flag, ABSENT)
        if a != b:
            out.append(f"{flag} {a} -> {b}")
    old_options, new_options = list(old.get("options") or []), list(new.get("options") or [])
    out += [f"option {o} -> {ABSENT}" for o in old_options if o not in new_options]
    out += [f"option {ABSENT} -> {o}" for o in new_options if o not in old_options]
    return "; ".join(out)


@dataclass(frozen=True)
class GroupAction:
    """What the rollout does to one container, and why (the settings that differ, for a replace)."""

    action: Literal["keep", "start", "replace", "remove"]
    name: str
    group: int | None
    why: str = ""
    spec: ContainerSpec | None = None  # the container to start (start, replace)
    old: RunningContainer | None = None  # the container there now (keep, replace, remove)

    def line(self) -> str:
        """The operation's name: `group 0: replace container m-0 (--moe-runner-backend marlin -> …)`."""
        where = f"group {self.group}" if self.group is not None else "no group"
        return f"{where}: {self.action} container {self.name}" + (f" ({self.why})" if self.why else "")


def group_actions(
    current: list[RunningContainer],
    desired: list[ContainerSpec],
    records: Mapping[str, Mapping[str, Any] | None],
    kind: str,
) -> list[GroupAction]:
    """Per container, removes first, then each group in order: keep, start (no container of that name), or
    replace (with the settings that differ from `records[name]`, the running container's spec record, or why
    else). Pure: the serve role gives it the node's facts and the recipe's specs (`kind`: the recipe's kind)."""
    plan = plan_rollout(current, desired)
    by_name = {c.name: c for c in current}
    kept = {c.name for c in plan.keep}
    replaced = {spec.name for spec in plan.replace}
    gone = "its group is no longer in the recipe"
    actions = [GroupAction("remove", c.name, c.group, gone, old=c) for c in plan.remove]
    for spec in desired:
        old = by_name.get(spec.name)
        if spec.name in kept:
            actions.append(GroupAction("keep", spec.name, spec.group, spec=spec, old=old))
        elif spec.name in replaced and old is None:
            actions.append(GroupAction("start", spec.name, spec.group, spec=spec))
        elif spec.name in replaced:
            actions.append(
                GroupAction(
                    "replace", spec.name, spec.group, _why(old, spec, records.get(spec.name), kind), spec=spec, old=old
                )
            )
    return actions


def _why(old: RunningContainer, spec: ContainerSpec, record: Mapping[str, Any] | None, kind: str) -> str:
    if old.spec_hash == spec.spec_hash:
        return "it is not running"
    if record is None:
        return "its spec changed; no record of what it was started with"
    return spec_difference(record, spec_record(spec, kind)) or "its spec changed"
