"""pyinfra fact about a node's Docker engine: version, storage and cgroup drivers, runtimes (`docker info`).

Example (in a deploy):
    from hgxkit.node.facts_docker import DockerInfo
    "nvidia" in host.get_fact(DockerInfo).runtimes
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pyinfra.api import FactBase, StringCommand

from hgxkit.hostcmd import script


@dataclass(frozen=True)
class DockerEngine:
    """`docker info` as the fingerprint and the checks need it (None fields when Docker does not answer)."""

    server_version: str | None = None
    storage_driver: str | None = None
    cgroup_driver: str | None = None
    cgroup_version: str | None = None
    runtimes: tuple[str, ...] = ()
    default_runtime: str | None = None


class DockerInfo(FactBase[DockerEngine]):
    """The Docker engine's version and configuration (`docker info --format '{{json .}}'`)."""

    def command(self) -> StringCommand:
        return script("docker info --format {format} 2>/dev/null || true", format="{{json .}}")

    @staticmethod
    def default() -> DockerEngine:
        return DockerEngine()

    def process(self, output: list[str]) -> DockerEngine:
        try:
            info = json.loads(output[0]) if output and output[0].startswith("{") else {}
        except json.JSONDecodeError:
            info = {}
        if not isinstance(info, dict):
            return DockerEngine()
        return DockerEngine(
            server_version=info.get("ServerVersion"),
            storage_driver=info.get("Driver"),
            cgroup_driver=info.get("CgroupDriver"),
            cgroup_version=info.get("CgroupVersion"),
            runtimes=tuple(sorted(info.get("Runtimes") or {})),
            default_runtime=info.get("DefaultRuntime"),
        )
