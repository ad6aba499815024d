"""pyinfra facts about what serves on a node: the containers hgxkit manages (label `hgxkit.serve`), the
router container, and the TCP ports something listens on.

The container facts read only names, ids, hgxkit's labels and state through `docker inspect --format`, never
the whole `docker inspect` document: that holds the server's command line (an `--api-key` among it), and
pyinfra prints fact output with -vvv.

Example (in a deploy):
    from hgxkit.serving.facts import ManagedContainers
    running = host.get_fact(ManagedContainers)
"""

from __future__ import annotations

import json

from pyinfra.api import FactBase, StringCommand

from hgxkit.hostcmd import script
from hgxkit.serving.containers import GROUP_LABEL, MANAGED_LABEL, PORT_LABEL, SPEC_LABEL
from hgxkit.serving.rollout import RunningContainer
from hgxkit.serving.router import ROUTER_LABEL

# One JSON object per container: only what the roles need (no Config.Cmd/Args: they can hold a key).
_FORMAT = (
    '{"name":{{json .Name}},"id":{{json .Id}},"labels":{{json .Config.Labels}},'
    '"running":{{json .State.Running}},"started":{{json .State.StartedAt}},"restarts":{{json .RestartCount}}}'
)


def inspect_labelled(label: str) -> StringCommand:
    """Print one JSON line per container carrying `label` (running or not)."""
    return script(
        "ids=$(docker ps -aq --filter label={label} 2>/dev/null); "
        '[ -z "$ids" ] || docker inspect --format {format} $ids',
        label=label,
        format=_FORMAT,
    )


_PS = "ps\t"  # the prefix of `all_containers`' name lines (JSON lines start with "{")


def all_containers() -> StringCommand:
    """Every container's name and hgxkit labels (`ps\tID\tNAME\tSERVE\tROUTER` lines), then one JSON line per
    container hgxkit made (serving or router): what `ManagedContainers`, `RouterContainer` and `ContainerNames`
    each read, from two docker calls in all (one when hgxkit made none)."""
    return script(
        "ps=$(docker ps -a --format {format} 2>/dev/null); printf '%s\\n' \"$ps\"; "
        "ids=$(printf '%s\\n' \"$ps\" | awk -F '\\t' '$4 != \"\" || $5 != \"\" {{print $2}}'); "
        '[ -z "$ids" ] || docker inspect --format {inspect} $ids',
        format='ps\t{{.ID}}\t{{.Names}}\t{{.Label "' + MANAGED_LABEL + '"}}\t{{.Label "' + ROUTER_LABEL + '"}}',
        inspect=_FORMAT,
    )


def parse_inspected(lines: list[str], label: str | None = None) -> list[RunningContainer]:
    """The JSON lines of `inspect_labelled` (or `all_containers`: other lines are skipped) -> `RunningContainer`s
    sorted by name; with `label`, only the containers carrying it (bad lines skipped)."""
    out = []
    for line in lines:
        if not line.startswith("{"):
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(item, dict):
            continue
        labels = item.get("labels") or {}
        if label is not None and label not in labels:
            continue
        group = labels.get(GROUP_LABEL)
        out.append(
            RunningContainer(
                name=str(item.get("name", "")).lstrip("/"),
                container_id=str(item.get("id", "")),
                spec_hash=labels.get(SPEC_LABEL),
                group=int(group) if isinstance(group, str) and group.isdigit() else None,
                running=bool(item.get("running")),
                started_at=item.get("started"),
                port=int(labels[PORT_LABEL]) if str(labels.get(PORT_LABEL, "")).isdigit() else None,
            )
        )
    return sorted(out, key=lambda c: c.name)


class ManagedContainers(FactBase[list[RunningContainer]]):
    """Serving containers hgxkit manages on the host (running or not)."""

    def command(self) -> StringCommand:
        return all_containers()  # the same command as ContainerNames': a batched plan reads it once

    @staticmethod
    def default() -> list[RunningContainer]:
        return []

    def process(self, output: list[str]) -> list[RunningContainer]:
        return parse_inspected(output, MANAGED_LABEL)


class RouterContainer(FactBase[RunningContainer | None]):
    """The router container hgxkit manages (label `hgxkit.router`), or None when there is none."""

    def command(self) -> StringCommand:
        return all_containers()

    @staticmethod
    def default() -> None:
        return None

    def process(self, output: list[str]) -> RunningContainer | None:
        found = parse_inspected(output, ROUTER_LABEL)
        return found[0] if found else None


class ListeningPorts(FactBase[set[int]]):
    """TCP ports something listens on (`ss -ltnH`)."""

    def command(self) -> StringCommand:
        return script("ss -ltnH 2>/dev/null || true")

    @staticmethod
    def default() -> set[int]:
        return set()

    def process(self, output: list[str]) -> set[int]:
        ports = set()
        for line in output:
            fields = line.split()
            if len(fields) >= 4 and fields[3].rsplit(":", 1)[-1].isdigit():
                ports.add(int(fields[3].rsplit(":", 1)[-1]))
        return ports


class ContainerNames(FactBase[dict[str, bool]]):
    """Every container's name on the node -> whether hgxkit made it (carries the `hgxkit.serve` or
    `hgxkit.router` label). A name alone never makes a container hgxkit's."""

    def command(self) -> StringCommand:
        return all_containers()

    @staticmethod
    def default() -> dict[str, bool]:
        return {}

    def process(self, output: list[str]) -> dict[str, bool]:
        names = {}
        for line in output:
            if not line.startswith(_PS):
                continue
            fields = [*line.split("\t"), "", "", "", "", ""][:5]
            if fields[2].strip():
                names[fields[2].strip()] = (fields[3] + fields[4]).strip().startswith("1")
        return names


class ActiveUnits(FactBase[list[str]]):
    """systemd units whose name starts with `prefix` that are running now (e.g. hgxkit's replace units)."""

    def command(self, prefix: str) -> StringCommand:
        return script(
            "systemctl list-units --type=service --state=active,activating --plain --no-legend {pattern} "
            "2>/dev/null | awk '{{print $1}}'",
            pattern=f"{prefix}*",
        )

    @staticmethod
    def default() -> list[str]:
        return []

    def process(self, output: list[str]) -> list[str]:
        return sorted(line.strip() for line in output if line.strip())
