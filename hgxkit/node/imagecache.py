"""The fleet's image cache: a pull-through registry on one host that every node's Docker uses as its mirror.

The serving image (20-40 GB) is fetched from its registry once per fleet, not once per node: the CNCF
Distribution registry (Debian's and Ubuntu's `docker-registry` package) runs on the cache host as a
pull-through cache (`proxy.remoteurl`) and every node lists it first in daemon.json's `registry-mirrors`.
Docker verifies every layer by its digest as it always does; the cache stores only blobs checked against their
digests. The roles (roles/docker) first fill the cache with the recipe's image (hgxkit/node/cachefill.py, on the
cache host) and only then let the nodes pull, so every node's pull finds every layer in the cache and none
reaches the upstream. The fill does not ask the proxy: Distribution 2.8's proxy reads a missing blob from the
upstream twice (one copy streamed to the client, one stored) and once more per client asking while it is in
flight; the fill pushes each blob, read once, into the same storage through a second, non-proxy Distribution on
loopback. Air-gapped
(`image_cache_upstream: off`): the cache is a plain registry, filled from the bundle's image layout.

Knobs (roles/docker/defaults.py): `image_cache` (off by default; "first": the first inventory host; or a host's
inventory name), `image_cache_port`, `image_cache_upstream`, `image_cache_bind`.

Example:
    >>> cache_host_name(None, ["node1", "node2"]) is None
    True
    >>> cache_host_name("first", ["node1", "node2"])
    'node1'
    >>> with_mirror({"registry-mirrors": ["http://127.0.0.1:15000"]}, "http://node1:5050")["registry-mirrors"]
    ['http://node1:5050', 'http://127.0.0.1:15000']
"""

from __future__ import annotations

import json

from hgxkit.errors import HgxkitError
from hgxkit.imageref import normalized, repository
from hgxkit.netaddr import is_loopback
from hgxkit.problems import Problem

UNIT = "hgxkit-image-cache.service"
CONFIG_PATH = "/etc/hgxkit/image-cache.yml"
STORAGE = "/var/lib/hgxkit/image-cache"
WILDCARDS = ("0.0.0.0", "::", "[::]", "")

CONFIG = """# hgxkit image cache (roles/docker): a pull-through cache of the upstream registry
version: 0.1
log:
  level: info
  accesslog:
    disabled: false
storage:
  filesystem:
    rootdirectory: {storage}
http:
  addr: {addr}
"""
PROXY = """proxy:
  remoteurl: {upstream}
"""


def cache_host_name(setting: str | None, hosts: list[str]) -> str | None:
    """The inventory host that runs the cache: None (off), "first" (the first of `hosts`) or a host's name.

    Raises HgxkitError for a name the inventory does not have.
    """
    if not setting or str(setting).lower() in ("off", "false", "none"):
        return None
    if setting == "first":
        return hosts[0] if hosts else None
    if setting not in hosts:
        raise HgxkitError(
            f"image_cache names {setting!r}, which is not an inventory host ({', '.join(hosts[:5])}…); "
            "use first, a host's inventory name, or off"
        )
    return str(setting)


def cache_config(bind: str, port: int, upstream: str | None, storage: str = STORAGE) -> str:
    """The registry's configuration: listen on `bind`:`port`, proxy `upstream`, keep layers in `storage`. With
    `upstream` None (an air-gapped site) a plain registry: it serves what the fill put in, from the bundle
    (Distribution 2.8's proxy does not even start when its upstream does not answer)."""
    host = f"[{bind}]" if ":" in bind and not bind.startswith("[") else bind
    # Values as JSON strings (valid YAML): an address such as [fd00::5]:5050 is not a plain YAML scalar.
    text = CONFIG.format(addr=json.dumps(f"{host}:{int(port)}"), storage=json.dumps(storage))
    return text + PROXY.format(upstream=json.dumps(upstream)) if upstream else text


