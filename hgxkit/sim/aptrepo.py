"""Build the SIMULATED NVIDIA apt repositories from `data/aptrepo/` with dpkg-deb and apt-ftparchive.

The result is a directory laid out like NVIDIA's real repositories, signed with a throwaway GPG key:

    <root>/cuda/debian12/x86_64/{*.deb,Packages,Packages.gz,Release,Release.gpg,InRelease,hgxkit-sim.pub}
    <root>/libnvidia-container/stable/deb/amd64/{...same...}
    <root>/libnvidia-container/gpgkey     (ASCII-armoured public key, like nvidia.github.io's)
    <root>/repo.json                      (what was built: repositories, packages, versions, key)

Nodes see it read-only at /srv/hgxkit-sim-repo and serve it on http://127.0.0.1:8081/ (see `NODE_URL`).

Example:
    >>> from pathlib import Path
    >>> from hgxkit.sim.aptrepo import build_repo
    >>> repo = build_repo(Path("/tmp/hgxkit-sim-repos"))   # doctest: +SKIP
    >>> repo.root / "cuda/debian12/x86_64/InRelease"       # doctest: +SKIP
"""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from hgxkit.errors import HgxkitError

DATA = Path(__file__).parent / "data" / "aptrepo"
BUILD_FORMAT = "1"  # bump to force a rebuild when this module's output changes
NODE_DIR = "/srv/hgxkit-sim-repo"
NODE_URL = "http://127.0.0.1:8081"
KEY_NAME = "hgxkit-sim.pub"
TOOLS = {"dpkg-deb": "dpkg", "apt-ftparchive": "apt-utils", "gpg": "gpg"}


@dataclass(frozen=True)
class RepoSpec:
    """One flat repository (like NVIDIA's `debian12/x86_64/`)."""

    name: str
    path: str
    origin: str
    label: str


@dataclass(frozen=True)
class PackageSpec:
    """One simulated package; built once per version of its version set."""

    name: str
    repo: str
    versions: tuple[str, ...]
    description: str
    section: str = "non-free"
    depends: str = ""
    conflicts: str = ""
    provides: str = ""
    files: dict[str, str] = field(default_factory=dict)
    postinst: str = ""


@dataclass(frozen=True)
class Manifest:
    repos: dict[str, RepoSpec]
    packages: tuple[PackageSpec, ...]


@dataclass(frozen=True)
class RepoBuild:
    """A built repository tree."""

    root: Path
    digest: str
    fingerprint: str
    packages: dict[str, list[str]]  # name -> Debian versions

    def node_url(self, repo: str) -> str:
        """URL of one repository as seen from inside a node, e.g. node_url("cuda")."""
        return f"{NODE_URL}/{load_manifest().repos[repo].path}/"


def upstream(version: str) -> str:
    """'1:4.4.1-1' -> '4.4.1'; '580.95.05-1' -> '580.95.05'."""
    return version.split(":", 1)[-1].rsplit("-", 1)[0]


def load_manifest(path: Path = DATA / "packages.yaml") -> Manifest:
    """Read and check packages.yaml."""
    raw = yaml.safe_load(path.read_text())
    repos = {n: RepoSpec(n, r["path"], r["origin"], r["label"]) for n, r in raw["repositories"].items()}
    sets: dict[str, list[str]] = raw["version_sets"]
    packages = []
    known = set(PackageSpec.__dataclass_fields__)
    for p in raw["packages"]:
        unknown = set(p) - known
        if unknown:
            raise HgxkitError(
                f"{path}: package {p.get('name')!r} has unknown keys {sorted(unknown)}; "
                "fix them (quote values that contain commas)"
            )
        if p["repo"] not in repos or p["versions"] not in sets:
            raise HgxkitError(f"{path}: package {p['name']!r} names an unknown repo or version set; fix the entry")
        for src in p.get("files", {}).values():
            if not (DATA / "files" / src).is_file():
                raise HgxkitError(f"{path}: package {p['name']!r} ships missing file files/{src}; add it")
        packages.append(
            PackageSpec(
                name=p["name"],
                repo=p["repo"],
                versions=tuple(sets[p["versions"]]),
                description=p["description"],
                section=p.get("section", "non-free"),
                depends=p.get("depends", ""),
                conflicts=p.get("conflicts", ""),
                provides=p.get("provides", ""),
                files=dict(p.get("files", {})),
                postinst=p.get("postinst", ""),
            )
        )
    return Manifest(repos, tuple(packages))


