"""The fleet's image cache: a pull-through registry on one host that every node's Docker uses as its mirror.

The serving image (20-40 GB) is fetched from its registry once per fleet, not once per node: the CNCF
Distribution registry (Debian's and Ubuntu's `docker-registry` package) runs on the cache host as a
pull-through cache (`proxy.remoteurl`) and every node lists it first in daemon.json's `registry-mirrors`.
Docker verifies every layer by its digest as it always does; the cache only stores what it fetched. The roles
(roles/docker) first fill the cache with the recipe's image (`FILL_PROGRAM`, on the cache host) and only then let
the nodes pull, so every node's pull finds every layer in the cache and none reaches the upstream. Measured
(tests/e2e/test_image_cache.py): Debian's Distribution 2.8 fetches a missing blob twice while filling (one copy
streamed to the asking client, one stored; a HEAD does not avoid it), so the uplink carries two copies of the
image per fleet, whatever the node count; Distribution 3 streams and stores one copy.

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
from hgxkit.recipe.imageref import normalized, repository

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


# Run on the cache host with python3 (stdlib only): BASE REPO REF STORAGE TIMEOUT_S. Reads the image's manifest
# through the cache (this host's platform from an index), asks the cache for every blob it lacks (HEAD: nothing
# comes back to this program; the cache fetches and stores the blob), and waits until every blob is stored.
FILL_PROGRAM = """
import json, os, sys, time, urllib.request
base, repo, ref, storage, timeout = sys.argv[1:6]
ACCEPT = ", ".join(["application/vnd.oci.image.index.v1+json",
                    "application/vnd.docker.distribution.manifest.list.v2+json",
                    "application/vnd.oci.image.manifest.v1+json",
                    "application/vnd.docker.distribution.manifest.v2+json"])
def ask(path, method="GET"):
    req = urllib.request.Request(base + path, method=method, headers={"Accept": ACCEPT})
    return urllib.request.urlopen(req, timeout=600)
manifest = json.load(ask("/v2/%s/manifests/%s" % (repo, ref)))
if "manifests" in manifest:
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(os.uname().machine, os.uname().machine)
    mine = [m for m in manifest["manifests"] if m.get("platform", {}).get("architecture") == arch]
    manifest = json.load(ask("/v2/%s/manifests/%s" % (repo, mine[0]["digest"])))
blobs = [manifest["config"]["digest"]] + [layer["digest"] for layer in manifest["layers"]]
def stored(blob):
    algo, hexdigest = blob.split(":", 1)
    return os.path.exists("%s/docker/registry/v2/blobs/%s/%s/%s/data" % (storage, algo, hexdigest[:2], hexdigest))
for blob in blobs:
    if not stored(blob):
        try:
            ask("/v2/%s/blobs/%s" % (repo, blob), method="HEAD").close()
        except OSError:
            pass
deadline = time.time() + float(timeout)
while not all(stored(blob) for blob in blobs):
    if time.time() > deadline:
        sys.exit("the cache did not store %d of %d blobs in %s s" % (
            len([b for b in blobs if not stored(b)]), len(blobs), timeout))
    time.sleep(1)
print("cached %d blobs of %s:%s" % (len(blobs), repo, ref))
"""


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
