"""`hgxkit bundle create`: everything a node needs for one recipe at its pinned versions, in one directory.

    DIR/bundle.json                     every artifact (size, sha256), the recipe and its hash, the key, the sources
    DIR/recipe.yaml                     the recipe, byte for byte
    DIR/apt/<repo>/                     the pinned packages as a flat repository signed with the bundle key
    DIR/apt/bundle-key.asc              the bundle key (its fingerprint is in bundle.json)
    DIR/apt/upstream/<repo>/            the upstream InRelease, Packages and key the packages were checked with
    DIR/image/                          the serving image by digest: an OCI layout `docker load` also reads
    DIR/model/<name>/                   the model at its commit, with the downloader's .hgxkit-manifest.json
    DIR/wheels/                         node-side wheels and requirements.txt with --hash lines (pip --require-hashes)

Knobs are read as the roles read them (inventory, else roles/<role>/defaults.py, handed in by deploys/bundle.py
since the library never imports roles). On simulated nodes (`hgxkit_simulated`) the node-local URLs of the
sim's repositories, Hub and registry mirror are read from this machine's copies of them (hgxkit.sim.bundlesources).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hgxkit import __version__
from hgxkit.bundle import aptbundle, manifest, ociimage
from hgxkit.errors import HgxkitError, InputError
from hgxkit.recipe.judge import Judged

NVIDIA_CONTAINER_REPO = "https://nvidia.github.io/libnvidia-container/stable/deb/amd64/"
NVIDIA_CONTAINER_KEY = "https://nvidia.github.io/libnvidia-container/gpgkey"
TOOLKIT_PACKAGES = (
    "nvidia-container-toolkit",
    "nvidia-container-toolkit-base",
    "libnvidia-container-tools",
    "libnvidia-container1",
)
Log = Callable[[str], None]


@dataclass
class Sources:
    """Where create reads each part: apt repositories (name -> url, key url, packages), Hub, registry."""

    apt: dict[str, tuple[str, str, dict[str, str]]]
    hub: str
    registry: str | None
    wheel_requirements: list[str]
    notes: list[str] = field(default_factory=list)


def apt_wanted(knobs: Mapping[str, Any], distro: str) -> tuple[dict[str, str], dict[str, str]]:
    """(CUDA repository packages, container toolkit packages) bring-up installs, name -> apt version glob.

    Example:
        >>> cuda, tk = apt_wanted({"nvidia_driver_branch": "580", "nvidia_driver_version": "580.105.08",
        ...     "nvidia_driver_flavor": "open", "dcgm_package": "dcgm", "nvidia_container_toolkit_version": "1.18.0-1"},
        ...     "debian12")
        >>> cuda, tk["nvidia-container-toolkit"]  # doctest: +NORMALIZE_WHITESPACE
        ({'nvidia-open': '580.105.08-*', 'nvidia-fabricmanager': '580.105.08-*',
          'libnvidia-nscq': '580.105.08-*', 'dcgm': '*'}, '1.18.0-1')
    """
    from hgxkit.node.driver import driver_package_plan

    plan = driver_package_plan(
        distro=distro,
        branch=str(knobs.get("nvidia_driver_branch")),
        version=knobs.get("nvidia_driver_version"),
        flavor=knobs.get("nvidia_driver_flavor"),
    )
    cuda = {name: plan.version_glob() for name in plan.packages}
    cuda.update({name: "*" for name in plan.pre_packages})
    cuda[str(knobs.get("dcgm_package"))] = str(knobs.get("dcgm_version") or "*")
    toolkit = {name: str(knobs.get("nvidia_container_toolkit_version") or "*") for name in TOOLKIT_PACKAGES}
    return cuda, toolkit


def real_sources(knobs: Mapping[str, Any], distro: str) -> Sources:
    """Sources for real nodes: the knobs' URLs (NVIDIA's repositories, the Hub, the image's registry)."""
    from hgxkit.node.driver import default_cuda_repo_url

    cuda, toolkit = apt_wanted(knobs, distro)
    repo = knobs.get("nvidia_repo_url") or default_cuda_repo_url(distro)
    key = knobs.get("nvidia_repo_key_url") or f"{repo.rstrip('/')}/3bf863cc.pub"
    ctk = knobs.get("nvidia_container_repo_url") or NVIDIA_CONTAINER_REPO
    ctk_key = knobs.get("nvidia_container_repo_key_url") or NVIDIA_CONTAINER_KEY
    return Sources(
        apt={"nvidia": (repo, key, cuda), "nvidia-container": (ctk, ctk_key, toolkit)},
        hub=knobs.get("hf_endpoint") or "https://huggingface.co",
        registry=None,
        wheel_requirements=[str(knobs.get("model_hf_hub_requirement"))],
    )