def sources_digest() -> str:
    """Hash of everything the repository is built from (manifest, files, this module's format)."""
    h = hashlib.sha256(BUILD_FORMAT.encode())
    for f in sorted(DATA.rglob("*")):
        if f.is_file():
            h.update(
                str(f.relative_to(DATA)).encode() + b"\0" + f.read_bytes() + bytes([f.stat().st_mode & 0o111 != 0])
            )
    return h.hexdigest()[:16]


def _run(cmd: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    try:
        res = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    except FileNotFoundError as err:
        raise HgxkitError(f"{cmd[0]} not found: install Debian package {TOOLS.get(cmd[0], cmd[0])}") from err
    if res.returncode != 0:
        raise HgxkitError(f"{' '.join(cmd[:3])} failed: {(res.stderr or res.stdout).strip().splitlines()[-1:]}")
    return res.stdout


def _control(pkg: PackageSpec, version: str) -> str:
    lines = [
        f"Package: {pkg.name}",
        f"Version: {version}",
        "Architecture: amd64",
        "Maintainer: hgxkit simulation <sim@hgxkit.invalid>",
        f"Section: {pkg.section}",
        "Priority: optional",
    ]
    for key, value in (("Depends", pkg.depends), ("Conflicts", pkg.conflicts), ("Provides", pkg.provides)):
        if value:
            lines.append(f"{key}: {value.format(version=version)}")
    lines.append(f"Description: {pkg.description}")
    lines.append(" Part of hgxkit's simulated NVIDIA stack: it only simulates hardware behaviour.")
    return "\n".join(lines) + "\n"


def _build_deb(pkg: PackageSpec, version: str, out_dir: Path, work: Path) -> Path:
    stage = work / f"{pkg.name}_{version.replace(':', '_')}"
    (stage / "DEBIAN").mkdir(parents=True)
    (stage / "DEBIAN" / "control").write_text(_control(pkg, version))
    up = upstream(version)
    subst = {"@VERSION@": up, "@DEBVERSION@": version}
    if pkg.postinst:
        script = pkg.postinst
        for k, v in subst.items():
            script = script.replace(k, v)
        post = stage / "DEBIAN" / "postinst"
        post.write_text("#!/bin/sh\nset -e\n" + script.rstrip() + "\nexit 0\n")
        post.chmod(0o755)
    ver = stage / "usr/share/hgxkit-sim/versions" / pkg.name
    ver.parent.mkdir(parents=True)
    ver.write_text(up + "\n")
    for dest, src in pkg.files.items():
        source = DATA / "files" / src
        target = stage / dest.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        text = source.read_text()
        for k, v in subst.items():
            text = text.replace(k, v)
        target.write_text(text)
        target.chmod(0o755 if source.stat().st_mode & 0o111 else 0o644)
    deb = out_dir / f"{pkg.name}_{version.split(':', 1)[-1]}_amd64.deb"
    _run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(stage), str(deb)])
    return deb


