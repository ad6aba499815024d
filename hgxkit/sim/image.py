"""Build the simulated node's Docker image: a minimal Debian 12 base (mmdebstrap) plus hgxkit's files.

Two local images, each tagged with a hash of its inputs so a change rebuilds only what it affects:

    hgxkit-sim-base:<hash of package list, suite, mirror>   mmdebstrap --variant=minbase, `docker import`ed
    hgxkit-sim-node:<hash of base tag, data/rootfs, data/image, host CA bundle>   built FROM the base

Nothing is pulled from a registry. The base needs root and the Debian archive. mmdebstrap rather than debootstrap:
it resolves with apt, unpacks in one pass and writes the tarball `docker import` reads, in half the time; with
its merged-/usr hook it installs the same packages (usr-is-merged, not usrmerge and perl; lsb-base, a transitional
dummy, left out).

Example:
    >>> import docker
    >>> from hgxkit.sim.image import ensure_node_image
    >>> tag = ensure_node_image(docker.from_env())   # doctest: +SKIP
    >>> tag                                           # doctest: +SKIP
    'hgxkit-sim-node:3f0c2a9d41e7b6c1'
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import docker
import docker.errors

from hgxkit.errors import HgxkitError

DATA = Path(__file__).parent / "data"
SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
BASE_REPO = "hgxkit-sim-base"
NODE_REPO = "hgxkit-sim-node"
LABEL = "hgxkit.sim"
MERGED_USR_HOOKS = "/usr/share/mmdebstrap/hooks/merged-usr"  # shipped with the mmdebstrap package
BUILD_FORMAT = "1"  # bump when the build steps change in a way the hashed inputs don't show

Log = Callable[[str], None]


def _stderr(msg: str) -> None:
    print(f"hgxkit sim: {msg}", file=sys.stderr, flush=True)


def packages() -> list[str]:
    """The Debian packages of the node image (data/image/packages.txt, comments stripped)."""
    lines = (DATA / "image" / "packages.txt").read_text().splitlines()
    return [p for p in (line.split("#", 1)[0].strip() for line in lines) if p]


def mirror() -> str:
    """The Debian mirror: $HGXKIT_SIM_MIRROR, else the first deb.debian.org-like URI apt uses here."""
    if os.environ.get("HGXKIT_SIM_MIRROR"):
        return os.environ["HGXKIT_SIM_MIRROR"]
    sources = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]
    for src in sources:
        try:
            text = src.read_text()
        except OSError:
            continue
        for url in re.findall(r"(?:URIs:\s*|deb\s+(?:\[[^\]]*\]\s+)?)(\S+)", text):
            if url.rstrip("/").endswith("/debian"):
                return url.rstrip("/")
    return DEFAULT_MIRROR


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256(BUILD_FORMAT.encode())
    for p in parts:
        h.update(hashlib.sha256(p).digest())
    return h.hexdigest()[:16]


def _tree_bytes(root: Path) -> bytes:
    out = []
    for f in sorted(root.rglob("*")):
        if f.is_file():
            mode = f.stat().st_mode & 0o777
            out.append(str(f.relative_to(root)).encode() + f"\0{mode:o}\0".encode() + f.read_bytes())
    return b"\1".join(out)


def base_tag() -> str:
    """Tag of the base image for the current package list."""
    return f"{BASE_REPO}:{_digest(' '.join(packages()).encode(), SUITE.encode(), mirror().encode())}"


def node_tag() -> str:
    """Tag of the node image for the current base, data files and host CA bundle."""
    ca = HOST_CA_BUNDLE.read_bytes() if HOST_CA_BUNDLE.is_file() else b""
    trees = _tree_bytes(DATA / "rootfs"), _tree_bytes(DATA / "image")
    return f"{NODE_REPO}:{_digest(base_tag().encode(), *trees, ca)}"


def _exists(client: docker.DockerClient, tag: str) -> bool:
    try:
        client.images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


def build_base(
    client: docker.DockerClient,
    tag: str,
    log: Log = _stderr,
    include: list[str] | None = None,
    label: str = "base",
) -> None:
    """mmdebstrap Debian 12 (minbase + `include`, default packages.txt) and import it as `tag`. Needs root."""
    include = packages() if include is None else include
    if os.geteuid() != 0:
        raise HgxkitError(f"building {tag} needs root (mmdebstrap): run `sudo hgxkit sim up` once")
    if shutil.which("mmdebstrap") is None:
        raise HgxkitError("mmdebstrap not found: install it (apt-get install mmdebstrap) to build the node image")
    work = Path(tempfile.mkdtemp(prefix="hgxkit-sim-rootfs-", dir=os.environ.get("HGXKIT_SIM_BUILD_DIR", "/var/tmp")))
    tar = work / "rootfs.tar"
    try:
        log(f"building {tag}: mmdebstrap {SUITE} from {mirror()} (about a minute, once)")
        cmd = [
            "mmdebstrap",
            "--variant=minbase",
            f"--hook-dir={MERGED_USR_HOOKS}",
            f"--include={','.join(include)}",
            SUITE,
            str(tar),
            mirror(),
        ]
        res = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if res.returncode != 0:
            tail = (res.stdout + res.stderr).strip().splitlines()[-3:]
            raise HgxkitError(f"mmdebstrap failed ({' | '.join(tail)}): check the mirror or set HGXKIT_SIM_MIRROR")
        log(f"importing {tag}")
        repo, _, version = tag.partition(":")
        client.api.import_image_from_file(str(tar), repository=repo, tag=version, changes=[f"LABEL {LABEL}={label}"])
        if not _exists(client, tag):
            raise HgxkitError(f"docker import of {tag} produced no image: see the Docker daemon's log")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _host_ca_dir(dest: Path) -> None:
    """Split the host CA bundle into one .crt per certificate (update-ca-certificates wants that)."""
    dest.mkdir(parents=True)
    if not HOST_CA_BUNDLE.is_file():
        return
    pems = re.findall(r"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", HOST_CA_BUNDLE.read_text(), re.S)
    for i, pem in enumerate(pems):
        (dest / f"host-{i:03d}.crt").write_text(pem + "\n")


def build_node(client: docker.DockerClient, tag: str, base: str, log: Log = _stderr) -> None:
    """Build the node image `tag` FROM `base` with data/image/Dockerfile and data/rootfs."""
    log(f"building {tag} from {base}")
    with tempfile.TemporaryDirectory(prefix="hgxkit-sim-ctx-") as ctx:
        c = Path(ctx)
        shutil.copytree(DATA / "rootfs", c / "rootfs", symlinks=True)
        shutil.copy(DATA / "image" / "Dockerfile", c / "Dockerfile")
        _host_ca_dir(c / "host-ca")
        try:
            client.images.build(
                path=ctx,
                tag=tag,
                buildargs={"BASE": base},
                rm=True,
                forcerm=True,
                labels={LABEL: "node"},
                network_mode="none",
            )
        except docker.errors.BuildError as err:
            lines = [str(x.get("stream", x.get("error", ""))).strip() for x in err.build_log]
            raise HgxkitError(f"building {tag} failed: {' | '.join(line for line in lines if line)[-300:]}") from err


def prune_old(client: docker.DockerClient, keep: set[str]) -> list[str]:
    """Remove hgxkit-sim images other than `keep` that no container uses; return the removed tags."""
    removed = []
    for img in client.images.list(filters={"label": LABEL}):
        for tag in img.tags:
            if tag.split(":")[0] in (BASE_REPO, NODE_REPO) and tag not in keep:
                try:
                    client.images.remove(tag)
                    removed.append(tag)
                except docker.errors.APIError:
                    pass  # still used by a container (or a child image): keep it
    return removed


def ensure_node_image(client: docker.DockerClient, log: Log = _stderr) -> str:
    """Return the node image tag, building the base and/or node image first when their inputs changed.

    After a build, older hgxkit-sim images that no container uses are removed.
    """
    base, node = base_tag(), node_tag()
    if not _exists(client, node):
        if not _exists(client, base):
            build_base(client, base, log)
        build_node(client, node, base, log)
        for tag in prune_old(client, {base, node}):
            log(f"removed old image {tag}")
    return node
