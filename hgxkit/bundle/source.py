"""What the roles ask when the `bundle` knob names a bundle: put it on the node, verified, and say where each
part is there (apt repositories and key, image layout, model directory, wheels).

`delivered(host)` is the one entry: None when the knob is unset (every role goes on as before); else the bundle,
copied to the node once per run with rsync over the deploy's own SSH connection into
/var/lib/hgxkit/bundle/<hash>/ and verified there (hgxkit/bundle/manifest.py, run by the node's python3)
before any later operation of the run, so nothing is installed from a changed or incomplete copy. Its
bundle.json is checked on the controller at plan time first: a manifest whose hash was edited stops the run
before any operation. A node that already holds the verified bundle (its stamp) costs one fact read.

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

from pyinfra.api import FactBase, StringCommand
from pyinfra.api.exceptions import DeployError
from pyinfra.operations import files, server

from hgxkit.bundle import manifest
from hgxkit.bundle.aptbundle import KEY_FILE
from hgxkit.hostcmd import argv, script
from hgxkit.knobs import knob
from hgxkit.node.facts_files import FileText
from hgxkit.serving.image import LOCAL_PREFIX

NODE_ROOT = "/var/lib/hgxkit/bundle"
VERIFY_PROGRAM = f"{NODE_ROOT}/hgxkit_bundle_verify.py"
_planned: set[str] = set()  # hosts whose delivery this run has planned already (several roles ask)


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
        doc, problem = manifest.read_manifest(Path(path))
        if doc is not None and fingerprint:
            problem = manifest.signature_problem(Path(path), fingerprint)
        if doc is None or problem:
            raise DeployError(f"bundle knob: {problem}; nothing was changed")
        _loaded[(path, fingerprint)] = NodeBundle(Path(path), doc)
    return _loaded[(path, fingerprint)]


class DockerImageIds(FactBase[list[str]]):
    """The IDs of the images in the node's Docker (none when Docker is not there yet)."""

    def command(self) -> StringCommand:
        return script("docker image ls -q --no-trunc 2>/dev/null || true")

    def process(self, output: list[str]) -> list[str]:
        return [line.strip() for line in output if line.strip()]


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
    if (host.get_fact(FileText, path=b.stamp) or "").strip() == b.sha256:
        return b
    files.directory(name=f"Bundle directory {NODE_ROOT}", path=NODE_ROOT, mode="0755")  # apt reads it as _apt
    files.rsync(
        name=f"Copy the bundle {b.sha256[:16]} to {b.node_dir}",
        src=f"{b.local}/",
        dest=b.node_dir,
        flags=["-a", "--delete", "--chmod=D755,F644"],
    )
    files.put(name="Upload the bundle verifier", src=manifest.__file__, dest=VERIFY_PROGRAM, mode="0644")
    server.shell(
        name=f"Verify the bundle on the node before anything is installed from it ({b.node_dir})",
        commands=[
            argv("python3", VERIFY_PROGRAM, b.node_dir, b.sha256),
            script("echo {h} > {stamp}", h=b.sha256, stamp=b.stamp),
        ],
    )
    return b


def load_image(host: Any, b: NodeBundle) -> None:
    """Load the bundle's image into the node's Docker unless an image with its ID is there (plan-time fact)."""
    image_id = b.image_digest().removeprefix(LOCAL_PREFIX)
    if image_id in host.get_fact(DockerImageIds):
        return
    server.shell(
        name=f"Load {b.doc['image']['reference']} from the bundle ({image_id[:19]})",
        commands=[
            script("tar -C {d} -cf - . | docker load -q", d=b.image_layout),
            script("docker image inspect {i} >/dev/null", i=image_id),
        ],
    )
