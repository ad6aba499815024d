"""The monitoring containers a node runs (DCGM exporter, Grafana), and the hash of a root-only file, as pyinfra
facts."""

from __future__ import annotations

import re

from pyinfra.api import FactBase, StringCommand

from hgxkit.hostcmd import script
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


class FileSha256(FactBase[str | None]):
    """The sha256 of a file (None: absent): a file holding secrets is compared by hash, never read back."""

    def command(self, path: str) -> StringCommand:
        return script("sha256sum {path} 2>/dev/null || true", path=path)

    def process(self, output: list[str]) -> str | None:
        found = re.match(r"([0-9a-f]{64})\s", output[0]) if output else None
        return found.group(1) if found else None
