"""Build the router image `lmsysorg/sgl-model-gateway:latest` for simulated nodes, with the REAL router.

The image is the SGLang stand-in's Debian base (hgxkit/sim/standin/image.py, python3 only) plus PyPI's
`sglang-router` (the SGLang Model Gateway: a Rust router shipped as a binary in its wheel). pip is not in the
base, so the build runs pip from its wheel (downloaded on the host with the host's pip) and installs the
pinned router from PyPI inside `docker build`, trusting the host's CA bundle (TLS is intercepted here).
Nothing in the image is simulated: `python3 -m sglang_router.launch_router …` is the real router.

    hgxkit-sim-router:<hash of base, requirement, Dockerfile>   also tagged lmsysorg/sgl-model-gateway:latest

Example:
    >>> from hgxkit.sim.standin import router_image
    >>> router_image.image_tag()[:18]
    'hgxkit-sim-router:'
    >>> router_image.REQUIREMENT
    'sglang-router==0.3.2'
    >>> router_image.ensure_published(docker.from_env())  # doctest: +SKIP
    {'lmsysorg/sgl-model-gateway:latest': 'sha256:…'}
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import docker
import docker.errors

from hgxkit.errors import HgxkitError
from hgxkit.sim import image
from hgxkit.sim.standin import image as serving

REPO = "hgxkit-sim-router"
DEFAULT_TAGS = ("lmsysorg/sgl-model-gateway:latest",)
REQUIREMENT = "sglang-router==0.3.2"  # the last sglang-router release (reference notes §7)
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
BUILD_FORMAT = "1"

DOCKERFILE = f"""# Router image for simulated nodes (REAL sglang-router from PyPI): hgxkit.sim.standin.router_image
ARG BASE
FROM ${{BASE}}
COPY build/ /tmp/hgxkit-build/
RUN set -e; cd /tmp/hgxkit-build; \\
    python3 pip.whl/pip install --no-cache-dir --disable-pip-version-check --break-system-packages \\
        --root-user-action=ignore --cert ca-certificates.crt --only-binary=:all: '{REQUIREMENT}'; \\
    python3 -c 'import sglang_router.launch_router, sglang_router.router'; \\
    rm -rf /tmp/hgxkit-build
ENV PYTHONUNBUFFERED=1
LABEL {image.LABEL}=router org.opencontainers.image.description="sglang-router from PyPI on Debian 12 (hgxkit)"
CMD ["python3", "-m", "sglang_router.launch_router", "--help"]
"""


def image_tag() -> str:
    """Tag of the router image for the current base, requirement and Dockerfile."""
    parts = (BUILD_FORMAT, serving.base_tag(), REQUIREMENT, DOCKERFILE)
    return f"{REPO}:{serving._hash(*(p.encode() for p in parts))}"


def _pip_wheel(dest: Path) -> Path:
    """Download pip's wheel (the build runs pip from it: the base has no pip) into `dest`."""
    res = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", str(dest), "pip"],
        capture_output=True,
        text=True,
        check=False,
    )
    wheels = sorted(dest.glob("pip-*.whl"))
    if res.returncode != 0 or not wheels:
        tail = " | ".join((res.stdout + res.stderr).strip().splitlines()[-2:])
        raise HgxkitError(f"`pip download pip` failed ({tail}): check that PyPI is reachable from this host")
    return wheels[-1]


def build_image(client: docker.DockerClient, tag: str, base: str, log: image.Log) -> None:
    """Build `tag` FROM `base`: pip from its wheel installs REQUIREMENT from PyPI (network needed)."""
    if not HOST_CA_BUNDLE.is_file():
        raise HgxkitError(f"{HOST_CA_BUNDLE} is missing: install ca-certificates so the build can reach PyPI")
    log(f"building {tag}: {REQUIREMENT} from PyPI on {base}")
    with tempfile.TemporaryDirectory(prefix="hgxkit-sim-router-ctx-") as ctx:
        build = Path(ctx) / "build"
        build.mkdir()
        shutil.copy(_pip_wheel(Path(ctx) / "dl"), build / "pip.whl")
        shutil.copy(HOST_CA_BUNDLE, build / "ca-certificates.crt")
        (Path(ctx) / "Dockerfile").write_text(DOCKERFILE)
        try:
            client.images.build(path=ctx, tag=tag, buildargs={"BASE": base}, rm=True, forcerm=True)
        except docker.errors.BuildError as err:
            lines = [str(x.get("stream", x.get("error", ""))).strip() for x in err.build_log]
            raise HgxkitError(
                f"building {tag} failed: {' | '.join(x for x in lines if x)[-300:]}; check PyPI from containers"
            ) from err


def ensure_image(
    client: docker.DockerClient, tags: list[str] | tuple[str, ...] = DEFAULT_TAGS, log: image.Log = image._stderr
) -> str:
    """Build the router image when its inputs changed, tag it as each of `tags`; return its hash tag."""
    names = [serving.check_tag(t) for t in tags]
    tag = image_tag()
    return serving.build_on_base(client, tag, names, lambda base: build_image(client, tag, base, log), log)


def ensure_published(client: docker.DockerClient, log: image.Log = image._stderr) -> dict[str, str]:
    """Build the router image if needed and publish its tags to the nodes' registry mirror; {tag: digest}."""
    from hgxkit.sim.standin import registry as serving_registry

    ensure_image(client, list(DEFAULT_TAGS), log=log)
    return serving_registry.publish(client, list(DEFAULT_TAGS), log)
