"""The rollout plan: which serving containers stay untouched, which are replaced (one group at a time), and
which are removed because their group left the recipe. Containers are matched by name and spec hash.

`group_actions` says it per group, as the serve role names its operations at plan time (so `pyinfra --dry`
shows them): keep, start, replace with the settings that differ, remove. The settings a running container was
started with come from its spec record (`spec_record`, written on the node when the container started; the
containers' own `docker inspect` is never read for its command, which can hold secrets). `split_gaps` says which
replaces leave a side of a prefill/decode split with no group serving while they run.

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
from hgxkit.problems import Problem
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


@dataclass(frozen=True)
class SideGap:
    """A replace during which one side of a prefill/decode split has no group serving: the router then has nowhere
    to send that half of a request and answers an error (sglang-router 0.3.2: 502, then 503 once its circuits open)
    until the new container is healthy."""

    group: int
    name: str
    side: str

    def line(self) -> str:
        """What the plan says of it, naming the group and the side."""
        return (
            f"group {self.group} ({self.name}) is the split's only serving {self.side} group: while it is replaced "
            f"no {self.side} serves, so the router answers 502/503 until the new one is healthy (no GPUs are free "
            f"for a second {self.side} beside it)"
        )

    def problem(self) -> Problem:
        """The refusal when the gap is not accepted (the serve role's `pd_accept_gap`)."""
        return Problem(
            "pd-gap",
            self.line(),
            f"to accept the gap, run again with --data pd_accept_gap=true; to avoid it, give the split a second "
            f"{self.side} group on GPUs of its own (the router then sends to it while this one is replaced)",
        )


def split_gaps(actions: list[GroupAction], sides: Mapping[int, str]) -> list[SideGap]:
    """The replaces that leave a side of a split with no group serving, in the rollout's order: one group at a
    time, each healthy again before the next starts (`group_actions`), so a group of the same side serves
    meanwhile when it is running now or was (re)started earlier. `sides`: each split group's side ('prefill',
    'decode'; groups that serve both phases are left out). A replace of a container that is not running opens no
    gap: there is none serving to lose. The order itself cannot close a gap: a side's only group is replaced in
    place, on its own GPUs, so a second copy needs GPUs the node does not have.

    >>> running = [RunningContainer(f"p-{g}", f"id{g}", "a", g, True) for g in range(3)]
    >>> acts = [GroupAction("keep", "p-0", 0, old=running[0]), GroupAction("replace", "p-1", 1, old=running[1])]
    >>> [g.side for g in split_gaps(acts, {0: "prefill", 1: "decode"})]
    ['decode']
    >>> split_gaps([*acts, GroupAction("keep", "p-2", 2, old=running[2])], {0: "prefill", 1: "decode", 2: "decode"})
    []
    """
    serving = {a.group for a in actions if a.action in ("keep", "replace") and a.old is not None and a.old.running}
    gaps = []
    for action in actions:
        side = sides.get(action.group) if action.group is not None else None
        if action.group is None or side is None or action.action not in ("replace", "start"):
            continue
        others = [g for g in serving if g != action.group and sides.get(g) == side]
        if action.action == "replace" and action.group in serving and not others:
            gaps.append(SideGap(action.group, action.name, side))
        serving.add(action.group)
    return gaps


def held_ports(
    specs: list[ContainerSpec],
    current: list[RunningContainer],
    removed: list[RunningContainer],
    listening: set[int],
    routers: list[RunningContainer],
) -> list[Problem]:
    """Host ports new containers need that something else already listens on; a container of ours that this
    rollout removes, or the group's own container it replaces, frees its port first. An earlier deploy's router
    (`routers`, hgxkit's) is named with the way out: the router role replaces it only after the groups start."""
    ours = {c.name for c in current}
    freed = {c.port for c in removed if c.port is not None}
    holders = {c.port: c.name for c in routers if c.port is not None}
    return [
        Problem(
            "port",
            f"port {spec.port} is in use on the host by hgxkit's router {holders[spec.port]} of an earlier deploy",
            f"remove it (`docker rm -f {holders[spec.port]}`), or move the groups (groups.port_base)",
        )
        if spec.port in holders
        else Problem("port", f"port {spec.port} is in use on the host", "stop what listens there or change port_base")
        for spec in specs
        if spec.port in listening and spec.name not in ours and spec.port not in freed
    ]
