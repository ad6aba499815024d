"""pyinfra facts about what serves on a node: the containers hgxkit manages (label `hgxkit.serve`), the
router container, and the TCP ports something listens on.

The container facts read only names, ids, hgxkit's labels and state through one listing (dockerd's API with
its command lines blanked on the node, or `docker ps --format`; the monitoring exporters' fact through
`docker inspect --format`), never the whole `docker inspect` document: that holds the server's command line
(an `--api-key` among it), and pyinfra prints fact output with -vvv.

Example (in a deploy):
    from hgxkit.serving.facts import ManagedContainers
    running = host.get_fact(ManagedContainers)
"""

from __future__ import annotations

import json
from fnmatch import fnmatchcase

from pyinfra.api import FactBase, StringCommand

from hgxkit.hostcmd import script
from hgxkit.node.converged import UNIT_PATTERNS, unit_blocks, units_command
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


_PS = "ps\t"  # the prefix of `all_containers`' lines from the docker CLI
_API = "api\t"  # ... and of its one line from the Engine API (a JSON array)
_PS_LABELS = (MANAGED_LABEL, ROUTER_LABEL, SPEC_LABEL, GROUP_LABEL, PORT_LABEL)
# `docker ps` names a container's state; `docker inspect`'s State.Running is true in each of these.
_RUNNING_STATES = frozenset({"running", "paused", "restarting"})
# The API's listing holds each container's command line (`Command`, an `--api-key` among it): blanked on the node,
# before pyinfra could print it (-vvv). A JSON string is `"` then escapes or other characters than `"` and `\`.
_NO_COMMAND = r's/"Command":"([^"\\]|\\.)*"/"Command":""/g'


def all_containers() -> StringCommand:
    """Every container on the node, with its id, name, state and labels: what `ManagedContainers`,
    `RouterContainers` and `ContainerNames` each read, from one listing (no `docker inspect`: a no-op re-run needs
    nothing it adds).

    Asked of dockerd's Engine API over its socket with curl when the node has both and no DOCKER_HOST points
    elsewhere: the docker CLI costs the node ~43 ms of CPU per call (most of it the client starting), curl ~14 ms,
    for the same answer from the same daemon. Anything else (no curl, another socket, an answer that is not a
    list) falls back to `docker ps -a`, whose lines the parsers read as well."""
    labels = "".join('\t{{.Label "' + label + '"}}' for label in _PS_LABELS)
    return script(
        'if [ -z "${{DOCKER_HOST:-}}" ] && [ -S /var/run/docker.sock ] && command -v curl >/dev/null 2>&1 && '
        "out=$(curl -sf --max-time 30 --unix-socket /var/run/docker.sock {url} 2>/dev/null) && "
        '[ "${{out#[}}" != "$out" ]; then printf {api} "$out" | sed -E {strip}; '
        "else docker ps -a --no-trunc --format {format} 2>/dev/null; fi",
        url="http://docker/containers/json?all=1",
        api=r"api\t%s\n",
        strip=_NO_COMMAND,
        format="ps\t{{.ID}}\t{{.Names}}\t{{.State}}" + labels,
    )


def listed_rows(lines: list[str]) -> list[list[str]]:
    r"""`all_containers`' output, either form -> one row per container: id, name, state, then the values of the
    labels hgxkit reads (serve, router, spec, group, port; "" when absent). Unreadable lines are skipped.

    >>> listed_rows(["ps\tc1\tm-0\trunning\t1\t\th1\t0\t30000"])
    [['c1', 'm-0', 'running', '1', '', 'h1', '0', '30000']]
    >>> api = '[{"Id":"c1","Names":["/m-0"],"State":"exited","Labels":{"hgxkit.serve":"1","hgxkit.group":"2"}}]'
    >>> listed_rows(["api\t" + api])
    [['c1', 'm-0', 'exited', '1', '', '', '2', '']]
    """
    rows: list[list[str]] = []
    for line in lines:
        if line.startswith(_PS):
            rows.append([*line.split("\t"), *[""] * (4 + len(_PS_LABELS))][1 : 4 + len(_PS_LABELS)])
        elif line.startswith(_API):
            try:
                items = json.loads(line[len(_API) :])
            except json.JSONDecodeError:
                continue
            for item in items if isinstance(items, list) else []:
                if not isinstance(item, dict):
                    continue
                # A container's own name is its one name without a further '/' (legacy links add "/a/b").
                names = [str(n).lstrip("/") for n in item.get("Names") or [] if str(n).count("/") <= 1]
                found = item.get("Labels") if isinstance(item.get("Labels"), dict) else {}
                rows.append(
                    [
                        str(item.get("Id", "")),
                        names[0] if names else "",
                        str(item.get("State", "")),
                        *(str(found.get(label, "")) for label in _PS_LABELS),
                    ]
                )
    return rows


