"""Build the router images for simulated nodes, one per router, each with the REAL router from PyPI.

Each image is the SGLang stand-in's Debian base (hgxkit/sim/standin/image.py, python3 only) plus one pinned wheel:
`sglang-router` (the SGLang Model Gateway) or `vllm-router` (vLLM's), both a Rust router shipped as a binary in
its wheel. pip is not in the base, so the build runs pip from its wheel (downloaded on the host with the host's
pip) and installs the pinned router from PyPI inside `docker build`, trusting the host's CA bundle (TLS is
intercepted here). Nothing in an image is simulated: `python3 -m sglang_router.launch_router …` and `vllm-router …`
are the real routers.

    hgxkit-sim-router:<hash of base, requirement, Dockerfile>   also tagged lmsysorg/sgl-model-gateway:latest
    hgxkit-sim-router:<hash …>                                  also tagged vllm/vllm-router:v0.1.17

A router is one row of ROUTERS; every kind's PD router image (`PDRouter.image`) must be one of its tags
(tests/unit/serving/test_router_plan.py).

Example:
    >>> from hgxkit.sim.standin import router_image
    >>> router_image.image_tag()[:18]
    'hgxkit-sim-router:'
    >>> router_image.ROUTERS["vllm"].requirement
    'vllm-router==0.1.17'
    >>> router_image.ensure_published(docker.from_env(), "vllm")  # doctest: +SKIP
    {'vllm/vllm-router:v0.1.17': 'sha256:…'}
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors

from hgxkit.errors import HgxkitError
from hgxkit.sim import image
from hgxkit.sim.standin import image as serving

REPO = "hgxkit-sim-router"
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
BUILD_FORMAT = "1"


@dataclass(frozen=True)
class Router:
    """One router image: the pinned wheel, the tags it is published as, what the build imports to check it, and
    the image's default command."""

    requirement: str
    tags: tuple[str, ...]
    imports: str
    command: str  # the Dockerfile's CMD, JSON

    def dockerfile(self) -> str:
        name = self.requirement.split("==")[0]
        return f"""# Router image for simulated nodes (REAL {name} from PyPI): hgxkit.sim.standin.router_image
ARG BASE
FROM ${{BASE}}
COPY build/ /tmp/hgxkit-build/
RUN set -e; cd /tmp/hgxkit-build; \\
    python3 pip.whl/pip install --no-cache-dir --disable-pip-version-check --break-system-packages \\
        --root-user-action=ignore --cert ca-certificates.crt --only-binary=:all: '{self.requirement}'; \\
    python3 -c '{self.imports}'; \\
    rm -rf /tmp/hgxkit-build
ENV PYTHONUNBUFFERED=1
LABEL {image.LABEL}=router org.opencontainers.image.description="{name} from PyPI on Debian 12 (hgxkit)"
CMD {self.command}
"""


ROUTERS = {
    # the last sglang-router release (reference notes §7)
    "sglang": Router(
        "sglang-router==0.3.2",
        ("lmsysorg/sgl-model-gateway:latest",),
        "import sglang_router.launch_router, sglang_router.router",
        '["python3", "-m", "sglang_router.launch_router", "--help"]',
    ),
    # vLLM's router (vllm-project/router), the release the vLLM stand-in's split is judged by
    "vllm": Router(
        "vllm-router==0.1.17",
        ("vllm/vllm-router:v0.1.17",),
        "import vllm_router.launch_router, vllm_router_rs",
        '["vllm-router", "--help"]',
    ),
}
# SGLang's router, the one `hgxkit sim image build --router` builds when it names none
REQUIREMENT = ROUTERS["sglang"].requirement
DEFAULT_TAGS = ROUTERS["sglang"].tags
DOCKERFILE = ROUTERS["sglang"].dockerfile()


def image_tag(router: str = "sglang") -> str:
    """Tag of `router`'s image for the current base, requirement and Dockerfile."""
    one = ROUTERS[router]
    parts = (BUILD_FORMAT, serving.base_tag(), one.requirement, one.dockerfile())
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


def build_image(client: docker.DockerClient, tag: str, base: str, log: image.Log, router: str = "sglang") -> None:
    """Build `tag` FROM `base`: pip from its wheel installs `router`'s requirement from PyPI (network needed)."""
    if not HOST_CA_BUNDLE.is_file():
        raise HgxkitError(f"{HOST_CA_BUNDLE} is missing: install ca-certificates so the build can reach PyPI")
    one = ROUTERS[router]
    log(f"building {tag}: {one.requirement} from PyPI on {base}")
    with tempfile.TemporaryDirectory(prefix="hgxkit-sim-router-ctx-") as ctx:
        build = Path(ctx) / "build"
        build.mkdir()
        shutil.copy(_pip_wheel(Path(ctx) / "dl"), build / "pip.whl")
        shutil.copy(HOST_CA_BUNDLE, build / "ca-certificates.crt")
        (Path(ctx) / "Dockerfile").write_text(one.dockerfile())
        try:
            client.images.build(path=ctx, tag=tag, buildargs={"BASE": base}, rm=True, forcerm=True)
        except docker.errors.BuildError as err:
            lines = [str(x.get("stream", x.get("error", ""))).strip() for x in err.build_log]
            raise HgxkitError(
                f"building {tag} failed: {' | '.join(x for x in lines if x)[-300:]}; check PyPI from containers"
            ) from err


def ensure_image(client: docker.DockerClient, router: str = "sglang", log: image.Log = image._stderr) -> str:
    """Build `router`'s image when its inputs changed, tag it as each of its tags; return its hash tag."""
    names = [serving.check_tag(t) for t in ROUTERS[router].tags]
    tag = image_tag(router)
    return serving.build_on_base(client, tag, names, lambda base: build_image(client, tag, base, log, router), log)


def ensure_published(
    client: docker.DockerClient, router: str = "sglang", log: image.Log = image._stderr
) -> dict[str, str]:
    """Build `router`'s image if needed and publish its tags to the nodes' registry mirror; {tag: digest}."""
    from hgxkit.sim.standin import registry as serving_registry

    ensure_image(client, router, log=log)
    return serving_registry.publish(client, list(ROUTERS[router].tags), log)
