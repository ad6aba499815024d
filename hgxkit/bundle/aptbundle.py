"""The bundle's apt repositories: the packages bring-up pins, fetched from their upstream flat repositories
(whose InRelease is checked with the upstream key first; InRelease, Packages and key are kept in
`apt/upstream/<repo>/`), each .deb checked against the signed Packages index, then indexed again with
apt-ftparchive and signed with the bundle key (`apt/<repo>/InRelease`, key `apt/bundle-key.asc`).

Example:
    >>> pkgs = parse_packages("Package: a\\nVersion: 1-1\\nDepends: b (>= 1), c | d\\nFilename: ./a.deb\\n"
    ...                       "SHA256: 00\\nSize: 1\\n\\nPackage: b\\nVersion: 1-1\\nFilename: ./b.deb\\nSHA256: 11\\n"
    ...                       "Size: 1\\n")
    >>> [(p.name, p.depends) for p in select(pkgs, {"a": "1-*"})]
    [('a', ('b', 'c')), ('b', ())]
"""

from __future__ import annotations

import fnmatch
import gzip
import hashlib
import re
import shutil
import subprocess
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from hgxkit.errors import HgxkitError

TOOLS = {"apt-ftparchive": "apt-utils", "gpg": "gpg", "gpgv": "gpgv"}
KEY_FILE = "bundle-key.asc"
GPG_UNATTENDED = ("--batch", "--yes", "--pinentry-mode", "loopback", "--passphrase", "")  # no agent prompt


@dataclass(frozen=True)
class Deb:
    """One package stanza of a Packages index."""

    name: str
    version: str
    filename: str
    sha256: str
    size: int
    depends: tuple[str, ...]


def parse_packages(text: str) -> list[Deb]:
    """The stanzas of a Packages file (only the fields a bundle needs)."""
    out = []
    for stanza in text.strip().split("\n\n"):
        fields = dict(re.findall(r"^([\w-]+): ?(.*)$", stanza, re.M))
        if "Package" not in fields:
            continue
        deps = []
        for key in ("Pre-Depends", "Depends"):
            for alt in filter(None, (d.strip() for d in fields.get(key, "").split(","))):
                deps.append(re.split(r"[\s(:]", alt.split("|")[0].strip())[0])
        out.append(
            Deb(
                fields["Package"],
                fields.get("Version", ""),
                fields.get("Filename", ""),
                fields.get("SHA256", ""),
                int(fields.get("Size", "0") or 0),
                tuple(deps),
            )
        )
    return out


def select(debs: list[Deb], wanted: dict[str, str]) -> list[Deb]:
    """The packages `wanted` (name -> apt version glob) and the dependencies they find in the same repository
    (at the pinned upstream version when the repository has it, else its newest), sorted by name."""
    by_name: dict[str, list[Deb]] = {}
    for d in debs:
        by_name.setdefault(d.name, []).append(d)
    chosen: dict[tuple[str, str], Deb] = {}
    todo = list(wanted)
    upstreams = {g.split("-")[0].rstrip("*").rstrip(".") for g in wanted.values()}
    while todo:
        name = todo.pop()
        candidates = by_name.get(name, [])
        glob = wanted.get(name)
        if glob is not None:
            picked = [d for d in candidates if fnmatch.fnmatchcase(d.version, glob)]
            if not picked:
                raise HgxkitError(f"package {name}={glob} is not in the repository; check the version knobs")
        else:
            same = [d for d in candidates if any(u and d.version.startswith(u) for u in upstreams)]
            picked = same or sorted(candidates, key=lambda d: d.version)[-1:]
        for d in picked:
            if (d.name, d.version) not in chosen:
                chosen[(d.name, d.version)] = d
                todo += [dep for dep in d.depends if dep in by_name and all(k[0] != dep for k in chosen)]
    return sorted(chosen.values(), key=lambda d: (d.name, d.version))


def _run(cmd: list[str], cwd: Path | None = None) -> str:
    try:
        res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise HgxkitError(f"{cmd[0]} not found: apt-get install {TOOLS.get(cmd[0], cmd[0])}") from None
    if res.returncode != 0:
        raise HgxkitError(f"{' '.join(cmd[:3])} failed: {(res.stderr or res.stdout).strip()[-300:]}")
    return res.stdout


def fetch(url: str) -> bytes:
    """The bytes at an http(s):// or file:// URL."""
    try:
        with urllib.request.urlopen(url, timeout=120) as resp:
            return resp.read()
    except OSError as err:
        raise HgxkitError(f"{url}: {err}; is the repository reachable from this machine?") from None


