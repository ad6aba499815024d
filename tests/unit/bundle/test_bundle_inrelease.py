"""bundle create trusts an upstream repository only for what its InRelease signature covers: a Packages index whose
hash appears anywhere else (after the signed block, before it, in a second block, in an armor header or comment, in
another field) is refused before any package is fetched; real gpg keys in throwaway GnuPG homes, real .debs."""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from hgxkit.bundle import aptbundle
from hgxkit.errors import HgxkitError


def _gpg(key: aptbundle.BundleKey, *args: str, data: bytes) -> bytes:
    return subprocess.run([*key.base, "-u", key.fingerprint, *args], input=data, capture_output=True, check=True).stdout


def clearsign(key: aptbundle.BundleKey, text: str) -> bytes:
    return _gpg(key, "--clearsign", data=text.encode())


def make_deb(where: Path, name: str, version: str, payload: str) -> None:
    stage = where / f"stage-{name}-{payload}"
    (stage / "DEBIAN").mkdir(parents=True)
    (stage / "DEBIAN" / "control").write_text(
        f"Package: {name}\nVersion: {version}\nArchitecture: all\nMaintainer: t <t@t>\nDescription: {payload}\n"
    )
    (stage / "usr/share").mkdir(parents=True)
    (stage / "usr/share" / name).write_text(payload)
    deb = where / "repo" / f"{name}_{version}_all.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", str(stage), str(deb)], check=True, capture_output=True)


def release(packages: bytes) -> str:
    return f"Origin: upstream\nLabel: upstream\nSHA256:\n {hashlib.sha256(packages).hexdigest()} {len(packages)} Packages\n"


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, aptbundle.BundleKey]:
    home = tmp_path_factory.mktemp("keys")
    return {who: aptbundle.BundleKey(home / who) for who in ("upstream", "stranger", "bundle")}


@pytest.fixture()
def upstream(tmp_path: Path, keys) -> dict:
    """A flat repository signed by the upstream key whose .deb and Packages a mirror then swapped: `honest` is the
    signed Packages, `served` what the mirror now serves (its hash in no signed text)."""
    (tmp_path / "repo").mkdir()
    make_deb(tmp_path, "tool", "1.0-1", "honest")
    honest = subprocess.run(["apt-ftparchive", "packages", "."], cwd=tmp_path / "repo", capture_output=True).stdout
    make_deb(tmp_path, "tool", "1.0-1", "evil")  # same name and version, other bytes
    served = subprocess.run(["apt-ftparchive", "packages", "."], cwd=tmp_path / "repo", capture_output=True).stdout
    assert served != honest
    (tmp_path / "repo" / "Packages").write_bytes(served)
    (tmp_path / "repo" / "key.asc").write_text(keys["upstream"].public())
    return {"dir": tmp_path / "repo", "honest": honest, "served": served, "out": tmp_path / "bundle"}


def build(up: dict, inrelease: bytes, keys) -> list[aptbundle.Deb]:
    (up["dir"] / "InRelease").write_bytes(inrelease)
    url = f"file://{up['dir']}/"
    return aptbundle.build_repo("up", url, url + "key.asc", {"tool": "1.0-*"}, up["out"], keys["bundle"])


SIG = b"-----BEGIN PGP SIGNATURE-----"


def _line(text: str) -> bytes:
    """The checksum line of a Release text (` sha256 size Packages`)."""
    return text.split("SHA256:\n")[1].rstrip("\n").encode()


# Each takes (the honest signed InRelease, the honest Release text, the served Packages' Release text, the keys)
# and returns what a mirror serves: the served Packages' hash where the upstream signature does not cover it.
ATTACKS: dict[str, Callable[[bytes, str, str, dict], bytes]] = {
    "appended after the signature": lambda ok, good, evil, k: ok + evil.encode(),
    "appended as a bare checksum line": lambda ok, good, evil, k: ok + b"SHA256:\n" + _line(evil) + b"\n",
    "prepended before the signed block": lambda ok, good, evil, k: evil.encode() + b"\n" + ok,
    "a second block signed by another key": lambda ok, good, evil, k: ok + clearsign(k["stranger"], evil),
    "a second block signed by the same key": lambda ok, good, evil, k: ok + clearsign(k["upstream"], evil),
    "a comment in the signature's armor": lambda ok, good, evil, k: ok.replace(
        SIG + b"\n", SIG + b"\nComment: SHA256:" + _line(evil) + b"\n"
    ),
    "an armor header of the signed block": lambda ok, good, evil, k: ok.replace(
        b"Hash: ", b"Comment: SHA256:" + _line(evil) + b"\nHash: ", 1
    ),
    "signed by another key only": lambda ok, good, evil, k: clearsign(k["stranger"], evil),
    "the signed text edited after signing": lambda ok, good, evil, k: ok.replace(_line(good), _line(evil)),
}


def test_an_honest_signed_inrelease_is_taken(upstream, keys) -> None:
    (upstream["dir"] / "Packages").write_bytes(upstream["served"])
    signed = clearsign(keys["upstream"], release(upstream["served"]))
    debs = build(upstream, signed, keys)
    assert [(d.name, d.version) for d in debs] == [("tool", "1.0-1")]
    assert (upstream["out"] / "apt/upstream/up/InRelease").read_bytes() == signed


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_a_packages_hash_outside_the_signed_text_is_never_used(upstream, keys, attack: str) -> None:
    good, evil = release(upstream["honest"]), release(upstream["served"])
    served = ATTACKS[attack](clearsign(keys["upstream"], good), good, evil, keys)
    with pytest.raises(HgxkitError, match=r"(InRelease|Packages): .*refused") as err:
        build(upstream, served, keys)
    assert "\n" not in str(err.value)
    assert not (upstream["out"] / "apt" / "up").exists()  # refused before any package was fetched


def test_only_the_sha256_fields_own_lines_count() -> None:
    from hgxkit.bundle.signedrelease import release_sha256

    digest = "ab" * 32
    text = (
        f"Origin: x\nDescription: mirror\n {digest} 10 Packages\nMD5Sum:\n {digest} 10 Packages\n"
        f"SHA256:\n {'cd' * 32} 10 main/Packages\n# {digest} 10 Packages\n\nSHA256:\n {digest} 10 Packages\n"
    )
    assert release_sha256(text) == {"main/Packages": ("cd" * 32, 10)}