def parse_listed(lines: list[str], label: str) -> list[RunningContainer]:
    r"""The `all_containers` lines of containers carrying `label` (serve or router) -> `RunningContainer`s sorted
    by name (the same fields `parse_inspected` gives, but the start time, which no plan reads).

    >>> (c,) = parse_listed(["ps\tc1\tm-0\tpaused\t1\t\th1\t0\t30000", "ps\tc2\tx\trunning\t\t\t\t\t"], "hgxkit.serve")
    >>> (c.name, c.container_id, c.spec_hash, c.group, c.running, c.port)
    ('m-0', 'c1', 'h1', 0, True, 30000)
    """
    out = []
    for cid, name, state, *values in listed_rows(lines):
        found = dict(zip(_PS_LABELS, values, strict=True))
        if label not in _PS_LABELS or not found[label]:
            continue
        group, port = found[GROUP_LABEL], found[PORT_LABEL]
        out.append(
            RunningContainer(
                name=name.strip(),
                container_id=cid.strip(),
                spec_hash=found[SPEC_LABEL] or None,
                group=int(group) if group.isdigit() else None,
                running=state.strip() in _RUNNING_STATES,
                port=int(port) if port.isdigit() else None,
            )
        )
    return sorted(out, key=lambda c: c.name)


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
        return parse_listed(output, MANAGED_LABEL)


class RouterContainers(FactBase[list[RunningContainer]]):
    """The router containers hgxkit manages on the host (label `hgxkit.router`, whatever their name), sorted by
    name: one normally, more where an earlier run named its router otherwise."""

    def command(self) -> StringCommand:
        return all_containers()

    @staticmethod
    def default() -> list[RunningContainer]:
        return []

    def process(self, output: list[str]) -> list[RunningContainer]:
        return parse_listed(output, ROUTER_LABEL)


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
        for _, name, _, serve, router, *_ in listed_rows(output):
            if name.strip():
                names[name.strip()] = (serve + router).strip().startswith("1")
        return names


class ActiveUnits(FactBase[list[str]]):
    """systemd services whose name starts with `prefix` that are running now (e.g. hgxkit's replace units).

    For a prefix the no-op's one systemctl call covers (`converged.UNIT_PATTERNS`) it is that very command, so a
    batched plan runs it once for bring-up and for this; any other prefix asks `systemctl list-units` itself."""

    def command(self, prefix: str) -> StringCommand:
        if f"{prefix}*" in UNIT_PATTERNS:
            return units_command()
        return script(
            "systemctl list-units --type=service --state=active,activating --plain --no-legend {pattern} "
            "2>/dev/null | awk '{{print $1}}'",
            pattern=f"{prefix}*",
        )

    @staticmethod
    def default() -> list[str]:
        return []

    def process(self, output: list[str]) -> list[str]:
        blocks = unit_blocks(output)
        if not blocks:  # list-units through awk: the running units' names
            return sorted(line.strip() for line in output if line.strip())
        return sorted(
            unit
            for unit, lines in blocks.items()
            if unit.endswith(".service")
            and any(fnmatchcase(unit, pattern) for pattern in UNIT_PATTERNS)
            and any(line in ("ActiveState=active", "ActiveState=activating") for line in lines)
        )
