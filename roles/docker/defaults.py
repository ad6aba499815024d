"""Knobs of the docker role (inventory data overrides each).


The fleet's image cache (hgxkit/node/imagecache.py): one host runs a pull-through registry (the CNCF Distribution
registry, Debian/Ubuntu's `docker-registry` package, unit hgxkit-image-cache) and every node's Docker lists it
first in daemon.json's `registry-mirrors`, so the serving image crosses the site's uplink once per fleet, not once
per node (layers are verified by digest by each Docker, as always). Docker asks mirrors only for Docker Hub
images (`lmsysorg/sglang`, `vllm/vllm-openai`); images of other registries are pulled directly.
With the `bundle` knob and the cache on, only the cache host gets the bundle's image/ (it fills the cache from it);
every other node gets the bundle without image/ and pulls the image through the cache by the manifest digest the
bundle records, refused unless its image ID is the bundle's (hgxkit/bundle/source.py). The cache off: every node
gets the whole bundle and loads the image from its own copy.
"""

from __future__ import annotations

from dataclasses import dataclass

from hgxkit.knobs import Knobs, declare, shared


@dataclass(frozen=True)
class DockerKnobs(Knobs):
    """The docker role's knobs (inventory data or `--data key=value` overrides each)."""

    docker_source: str = declare(
        "auto",
        '"docker-ce" (Docker\'s repository), "docker.io" (the distribution\'s package), or "auto": docker-ce on Ubuntu,'
        " docker.io on Debian (and where Docker's repository is unreachable, as on the simulated nodes). Never the "
        "snap: `--gpus` does not work with it.",
    )
    docker_repo_url: str | None = declare(
        None,
        "Docker's repository or a mirror; None: https://download.docker.com/linux/ubuntu",
    )
    docker_repo_key_url: str | None = declare(None, "its key; None: <docker_repo_url>/gpg")
    docker_version: str | None = declare(
        None,
        'pin docker-ce and docker-ce-cli (e.g. "5:28.5.1-1~ubuntu.24.04~noble"); None: newest.',
    )
    image_cache: str | None = declare(
        None,
        'None / "off": no cache (the default; turning it off takes the mirror out of daemon.json again); "first": the'
        " first inventory host runs it; or an inventory host's name.",
    )
    image_cache_port: int = declare(5050, "its port (default 5050).")
    image_cache_bind: str | None = declare(
        None,
        "the address it listens on; None: the cache host's `fabric_address` (where the other nodes reach it). "
        "Exposure policy: a wildcard (0.0.0.0, ::) is refused unless `allow_unauthenticated: true` (the cache answers"
        " anyone, without credentials); loopback is refused (the other nodes could not reach it).",
    )
    image_cache_upstream: str = declare(
        "https://registry-1.docker.io",
        "the registry it proxies (default Docker Hub, https://registry-1.docker.io; a site's own registry works the "
        'same way). "off": an air-gapped site; the cache is a plain registry, filled from the bundle\'s image layout '
        "(the `bundle` knob) on the cache host.",
    )
    allow_unauthenticated: bool = shared("allow_unauthenticated")
    state_dir: str = shared("state_dir")
    image_cache_fill_s: int = declare(
        7200,
        "how long the cache host's fill may take (default 7200 s). The fill reads each blob of this host's platform "
        "from the upstream once and stores it (hgxkit/node/cachefill.py).",
    )


DEFAULTS = DockerKnobs.defaults()
__doc__ = f"{__doc__}\n{DockerKnobs.table()}\n"


DOCKER_CE_PACKAGES = ["docker-ce", "docker-ce-cli", "containerd.io", "docker-buildx-plugin", "docker-compose-plugin"]
# Docker's install guide removes these before installing docker-ce.
CONFLICTING_PACKAGES = [
    "docker.io",
    "docker-compose",
    "docker-compose-v2",
    "docker-doc",
    "podman-docker",
    "containerd",
    "runc",
]
KEYRING = "/etc/apt/keyrings/docker.asc"
SOURCES_FILE = "/etc/apt/sources.list.d/docker.sources"