def _index_and_sign(repo: RepoSpec, repo_dir: Path, gnupg: Path) -> None:
    packages = _run(["apt-ftparchive", "packages", "."], cwd=repo_dir)
    (repo_dir / "Packages").write_text(packages)
    (repo_dir / "Packages.gz").write_bytes(gzip.compress(packages.encode(), mtime=0))
    release = _run(
        [
            "apt-ftparchive",
            "-o",
            f"APT::FTPArchive::Release::Origin={repo.origin}",
            "-o",
            f"APT::FTPArchive::Release::Label={repo.label}",
            "-o",
            "APT::FTPArchive::Release::Architectures=amd64",
            "release",
            ".",
        ],
        cwd=repo_dir,
    )
    (repo_dir / "Release").write_text(release)
    base = [
        "gpg",
        "--homedir",
        str(gnupg),
        "--batch",
        "--yes",
        "--pinentry-mode",
        "loopback",
        "--passphrase",
        "",
    ]
    _run([*base, "--clearsign", "-o", str(repo_dir / "InRelease"), str(repo_dir / "Release")])
    _run([*base, "--armor", "--detach-sign", "-o", str(repo_dir / "Release.gpg"), str(repo_dir / "Release")])


def build_repo(cache_dir: Path) -> RepoBuild:
    """Build (or reuse) the repositories under `cache_dir/<sources digest>/` and return where they are."""
    manifest = load_manifest()
    digest = sources_digest()
    root = cache_dir / digest
    done = root / "repo.json"
    if done.is_file():
        meta = json.loads(done.read_text())
        return RepoBuild(root, digest, meta["key_fingerprint"], meta["packages"])
    for tool in TOOLS:
        if shutil.which(tool) is None:
            raise HgxkitError(f"{tool} not found: install Debian package {TOOLS[tool]} to build the simulated repo")
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp_root = Path(tempfile.mkdtemp(prefix=f".{digest}-", dir=cache_dir))
    gnupg = Path(tempfile.mkdtemp(prefix="hgxg"))  # short path: gpg-agent's socket name is length-limited
    try:
        gnupg.chmod(0o700)
        uid = "hgxkit simulated NVIDIA repository (THROWAWAY KEY) <sim@hgxkit.invalid>"
        base = ["gpg", "--homedir", str(gnupg), "--batch", "--pinentry-mode", "loopback", "--passphrase", ""]
        _run([*base, "--quick-gen-key", uid, "ed25519", "sign", "never"])
        fpr = next(
            line.split(":")[9]
            for line in _run([*base, "--with-colons", "--list-keys"]).splitlines()
            if line.startswith("fpr:")
        )
        pub = _run([*base, "--armor", "--export", fpr])
        built: dict[str, list[str]] = {}
        with tempfile.TemporaryDirectory(prefix="hgxkit-debs-") as work:
            for pkg in manifest.packages:
                repo_dir = tmp_root / manifest.repos[pkg.repo].path
                repo_dir.mkdir(parents=True, exist_ok=True)
                for version in pkg.versions:
                    _build_deb(pkg, version, repo_dir, Path(work))
                    built.setdefault(pkg.name, []).append(version)
        for repo in manifest.repos.values():
            repo_dir = tmp_root / repo.path
            (repo_dir / KEY_NAME).write_text(pub)
            _index_and_sign(repo, repo_dir, gnupg)
        (tmp_root / "libnvidia-container" / "gpgkey").write_text(pub)
        meta = {
            "simulated": True,
            "digest": digest,
            "key_fingerprint": fpr,
            "repositories": {n: {"path": r.path, "url": f"{NODE_URL}/{r.path}/"} for n, r in manifest.repos.items()},
            "packages": built,
        }
        (tmp_root / "repo.json").write_text(json.dumps(meta, indent=2) + "\n")
        for p in tmp_root.rglob("*"):
            p.chmod(0o755 if p.is_dir() else 0o644)
        tmp_root.chmod(0o755)
        if root.exists():
            shutil.rmtree(root)
        tmp_root.rename(root)
    finally:
        subprocess.run(["gpgconf", "--homedir", str(gnupg), "--kill", "all"], capture_output=True, check=False)
        shutil.rmtree(gnupg, ignore_errors=True)
        shutil.rmtree(tmp_root, ignore_errors=True)
    return RepoBuild(root, digest, fpr, built)
