"""Build the serving stand-in images locally: SGLang's (`lmsysorg/sglang:*`) and vLLM's (`vllm/vllm-openai:*`),
for ANY image reference (SIMULATED servers; no Docker Hub).

Local images, each tagged with a hash of its inputs, plus the tags a recipe names:

    hgxkit-sim-sglang-base:<hash of suite, mirror, packages>     mmdebstrap --variant=minbase --include=python3
                                                                 (shared by both stand-ins)
    hgxkit-sim-sglang:<hash of base, stand-in sources, variant>  SGLang's, also tagged e.g. lmsysorg/sglang:dev-dspark
    hgxkit-sim-vllm:<hash of base, stand-in sources, variant>    vLLM's, also tagged e.g. vllm/vllm-openai:v0.33.0

The kind of stand-in is inferred from the reference (`kind_for`): ``lmsysorg/sglang`` → sglang,
``vllm/vllm-openai`` → vllm (a registry host in front is ignored); any other repository needs ``kind``.

Inside, like the real images:
- SGLang: `sglang serve …` and `python3 -m sglang.launch_server …` run the stdlib stand-in from
  /opt/hgxkit-sim; working directory /sgl-workspace/sglang; no ENTRYPOINT.
- vLLM (0.33 era): ENTRYPOINT ``["vllm", "serve"]`` with no CMD, so ``docker run … IMAGE --model X`` and
  ``docker run … IMAGE X --flags`` work as with the real image; ``vllm`` on PATH; ``python3 -m
  vllm.entrypoints.openai.api_server`` works; working directory /vllm-workspace. ``vllm serve`` and the
  api_server module run the stand-in; every other ``vllm`` sub-command (``vllm bench serve``) runs the REAL
  vLLM client (see `hgxkit.sim.standin.vllm.shim`).

Neither image holds the benchmark clients (7.2 GB with CUDA torch): the simulated NVIDIA hook bind-mounts the
host's client store read-only at /opt/hgxkit-sglang-client into every GPU container, and the image's python3
finds it through a .pth file (SGLang: the store's site-packages; vLLM: that plus its vllm-site layer). So
``docker exec <ctr> python3 -m sglang.benchmark.serving …`` / ``docker exec <ctr> vllm bench serve …`` run
the real clients. ``variant`` changes the image content (a file /etc/hgxkit-sim/<kind>-variant), so a rebuild
gets another digest (digest-pinning tests).

Example:
    >>> from hgxkit.sim.standin import image as serving
    >>> serving.image_tag("")[:18], serving.kind_for("vllm/vllm-openai:v0.33.0")
    ('hgxkit-sim-sglang:', 'vllm')
    >>> serving.ensure_image(docker.from_env(), ["vllm/vllm-openai:latest"])  # doctest: +SKIP
    'hgxkit-sim-vllm:5be1f0c2d9a8e7b3'
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors

from hgxkit.errors import HgxkitError, InputError
from hgxkit.sim import image
from hgxkit.sim.standin import KINDS

PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the hgxkit package
BASE_REPO = "hgxkit-sim-sglang-base"
REPO = "hgxkit-sim-sglang"
VLLM_REPO = "hgxkit-sim-vllm"
DEFAULT_TAGS = ("lmsysorg/sglang:dev-dspark",)
VLLM_DEFAULT_TAGS = ("vllm/vllm-openai:latest",)
BASE_PACKAGES = ["python3"]
CLIENT_MOUNT = "/opt/hgxkit-sglang-client"  # where nodes and GPU containers see the client store
CLIENT_SITE = f"{CLIENT_MOUNT}/lib/python3.11/site-packages"
VLLM_CLIENT_SITE = f"{CLIENT_MOUNT}/vllm-site"  # vllm's layer of the store (client_store.VLLM_SITE)
SITE = "/usr/local/lib/python3.11/dist-packages"  # Debian 12's python3 looks here first
BUILD_FORMAT = "2"  # bump when the Dockerfiles below change in a way the hashed inputs don't show
# The vLLM image's .pth line: both store layers when mounted. One line, no comprehension (a .pth line runs with
# exec() in site.addpackage's locals, which a comprehension's own scope cannot see).
VLLM_PTH = (
    f"import os, site; list(map(site.addsitedir, filter(os.path.isdir, ('{CLIENT_SITE}', '{VLLM_CLIENT_SITE}'))))"
)

DOCKERFILE = f"""# SIMULATED SGLang image (hgxkit stand-in), built by hgxkit/sim/standin/image.py
ARG BASE
FROM ${{BASE}}
COPY stub/ /opt/hgxkit-sim/
COPY sglang-variant /etc/hgxkit-sim/sglang-variant
COPY stands-for /usr/share/hgxkit-sim/stands-for
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