def mirror_url(address: str, port: int) -> str:
    """The URL every node's Docker uses for the cache (plain HTTP, as Docker accepts for a mirror)."""
    host = f"[{address}]" if ":" in address and not address.startswith("[") else address
    return f"http://{host}:{int(port)}"


def with_mirror(config: dict, url: str | None, previous: list[str] = ()) -> dict:
    """daemon.json `config` with `url` first in `registry-mirrors` (every other mirror and key kept); with `url`
    None, `previous` cache URLs are taken out again (the knob turned off)."""
    mirrors = [m for m in config.get("registry-mirrors", []) if m != url and m not in previous]
    if url:
        mirrors = [url, *mirrors]
    out = {k: v for k, v in config.items() if k != "registry-mirrors"}
    return {**out, "registry-mirrors": mirrors} if mirrors else out


def hub_repository(reference: str) -> tuple[str, str] | None:
    """(repository path on Docker Hub, tag or digest) of a Docker Hub image: what a mirror serves. None for an
    image of another registry (`nvcr.io/…`, `host:5000/…`): Docker asks its mirrors only for Docker Hub's.

    >>> hub_repository("lmsysorg/sglang:dev-dspark"), hub_repository("ubuntu"), hub_repository("nvcr.io/nim/x:1")
    (('lmsysorg/sglang', 'dev-dspark'), ('library/ubuntu', 'latest'), None)
    """
    name = normalized(reference)
    repo = repository(name)
    first = repo.split("/", 1)[0]
    if "/" in repo and ("." in first or ":" in first or first == "localhost"):
        return None
    rest = name[len(repo) :]
    ref = rest.split("@", 1)[1] if "@" in rest else rest.lstrip(":")
    return (repo if "/" in repo else f"library/{repo}"), ref


def upstream_url(setting: object) -> str | None:
    """The registry the cache proxies, from `image_cache_upstream`; None ("off", "none", empty): no upstream, a plain
    registry filled from the bundle (an air-gapped site).

    >>> upstream_url("https://registry-1.docker.io"), upstream_url("off"), upstream_url(None)
    ('https://registry-1.docker.io', None, None)
    """
    text = str(setting or "").strip()
    return None if text.lower() in ("", "off", "none", "false") else text.rstrip("/")


def fill_source(layout: str | None, upstream_setting: object) -> str:
    """Where the fill reads the image: the bundle's image layout on the cache host (`layout`, with the `bundle` knob)
    before the upstream. Raises HgxkitError when there is neither (upstream off, no bundle).

    >>> fill_source("/var/lib/hgxkit/bundle/ab/image", "https://registry-1.docker.io")
    'oci:/var/lib/hgxkit/bundle/ab/image'
    >>> fill_source(None, "http://mirror.site:5000/")
    'http://mirror.site:5000'
    """
    if layout:
        return f"oci:{layout}"
    upstream = upstream_url(upstream_setting)
    if upstream is None:
        raise HgxkitError(
            "image_cache_upstream is off and no bundle is set: nothing can fill the image cache; set "
            "bundle (an air-gapped site) or image_cache_upstream"
        )
    return upstream


def cache_exposure_problems(bind: str, allow_unauthenticated: bool) -> list[Problem]:
    """The cache answers anyone who reaches it, without credentials: it listens on one address the nodes reach
    (the cache host's fabric address), never on every interface unless `allow_unauthenticated: true`."""
    if bind.strip() in WILDCARDS and not allow_unauthenticated:
        return [
            Problem(
                "exposure",
                f"image_cache_bind {bind or '(empty)'} publishes the image cache on every interface, without "
                "credentials",
                "bind the cache host's fabric address (the default) or set allow_unauthenticated: true",
            )
        ]
    if is_loopback(bind):
        return [
            Problem(
                "image-cache",
                f"image_cache_bind {bind} is loopback: the other nodes cannot reach the cache",
                "bind the cache host's fabric address (set fabric_address in the inventory)",
            )
        ]
    return []
