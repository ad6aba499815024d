"""The role's checks: `status` (metadata only, no hashing, no download) and `result` (how a sync ended)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from hgxkit.model import core

from .errors import FetchError
from .filelist import hub_files
from .localdir import load_manifest


def program_sha() -> str:
    """sha256 over this file and model_core.py next to it (what the role compares with the version it ships)."""
    here = os.path.dirname(os.path.abspath(__file__))
    h = hashlib.sha256()
    for name in ("hgxkit_fetch.py", "model_core.py"):
        with open(os.path.join(here, name), "rb") as f:
            h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()


def unit_active(spec: core.Spec) -> bool:
    if shutil.which("systemctl") is None:
        return False
    unit = core.unit_name(spec.local_dir)
    res = subprocess.run(["systemctl", "is-active", "--quiet", unit], stderr=subprocess.DEVNULL, check=False)
    return res.returncode == 0


def status(spec: core.Spec, token: str | None) -> dict[str, Any]:
    """The metadata-only check: is `local_dir` a verified copy of what the spec wants?"""
    started = time.time()
    out: dict[str, Any] = {"name": spec.name, "unit": core.unit_name(spec.local_dir)}
    if unit_active(spec):
        return {**out, "state": "running", "reason": "a sync is running"}
    manifest = load_manifest(spec.local_dir)
    commit: str | None = None
    files: list[core.FileMeta] | None = None
    if spec.full_rehash:
        return {**out, "state": "incomplete", "reason": "a full re-hash was asked for (model_full_rehash)"}
    if spec.program_sha and spec.program_sha != program_sha():
        return {**out, "state": "incomplete", "reason": "the role ships a newer downloader"}
    if core.is_commit(spec.revision):
        commit = spec.revision
    elif spec.source != "peer" and manifest is not None:
        try:
            commit, files = hub_files(spec, token, retry=False)
        except FetchError as err:
            if not err.transient:
                return {**out, "state": "error", "reason": str(err)}
            return {**out, "state": "incomplete", "reason": f"cannot re-resolve {spec.revision!r}: {err}"}
    check = core.check_manifest(manifest, spec.local_dir, spec.repo_id, spec.allow_patterns, commit, files)
    state = "complete" if check.ok else "incomplete"
    reason = check.reason
    if check.ok:
        try:
            record = json.loads(Path(spec.state_file(".json")).read_text())
        except (OSError, ValueError):
            record = {}
        if manifest is not None and record.get("commit") != manifest.commit:
            state, reason = "incomplete", "the host's record of the sync is missing"
    # The verdict, cached for the node's shell check (hgxkit.model.facts): written for exactly what was read here.
    if state == "complete" and manifest is not None:
        core.write_stamp(spec, manifest)
    else:
        core.remove_stamp(spec)
    commit_out = manifest.commit if manifest else commit
    return {**out, "state": state, "reason": reason, "commit": commit_out, "elapsed_s": round(time.time() - started, 3)}


def report_result(spec: core.Spec) -> int:
    """The role's last step: one line on how the latest sync ended; exit 1 unless it succeeded."""
    unit = core.unit_name(spec.local_dir)
    try:
        doc = json.loads(Path(spec.state_file(".result.json")).read_text())
    except (OSError, ValueError):
        doc = None
    if unit_active(spec):
        try:
            p = core.Progress(**json.loads(Path(spec.state_file(".progress.json")).read_text()))
            where = core.format_progress(p)
        except (OSError, ValueError, TypeError):
            where = "running"
        print(f"the sync is still running in {unit} ({where}): re-run the deploy to attach", file=sys.stderr)
        return 1
    if doc is None:
        print(f"{unit} ended without a result (killed?): re-run the deploy to resume", file=sys.stderr)
        return 1
    if not doc.get("ok"):
        print(str(doc.get("error")), file=sys.stderr)
        return 1
    print(
        f"{spec.repo_id}@{str(doc.get('commit'))[:12]} verified in {spec.local_dir}: fetched "
        f"{len(doc.get('fetched', []))} files, re-fetched corrupted {doc.get('refetched_corrupt', [])}"
    )
    return 0