VLLM_DOCKERFILE = f"""# SIMULATED vLLM image (hgxkit stand-in, vLLM 0.33 era), built by hgxkit/sim/standin/image.py
ARG BASE
FROM ${{BASE}}
COPY stub/ /opt/hgxkit-sim/
COPY vllm-variant /etc/hgxkit-sim/vllm-variant
COPY stands-for /usr/share/hgxkit-sim/stands-for
RUN set -e; cd /opt/hgxkit-sim; \\
    python3 -m hgxkit.sim.standin.vllm install-shim --site-packages {SITE} --bin-dir /usr/local/bin \\
        --stub-root /opt/hgxkit-sim --python /usr/bin/python3 --overlay {VLLM_CLIENT_SITE} >/dev/null; \\
    echo "{VLLM_PTH}" > {SITE}/hgxkit-vllm-client.pth; \\
    mkdir -p /vllm-workspace {CLIENT_MOUNT}; \\
    echo "SIMULATED: hgxkit's vLLM stand-in; vLLM is not here" > /vllm-workspace/README
ENV PYTHONUNBUFFERED=1
WORKDIR /vllm-workspace
LABEL {image.LABEL}=vllm org.opencontainers.image.description="SIMULATED vLLM (hgxkit stand-in)"
ENTRYPOINT ["vllm", "serve"]
"""


@dataclass(frozen=True)
class Kind:
    """One kind of stand-in image."""

    name: str
    repo: str
    dockerfile: str
    default_tags: tuple[str, ...]


_KINDS = {
    "sglang": Kind("sglang", REPO, DOCKERFILE, DEFAULT_TAGS),
    "vllm": Kind("vllm", VLLM_REPO, VLLM_DOCKERFILE, VLLM_DEFAULT_TAGS),
}
_INFER = {"lmsysorg/sglang": "sglang", "vllm/vllm-openai": "vllm"}


def _kind(kind: str) -> Kind:
    if kind not in _KINDS:
        raise InputError(f"unknown stand-in kind {kind!r}: use one of {', '.join(KINDS)}")
    return _KINDS[kind]


