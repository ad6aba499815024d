"""pyinfra facts about the serving containers hgxkit manages (label `hgxkit.serve`) and host ports.

Example (in a deploy):
    from hgxkit.facts_docker import ManagedContainers
    running = host.get_fact(ManagedContainers)
"""

from __future__ import annotations

import json

from pyinfra.api import FactBase

from hgxkit.serve import GROUP_LABEL, MANAGED_LABEL, SPEC_LABEL, RunningContainer

INSPECT_MANAGED = (
    f"ids=$(docker ps -aq --filter label={MANAGED_LABEL} 2>/dev/null); "
    'if [ -n "$ids" ]; then docker inspect $ids; else echo "[]"; fi'
)


def parse_managed(text: str) -> list[RunningContainer]:
    """`docker inspect` JSON of the managed containers -> `RunningContainer`s (empty on no/invalid output)."""
    try:
        items = json.loads(text or "[]")
    except json.JSONDecodeError:
        return []
    out = []
    for item in items:
        labels = item.get("Config", {}).get("Labels") or {}
        group = labels.get(GROUP_LABEL)
        state = item.get("State", {})
        out.append(
            RunningContainer(
                name=item.get("Name", "").lstrip("/"),
                container_id=item.get("Id", ""),
                spec_hash=labels.get(SPEC_LABEL),
                group=int(group) if group and group.isdigit() else None,
                running=bool(state.get("Running")),
                started_at=state.get("StartedAt"),
            )
        )
    return sorted(out, key=lambda c: c.name)


class ManagedContainers(FactBase[list[RunningContainer]]):
    """Serving containers hgxkit manages on the host (running or not)."""

    def command(self) -> str:
        return INSPECT_MANAGED

    @staticmethod
    def default() -> list[RunningContainer]:
        return []

    def process(self, output: list[str]) -> list[RunningContainer]:
        return parse_managed("\n".join(output))


class ListeningPorts(FactBase[set[int]]):
    """TCP ports something listens on (`ss -ltnH`)."""

    def command(self) -> str:
        return "ss -ltnH 2>/dev/null || true"

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