class BundleKey:
    """The bundle's signing key: made once in `home` (never copied into a bundle) and reused, so every bundle
    this machine makes carries the same fingerprint."""

    UID = "hgxkit bundle signing key <bundle@hgxkit.invalid>"

    def __init__(self, home: Path) -> None:
        self.home = home
        self.base = ["gpg", "--homedir", str(home), *GPG_UNATTENDED]
        if not home.is_dir():
            home.mkdir(parents=True, mode=0o700)
        if not self._fingerprint():
            _run([*self.base, "--quick-gen-key", self.UID, "ed25519", "sign", "never"])
        self.fingerprint = self._fingerprint()

    def _fingerprint(self) -> str:
        out = _run([*self.base, "--with-colons", "--list-secret-keys"])
        return next((ln.split(":")[9] for ln in out.splitlines() if ln.startswith("fpr:")), "")

    def public(self) -> str:
        return _run([*self.base, "--armor", "--export", self.fingerprint])

    def write_keyring(self, path: Path) -> None:
        """The public key as a binary keyring (what gpgv and apt's signed-by read)."""
        _run([*self.base, "--export", "-o", str(path), self.fingerprint])

    def sign_detached(self, path: Path, out: Path) -> None:
        _run([*self.base, "-u", self.fingerprint, "--detach-sign", "-o", str(out), str(path)])

    def sign_release(self, repo_dir: Path) -> None:
        release = _run(
            [
                "apt-ftparchive",
                "-o",
                "APT::FTPArchive::Release::Origin=hgxkit-bundle",
                "-o",
                "APT::FTPArchive::Release::Label=hgxkit bundle",
                "release",
                ".",
            ],
            cwd=repo_dir,
        )
        (repo_dir / "Release").write_text(release)
        _run(
            [
                *self.base,
                "-u",
                self.fingerprint,
                "--clearsign",
                "-o",
                str(repo_dir / "InRelease"),
                str(repo_dir / "Release"),
            ]
        )
        _run(
            [
                *self.base,
                "-u",
                self.fingerprint,
                "--armor",
                "--detach-sign",
                "-o",
                str(repo_dir / "Release.gpg"),
                str(repo_dir / "Release"),
            ]
        )


def check_upstream(inrelease: bytes, key: bytes, packages: bytes, where: str) -> None:
    """The upstream InRelease is signed by `key`, and lists `packages` with its sha256; else refused."""
    with tempfile.TemporaryDirectory(prefix="hgxb") as tmp:
        ring = Path(tmp) / "key.gpg"
        armored = key.lstrip().startswith(b"-----BEGIN")
        if armored:
            res = subprocess.run(["gpg", "--dearmor"], input=key, capture_output=True, check=False)
            key = res.stdout
        ring.write_bytes(key)
        signed = Path(tmp) / "InRelease"
        signed.write_bytes(inrelease)
        res = subprocess.run(["gpgv", "--keyring", str(ring), str(signed)], capture_output=True, check=False)
        if res.returncode != 0:
            raise HgxkitError(f"{where}InRelease: its signature does not verify with the repository key; refused")
    digest = hashlib.sha256(packages).hexdigest()
    if not re.search(rf"^ {digest}\s+{len(packages)}\s+Packages$", inrelease.decode(errors="replace"), re.M):
        raise HgxkitError(f"{where}Packages: sha256 {digest[:16]}… is not in its signed InRelease; refused")


def build_repo(name: str, url: str, key_url: str, wanted: dict[str, str], out: Path, key: BundleKey) -> list[Deb]:
    """Fetch `wanted` (with dependencies) from the flat repository `url` into `out/apt/<name>/`, signed."""
    base = url.rstrip("/") + "/"
    inrelease, upstream_key, packages = fetch(base + "InRelease"), fetch(key_url), fetch(base + "Packages")
    check_upstream(inrelease, upstream_key, packages, base)
    keep = out / "apt" / "upstream" / name
    keep.mkdir(parents=True, exist_ok=True)
    (keep / "InRelease").write_bytes(inrelease)
    (keep / "Packages").write_bytes(packages)
    (keep / "key").write_bytes(upstream_key)
    debs = select(parse_packages(packages.decode()), wanted)
    repo_dir = out / "apt" / name
    repo_dir.mkdir(parents=True, exist_ok=True)
    for d in debs:
        body = fetch(base + d.filename.removeprefix("./"))
        if hashlib.sha256(body).hexdigest() != d.sha256:
            raise HgxkitError(f"{base}{d.filename}: sha256 differs from the signed Packages index; refused")
        (repo_dir / Path(d.filename).name).write_bytes(body)
    text = _run(["apt-ftparchive", "packages", "."], cwd=repo_dir)
    (repo_dir / "Packages").write_text(text)
    (repo_dir / "Packages.gz").write_bytes(gzip.compress(text.encode(), mtime=0))
    key.sign_release(repo_dir)
    (out / "apt" / KEY_FILE).write_text(key.public())
    key.write_keyring(out / "apt" / "bundle-key.gpg")
    return debs


def have_tools() -> list[str]:
    """The Debian packages a bundle's apt part needs that this machine lacks."""
    return sorted({pkg for tool, pkg in TOOLS.items() if shutil.which(tool) is None})
