"""Docker Engine: Docker CE from Docker's repository on Ubuntu, Debian's docker.io otherwise; never the snap.

Example (deploys/bringup.py):
    from roles.docker import docker_engine
    docker_engine()
"""

from __future__ import annotations

from io import StringIO

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.api.exceptions import DeployError
from pyinfra.operations import apt, files, server, systemd
from pyinfra.operations.util import any_changed

from hgxkit.hostcmd import argv
from hgxkit.node.docker import deb822_sources
from hgxkit.node.facts_apt import InstalledPackages, SnapInstalled
from hgxkit.node.facts_system import OsRelease
from roles.docker.defaults import CONFLICTING_PACKAGES, DEFAULTS, DOCKER_CE_PACKAGES, KEYRING, SOURCES_FILE


def docker_source() -> str:
    """`docker-ce` or `docker.io` for this host, from `docker_source`."""
    source = host.data.get("docker_source")
    if source == "auto":
        return "docker-ce" if host.get_fact(OsRelease).get("ID") == "ubuntu" else "docker.io"
    if source not in ("docker-ce", "docker.io"):
        raise DeployError(f"{host.name}: docker_source {source!r}; use auto, docker-ce or docker.io")
    return source


@deploy("hgxkit Docker engine", data_defaults=DEFAULTS)
def docker_engine() -> None:
    """Install and start Docker (idempotent: a second run changes nothing)."""
    if host.get_fact(SnapInstalled, snap="docker"):
        server.shell(
            name="Remove the snap Docker (GPU containers do not work with it)",
            commands=[argv("snap", "remove", "--purge", "docker")],
        )
    if docker_source() == "docker-ce":
        _docker_ce()
    else:
        apt.packages(name="Install Debian's docker.io", packages=["docker.io"])
    systemd.service(name="Docker running and enabled", service="docker.service", running=True, enabled=True)


def _docker_ce() -> None:
    installed = host.get_fact(InstalledPackages, patterns=" ".join(CONFLICTING_PACKAGES))
    if installed:
        apt.packages(name="Remove packages that conflict with docker-ce", packages=sorted(installed), present=False)
    release = host.get_fact(OsRelease)
    repo = host.data.get("docker_repo_url") or "https://download.docker.com/linux/ubuntu"
    key = files.download(
        name="Docker repository key",
        src=host.data.get("docker_repo_key_url") or f"{repo}/gpg",
        dest=KEYRING,
        mode="0644",
    )
    sources = files.put(
        name="Docker repository",
        src=StringIO(deb822_sources(repo, release["VERSION_CODENAME"], KEYRING)),
        dest=SOURCES_FILE,
        mode="0644",
    )
    apt.update(name="Refresh apt lists for Docker", _if=any_changed(key, sources))
    version = host.data.get("docker_version")
    pinned = [f"{p}={version}" if version and p in ("docker-ce", "docker-ce-cli") else p for p in DOCKER_CE_PACKAGES]
    apt.packages(name="Install Docker CE", packages=pinned)
