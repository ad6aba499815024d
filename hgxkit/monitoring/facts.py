"""The monitoring containers a node runs (DCGM exporter, Grafana), as pyinfra facts."""

from __future__ import annotations

from pyinfra.api import FactBase, StringCommand

from hgxkit.monitoring.dcgm import EXPORTER_LABEL
from hgxkit.serving.facts import inspect_labelled, parse_inspected
from hgxkit.serving.rollout import RunningContainer


class MonitoringContainers(FactBase[dict[str, RunningContainer]]):
    """Containers labelled `hgxkit.monitoring`, by name."""

    def command(self) -> StringCommand:
        return inspect_labelled(EXPORTER_LABEL)

    @staticmethod
    def default() -> dict[str, RunningContainer]:
        return {}

    def process(self, output: list[str]) -> dict[str, RunningContainer]:
        return {container.name: container for container in parse_inspected(output)}
