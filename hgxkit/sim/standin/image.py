"""Build the SGLang stand-in image `lmsysorg/sglang:dev-dspark` locally (SIMULATED SGLang; no Docker Hub).

Two local images, each tagged with a hash of its inputs, plus the tags a recipe names:

    hgxkit-sim-sglang-base:<hash of suite, mirror, packages>   debootstrap --variant=minbase --include=python3
    hgxkit-sim-sglang:<hash of base, stand-in sources, variant>   the stand-in, also tagged e.g.
                                                                  lmsysorg/sglang:dev-dspark

Inside, like the real image: `sglang serve …` and `python3 -m sglang.launch_server …` (they run the stdlib
stand-in from /opt/hgxkit-sim), working directory /sgl-workspace/sglang, no ENTRYPOINT. The image does not
hold SGLang's benchmark client (6.3 GB with CUDA torch): the simulated NVIDIA hook bind-mounts the host's
client store read-only at /opt/hgxkit-sglang-client into every GPU container, and the image's python3 finds it
through a .pth file (see serving_client.py). `--variant TEXT` changes the image content (a file
/etc/hgxkit-sim/sglang-variant), so a rebuild gets another digest (digest-pinning tests).

Example:
    >>> from hgxkit.sim.standin import image as serving
    >>> serving.image_tag("")[:18]
    'hgxkit-sim-sglang:'
    >>> serving.ensure_image(docker.from_env(), ["lmsysorg/sglang:dev-dspark"])  # doctest: +SKIP
    'hgxkit-sim-sglang:5be1f0c2d9a8e7b3'
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

import docker
import docker.errors

from hgxkit.errors import HgxkitError, InputError
from hgxkit.sim import image

PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the hgxkit package
BASE_REPO = "hgxkit-sim-sglang-base"
REPO = "hgxkit-sim-sglang"
DEFAULT_TAGS = ("lmsysorg/sglang:dev-dspark",)
BASE_PACKAGES = ["python3"]
CLIENT_MOUNT = "/opt/hgxkit-sglang-client"  # where nodes and GPU containers see the client store
CLIENT_SITE = f"{CLIENT_MOUNT}/lib/python3.11/site-packages"
SITE = "/usr/local/lib/python3.11/dist-packages"  # Debian 12's python3 looks here first
BUILD_FORMAT = "1"  # bump when the Dockerfile below changes in a way the hashed inputs don't show

DOCKERFILE = f"""# SIMULATED SGLang image (hgxkit stand-in), built by hgxkit/sim/standin/image.py
ARG BASE
FROM ${{BASE}}
COPY stub/ /opt/hgxkit-sim/
COPY sglang-variant /etc/hgxkit-sim/sglang-variant
RUN set -e; cd /opt/hgxkit-sim; \\
    python3 -m hgxkit.sim.standin.sglang install-shim --site-packages {SITE} --bin-dir /usr/local/bin \\
        --stub-root /opt/hgxkit-sim --python /usr/bin/python3 --overlay {CLIENT_SITE} >/dev/null; \\
    echo "import os, site; os.path.isdir('{CLIENT_SITE}') and site.addsitedir('{CLIENT_SITE}')" \\
        > {SITE}/hgxkit-sglang-client.pth; \\
    mkdir -p /sgl-workspace/sglang {CLIENT_MOUNT}; \\
    echo "SIMULATED: hgxkit's SGLang stand-in; SGLang's source is not here" > /sgl-workspace/sglang/README
ENV PYTHONUNBUFFERED=1
WORKDIR /sgl-workspace/sglang
LABEL {image.LABEL}=sglang org.opencontainers.image.description="SIMULATED SGLang (hgxkit stand-in)"
CMD ["/bin/bash"]
"""


def _stub_files() -> dict[str, bytes]:
    """The stdlib-only part of hgxkit the stand-in needs, relative to the image's /opt/hgxkit-sim."""
    files = {"hgxkit/__init__.py": (PACKAGE_ROOT / "__init__.py").read_bytes()}
    for package in ("sim", "sim/standin"):
        files[f"hgxkit/{package}/__init__.py"] = (PACKAGE_ROOT / package / "__init__.py").read_bytes()
    for sub in ("common", "sglang"):
        for f in sorted((PACKAGE_ROOT / "sim" / "standin" / sub).glob("*.py")):
            files[f"hgxkit/sim/standin/{sub}/{f.name}"] = f.read_bytes()
    return files


def _hash(*parts: bytes) -> str:
    h = hashlib.sha256(BUILD_FORMAT.encode())
    for p in parts:
        h.update(hashlib.sha256(p).digest())
    return h.hexdigest()[:16]


def base_tag() -> str:
    """Tag of the minimal debootstrapped base (python3 only)."""
    return f"{BASE_REPO}:{_hash(image.SUITE.encode(), image.mirror().encode(), ' '.join(BASE_PACKAGES).encode())}"


def image_tag(variant: str = "") -> str:
    """Tag of the stand-in image for the current sources and `variant`."""
    stub = b"\1".join(k.encode() + b"\0" + v for k, v in _stub_files().items())
    return f"{REPO}:{_hash(base_tag().encode(), stub, DOCKERFILE.encode(), variant.encode())}"


def check_tag(tag: str) -> str:
    """`tag` as REPO:TAG (':latest' added), or an InputError naming the problem."""
    name = tag if ":" in tag.rsplit("/", 1)[-1] else f"{tag}:latest"
    repo, _, version = name.rpartition(":")
    if not repo or not version or "@" in name or not all(c.isalnum() or c in "._-/:" for c in name):
        raise InputError(f"image tag {tag!r} is invalid: use REPOSITORY[:TAG], e.g. lmsysorg/sglang:dev-dspark")
    return name


def build_image(client: docker.DockerClient, tag: str, base: str, variant: str, log: image.Log) -> None:
    """Build the stand-in `tag` FROM `base` (no network)."""
    log(f"building {tag} (SIMULATED SGLang stand-in) from {base}")
    with tempfile.TemporaryDirectory(prefix="hgxkit-sim-sglang-ctx-") as ctx:
        c = Path(ctx)
        for rel, data in _stub_files().items():
            (c / "stub" / rel).parent.mkdir(parents=True, exist_ok=True)
            (c / "stub" / rel).write_bytes(data)
        (c / "sglang-variant").write_text(f"{variant}\n")
        (c / "Dockerfile").write_text(DOCKERFILE)
        try:
            client.images.build(
                path=ctx, tag=tag, buildargs={"BASE": base}, rm=True, forcerm=True, network_mode="none"
            )
        except docker.errors.BuildError as err:
            lines = [str(x.get("stream", x.get("error", ""))).strip() for x in err.build_log]
            raise HgxkitError(f"building {tag} failed: {' | '.join(x for x in lines if x)[-300:]}") from err


def ensure_image(
    client: docker.DockerClient,
    tags: list[str] | tuple[str, ...] = DEFAULT_TAGS,
    variant: str = "",
    log: image.Log = image._stderr,
) -> str:
    """Build (when its inputs changed) the stand-in, tag it as each of `tags`; return its hash tag."""
    names = [check_tag(t) for t in tags]
    base, tag = base_tag(), image_tag(variant)
    if not image._exists(client, tag):
        if not image._exists(client, base):
            image.build_base(client, base, log, include=BASE_PACKAGES, label="sglang-base")
        build_image(client, tag, base, variant, log)
    built = client.images.get(tag)
    for name in names:
        repo, _, version = name.rpartition(":")
        built.tag(repo, version)
    return tag
