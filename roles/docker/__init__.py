"""Docker Engine: Docker CE from Docker's repository on Ubuntu, Debian's docker.io otherwise; never the snap.
With `image_cache` set, the fleet's pull-through image cache on one host and every node's Docker mirroring it
(hgxkit/node/imagecache.py).

Example (deploys/bringup.py):
    from roles.docker import docker_engine
    docker_engine()
"""

from __future__ import annotations

from io import StringIO

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.api.output import echo
from pyinfra.operations import apt, files, python, server, systemd
from pyinfra.operations.util import any_changed

from hgxkit.bundle.source import delivered
from hgxkit.errors import HgxkitError
from hgxkit.hostcmd import HostRunner, argv
from hgxkit.hostfiles import program_text, write_text
from hgxkit.knobs import ssh_hostname
from hgxkit.node import imagecache
from hgxkit.node.docker import DAEMON_JSON, daemon_json_text, deb822_sources, parse_daemon_json
from hgxkit.node.facts_apt import InstalledPackages, SnapInstalled
from hgxkit.node.facts_files import FileText, RecordFile
from hgxkit.node.facts_system import OsRelease
from hgxkit.planfacts import plan_fact
from hgxkit.problems import Problem, refuse
from hgxkit.runfailure import RunFailure
from hgxkit.serving.image import recorded_digest
from hgxkit.serving.nodegroups import fabric_address
from hgxkit.serving.steps import judged_for, record_path
from roles.docker.defaults import (
    CONFLICTING_PACKAGES,
    DEFAULTS,
    DOCKER_CE_PACKAGES,
    KEYRING,
    SOURCES_FILE,
    DockerKnobs,
)


def docker_source() -> str:
    """`docker-ce` or `docker.io` for this host, from `docker_source`."""
    source = DockerKnobs.from_host(host).docker_source
    if source == "auto":
        return "docker-ce" if host.get_fact(OsRelease).get("ID") == "ubuntu" else "docker.io"
    if source not in ("docker-ce", "docker.io"):
        refuse(f"{host.name}: the docker role's knobs", [f"docker_source {source!r}; use auto, docker-ce or docker.io"])
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
    _image_cache()


REGISTRY_BINARY = "/usr/bin/docker-registry"  # Debian's and Ubuntu's docker-registry package
UNIT_TEXT = """[Unit]
Description=hgxkit image cache: pull-through registry for the fleet (roles/docker)
After=network-online.target

[Service]
ExecStart={binary} serve {config}
Restart=on-failure

[Install]
WantedBy=multi-user.target
"""


def cache_host() -> object | None:
    """The inventory host that runs the image cache (None: `image_cache` is off)."""
    try:
        name = imagecache.cache_host_name(DockerKnobs.from_host(host).image_cache, [h.name for h in host.inventory])
    except HgxkitError as err:
        refuse(f"{host.name}: no image cache host", [err.message])
        raise
    return host.inventory.get_host(name) if name else None


def cache_url(cache: object) -> str:
    """How the nodes reach the cache on `cache` (its fabric address, else its SSH address)."""
    address = fabric_address(cache) or ssh_hostname(cache) or cache.name  # type: ignore[attr-defined]
    return imagecache.mirror_url(str(address), DockerKnobs.from_host(host).image_cache_port)


def _image_cache() -> None:
    """Run the cache on its host; list it first in every node's registry-mirrors (or take it out, when off)."""
    cache = cache_host()
    knobs = DockerKnobs.from_host(host)
    if cache is not None and cache.name == host.name:  # type: ignore[attr-defined]
        bind = str(knobs.image_cache_bind or fabric_address(host) or "")
        refuse(
            f"image cache on {host.name}: nothing was changed",
            imagecache.cache_exposure_problems(bind, knobs.allow_unauthenticated),
        )
        apt.packages(name="The registry (CNCF Distribution) for the image cache", packages=["docker-registry"])
        files.directory(name="Image cache storage", path=imagecache.STORAGE, mode="0700")
        text = imagecache.cache_config(
            bind, knobs.image_cache_port, imagecache.upstream_url(knobs.image_cache_upstream)
        )
        config = files.put(
            name="Image cache configuration", dest=imagecache.CONFIG_PATH, mode="0644", src=StringIO(text)
        )
        unit_text = UNIT_TEXT.format(binary=REGISTRY_BINARY, config=imagecache.CONFIG_PATH)
        unit = files.put(
            name=f"Unit {imagecache.UNIT}",
            dest=f"/etc/systemd/system/{imagecache.UNIT}",
            mode="0644",
            src=StringIO(unit_text),
        )
        systemd.service(
            name="Image cache running",
            service=imagecache.UNIT,
            running=True,
            enabled=True,
            daemon_reload=unit.did_change,
            restarted=any_changed(config, unit),
        )
    url = cache_url(cache) if cache is not None else None
    record = f"{knobs.state_dir}/node/image-cache-mirror"
    previous = [line.strip() for line in (host.get_fact(FileText, path=record) or "").splitlines() if line.strip()]
    config = parse_daemon_json(host.get_fact(FileText, path=DAEMON_JSON))
    if isinstance(config, Problem):
        refuse(f"Docker on {host.name}: its registry mirrors were not changed", [config])
        return
    if imagecache.with_mirror(config, url, previous) == config:
        return
    python.call(
        name=f"Docker's registry mirror: {url or 'no image cache'}",
        function=_set_mirror,
        url=url,
        previous=previous,
        record=record,
    )
    systemd.service(
        name="Restart Docker for its registry mirror", service="docker.service", running=True, restarted=True
    )


