"""Pre-load the nodes' registry mirror: push the stand-in images into a registry storage dir on the host.

Debian's ``docker-registry`` (the distribution registry) runs briefly on the host on 127.0.0.1:<free port>
with its storage in ``<sim state dir>/registry``; the SGLang stand-in is pushed there as
``lmsysorg/sglang:dev-dspark`` by `ensure_published` (what ``hgxkit sim up`` calls), and any other tag asked
for with ``hgxkit sim image build --tag REF`` (e.g. ``vllm/vllm-openai:v0.33.0`` for the vLLM stand-in).
Every simulated node bind-mounts that storage read-only at /var/lib/docker-registry and runs its own
``docker-registry`` on http://127.0.0.1:15000 (read-only mode), which its Docker engine uses as
``registry-mirrors`` (/etc/docker/daemon.json). So a plain ``docker pull lmsysorg/sglang:dev-dspark`` on a
node works offline and yields the real repository digest; publishing a rebuilt stand-in
(``hgxkit sim image build --variant X``) changes it, on running nodes too.

Example:
    >>> from hgxkit.sim.standin import registry as serving_registry
    >>> serving_registry.MIRROR_URL
    'http://127.0.0.1:15000'
    >>> serving_registry.publish(docker.from_env(), ["lmsysorg/sglang:dev-dspark"])  # doctest: +SKIP
    {'lmsysorg/sglang:dev-dspark': 'sha256:9b1f…'}
"""

from __future__ import annotations

import fcntl
import json
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import docker

from hgxkit.errors import HgxkitError
from hgxkit.sim.image import Log, _stderr
from hgxkit.sim.standin import image as serving

MIRROR_PORT = 15000  # not 5000: the seed publishes its servers on 5000 and 5001
MIRROR_URL = f"http://127.0.0.1:{MIRROR_PORT}"
NODE_STORAGE = "/var/lib/docker-registry"
PUBLISHED = "hgxkit-published.json"

CONFIG = """version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: {root}
  maintenance:
    uploadpurging:
      enabled: false
    readonly:
      enabled: {readonly}
http:
  addr: 127.0.0.1:{port}
"""


def storage_dir() -> Path:
    """The registry storage the host fills and the nodes mount read-only."""
    from hgxkit.sim.paths import state_dir

    return state_dir() / "registry"


def published() -> dict[str, dict[str, str]]:
    """{tag: {"image": image id, "digest": repository digest}} of what the storage holds."""
    f = storage_dir() / PUBLISHED
    return json.loads(f.read_text()) if f.is_file() else {}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_v2(port: int, proc: subprocess.Popen[bytes], deadline_s: float = 20.0) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            break
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise HgxkitError(f"docker-registry did not answer on 127.0.0.1:{port}: run it by hand to see why")


def _push(client: docker.DockerClient, ref: str, version: str) -> str:
    digest = ""
    for event in client.images.push(ref, tag=version, stream=True, decode=True):
        if "error" in event:
            raise HgxkitError(f"pushing {ref}:{version} failed: {event['error']}")
        digest = event.get("aux", {}).get("Digest", digest)
    if not digest:
        raise HgxkitError(f"pushing {ref}:{version} reported no digest: see the Docker daemon's log")
    return str(digest)


def publish(client: docker.DockerClient, tags: list[str], log: Log = _stderr, force: bool = False) -> dict[str, str]:
    """Push the local images `tags` into the registry storage (skipped per tag when already there)."""
    binary = shutil.which("docker-registry")
    if binary is None:
        raise HgxkitError("docker-registry not found: apt-get install docker-registry (Debian's registry)")
    names = [serving.check_tag(t) for t in tags]
    storage_dir().mkdir(parents=True, exist_ok=True)
    with open(storage_dir() / ".lock", "w") as lock:  # concurrent `hgxkit sim up`s publish one at a time
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _publish_locked(client, binary, names, log, force)


def _publish_locked(
    client: docker.DockerClient, binary: str, names: list[str], log: Log, force: bool
) -> dict[str, str]:
    done = published()
    todo = [n for n in names if force or done.get(n, {}).get("image") != client.images.get(n).id]
    if todo:
        root = storage_dir()
        root.mkdir(parents=True, exist_ok=True)
        port = _free_port()
        with tempfile.TemporaryDirectory(prefix="hgxkit-sim-registry-") as tmp:
            cfg = Path(tmp) / "config.yml"
            cfg.write_text(CONFIG.format(root=root, port=port, readonly="false"))
            proc = subprocess.Popen([binary, "serve", str(cfg)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                _wait_v2(port, proc)
                for name in todo:
                    repo, _, version = name.rpartition(":")
                    img = client.images.get(name)
                    ref = f"127.0.0.1:{port}/{repo}"
                    img.tag(ref, version)
                    log(f"pushing {name} into the nodes' registry mirror storage {root}")
                    try:
                        done[name] = {"image": str(img.id), "digest": _push(client, ref, version)}
                    finally:
                        client.images.remove(f"{ref}:{version}", noprune=True)
            finally:
                proc.terminate()
                proc.wait(timeout=10)
        (root / PUBLISHED).write_text(json.dumps(done, indent=2) + "\n")
    return {n: done[n]["digest"] for n in names}


def ensure_published(client: docker.DockerClient, log: Log = _stderr) -> dict[str, str]:
    """Build the stand-in if needed and publish its default tags; what `hgxkit sim up` calls."""
    serving.ensure_image(client, list(serving.DEFAULT_TAGS), log=log)
    return publish(client, list(serving.DEFAULT_TAGS), log)
