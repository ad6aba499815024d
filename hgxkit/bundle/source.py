"""What the roles ask when the `bundle` knob names a bundle: put it on the node, verified, and say where each
part is there (apt repositories and key, image layout, model directory, wheels).

`delivered(host)` is the one entry: None when the knob is unset (every role reads from its usual
sources); else the bundle, copied to the node once per run with rsync over the deploy's own SSH connection into
/var/lib/hgxkit/bundle/<hash>/ and verified there (hgxkit/bundle/manifest.py, run by the node's python3)
before any later operation of the run, so nothing is installed from a changed or incomplete copy. Its
bundle.json is checked on the controller at plan time first: a manifest whose hash was edited stops the run
before any operation. A node that already holds the verified bundle (its stamp) costs one fact read.

With the fleet's image cache on (`image_cache`, hgxkit/node/imagecache.py) only the cache host gets the bundle's
image/ (it fills the cache from it, roles/docker); every other node gets the bundle without it and pulls the image
through its Docker mirror by the manifest digest the bundle records, so the controller's link carries the image
once per fleet. Docker checks each layer by digest; the pulled image's ID must be the bundle's or the run stops.

Example:
    >>> b = NodeBundle(Path("/media/b"), {"bundle_sha256": "ab" * 32, "image": {"id": "sha256:" + "c" * 64},
    ...                "model": {"dir": "model/m"}, "artifacts": []})
    >>> b.node_dir, b.apt_url("nvidia")
    ('/var/lib/hgxkit/bundle/abababababababab', 'file:///var/lib/hgxkit/bundle/abababababababab/apt/nvidia/')
    >>> b.image_digest()[:14]
    'local:sha256:c'
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyinfra import host as current_host  # the host a callback runs for
from pyinfra.api import FactBase, StringCommand
from pyinfra.api.exceptions import DeployError
from pyinfra.operations import files, python, server

from hgxkit.bundle import manifest
from hgxkit.bundle.manifest import KEY_FILE
from hgxkit.errors import HgxkitError
from hgxkit.hostcmd import HostRunner, argv, script
from hgxkit.knobs import knob
from hgxkit.node import imagecache
from hgxkit.node.facts_files import FileText
from hgxkit.serving.image import LOCAL_PREFIX

NODE_ROOT = "/var/lib/hgxkit/bundle"
VERIFY_PROGRAM = f"{NODE_ROOT}/hgxkit_bundle_verify.py"
IMAGE_DIR = "image"  # the bundle's OCI layout of the serving image (hgxkit/bundle/create.py)
RSYNC_FLAGS = ["-a", "--delete", "--chmod=D755,F644"]
_planned: set[str] = set()  # hosts whose delivery this run has planned already (several roles ask)


def cache_pull_reference(image: dict[str, Any]) -> str | None:
    """What a node behind the image cache pulls: the bundle's image by the manifest digest it records
    (`repository@sha256:…`); None for an image of another registry than Docker Hub (Docker asks its mirrors for
    no other's: every node then gets image/ as without the cache).

    >>> cache_pull_reference({"reference": "lmsysorg/sglang:dev-dspark", "digest": "sha256:" + "d" * 64})[:23]
    'lmsysorg/sglang@sha256:'
    >>> cache_pull_reference({"reference": "nvcr.io/nim/x:1", "digest": "sha256:" + "d" * 64}) is None
    True
    """
    where = imagecache.hub_repository(str(image.get("reference", "")))
    digest = image.get("digest")
    if where is None or not isinstance(digest, str) or not digest.startswith("sha256:"):
        return None
    return f"{where[0]}@{digest}"


def gets_image(host_name: str, cache_name: str | None, pull_reference: str | None) -> bool:
    """Whether `host_name` receives the bundle's image/: every node without the image cache (or for an image the
    cache cannot serve); with it, only the cache host, which fills the cache from it.

    >>> gets_image("node2", None, "r@sha256:x"), gets_image("node1", "node1", "r@sha256:x")
    (True, True)
    >>> gets_image("node2", "node1", "r@sha256:x"), gets_image("node2", "node1", None)
    (False, True)
    """
    return cache_name is None or pull_reference is None or host_name == cache_name


def rsync_flags(with_image: bool) -> list[str]:
    """rsync's flags for the bundle's copy: the whole bundle, or all of it but image/ (which a copy made before
    the cache was on loses: --delete-excluded; the node's disk keeps no stale image)."""
    return list(RSYNC_FLAGS) if with_image else [*RSYNC_FLAGS, f"--exclude=/{IMAGE_DIR}/", "--delete-excluded"]


def stamp_text(sha256: str, with_image: bool) -> str:
    """What the node's stamp holds once the copy is verified: a copy without image/ is another copy (turning the
    cache off later copies and verifies again).

    >>> stamp_text("ab", True), stamp_text("ab", False)
    ('ab', 'ab without-image')
    """
    return sha256 if with_image else f"{sha256} without-{IMAGE_DIR}"


def verify_args(node_dir: str, sha256: str, with_image: bool) -> list[str]:
    """The node-side verifier's arguments (hgxkit/bundle/manifest.py main)."""
    return [node_dir, sha256] if with_image else [node_dir, sha256, "--from-cache", IMAGE_DIR]


def image_id_problem(node: str, expected: str, found: str | None) -> str | None:
    """None when the image pulled through the cache is the one the bundle vouches for (same image ID); else the
    one line that stops the run.

    >>> image_id_problem("node2", "sha256:aa", "sha256:aa") is None
    True
    >>> image_id_problem("node2", "sha256:aa", "sha256:bb")[:78]
    'node2: the image pulled through the image cache is sha256:bb, the bundle says '
    """
    if found == expected:
        return None
    return (
        f"{node}: the image pulled through the image cache is {found or '(none)'}, the bundle says {expected}; "
        "refused: no container was changed (check the cache host's fill, or set image_cache off)"
    )


@dataclass(frozen=True)
class NodeBundle:
    """A bundle as the roles use it: on the controller at `local`, on the node at `node_dir`."""

    local: Path
    doc: dict[str, Any]

    @property
    def sha256(self) -> str:
        return str(self.doc["bundle_sha256"])

    @property
    def node_dir(self) -> str:
        return f"{NODE_ROOT}/{self.sha256[:16]}"

    @property
    def stamp(self) -> str:
        return f"{NODE_ROOT}/{self.sha256[:16]}.verified"

    def apt_url(self, repo: str) -> str:
        """The flat apt repository `repo` of the bundle, on the node."""
        return f"file://{self.node_dir}/apt/{repo}/"

    @property
    def key_url(self) -> str:
        return f"file://{self.node_dir}/apt/{KEY_FILE}"

    @property
    def key_sha256(self) -> str | None:
        """The bundle key file's sha256 (files.download replaces a keyring that differs)."""
        found = [a["sha256"] for a in self.doc["artifacts"] if a["path"] == f"apt/{KEY_FILE}"]
        return found[0] if found else None

    @property
    def model_dir(self) -> str:
        return f"{self.node_dir}/{self.doc['model']['dir']}"

    @property
    def image_layout(self) -> str:
        return f"{self.node_dir}/image"

    def image_digest(self) -> str:
        """What serving records and runs: the loaded image's ID (`docker load` gives no repository digest)."""
        return LOCAL_PREFIX + str(self.doc["image"]["id"])

    @property
    def image_id(self) -> str:
        return str(self.doc["image"]["id"])

    @property
    def cache_pull(self) -> str | None:
        """The reference a node behind the image cache pulls (`cache_pull_reference`)."""
        return cache_pull_reference(self.doc["image"])

    def pip_install(self, pip: str) -> list[StringCommand]:
        """pip from the bundle's wheels only, every file checked against its hash."""
        wheels = f"{self.node_dir}/wheels"
        return [
            argv(
                pip,
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--no-index",
                "--find-links",
                wheels,
                "--require-hashes",
                "-r",
                f"{wheels}/requirements.txt",
            )
        ]


_loaded: dict[tuple[str, str | None], NodeBundle] = {}


def bundle_of(path: str, fingerprint: str | None = None) -> NodeBundle:
    """The bundle at `path` on the controller, its bundle.json checked (hash, schema; and its signature by the key
    with `fingerprint` when given); DeployError otherwise."""
    if (path, fingerprint) not in _loaded:
        doc, problem = manifest.read_manifest(Path(path), fingerprint)
        if doc is None:
            raise DeployError(f"bundle knob: {problem}; nothing was changed")
        _loaded[(path, fingerprint)] = NodeBundle(Path(path), doc)
    return _loaded[(path, fingerprint)]


class DockerImageIds(FactBase[list[str]]):
    """The IDs of the images in the node's Docker (none when Docker is not there yet)."""

    def command(self) -> StringCommand:
        return script("docker image ls -q --no-trunc 2>/dev/null || true")

    def process(self, output: list[str]) -> list[str]:
        return [line.strip() for line in output if line.strip()]


def cache_name(host: Any) -> str | None:
    """The inventory host that runs the image cache (`image_cache`), or None when it is off."""
    try:
        return imagecache.cache_host_name(host.data.get("image_cache"), [h.name for h in host.inventory])
    except HgxkitError as err:
        raise DeployError(f"{host.name}: {err.message}") from None


def with_image(host: Any, b: NodeBundle) -> bool:
    """Whether `host` gets the bundle's image/ (`gets_image`)."""
    return gets_image(host.name, cache_name(host), b.cache_pull)


def delivered(host: Any) -> NodeBundle | None:
    """None without the `bundle` knob; else the bundle, whose copy and node-side verify this run plans once
    per host (before the asking role's first operation)."""
    path = knob(host, "bundle")
    if not path:
        return None
    b = bundle_of(str(path), knob(host, "bundle_fingerprint"))
    if host.name in _planned:
        return b
    _planned.add(host.name)
    image = with_image(host, b)
    if (host.get_fact(FileText, path=b.stamp) or "").strip() == stamp_text(b.sha256, image):
        return b
    files.directory(name=f"Bundle directory {NODE_ROOT}", path=NODE_ROOT, mode="0755")  # apt reads it as _apt
    files.rsync(
        name=f"Copy the bundle {b.sha256[:16]} to {b.node_dir}" + ("" if image else " (image/ from the image cache)"),
        src=f"{b.local}/",
        dest=b.node_dir,
        flags=rsync_flags(image),
    )
    files.put(name="Upload the bundle verifier", src=manifest.__file__, dest=VERIFY_PROGRAM, mode="0644")
    server.shell(
        name=f"Verify the bundle on the node before anything is installed from it ({b.node_dir})",
        commands=[
            argv("python3", VERIFY_PROGRAM, *verify_args(b.node_dir, b.sha256, image)),
            script("echo {h} > {stamp}", h=stamp_text(b.sha256, image), stamp=b.stamp),
        ],
    )
    return b


def load_image(host: Any, b: NodeBundle) -> None:
    """Make the bundle's image present in the node's Docker unless an image with its ID is there (plan-time fact):
    loaded from the node's copy, or behind the image cache pulled through it and its ID checked."""
    image_id = b.image_id
    if image_id in host.get_fact(DockerImageIds):
        return
    if not with_image(host, b):
        python.call(
            name=f"Pull {b.doc['image']['reference']} through the image cache ({image_id[:19]})",
            function=_pull_through_cache,
            reference=str(b.cache_pull),
            image_id=image_id,
        )
        return
    server.shell(
        name=f"Load {b.doc['image']['reference']} from the bundle ({image_id[:19]})",
        commands=[
            script("tar -C {d} -cf - . | docker load -q", d=b.image_layout),
            script("docker image inspect {i} >/dev/null", i=image_id),
        ],
    )


def _pull_through_cache(reference: str, image_id: str) -> None:
    """Execute time: pull `reference` (by digest: Docker asks its mirror, the cache, first and checks each layer),
    then refuse unless the image is the bundle's `image_id`."""
    host = current_host
    run = HostRunner(host)
    ok, said = run.status(argv("docker", "pull", "-q", reference))
    if not ok:
        raise DeployError(
            f"{host.name}: `docker pull {reference}` through the image cache failed: "
            f"{' '.join(said)[-300:]}; no container was changed"
        )
    ok, said = run.status(argv("docker", "image", "inspect", "--format", "{{.Id}}", reference))
    problem = image_id_problem(host.name, image_id, said[-1].strip() if ok and said else None)
    if problem:
        raise DeployError(problem)
