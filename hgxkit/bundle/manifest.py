"""`bundle.json`: every artifact of a bundle with its size and sha256, and the bundle's own hash (stdlib only).

The bundle's hash is the sha256 of bundle.json's canonical JSON (sorted keys, no spaces) without the
`bundle_sha256` key itself. `verify` checks that hash first, so a bundle.json edited by hand (a hash
changed to match a swapped file) is refused before any artifact is read, then every artifact: a missing
file, another size, another sha256 or a file the manifest does not list is one problem line naming the file.
This file also runs on a node (`python3 hgxkit_bundle_verify.py DIR`, uploaded by hgxkit.bundle.source) before
anything is installed from the bundle. A node behind the fleet's image cache gets the bundle without image/
(`--from-cache image`): what it did receive is verified as always, and the one line it prints says image/ is taken
from the cache (its Docker checks every layer by digest; the role checks the image ID).

Example:
    >>> doc = {"schema_version": 1, "artifacts": []}
    >>> seal(doc)["bundle_sha256"] == manifest_hash(doc)
    True
    >>> hash_problem({**seal(doc), "artifacts": [{"path": "x", "size": 1, "sha256": "0" * 64}]})
    'bundle.json: its bundle_sha256 does not match its content (edited after create?); refused: re-create the bundle'
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

MANIFEST = "bundle.json"
SIGNATURE = "bundle.json.sig"  # detached signature of bundle.json by the bundle key (binary, for gpgv)
KEYRING = "apt/bundle-key.gpg"  # the bundle key's public part as a keyring gpgv and apt read
SCHEMA_VERSION = 1
BUFFER = 1 << 20


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes, read in 1 MiB pieces."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(BUFFER):
            h.update(chunk)
    return h.hexdigest()


def manifest_hash(doc: dict[str, Any]) -> str:
    """The bundle's hash: sha256 of the canonical JSON of `doc` without its `bundle_sha256`."""
    body = {k: v for k, v in doc.items() if k != "bundle_sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def seal(doc: dict[str, Any]) -> dict[str, Any]:
    """`doc` with its `bundle_sha256` set."""
    return {**doc, "bundle_sha256": manifest_hash(doc)}


def artifact_entry(root: Path, rel: str) -> dict[str, Any]:
    """One artifact of the manifest: path relative to the bundle, size, sha256."""
    path = root / rel
    return {"path": rel, "size": path.stat().st_size, "sha256": file_sha256(path)}


def list_files(root: Path) -> list[str]:
    """Every regular file under `root` but bundle.json, as sorted POSIX paths relative to it."""
    out = []
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            rel = Path(dirpath, name).relative_to(root).as_posix()
            if rel not in (MANIFEST, SIGNATURE):
                out.append(rel)
    return sorted(out)


def hash_problem(doc: Any) -> str | None:
    """Why bundle.json itself cannot be trusted (not a bundle manifest, or its hash does not match), or None."""
    if (
        not isinstance(doc, dict)
        or doc.get("schema_version") != SCHEMA_VERSION
        or not isinstance(doc.get("artifacts"), list)
    ):
        return f"{MANIFEST}: not an hgxkit bundle manifest of schema_version {SCHEMA_VERSION}; re-create the bundle"
    if doc.get("bundle_sha256") != manifest_hash(doc):
        return (
            f"{MANIFEST}: its bundle_sha256 does not match its content (edited after create?); refused: "
            "re-create the bundle"
        )
    return None


def read_manifest(root: Path) -> tuple[dict[str, Any] | None, str | None]:
    """bundle.json of the bundle at `root` and None, or None and the one line saying why it cannot be used."""
    path = root / MANIFEST
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return None, f"{path}: no bundle manifest here; is {root} a bundle (`hgxkit bundle create`)?"
    except (OSError, ValueError) as err:
        return None, f"{path}: unreadable ({err}); re-create or re-copy the bundle"
    problem = hash_problem(doc)
    return (None, problem) if problem else (doc, None)


def from_elsewhere(rel: str, elsewhere: tuple[str, ...]) -> bool:
    """Whether artifact `rel` lies under one of the top-level directories `elsewhere` (taken from the image cache).

    >>> from_elsewhere("image/blobs/sha256/ab", ("image",)), from_elsewhere("images.txt", ("image",))
    (True, False)
    """
    return rel.split("/", 1)[0] in elsewhere and "/" in rel


def artifact_problems(
    root: Path, artifacts: list[dict[str, Any]], present: list[str], elsewhere: tuple[str, ...] = ()
) -> list[str]:
    """Every artifact that is missing, has another size or sha256, and every file the manifest does not list. An
    artifact under a directory of `elsewhere` may be absent (the node takes it from the image cache); one that is
    there is checked like every other."""
    problems = []
    listed = set()
    for entry in artifacts:
        rel = str(entry.get("path"))
        listed.add(rel)
        path = root / rel
        if rel.startswith("/") or ".." in Path(rel).parts:
            problems.append(f"{rel}: not a path inside the bundle; refused")
        elif from_elsewhere(rel, elsewhere) and not path.exists() and not path.is_symlink():
            continue
        elif not path.is_file() or path.is_symlink():
            problems.append(f"{rel}: missing (or not a regular file); re-copy the bundle")
        elif path.stat().st_size != entry.get("size"):
            problems.append(f"{rel}: {path.stat().st_size} bytes, the manifest says {entry.get('size')}; re-copy it")
        else:
            digest = file_sha256(path)
            if digest != entry.get("sha256"):
                problems.append(
                    f"{rel}: sha256 {digest[:16]}…, the manifest says {str(entry.get('sha256'))[:16]}…; "
                    "the file changed after create: re-copy it"
                )
    problems += [
        f"{rel}: not in the manifest; remove it or re-create the bundle" for rel in present if rel not in listed
    ]
    return problems


def verify(root: Path, elsewhere: tuple[str, ...] = ()) -> tuple[dict[str, Any] | None, list[str]]:
    """The bundle at `root` checked: (manifest or None, problems); no problems means every byte is as created (but
    the absent files under the directories of `elsewhere`, which the node takes from the image cache)."""
    doc, problem = read_manifest(root)
    if doc is None:
        return None, [str(problem)]
    return doc, artifact_problems(root, doc["artifacts"], list_files(root), elsewhere)


def elsewhere_note(root: Path, artifacts: list[dict[str, Any]], elsewhere: tuple[str, ...]) -> str | None:
    """The line a verify with `elsewhere` prints: how many artifacts were not here, taken from the image cache."""
    absent = [a for a in artifacts if from_elsewhere(str(a.get("path")), elsewhere) and not (root / a["path"]).exists()]
    if not absent:
        return None
    size = sum(int(a.get("size", 0)) for a in absent)
    return (
        f"{', '.join(d + '/' for d in elsewhere)}: {len(absent)} files ({size} bytes) not on this node, taken "
        "from the image cache (Docker checks each layer by digest, the role the image ID)"
    )


def signature_problem(root: Path, fingerprint: str) -> str | None:
    """Why bundle.json is not signed by the key with `fingerprint` (one the site got another way), or None.
    The signature is checked with gpgv (every Debian and Ubuntu system has it: apt needs it) against the key the
    bundle carries; the fingerprint the site holds is what makes that key the one it trusts."""
    want = fingerprint.replace(" ", "").upper()
    try:
        res = subprocess.run(
            [
                "gpgv",
                "--status-fd",
                "1",
                "--keyring",
                str((root / KEYRING).resolve()),
                str(root / SIGNATURE),
                str(root / MANIFEST),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
    except FileNotFoundError:
        return "gpgv not found: apt-get install gpgv"
    valid = [line.split()[2] for line in res.stdout.splitlines() if line.startswith("[GNUPG:] VALIDSIG ")]
    if res.returncode != 0 or not valid:
        return f"{SIGNATURE}: no valid signature of {MANIFEST} by the bundle's key; refused: re-copy or re-create it"
    if valid[0].upper() != want:
        return f"{MANIFEST}: signed by key {valid[0]}, not the expected {want}; refused: is this the bundle you made?"
    return None


def main(argv: list[str] | None = None) -> int:
    """Node side: `python3 hgxkit_bundle_verify.py DIR [EXPECTED_HASH] [--from-cache DIRNAME]`; exit 1 with one line
    per problem."""
    args = list(sys.argv[1:] if argv is None else argv)
    elsewhere: tuple[str, ...] = ()
    if "--from-cache" in args:
        at = args.index("--from-cache")
        elsewhere = tuple(args[at + 1 : at + 2])
        del args[at : at + 2]
    root = Path(args[0])
    doc, problems = verify(root, elsewhere)
    if doc is not None and len(args) > 1 and doc["bundle_sha256"] != args[1]:
        problems.insert(0, f"{root}: bundle {doc['bundle_sha256'][:16]}…, the controller's is {args[1][:16]}…")
    for line in problems:
        print(line, file=sys.stderr)
    if not problems and doc is not None:
        note = elsewhere_note(root, doc["artifacts"], elsewhere)
        if note:
            print(note)
        print(doc["bundle_sha256"])
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
