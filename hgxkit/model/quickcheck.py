"""The model check's fast path: a pinned, verified, unchanged copy answered with os/json/hashlib only.

`fetch.py status` imports the downloader (huggingface_hub and its dependencies) before it looks at anything; on
a no-op re-run that start-up is most of the node's CPU for the model. When the recipe pins a commit, the answer
needs no Hub: this program compares the spec with the manifest of the last verified sync, the host's record of
it and each file's size and mtime (the same metadata `core.check_manifest` compares, no link followed) and
prints the same JSON line `status` would. It prints nothing and exits 1 on anything else (a branch or tag, a
moved file, a missing record, a newer downloader, a full re-hash asked for): the caller then runs the full
check. Its source is sent inline (`python -I -S -c`), so it needs no upload and never lags the role. It is the
second tier: the node's shell first checks the stamp (`core.write_stamp`, see hgxkit.model.facts), which this
program writes whenever it answers complete, so it runs only once after something changed.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
import time

MANIFEST_NAME = ".hgxkit-manifest.json"
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")


def _regular(path: str) -> os.stat_result | None:
    """lstat of `path` when it is a regular file whose parents are no links (realpath unchanged), else None."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st if stat.S_ISREG(st.st_mode) else None


def _name(local_dir: str) -> str:
    """`core.model_name` without `re`: each run of other characters becomes one '-'."""
    base = os.path.basename(local_dir.rstrip("/")) or "model"
    out = ""
    replaced = False
    for c in base:
        if c in _NAME_CHARS:
            out, replaced = out + c, False
        elif not replaced:
            out, replaced = out + "-", True
    return out.strip("-.") or "model"


def quick_status(spec: dict, program: str) -> dict | None:
    """The `status` answer when the pinned copy is verified and unchanged; None: run the full check."""
    started = time.time()
    revision = str(spec.get("revision", ""))
    if len(revision) != 40 or any(c not in "0123456789abcdef" for c in revision) or spec.get("full_rehash"):
        return None
    local_dir = str(spec["local_dir"])
    root = os.path.realpath(local_dir)
    if spec.get("program_sha"):
        h = hashlib.sha256()
        here = os.path.dirname(os.path.abspath(program))
        try:
            for name in ("hgxkit_fetch.py", "model_core.py"):
                with open(os.path.join(here, name), "rb") as f:
                    h.update(hashlib.sha256(f.read()).digest())
        except OSError:
            return None
        if h.hexdigest() != spec["program_sha"]:
            return None
    mpath = os.path.join(root, MANIFEST_NAME)
    if _regular(mpath) is None:
        return None
    try:
        with open(mpath, "rb") as f:
            raw = f.read()
        manifest = json.loads(raw)
        with open(os.path.join(str(spec["state_dir"]), _name(local_dir) + ".json"), "rb") as f:
            record = json.loads(f.read())
        if (
            manifest.get("schema") != 1
            or manifest.get("repo_id") != spec.get("repo_id")
            or list(manifest.get("allow_patterns")) != list(spec.get("allow_patterns", []))
            or manifest.get("commit") != revision
            or record.get("commit") != revision
        ):
            return None
        entries = manifest["files"]
        for entry in entries:
            rel = str(entry["path"])
            full = os.path.join(root, rel)
            # No '..', no absolute name, no link anywhere below local_dir (what core.parent_of guarantees).
            if os.path.isabs(rel) or os.path.realpath(full) != os.path.normpath(full) or full != os.path.normpath(full):
                return None
            st = _regular(full)
            if st is None or st.st_size != entry["size"] or st.st_mtime_ns != entry["mtime_ns"]:
                return None
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None
    _write_stamp(spec, program, raw)
    name = _name(local_dir)
    return {
        "name": name,
        "unit": f"hgxkit-model-{name}",
        "state": "complete",
        "reason": f"verified {len(entries)} files at {revision[:12]} (unchanged since verify)",
        "commit": revision,
        "elapsed_s": round(time.time() - started, 3),
    }


def _write_stamp(spec: dict, program: str, manifest: bytes) -> None:
    """Leave the verdict for the shell check (`model_core.write_stamp`, uploaded beside the program: the same code
    the role ships when `program_sha` matched above); an older or missing model_core only means no stamp."""
    try:
        sys.path.insert(0, os.path.dirname(os.path.abspath(program)))
        import model_core  # type: ignore[import-not-found]

        model_core.write_stamp(model_core.Spec(**spec), model_core.Manifest.from_json(manifest.decode()))
    except Exception:  # a cache: whatever goes wrong, the answer above stands
        pass


def main(argv: list[str]) -> int:
    """`quickcheck.py SPEC_JSON PROGRAM`: print the answer and exit 0, or print nothing and exit 1."""
    try:
        answer = quick_status(json.loads(argv[0]), argv[1])
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        answer = None
    if answer is None:
        return 1
    print(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