def _set_mirror(url: str | None, previous: list[str], record: str) -> None:
    """Execute time: rewrite daemon.json's registry-mirrors from the file as it is now (others may have written
    it since the plan read it), and record the URL so that turning the cache off takes it out again."""
    run = HostRunner(host)
    config = parse_daemon_json(host.get_fact(FileText, path=DAEMON_JSON))
    if isinstance(config, Problem):
        refuse(f"{host.name}: {DAEMON_JSON} is left as it is", [config.message])
        return
    text = daemon_json_text(imagecache.with_mirror(config, url, previous))
    if not write_text(run, DAEMON_JSON, text) or not write_text(run, record, (url or "") + "\n"):
        raise RunFailure(f"could not write {DAEMON_JSON}", [], "check the node's root file system (space, read-only)")


def _docker_ce() -> None:
    installed = host.get_fact(InstalledPackages, patterns=" ".join(CONFLICTING_PACKAGES))
    if installed:
        apt.packages(name="Remove packages that conflict with docker-ce", packages=sorted(installed), present=False)
    release = host.get_fact(OsRelease)
    knobs = DockerKnobs.from_host(host)
    repo = knobs.docker_repo_url or "https://download.docker.com/linux/ubuntu"
    key = files.download(
        name="Docker repository key",
        src=knobs.docker_repo_key_url or f"{repo}/gpg",
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
    version = knobs.docker_version
    pinned = [f"{p}={version}" if version and p in ("docker-ce", "docker-ce-cli") else p for p in DOCKER_CE_PACKAGES]
    apt.packages(name="Install Docker CE", packages=pinned)


@deploy("hgxkit image cache: fill", data_defaults=DEFAULTS)
def warm_image_cache() -> None:
    """On the cache host, fill the cache with the recipe's image before any node pulls it (deploys/reproduce.py
    runs this before the image prefetch): each layer then crosses the uplink once, and every node's pull finds it
    in the cache. Nothing when the cache is off, on the other hosts, or when this host already runs a recorded
    digest of the image (a re-run pulls nothing)."""
    reference = judged_for(host).recipe.image.reference
    if recorded_digest(plan_fact(host, RecordFile, path=record_path(host)), reference):
        return
    fill_image_cache(reference)


@deploy("hgxkit image cache: fill", data_defaults=DEFAULTS)
def fill_image_cache(reference: str) -> None:
    """Add the operation that fills the cache with `reference`, on the cache host only (Docker Hub images only:
    Docker asks its mirrors for no other registry's): from the upstream, or with the `bundle` knob from the
    bundle's image layout on this host."""
    cache = cache_host()
    where = imagecache.hub_repository(reference)
    if cache is None or cache.name != host.name or where is None:  # type: ignore[attr-defined]
        return
    bundle = delivered(host)
    try:
        upstream = DockerKnobs.from_host(host).image_cache_upstream
        source = imagecache.fill_source(bundle.image_layout if bundle else None, upstream)
    except HgxkitError as err:
        refuse(f"{host.name}: the image cache cannot be filled", [err.message])
        raise
    python.call(name=f"Fill the image cache with {reference}", function=_fill, source=source, where=where)


def _fill(source: str, where: tuple[str, str]) -> None:
    wait_s = str(DockerKnobs.from_host(host).image_cache_fill_s)
    ok, said = HostRunner(host).status(
        argv("python3", "-", source, where[0], where[1], imagecache.STORAGE, wait_s, REGISTRY_BINARY),
        _stdin=program_text("hgxkit.node.cachefill"),
    )
    if not ok:
        raise RunFailure(
            "could not fill the image cache",
            " ".join(said)[-300:],
            "check the upstream registry (image_cache_upstream) or the bundle, and run again",
        )
    echo(f"[{host.name}] image cache: {' '.join(said)}")
