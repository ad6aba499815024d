"""The bundle's apt repositories: the packages bring-up pins, fetched from their upstream flat repositories
(whose InRelease is checked with the upstream key first; InRelease, Packages and key are kept in
`apt/upstream/<repo>/`), each .deb checked against the signed Packages index, then indexed again with
apt-ftparchive and signed with the bundle key (`apt/<repo>/InRelease`, key `apt/bundle-key.asc`).

Example:
    >>> pkgs = parse_packages("Package: a\\nVersion: 1-1\\nDepends: b (>= 1), c | d\\nFilename: ./a.deb\\n"
    ...                       "SHA256: 00\\nSize: 1\\n\\nPackage: b\\nVersion: 1-1\\nFilename: ./b.deb\\nSHA256: 11\\n"
    ...                       "Size: 1\\n")
    >>> [(p.name, p.needs) for p in select(pkgs, {"a": "1-*"})]
    [('a', ('b', 'c')), ('b', ())]
"""

from __future__ import annotations

import fnmatch
import functools
import gzip
import hashlib
import re
import shutil
import subprocess
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from hgxkit.bundle import signedrelease
from hgxkit.bundle.debversion import Relation, newest, parse_relations
from hgxkit.bundle.manifest import KEY_FILE
from hgxkit.errors import HgxkitError

TOOLS = {"apt-ftparchive": "apt-utils", "gpg": "gpg", "gpgv": "gpgv", "dpkg": "dpkg"}
GPG_UNATTENDED = ("--batch", "--yes", "--pinentry-mode", "loopback", "--passphrase", "")  # no agent prompt


@dataclass(frozen=True)
class Deb:
    """One package stanza of a Packages index."""

    name: str
    version: str
    filename: str
    sha256: str
    size: int
    relations: str  # Pre-Depends and Depends as the index writes them, parsed only for a package a bundle weighs

    @functools.cached_property
    def depends(self) -> tuple[tuple[Relation, ...], ...]:
        """Each requirement of Pre-Depends and Depends as its alternatives."""
        return tuple(tuple(alts) for alts in parse_relations(self.relations))

    @property
    def needs(self) -> tuple[str, ...]:
        """The first alternative of each requirement, by name."""
        return tuple(alts[0].name for alts in self.depends)


def parse_packages(text: str) -> list[Deb]:
    """The stanzas of a Packages file (only the fields a bundle needs)."""
    out = []
    for stanza in text.strip().split("\n\n"):
        fields = dict(re.findall(r"^([\w-]+): ?(.*)$", stanza, re.M))
        if "Package" not in fields:
            continue
        out.append(
            Deb(
                fields["Package"],
                fields.get("Version", ""),
                fields.get("Filename", ""),
                fields.get("SHA256", ""),
                int(fields.get("Size", "0") or 0),
                ", ".join(filter(None, (fields.get("Pre-Depends"), fields.get("Depends")))),
            )
        )
    return out


Needs = dict[str, list[tuple[Relation, str]]]  # package name -> (relation, the package that states it)


def _pick(name: str, candidates: list[Deb], glob: str | None, needs: list[tuple[Relation, str]]) -> Deb:
    """The newest of `candidates` (dpkg's order) that matches the knob's `glob` and every relation on it."""
    fits = [
        d
        for d in candidates
        if (glob is None or fnmatch.fnmatchcase(d.version, glob)) and all(r.allows(d.version) for r, _ in needs)
    ]
    if not fits:
        asked = [f"{name}={glob} (version knob)"] if glob is not None else []
        asked += [f"{by} needs {r.name} ({r.op} {r.version})" for r, by in needs if r.op]
        raise HgxkitError(
            f"package {name}: no version in the repository satisfies {'; '.join(asked)}; "
            "refused: check the version knobs"
        )
    best = newest(d.version for d in fits)
    return next(d for d in fits if d.version == best)


def _alternative(alts: tuple[Relation, ...], by_name: dict[str, list[Deb]], chosen: dict[str, Deb]) -> Relation | None:
    """Which alternative of one requirement the bundle carries: one already chosen that satisfies it, else the
    first the repository can satisfy; None when the repository has none of them (the node's own distribution
    provides it)."""
    for r in alts:
        if r.name in chosen and r.allows(chosen[r.name].version):
            return r
    for r in alts:
        if any(r.allows(d.version) for d in by_name.get(r.name, [])):
            return r
    if any(r.name in by_name for r in alts):
        return alts[0]  # in the repository, at no version that fits: _pick names what is missing
    return None


def _needs(chosen: dict[str, Deb], by_name: dict[str, list[Deb]]) -> Needs:
    """Every relation the chosen packages state on packages of the repository."""
    needs: Needs = {}
    for deb in chosen.values():
        for alts in deb.depends:
            r = _alternative(alts, by_name, chosen)
            if r is not None:
                needs.setdefault(r.name, []).append((r, f"{deb.name} {deb.version}"))
    return needs


def select(debs: list[Deb], wanted: dict[str, str]) -> list[Deb]:
    """The packages `wanted` (name -> apt version glob) and the dependencies they find in the same repository, one
    version each: the newest (dpkg's order, what apt takes) that the glob and every versioned relation on it
    allow; sorted by name. The relations are gathered again after each choice until nothing changes."""
    by_name: dict[str, list[Deb]] = {}
    for d in debs:
        by_name.setdefault(d.name, []).append(d)
    for name, glob in wanted.items():
        if not any(fnmatch.fnmatchcase(d.version, glob) for d in by_name.get(name, [])):
            raise HgxkitError(f"package {name}={glob} is not in the repository; check the version knobs")
    chosen: dict[str, Deb] = {}
    for _ in range(len(by_name) + 2):
        needs = _needs(chosen, by_name)
        again = {name: _pick(name, by_name[name], wanted.get(name), needs.get(name, [])) for name in {*wanted, *needs}}
        if again == chosen:
            return sorted(chosen.values(), key=lambda d: d.name)
        chosen = again
    raise HgxkitError(f"packages {', '.join(sorted(wanted))}: their relations do not settle; refused: check the knobs")


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


def build_repo(name: str, url: str, key_url: str, wanted: dict[str, str], out: Path, key: BundleKey) -> list[Deb]:
    """Fetch `wanted` (with dependencies) from the flat repository `url` into `out/apt/<name>/`, signed."""
    base = url.rstrip("/") + "/"
    inrelease, upstream_key, packages = fetch(base + "InRelease"), fetch(key_url), fetch(base + "Packages")
    signed = signedrelease.signed_text(inrelease, upstream_key, base)
    signedrelease.check_index(signed, "Packages", packages, base)
    keep = out / "apt" / "upstream" / name
    keep.mkdir(parents=True, exist_ok=True)
    (keep / "InRelease").write_bytes(inrelease)
    (keep / "Packages").write_bytes(packages)
    (keep / "key").write_bytes(upstream_key)
    debs = select(parse_packages(packages.decode(errors="replace")), wanted)
    repo_dir = out / "apt" / name
    repo_dir.mkdir(parents=True, exist_ok=True)
    for d in debs:
        body = fetch(base + d.filename.removeprefix("./"))
        if hashlib.sha256(body).hexdigest() != d.sha256 or len(body) != d.size:
            raise HgxkitError(f"{base}{d.filename}: sha256 or size differs from the signed Packages index; refused")
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
