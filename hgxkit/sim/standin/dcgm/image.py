"""Build the DCGM exporter stand-in image for simulated nodes and publish it to their registry mirror.

The image is the serving stand-ins' Debian base (python3 only) plus hgxkit/sim/standin/dcgm/exporter.py as
its entrypoint, so `docker run … IMAGE -f COUNTERS -a ADDR:PORT` takes the real exporter's flags. A node's
registry mirror serves Docker Hub names only, so simulated inventories run it as `hgxkit-sim/dcgm-exporter`
(inventories/sim.py sets dcgm_exporter_image) instead of NVIDIA's nvcr.io name.

    hgxkit-sim-dcgm-exporter:<hash of base, exporter, Dockerfile>   also tagged DEFAULT_TAGS

Example:
    >>> from hgxkit.sim.standin.dcgm import image as dcgm_image
    >>> dcgm_image.image_tag()[:25], dcgm_image.DEFAULT_TAGS
    ('hgxkit-sim-dcgm-exporter:', ('hgxkit-sim/dcgm-exporter:4.4.2-4.7.1-ubuntu22.04',))
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import docker
import docker.errors

from hgxkit.errors import HgxkitError
from hgxkit.sim import image
from hgxkit.sim.standin import image as serving

REPO = "hgxkit-sim-dcgm-exporter"
DEFAULT_TAGS = ("hgxkit-sim/dcgm-exporter:4.4.2-4.7.1-ubuntu22.04",)
EXPORTER = Path(__file__).with_name("exporter.py")
DOCKERFILE = f"""# DCGM exporter stand-in (SIMULATED): hgxkit.sim.standin.dcgm.image
ARG BASE
FROM ${{BASE}}
COPY exporter.py /usr/local/bin/dcgm-exporter
ENV PYTHONUNBUFFERED=1
LABEL {image.LABEL}=dcgm-exporter org.opencontainers.image.description="SIMULATED DCGM exporter (hgxkit)"
ENTRYPOINT ["python3", "/usr/local/bin/dcgm-exporter"]
"""


def image_tag() -> str:
    """Tag of the exporter image for the current base, exporter source and Dockerfile."""
    return f"{REPO}:{serving._hash(serving.base_tag().encode(), EXPORTER.read_bytes(), DOCKERFILE.encode())}"


def ensure_image(client: docker.DockerClient, log: image.Log = image._stderr) -> str:
    """Build the exporter image when its inputs changed (no network), tag it as DEFAULT_TAGS; its hash tag."""
    tag = image_tag()

    def build(base: str) -> None:
        log(f"building {tag}: the DCGM exporter stand-in on {base}")
        with tempfile.TemporaryDirectory(prefix="hgxkit-sim-dcgm-ctx-") as ctx:
            (Path(ctx) / "exporter.py").write_bytes(EXPORTER.read_bytes())
            (Path(ctx) / "Dockerfile").write_text(DOCKERFILE)
            try:
                client.images.build(path=ctx, tag=tag, buildargs={"BASE": base}, rm=True, forcerm=True)
            except docker.errors.BuildError as err:
                raise HgxkitError(f"building {tag} failed: {str(err)[-300:]}") from err

    return serving.build_on_base(client, tag, list(DEFAULT_TAGS), build, log)


def ensure_published(client: docker.DockerClient, log: image.Log = image._stderr) -> dict[str, str]:
    """Build the exporter image if needed and publish its tags to the nodes' registry mirror; {tag: digest}."""
    from hgxkit.sim.standin import registry as serving_registry

    ensure_image(client, log)
    return serving_registry.publish(client, list(DEFAULT_TAGS), log)
