"""`bundle.json`: every artifact of a bundle with its size and sha256, and the bundle's own hash (stdlib only).

The bundle's hash is the sha256 of bundle.json's canonical JSON (sorted keys, no spaces) without the
`bundle_sha256` key itself. `verify` checks that hash first, so a bundle.json edited by hand (a hash
changed to match a swapped file) is refused before any artifact is read, then every artifact: a missing
file, another size, another sha256 or a file the manifest does not list is one problem line naming the file.
bundle.json is read once, and its signature, hash and artifacts are all judged on those bytes. A bundle holds
regular files and the directories above them only: a symlink anywhere (to a file or a directory, listed or not),
a special file or a directory the manifest does not need is refused, and no link is followed while checking.
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
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MANIFEST = "bundle.json"
SIGNATURE = "bundle.json.sig"  # detached signature of bundle.json by the bundle key (binary, for gpgv)
KEYRING = "apt/bundle-key.gpg"  # the bundle key's public part as a keyring gpgv and apt read
KEY_FILE = "bundle-key.asc"  # the same key, armoured, under apt/: the nodes' apt source names it
SCHEMA_VERSION = 1
BUFFER = 1 << 20
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW  # a directory of the bundle, never through a symlink


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


@dataclass
class Tree:
    """What a bundle directory holds, as relative POSIX paths, no link followed: regular files, directories,
    symlinks (to anything) and the rest (FIFOs, sockets, devices)."""

    files: list[str] = field(default_factory=list)
    dirs: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    other: list[str] = field(default_factory=list)


def _walk(dir_fd: int, prefix: str, tree: Tree) -> None:
    with os.scandir(dir_fd) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            rel = prefix + entry.name
            if entry.is_symlink():
                tree.links.append(rel)
            elif entry.is_dir(follow_symlinks=False):
                tree.dirs.append(rel)
                sub = os.open(entry.name, DIR_FLAGS, dir_fd=dir_fd)
                try:
                    _walk(sub, rel + "/", tree)
                finally:
                    os.close(sub)
            elif entry.is_file(follow_symlinks=False):
                tree.files.append(rel)
            else:
                tree.other.append(rel)


def walk(root: Path) -> Tree:
    """Everything under `root` but bundle.json and its signature, sorted; symlinks are listed, never followed."""
    tree = Tree()
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        _walk(fd, "", tree)
    finally:
        os.close(fd)
    tree.files = sorted(rel for rel in tree.files if rel not in (MANIFEST, SIGNATURE))
    return tree


def list_files(root: Path) -> list[str]:
    """Every regular file under `root` but bundle.json, as sorted POSIX paths relative to it."""
    return walk(root).files


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


def read_inside(root: Path, rel: str) -> bytes:
    """The bytes of the regular file `rel` of the bundle, read once, reached with no symlink followed; OSError
    (ELOOP for a symlink) or ValueError (not a regular file) otherwise."""
    fd = open_inside(root, rel)
    with os.fdopen(fd, "rb") as f:
        return f.read()


def read_manifest(root: Path, fingerprint: str | None = None) -> tuple[dict[str, Any] | None, str | None]:
    """bundle.json of the bundle at `root` and None, or None and the one line saying why it cannot be used. Its
    bytes are read once: the signature (with `fingerprint`), the hash and the artifacts all judge those bytes,
    so storage that answers differently on a second read gains nothing."""
    path = root / MANIFEST
    try:
        data = read_inside(root, MANIFEST)
    except FileNotFoundError:
        return None, f"{path}: no bundle manifest here; is {root} a bundle (`hgxkit bundle create`)?"
    except (OSError, ValueError) as err:
        return None, f"{path}: unreadable or not a regular file ({err}); refused: re-create or re-copy the bundle"
    if fingerprint:
        problem = signature_problem(root, fingerprint, data)
        if problem:
            return None, problem
    try:
        doc = json.loads(data)
    except ValueError as err:
        return None, f"{path}: unreadable ({err}); re-create or re-copy the bundle"
    problem = hash_problem(doc)
    return (None, problem) if problem else (doc, None)


def from_elsewhere(rel: str, elsewhere: tuple[str, ...]) -> bool:
    """Whether artifact `rel` lies under one of the top-level directories `elsewhere` (taken from the image cache).

    >>> from_elsewhere("image/blobs/sha256/ab", ("image",)), from_elsewhere("images.txt", ("image",))
    (True, False)
    """
    return rel.split("/", 1)[0] in elsewhere and "/" in rel


def path_problem(rel: Any) -> str | None:
    """Why a manifest path cannot name a file inside the bundle (absolute, `..`, `.`, empty parts), or None.

    >>> [path_problem(p) is None for p in ("a/b", "/etc/passwd", "a/../b", "./a", "a//b", "")]
    [True, False, False, False, False, False]
    """
    parts = rel.split("/") if isinstance(rel, str) else [""]
    if any(part in ("", ".", "..") or "\0" in part for part in parts):
        return f"{rel}: not a path inside the bundle; refused"
    return None


def open_inside(root: Path, rel: str) -> int:
    """A read-only descriptor of the regular file `rel` under `root`, every component opened with O_NOFOLLOW
    relative to the one before, so no symlink anywhere on the way is followed (OSError ELOOP or ENOTDIR), and a
    FIFO or device is refused (ValueError) before it is read."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        *dirs, name = rel.split("/")
        for part in dirs:
            sub = os.open(part, DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = sub
        found = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
    finally:
        os.close(fd)
    if not stat.S_ISREG(os.fstat(found).st_mode):
        os.close(found)
        raise ValueError("not a regular file")
    return found


def _fd_sha256(fd: int) -> str:
    h = hashlib.sha256()
    with os.fdopen(fd, "rb") as f:
        while chunk := f.read(BUFFER):
            h.update(chunk)
    return h.hexdigest()


def entry_problem(root: Path, entry: Any, elsewhere: tuple[str, ...]) -> str | None:
    """Why one artifact of the manifest is not in the bundle as listed (missing, a symlink on its way, another
    size or sha256), or None; one under a directory of `elsewhere` may be absent."""
    rel = entry.get("path") if isinstance(entry, dict) else None
    problem = path_problem(rel)
    if problem:
        return problem
    try:
        fd = open_inside(root, rel)
    except FileNotFoundError:
        return None if from_elsewhere(rel, elsewhere) else f"{rel}: missing (or not a regular file); re-copy the bundle"
    except (OSError, ValueError):
        return f"{rel}: missing (or not a regular file); a symlink or special file is refused: re-copy the bundle"
    size = os.fstat(fd).st_size
    if size != entry.get("size"):
        os.close(fd)
        return f"{rel}: {size} bytes, the manifest says {entry.get('size')}; re-copy it"
    digest = _fd_sha256(fd)
    if digest != entry.get("sha256"):
        return (
            f"{rel}: sha256 {digest[:16]}…, the manifest says {str(entry.get('sha256'))[:16]}…; "
            "the file changed after create: re-copy it"
        )
    return None


def unlisted_problems(tree: Tree, listed: set[str]) -> list[str]:
    """Every entry of the bundle the manifest does not vouch for: a symlink or special file anywhere, a file it
    does not list, a directory that holds none of its files."""
    parents = {rel.rsplit("/", i)[0] for rel in listed for i in range(1, rel.count("/") + 1)}
    problems = [f"{rel}: a symlink; refused: a bundle holds regular files only, re-copy it" for rel in tree.links]
    problems += [f"{rel}: not a regular file; refused: re-copy the bundle" for rel in tree.other]
    for rel in tree.dirs:
        above = rel.rsplit("/", 1)[0] if "/" in rel else None
        if rel not in parents and (above is None or above in parents):  # the topmost only: what lies below is in it
            problems.append(f"{rel}/: a directory not in the manifest; remove it or re-create the bundle")
    problems += [
        f"{rel}: not in the manifest; remove it or re-create the bundle" for rel in tree.files if rel not in listed
    ]
    return problems


def artifact_problems(root: Path, artifacts: list[Any], tree: Tree, elsewhere: tuple[str, ...] = ()) -> list[str]:
    """Every artifact that is missing, has another size or sha256, is listed twice or is reached through a
    symlink, then every entry of the bundle the manifest does not list (`unlisted_problems`). An artifact under a
    directory of `elsewhere` may be absent (the node takes it from the image cache); one that is there is checked
    like every other."""
    problems = []
    listed: set[str] = set()
    for entry in artifacts:
        problem = entry_problem(root, entry, elsewhere)
        if problem:
            problems.append(problem)
        rel = str(entry.get("path")) if isinstance(entry, dict) else str(entry)
        if rel in listed:
            problems.append(f"{rel}: listed twice in the manifest; refused: re-create the bundle")
        listed.add(rel)
    named = {line.split(": ", 1)[0] for line in problems}
    return problems + [p for p in unlisted_problems(tree, listed) if p.split(": ", 1)[0] not in named]


def verify(
    root: Path, elsewhere: tuple[str, ...] = (), fingerprint: str | None = None
) -> tuple[dict[str, Any] | None, list[str]]:
    """The bundle at `root` checked: (manifest or None, problems); no problems means every byte is as created (but
    the absent files under the directories of `elsewhere`, which the node takes from the image cache), and, with
    `fingerprint`, that bundle.json as read is signed by that key."""
    doc, problem = read_manifest(root, fingerprint)
    if doc is None:
        return None, [str(problem)]
    return doc, artifact_problems(root, doc["artifacts"], walk(root), elsewhere)


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


def signature_problem(root: Path, fingerprint: str, data: bytes) -> str | None:
    """Why `data` (bundle.json's bytes, as read once) is not signed by the key with `fingerprint` (one the site got
    another way), or None. gpgv (every Debian and Ubuntu system has it: apt needs it) checks the signature over
    exactly those bytes, handed on its standard input, against the key the bundle carries; the fingerprint the
    site holds is what makes that key the one it trusts."""
    want = fingerprint.replace(" ", "").upper()
    refused = f"{SIGNATURE}: no valid signature of {MANIFEST} by the bundle's key; refused: re-copy or re-create it"
    try:
        keyring, signature = read_inside(root, KEYRING), read_inside(root, SIGNATURE)
    except (OSError, ValueError):
        return refused
    with tempfile.TemporaryDirectory(prefix="hgxkit-bundle-sig-") as tmp:
        Path(tmp, "key.gpg").write_bytes(keyring)
        Path(tmp, "sig").write_bytes(signature)
        cmd = ["gpgv", "--status-fd", "1", "--keyring", str(Path(tmp, "key.gpg")), str(Path(tmp, "sig")), "-"]
        try:
            res = subprocess.run(cmd, input=data, capture_output=True, check=False)
        except FileNotFoundError:
            return "gpgv not found: apt-get install gpgv"
    status = res.stdout.decode(errors="replace").splitlines()
    valid = [line.split()[2] for line in status if line.startswith("[GNUPG:] VALIDSIG ")]
    if res.returncode != 0 or not valid:
        return refused
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
