"""What each simulated node gets for serving: the pre-loaded registry mirror and the benchmark-client store.

`prepare` runs once per `hgxkit sim up` (cheap when nothing changed): it builds the SGLang stand-in image
when its inputs changed, publishes it into the registry storage, and makes sure the client store directory
exists (empty until ``hgxkit sim client install``; nodes see it fill in, the mount follows the directory).
`volumes` are the node container's read-only bind mounts:

    <state>/registry         -> /var/lib/docker-registry     (the node's docker-registry on 127.0.0.1:15000)
    <client store>           -> /opt/hgxkit-sglang-client    (the simulated NVIDIA hook mounts it into GPU containers)

Example:
    >>> sorted(v["bind"] for v in volumes().values())   # doctest: +SKIP
    ['/opt/hgxkit-sglang-client', '/var/lib/docker-registry']
"""

from __future__ import annotations

import shutil

import docker

from hgxkit.sim.image import Log, _stderr
from hgxkit.sim.standin import client_store as serving_client
from hgxkit.sim.standin import image as serving
from hgxkit.sim.standin import registry as serving_registry


def prepare(client: docker.DockerClient, log: Log = _stderr) -> None:
    """Build and publish the stand-in (when changed); create the client store dir. Warns without docker-registry."""
    if shutil.which("docker-registry") is None:
        log(
            "warning: docker-registry not found, so the nodes' registry mirror stays empty and "
            "`docker pull lmsysorg/sglang:dev-dspark` fails on them: apt-get install docker-registry"
        )
    else:
        serving_registry.ensure_published(client, log)
    serving_registry.storage_dir().mkdir(parents=True, exist_ok=True)
    serving_client.store_path().mkdir(parents=True, exist_ok=True)


def volumes() -> dict[str, dict[str, str]]:
    """The node container's bind mounts for serving (see the module doc)."""
    return {
        str(serving_registry.storage_dir().resolve()): {"bind": serving_registry.NODE_STORAGE, "mode": "ro"},
        str(serving_client.store_path().resolve()): {"bind": serving.CLIENT_MOUNT, "mode": "ro"},
    }