def _wheels(requirements: list[str], out: Path, log: Log) -> list[str]:
    """pip download the node-side requirements (CPython 3.11, manylinux x86-64: Debian 12 and the nodes) with
    their dependencies into out/wheels, and write requirements.txt pinning each file by sha256."""
    wheels = out / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--quiet",
        "--disable-pip-version-check",
        "--only-binary=:all:",
        "--python-version",
        "3.11",
        "--platform",
        "manylinux2014_x86_64",
        "--platform",
        "manylinux_2_28_x86_64",
        "--platform",
        "any",
        "-d",
        str(wheels),
        *requirements,
    ]
    log(f"wheels: pip download {' '.join(requirements)}")
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise HgxkitError(f"pip download {' '.join(requirements)} failed: {res.stderr.strip()[-300:]}")
    lines = []
    for whl in sorted(wheels.glob("*.whl")):
        name, version = whl.name.split("-")[:2]
        lines.append(f"{name.replace('_', '-').lower()}=={version} --hash=sha256:{manifest.file_sha256(whl)}")
    (wheels / "requirements.txt").write_text("\n".join(lines) + "\n")
    return sorted(w.name for w in wheels.glob("*.whl"))


def _model(recipe: Any, hub: str, out: Path, log: Log) -> dict[str, Any]:
    """The recipe's model at its commit, synced by the node-side downloader itself (so its manifest is the one
    the model role verifies) into out/model/<name>/."""
    from hgxkit.model import core

    model = recipe.model
    name = core.model_name(model.local_dir)
    local = out / "model" / name
    local.mkdir(parents=True, exist_ok=True)
    state = out.parent / f".{out.name}.model-state"
    spec = core.Spec(
        repo_id=model.repo_id,
        revision=model.revision or "main",
        local_dir=str(local),
        allow_patterns=list(model.allow_patterns),
        endpoint=hub,
        source="hub",
        xet=False,
        state_dir=str(state),
        margin_gb=0.0,
    )
    log(f"model: {model.repo_id}@{spec.revision} from {hub}")
    state.mkdir(parents=True, exist_ok=True)
    spec_file = state / "spec.json"
    spec_file.write_text(spec.to_json())
    cmd = [sys.executable, "-m", "hgxkit.model.fetch", "run", "--spec", str(spec_file)]
    env = {**os.environ, **spec.xet_env()}
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
        if res.returncode != 0:
            result = subprocess.run(
                [*cmd[:3], "result", "--spec", str(spec_file)], capture_output=True, text=True, check=False
            )
            raise HgxkitError(f"model {model.repo_id}: {(result.stderr or res.stderr).strip()[-300:]}")
    finally:
        shutil.rmtree(state, ignore_errors=True)
    shutil.rmtree(local / ".cache", ignore_errors=True)
    doc = json.loads((local / core.MANIFEST_NAME).read_text())
    return {
        "repo_id": model.repo_id,
        "revision": spec.revision,
        "commit": doc["commit"],
        "dir": f"model/{name}",
        "local_dir": model.local_dir,
        "bytes": doc.get("total_bytes"),
    }


