"""The fleet's image cache: a pull-through registry on one host that every node's Docker uses as its mirror.

The serving image (20-40 GB) is fetched from its registry once per fleet, not once per node: the CNCF
Distribution registry (Debian's and Ubuntu's `docker-registry` package) runs on the cache host as a
pull-through cache (`proxy.remoteurl`) and every node lists it first in daemon.json's `registry-mirrors`.
Docker verifies every layer by its digest as it always does; the cache only stores what it fetched. The roles
(roles/docker) first pull the recipe's image on the cache host (`warm`), so the other nodes' pulls find every
layer there: Distribution fetches a layer that several clients ask for at once once per client.

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
proxy:
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


def cache_config(bind: str, port: int, upstream: str, storage: str = STORAGE) -> str:
    """The registry's configuration: listen on `bind`:`port`, proxy `upstream`, keep layers in `storage`."""
    host = f"[{bind}]" if ":" in bind and not bind.startswith("[") else bind
    # Values as JSON strings (valid YAML): an address such as [fd00::5]:5050 is not a plain YAML scalar.
    return CONFIG.format(addr=json.dumps(f"{host}:{int(port)}"), upstream=json.dumps(upstream),
                         storage=json.dumps(storage))  # fmt: skip


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
