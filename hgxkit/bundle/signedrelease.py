"""An upstream repository's InRelease, trusted only for what its signature covers: gpgv checks it against the
repository key and writes out the signed text (`--output`), and only that text is read. A file with anything
outside its one signed block (text before or after it, a second block) is refused whole, as apt refuses it.

Example:
    >>> release_sha256("Origin: x\\nSHA256:\\n " + "ab" * 32 + " 12 main/Packages\\n")["main/Packages"][1]
    12
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import tempfile
from pathlib import Path

from hgxkit.errors import HgxkitError

BEGIN = b"-----BEGIN PGP SIGNED MESSAGE-----"
SIGNATURE = b"-----BEGIN PGP SIGNATURE-----"
END = b"-----END PGP SIGNATURE-----"
CHECKSUM = re.compile(r"^ ([0-9a-f]{64}) +([0-9]+) +(\S+)$")


def one_block_only(inrelease: bytes) -> bool:
    """Whether `inrelease` is one clearsigned block and nothing else (surrounding blank space aside). Refusal only:
    what the file says is read from gpgv's output, never from these bytes."""
    body = inrelease.strip()
    return (
        body.startswith(BEGIN + b"\n")
        and body.endswith(END)
        and body.count(BEGIN) == 1
        and body.count(SIGNATURE) == 1
        and body.count(END) == 1
    )


def _keyring(key: bytes, tmp: Path) -> Path:
    """The repository key (armored or binary) as a keyring file gpgv reads."""
    if key.lstrip().startswith(b"-----BEGIN"):
        res = subprocess.run(["gpg", "--dearmor"], input=key, capture_output=True, check=False)
        key = res.stdout
    ring = tmp / "key.gpg"
    ring.write_bytes(key)
    return ring


def signed_text(inrelease: bytes, key: bytes, where: str) -> str:
    """The text of `inrelease` that `key` signed, as gpgv writes it out; HgxkitError when the file is not exactly
    one block with exactly one good signature by that key."""
    refused = f"{where}InRelease: its signature does not verify with the repository key; refused"
    if not one_block_only(inrelease):
        raise HgxkitError(f"{where}InRelease: text outside its one signed block; refused: fix the repository")
    with tempfile.TemporaryDirectory(prefix="hgxb") as tmp:
        ring = _keyring(key, Path(tmp))
        out = Path(tmp) / "signed"
        try:
            res = subprocess.run(
                ["gpgv", "--status-fd", "1", "--keyring", str(ring), "--output", str(out), "-"],
                input=inrelease,
                capture_output=True,
                check=False,
            )
        except FileNotFoundError:
            raise HgxkitError("gpgv not found: apt-get install gpgv") from None
        status = res.stdout.decode(errors="replace").splitlines()
        valid = [line for line in status if line.startswith("[GNUPG:] VALIDSIG ")]
        plaintexts = [line for line in status if line.startswith("[GNUPG:] PLAINTEXT ")]
        if res.returncode != 0 or len(valid) != 1 or len(plaintexts) != 1 or not out.is_file():
            raise HgxkitError(refused)
        return out.read_bytes().decode("utf-8", errors="replace")


def release_sha256(text: str) -> dict[str, tuple[str, int]]:
    """The `SHA256` field of a Release text: index path -> (sha256, size). Only that field's own lines are read."""
    out: dict[str, tuple[str, int]] = {}
    inside = False
    for line in text.split("\n\n", 1)[0].splitlines():
        if not line.startswith((" ", "\t")):
            inside = line.rstrip() == "SHA256:"
            continue
        match = CHECKSUM.match(line.rstrip()) if inside else None
        if match:
            out.setdefault(match[3], (match[1], int(match[2])))
    return out


def check_index(signed: str, name: str, body: bytes, where: str) -> None:
    """`body` is the index `name` the signed Release text lists, by sha256 and size; else refused."""
    digest = hashlib.sha256(body).hexdigest()
    if release_sha256(signed).get(name) != (digest, len(body)):
        raise HgxkitError(f"{where}{name}: sha256 {digest[:16]}… is not in its signed InRelease; refused")