def _regular_files_only(tmp: Path) -> list[str]:
    """The files the manifest lists. Verify refuses a directory that holds none of them, so empty ones left by a
    tool are removed here; a symlink or special file (which verify refuses too) stops create instead."""
    for rel in reversed(manifest.walk(tmp).dirs):  # deepest first: a parent empties once its children are gone
        with contextlib.suppress(OSError):
            (tmp / rel).rmdir()
    tree = manifest.walk(tmp)
    if tree.links or tree.other:
        odd = (tree.links + tree.other)[0]
        raise HgxkitError(f"{tmp}/{odd}: a symlink or special file; a bundle holds neither: re-create it")
    return tree.files


def create(judged: Judged, recipe_path: Path, out: Path, sources: Sources, key_home: Path, log: Log) -> dict[str, Any]:
    """Build the bundle of the judged recipe read from `recipe_path` in `out` (which must not exist yet) and
    return its sealed bundle.json."""
    if out.exists():
        raise InputError(f"{out}: already exists; a bundle is made into a new directory (remove it or pick another)")
    recipe = judged.recipe
    started = time.monotonic()
    tmp = out.parent / f".{out.name}.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        shutil.copyfile(recipe_path, tmp / "recipe.yaml")
        key = aptbundle.BundleKey(key_home)
        apt: dict[str, Any] = {}
        for name, (url, key_url, wanted) in sources.apt.items():
            log(f"apt {name}: {len(wanted)} pinned packages from {url}")
            debs = aptbundle.build_repo(name, url, key_url, wanted, tmp, key)
            apt[name] = {
                "source": url,
                "dir": f"apt/{name}",
                "packages": [{"name": d.name, "version": d.version} for d in debs],
            }
        reference = (
            recipe.image.reference
            if not recipe.image.digest
            else f"{recipe.image.reference.split(':')[0]}@{recipe.image.digest}"
        )
        log(f"image: {reference}")
        saved = ociimage.save_layout(reference, tmp / "image", sources.registry)
        if recipe.image.digest and saved.digest != recipe.image.digest:
            raise HgxkitError(f"{recipe_path}: image.digest {recipe.image.digest} but the registry gave {saved.digest}")
        model = _model(recipe, sources.hub, tmp, log)
        wheels = _wheels(sources.wheel_requirements, tmp, log)
        doc = {
            "schema_version": manifest.SCHEMA_VERSION,
            "kind": "hgxkit-bundle",
            "hgxkit_version": __version__,
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "recipe": {
                "name": recipe.name,
                "file": "recipe.yaml",
                "sha256": manifest.file_sha256(tmp / "recipe.yaml"),
            },
            "key": {"fingerprint": key.fingerprint, "file": f"apt/{aptbundle.KEY_FILE}"},
            "apt": apt,
            "image": {
                "reference": recipe.image.reference,
                "digest": saved.digest,
                "id": saved.config,
                "dir": "image",
            },
            "model": model,
            "wheels": {"requirements": "wheels/requirements.txt", "for": sources.wheel_requirements, "files": wheels},
            "notes": sources.notes,
            "artifacts": [manifest.artifact_entry(tmp, rel) for rel in _regular_files_only(tmp)],
        }
        doc = manifest.seal(doc)
        (tmp / manifest.MANIFEST).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        key.sign_detached(tmp / manifest.MANIFEST, tmp / manifest.SIGNATURE)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log(
        f"bundle {doc['bundle_sha256'][:16]}… in {out}: {len(doc['artifacts'])} files, "
        f"{bundle_bytes(doc) / 1e6:.1f} MB in {time.monotonic() - started:.1f} s; key {key.fingerprint}"
    )
    return doc


def bundle_bytes(doc: Mapping[str, Any]) -> int:
    """The bundle's size: its artifacts' bytes."""
    return sum(int(a["size"]) for a in doc["artifacts"])


def digest_of(text: str) -> str:
    """sha256 of a text (what bundle.json records for small inputs)."""
    return hashlib.sha256(text.encode()).hexdigest()