def kind_for(ref: str, kind: str | None = None) -> str:
    """The stand-in kind for image reference `ref`: `kind` when given, else inferred (module doc)."""
    if kind is not None:
        return _kind(kind).name
    repo = check_tag(ref).rpartition(":")[0]
    parts = repo.split("/")
    if len(parts) > 2 or (len(parts) == 2 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost")):
        parts = parts[1:]  # drop a registry host
    inferred = _INFER.get("/".join(parts[-2:]))
    if inferred is None:
        raise InputError(
            f"cannot tell which stand-in image {ref!r} needs: pass --kind sglang or --kind vllm "
            f"(inferred only for {' and '.join(f'{r}:*' for r in _INFER)})"
        )
    return inferred


def _stub_files(kind: str = "sglang") -> dict[str, bytes]:
    """The stdlib-only part of hgxkit a stand-in needs, relative to the image's /opt/hgxkit-sim."""
    files = {"hgxkit/__init__.py": (PACKAGE_ROOT / "__init__.py").read_bytes()}
    for package in ("sim", "sim/standin"):
        files[f"hgxkit/{package}/__init__.py"] = (PACKAGE_ROOT / package / "__init__.py").read_bytes()
    for sub in ("common", _kind(kind).name):
        for f in sorted((PACKAGE_ROOT / "sim" / "standin" / sub).glob("*.py")):
            files[f"hgxkit/sim/standin/{sub}/{f.name}"] = f.read_bytes()
    for f in sorted((PACKAGE_ROOT / "engines").glob("*.py")):
        files[f"hgxkit/engines/{f.name}"] = f.read_bytes()
    return files


def _hash(*parts: bytes) -> str:
    h = hashlib.sha256(BUILD_FORMAT.encode())
    for p in parts:
        h.update(hashlib.sha256(p).digest())
    return h.hexdigest()[:16]


def base_tag() -> str:
    """Tag of the minimal base (python3 only), shared by both stand-ins."""
    return f"{BASE_REPO}:{_hash(image.SUITE.encode(), image.mirror().encode(), ' '.join(BASE_PACKAGES).encode())}"


def image_tag(variant: str = "", kind: str = "sglang", stands_for: str = "") -> str:
    """Tag of the `kind` stand-in image for the current sources, `variant` and the version it stands for."""
    k = _kind(kind)
    stub = b"\1".join(key.encode() + b"\0" + v for key, v in _stub_files(kind).items())
    return f"{k.repo}:{_hash(base_tag().encode(), stub, k.dockerfile.encode(), variant.encode(), stands_for.encode())}"


def stands_for(tag: str, kind: str) -> str:
    """ "" for a tag of the engine version the stand-in's option table was read from; else the tag itself: an
    image of another version, whose options hgxkit does not have (the import says "not checked" of the flags
    the table cannot read)."""
    from hgxkit.kinds.options import SGLANG_OPTIONS, VLLM_OPTIONS  # the controller's; not in the image

    table = {"sglang": SGLANG_OPTIONS, "vllm": VLLM_OPTIONS}[_kind(kind).name]
    return "" if table.applies(tag) else tag


def check_tag(tag: str) -> str:
    """`tag` as REPO:TAG (':latest' added), or an InputError naming the problem."""
    name = tag if ":" in tag.rsplit("/", 1)[-1] else f"{tag}:latest"
    repo, _, version = name.rpartition(":")
    if not repo or not version or "@" in name or not all(c.isalnum() or c in "._-/:" for c in name):
        raise InputError(f"image tag {tag!r} is invalid: use REPOSITORY[:TAG], e.g. lmsysorg/sglang:dev-dspark")
    return name


def build_image(
    client: docker.DockerClient,
    tag: str,
    base: str,
    variant: str,
    log: image.Log,
    kind: str = "sglang",
    stands_for: str = "",
) -> None:
    """Build the `kind` stand-in `tag` FROM `base` (no network)."""
    k = _kind(kind)
    log(f"building {tag} (SIMULATED {k.name} stand-in) from {base}")
    with tempfile.TemporaryDirectory(prefix=f"hgxkit-sim-{k.name}-ctx-") as ctx:
        c = Path(ctx)
        for rel, data in _stub_files(kind).items():
            (c / "stub" / rel).parent.mkdir(parents=True, exist_ok=True)
            (c / "stub" / rel).write_bytes(data)
        (c / f"{k.name}-variant").write_text(f"{variant}\n")
        (c / "stands-for").write_text(f"{stands_for}\n")
        (c / "Dockerfile").write_text(k.dockerfile)
        try:
            client.images.build(path=ctx, tag=tag, buildargs={"BASE": base}, rm=True, forcerm=True, network_mode="none")
        except docker.errors.BuildError as err:
            lines = [str(x.get("stream", x.get("error", ""))).strip() for x in err.build_log]
            raise HgxkitError(f"building {tag} failed: {' | '.join(x for x in lines if x)[-300:]}") from err


def tags_kind(tags: list[str] | tuple[str, ...], kind: str | None = None) -> str:
    """The one stand-in kind for all of `tags` (`kind` when given); an InputError when they disagree."""
    kinds = {kind_for(t, kind) for t in tags}
    if len(kinds) != 1:
        raise InputError(
            f"the tags {list(tags)} need different stand-ins ({', '.join(sorted(kinds))}): build them apart"
        )
    return kinds.pop()


def ensure_image(
    client: docker.DockerClient,
    tags: list[str] | tuple[str, ...] = DEFAULT_TAGS,
    variant: str = "",
    log: image.Log = image._stderr,
    kind: str | None = None,
    other_versions: bool = False,
) -> str:
    """Build (when its inputs changed) the stand-in for `tags`, tag it as each of them; return its hash tag.

    The kind is `kind`, else inferred from the tags (`kind_for`). By default the stand-in parses as the version
    its option table was read from, whatever the tag; with `other_versions`, a tag of another version gets an
    image of its own whose stand-in takes the flags the table cannot read unread, as that version may (one
    image per such tag; the first built is returned)."""
    names = [check_tag(t) for t in tags]
    which = tags_kind(names, kind)
    versions = {n: stands_for(n, which) if other_versions else "" for n in names}
    built = []
    for other in dict.fromkeys(versions.values()):
        tag = image_tag(variant, which, other)
        group = [n for n in names if versions[n] == other]
        build = lambda base, tag=tag, other=other: build_image(client, tag, base, variant, log, which, other)  # noqa: E731
        built.append(build_on_base(client, tag, group, build, log))
    return built[0]


def build_on_base(
    client: docker.DockerClient, tag: str, names: list[str], build: Callable[[str], None], log: image.Log
) -> str:
    """Run `build(base)` when `tag` is missing (the shared base built first when it is missing too), then tag
    the image as each of `names` (REPO:TAG); return `tag`."""
    base = base_tag()
    if not image._exists(client, tag):
        if not image._exists(client, base):
            image.build_base(client, base, log, include=BASE_PACKAGES, label="sglang-base")
        build(base)
    built = client.images.get(tag)
    for name in names:
        repo, _, version = name.rpartition(":")
        built.tag(repo, version)
    return tag
