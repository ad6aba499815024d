"""One sync: the file list, what is verified already, what to hash and fetch, then the manifest and record."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict
from functools import partial
from typing import Any

from hgxkit.model import core

from .bundle import copy_from_bundle
from .errors import FetchError, XetFile
from .feed import Feed
from .filelist import hub_files
from .hubbodies import HubBodies
from .localdir import (
    _check_name,
    _forget,
    _incomplete_bytes,
    _matches,
    _size_or_none,
    _stamp,
    load_journal,
    load_manifest,
    prepare_dir,
    remove_orphans,
)
from .parent import ParentLink, ParentState, _parent_dir
from .partial import Partial
from .progress import Reporter
from .retry import with_retries


class Syncer:
    """One sync of `spec` (see the module docstring); `run()` returns the result fields."""

    def __init__(self, spec: core.Spec, token: str | None, rep: Reporter) -> None:
        self.spec, self.token, self.rep = spec, token, rep
        self.verified: dict[str, core.VerifiedFile] = {}
        self._lock = threading.Lock()
        self._active: set[Partial] = set()
        self.commit = ""
        self.plan: list[core.FileMeta] = []
        self.started = time.time()
        self.hub: HubBodies | None = None
        self.to_fetch: list[core.FileMeta] = []
        self._xet_checked = False
        self.link = ParentLink(spec)
        self.manifest: core.Manifest | None = None  # set when this host's copy is complete (what it serves)
        self.result: dict[str, Any] | None = None  # set when the sync failed (what the hosts below read)
        self.fetched: list[str] = []
        self.rehashed: list[str] = []
        self.refetched_corrupt: list[str] = []
        self.resumed: list[str] = []

    # metadata
    def metadata(self) -> tuple[str, list[core.FileMeta]]:
        spec = self.spec
        if spec.source == "peer":
            if not (spec.peer_address and spec.peer_key):
                raise FetchError("model_source peer needs model_peer (an inventory host): set it in the inventory")
            self.rep.phase("reading the peer's file list", detail=spec.peer_name)
            state = self._wait_for_plan()
            if state.repo_id != spec.repo_id or list(state.allow_patterns) != list(spec.allow_patterns):
                raise FetchError(
                    f"peer {spec.peer_name} holds {state.repo_id} with allow_patterns {state.allow_patterns}, not "
                    f"{spec.repo_id} with {spec.allow_patterns}: sync the peer with the same recipe first"
                )
            if core.is_commit(spec.revision) and state.commit != spec.revision:
                raise FetchError(
                    f"peer {spec.peer_name} holds commit {state.commit[:12]}, the recipe pins {spec.revision[:12]}: "
                    "re-sync the peer first"
                )
            assert state.plan is not None
            return state.commit, state.plan
        if spec.source == "fleet" and spec.peer_name and not (spec.peer_address and spec.peer_key):
            raise FetchError("model_source fleet: the parent host has no address or key: re-run the deploy")
        self.rep.phase("resolving", detail=f"{spec.repo_id}@{spec.revision} at {spec.where}")
        return hub_files(spec, self.token)

    def _wait_for_plan(self) -> ParentState:
        spec = self.spec
        deadline = time.time() + spec.peer_wait_s
        while True:
            what = f"reading {spec.peer_name}'s file list"
            state = with_retries(spec, what, self.link.state, self.rep.log)
            if state is not None and state.plan is not None:
                return state
            if state is not None and state.error and state.error_at >= self.started:
                raise FetchError(f"peer {spec.peer_name} failed its sync: {state.error}")
            if time.time() >= deadline:
                raise FetchError(
                    f"peer {spec.peer_name} has no verified copy or file list in {_parent_dir(spec)} after "
                    f"{spec.peer_wait_s:.0f}s: deploy the model to the peer first"
                )
            self.rep.log(f"waiting for peer {spec.peer_name} to start its sync")
            time.sleep(2)

    def journal(self) -> None:
        """`.cache/hgxkit/verified.json`: the commit, the whole file list and the files verified so far. A later
        run trusts the verified ones (size+mtime); hosts below this one in a fleet copy them from here."""
        with self._lock:
            doc = {
                "commit": self.commit,
                "repo_id": self.spec.repo_id,
                "allow_patterns": list(self.spec.allow_patterns),
                "plan": [asdict(m) for m in self.plan],
                "files": [asdict(v) for v in self.verified.values()],
            }
            core.write_under(self.spec.local_dir, core.JOURNAL_PATH, json.dumps(doc))

    def _verified(self, meta: core.FileMeta, fetched: bool) -> None:
        with self._lock:
            self.verified[meta.path] = _stamp(self.spec, meta)
            if fetched:
                self.fetched.append(meta.path)
        self.rep.file_done(meta.size)
        self.journal()

    def hash_files(self, metas: list[core.FileMeta]) -> list[core.FileMeta]:
        """Hash `metas` in parallel; record the good ones, return the bad ones."""
        bad: list[core.FileMeta] = []
        self.rep.phase("verifying", total=sum(m.size for m in metas), files_total=len(metas))

        def one(meta: core.FileMeta) -> None:
            problem = core.verify_file(self.spec.local_dir, meta.path, meta)
            if problem is None:
                with self._lock:
                    self.verified[meta.path] = _stamp(self.spec, meta)
            else:
                self.rep.log(f"{meta.path}: {problem}")
                with self._lock:
                    bad.append(meta)
            self.rep.file_done(meta.size)

        with ThreadPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1))) as pool:
            list(pool.map(one, metas))
        self.journal()
        return bad

    def _inflight(self) -> int:
        with self._lock:
            ours = sum(p.offset for p in self._active)
        return ours + _incomplete_bytes(self.spec.local_dir)  # hf_xet's files in flight

    def fetch_one(self, meta: core.FileMeta, stream: Callable[[core.FileMeta, Partial], None], where: str) -> None:
        """Stream one file into its partial (resuming it), check its id, then move it into place; a corrupted
        copy is fetched again from byte 0, up to corrupt_refetch times."""
        spec = self.spec
        _check_name(meta.path)
        part = Partial(spec.local_dir, meta)
        problem: str | None = None
        with self._lock:
            self._active.add(part)
        try:
            for _ in range(spec.corrupt_refetch + 1):
                part.open()
                if part.offset < meta.size:  # a partial that is whole only needs its check
                    with_retries(spec, f"fetching {meta.path}", lambda: stream(meta, part), self.rep.log)
                problem = part.hash.problem()
                if problem is None:
                    if part.resumed_at:
                        self.rep.log(f"{meta.path}: resumed at byte {part.resumed_at}")
                        with self._lock:
                            self.resumed.append(meta.path)
                    part.install(meta.path)
                    self._verified(meta, fetched=True)
                    return
                self.rep.log(f"{meta.path} is corrupted ({problem}); fetching it again")
                part.discard()
                with self._lock:
                    self.refetched_corrupt.append(meta.path)
        finally:
            part.close()
            with self._lock:
                self._active.discard(part)
        raise FetchError(
            f"{meta.path} is corrupted ({problem}) after {spec.corrupt_refetch + 1} fetches from {where}: "
            + ("the server sends a bad copy; try another mirror" if where == spec.where else f"re-sync {where}")
        )

    def fetch_xet(self, meta: core.FileMeta) -> None:
        """A file in Xet storage: hf_xet writes it, then it is hashed (while the page cache still holds it)."""
        spec = self.spec
        assert self.hub is not None
        _forget(spec, meta.path)
        problem: str | None = None
        for _ in range(spec.corrupt_refetch + 1):
            # huggingface_hub writes by path: it gets a fresh directory under a random name (made by this code, no
            # link on the way), and the file is renamed into place through directory fds, then checked as a
            # regular file. A container racing huggingface_hub inside that directory is the residual risk.
            stage = f"{core.STAGE_DIR}/{secrets.token_hex(8)}"
            try:
                core.make_dir_under(spec.local_dir, stage)
                hub, where = self.hub, os.path.join(spec.local_dir, stage)
                with_retries(spec, f"fetching {meta.path} (xet)", partial(hub.fetch_xet, meta, where), self.rep.log)
                core.move_under(spec.local_dir, f"{stage}/{meta.path}", meta.path)
            finally:
                core.remove_under(spec.local_dir, stage)
            problem = core.verify_file(spec.local_dir, meta.path, meta)
            if problem is None:
                self._verified(meta, fetched=True)
                return
            self.rep.log(f"{meta.path} is corrupted ({problem}); fetching it again")
            _forget(spec, meta.path)
            with self._lock:
                self.refetched_corrupt.append(meta.path)
        raise FetchError(
            f"{meta.path} is corrupted ({problem}) after {spec.corrupt_refetch + 1} fetches from {spec.where}: "
            "the server sends a bad copy; try another mirror"
        )

    def fetch(self, metas: list[core.FileMeta]) -> None:
        """Fetch `metas` with `workers` transfers at once, each file as soon as its source has it."""
        spec = self.spec
        self.rep.phase("downloading", total=sum(m.size for m in metas), files_total=len(metas))
        self.rep.track(self._inflight)
        if spec.from_parent:
            link = self.link

            def one(m: core.FileMeta) -> None:
                self.fetch_one(m, link.stream, spec.peer_name)

        else:
            hub = self.hub
            assert hub is not None

            def one(m: core.FileMeta) -> None:
                try:
                    self.fetch_one(m, hub.stream, spec.where)
                except XetFile:
                    self.xet_space()
                    self.fetch_xet(m)

        feed = Feed(spec, metas, self.link, self.rep.log, self.commit, self.started)
        errors: list[BaseException] = []
        with ThreadPoolExecutor(max_workers=max(1, spec.workers)) as pool:
            running: set[Future[None]] = set()
            queue: deque[core.FileMeta] = deque()
            while feed.waiting or queue or running:
                try:
                    queue.extend(feed.ready())
                except FetchError as err:  # the parent failed or stalled: start no more, finish what runs
                    errors.insert(0, err)
                    queue.clear()
                    feed.waiting.clear()
                while queue and len(running) < max(1, spec.workers):
                    running.add(pool.submit(one, queue.popleft()))
                if not running:
                    time.sleep(0.2)  # waiting for the parent to verify more files
                    continue
                done, running = wait(running, timeout=0.5, return_when=FIRST_COMPLETED)
                # A file that fails does not stop the others: each good one is journaled for the next run.
                errors += [e for e in (fut.exception() for fut in done) if e is not None]
        if errors:
            raise errors[0]

    def xet_space(self) -> None:
        """Before the first file goes through hf_xet: the free-space check again, with hf_xet's caches."""
        with self._lock:
            if self._xet_checked:
                return
            self._xet_checked = True
        self.rep.log(f"files in Xet storage: hf_xet, HF_XET_HIGH_PERFORMANCE, caches in {self.spec.xet_dir}")
        self.disk_check(self.to_fetch, xet=True)

    def disk_check(self, to_fetch: list[core.FileMeta], xet: bool) -> None:
        spec = self.spec
        partial = {
            m.path: _size_or_none(spec.local_dir, f"{core.PARTIAL_DIR}/{core.content_key(m)}") or 0 for m in to_fetch
        }
        remaining = sum(m.size - partial[m.path] for m in to_fetch)
        needs = [
            core.DiskNeed(
                spec.local_dir,
                core.disk_need(remaining, spec.margin_pct, spec.margin_gb),
                f"{len(to_fetch)} files, {core.format_bytes(remaining)} to fetch + margin",
            )
        ]
        if xet:
            caches = int((spec.xet_chunk_cache_gb + spec.xet_shard_cache_gb) * core.GB)
            needs.append(
                core.DiskNeed(
                    spec.xet_dir,
                    max(0, caches - core.dir_bytes(spec.xet_dir)),
                    f"hf_xet's caches at {spec.xet_dir}: chunk {spec.xet_chunk_cache_gb:g} GB + shard "
                    f"{spec.xet_shard_cache_gb:g} GB (model_xet_chunk_cache_gb, model_xet_shard_cache_gb)",
                )
            )
        shorts = core.disk_shortfalls(needs)
        if shorts:
            raise FetchError(
                "; ".join(shorts)
                + ": free space there, or choose another model.local_dir"
                + (" or model_xet_cache_dir" if xet else "")
            )

    def run(self) -> dict[str, Any]:
        """The sync: the file list, then what is verified already, then the rest hashed or fetched; the result
        fields (`already` when the manifest shows a verified copy)."""
        spec = self.spec
        prepare_dir(spec.local_dir)
        self.commit, metas = self.metadata()
        for m in metas:
            why = core.name_problem(m.path)
            if why:
                raise FetchError(f"the file list from {spec.where} names {m.path!r}, which {why}: refusing it")
        self.plan = metas
        manifest = load_manifest(spec.local_dir)
        if manifest is not None:
            ok = core.check_manifest(manifest, spec.local_dir, spec.repo_id, spec.allow_patterns, self.commit, metas)
            if ok.ok and not spec.full_rehash:
                self.write_record(manifest)
                core.write_stamp(spec, manifest)
                self.manifest = manifest
                return {"commit": self.commit, "fetched": [], "rehashed": [], "seconds": 0.0, "already": True}
            # Never leave a manifest that claims files this run may replace.
            core.remove_under(spec.local_dir, core.MANIFEST_NAME)
        to_fetch = self.settle_in_place(metas, manifest)
        if to_fetch:
            self.download(to_fetch)
        return self.finish(metas)

    def settle_in_place(self, metas: list[core.FileMeta], manifest: core.Manifest | None) -> list[core.FileMeta]:
        """Sort `metas` by what is in local_dir: verified before (manifest or journal, size and mtime unchanged),
        there at the right size (hashed now), or missing; a bundle's missing files are copied and hashed. Returns
        what is still to fetch; with a source that only verifies (dir, bundle), that is an error."""
        spec = self.spec
        known: dict[str, core.VerifiedFile] = {}
        if not spec.full_rehash:
            if manifest is not None and manifest.commit == self.commit:
                known.update({f.path: f for f in manifest.files})
            known.update(load_journal(spec, self.commit))
        to_hash, to_fetch = [], []
        for m in metas:
            entry = known.get(m.path)
            if entry and _matches(entry, m) and core.unchanged_since_verify(spec.local_dir, entry):
                self.verified[m.path] = entry
            elif _size_or_none(spec.local_dir, m.path) == m.size:
                to_hash.append(m)
            else:
                to_fetch.append(m)
        if to_hash:
            bad = self.hash_files(to_hash)
            self.rehashed = [m.path for m in to_hash]
            to_fetch += bad
        if spec.source == "bundle" and to_fetch:  # copied, then hashed like any file found in place
            copy_from_bundle(spec, to_fetch)
            self.fetched = [m.path for m in to_fetch]
            to_fetch = self.hash_files(to_fetch)
        if spec.source in ("dir", "bundle") and to_fetch:
            first = to_fetch[0].path
            why = core.verify_file(spec.local_dir, first, to_fetch[0]) or "changed"
            raise FetchError(
                f"{len(to_fetch)} of {len(metas)} files missing or wrong in {spec.local_dir} ({first}: {why}); "
                + (
                    "the bundle's copy differs from its manifest: re-copy the bundle (`hgxkit bundle verify`)"
                    if spec.source == "bundle"
                    else "model_source dir only verifies: copy the model there, or use model_source hub"
                )
            )
        return to_fetch

    def download(self, to_fetch: list[core.FileMeta]) -> None:
        """Clear the way for `to_fetch` (wrong copies, orphaned partials), check the space, then fetch."""
        spec = self.spec
        self.to_fetch = to_fetch
        for m in to_fetch:  # wrong or partial copies in place are useless: their space counts as free
            _forget(spec, m.path)
        remove_orphans(spec.local_dir, {core.content_key(m) for m in to_fetch})
        self.disk_check(to_fetch, xet=False)  # before the first request for a file
        if not spec.from_parent:
            self.hub = HubBodies(spec, self.token, self.commit)
            big = max(to_fetch, key=lambda m: m.size)
            ask = f"asking {spec.where} for {big.path}"
            if spec.xet and with_retries(spec, ask, lambda: self.hub.in_xet(big), self.rep.log):  # type: ignore[union-attr]
                self.xet_space()  # a Xet repo: hf_xet's caches are checked before the first byte
        self.journal()
        self.fetch(to_fetch)

    def finish(self, metas: list[core.FileMeta]) -> dict[str, Any]:
        """Every file verified: write the manifest, drop the journal and partials, write the record and the
        stamp (last: the record and the manifest are in what it covers); the result fields."""
        spec = self.spec
        files = [self.verified[m.path] for m in metas]
        new = core.Manifest(
            repo_id=spec.repo_id,
            revision=spec.revision,
            commit=self.commit,
            allow_patterns=list(spec.allow_patterns),
            source=f"{spec.source}:{spec.peer_name}" if spec.from_parent else spec.source.replace("fleet", "hub"),
            endpoint="" if spec.source == "peer" else spec.where,
            files=files,
            verified_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        )
        core.write_under(spec.local_dir, core.MANIFEST_NAME, new.to_json())
        self.manifest = new
        core.remove_under(spec.local_dir, core.JOURNAL_PATH)
        core.remove_under(spec.local_dir, core.PARTIAL_DIR)
        core.remove_under(spec.local_dir, core.STAGE_DIR)
        self.write_record(new)
        core.write_stamp(spec, new)
        return {
            "commit": self.commit,
            "fetched": sorted(self.fetched),
            "rehashed": sorted(self.rehashed),
            "refetched_corrupt": sorted(self.refetched_corrupt),
            "resumed": sorted(self.resumed),
            "bytes": new.total_bytes,
            "seconds": round(time.time() - self.started, 3),
            "already": False,
        }

    def write_record(self, manifest: core.Manifest) -> None:
        """`<state_dir>/<name>.json`: what the verify role reads (which commit is on this host, from where)."""
        text = manifest.to_json()  # the text written to local_dir (never read back through what may be a link)
        record = {
            "name": self.spec.name,
            "repo_id": manifest.repo_id,
            "revision": manifest.revision,
            "commit": manifest.commit,
            "local_dir": self.spec.local_dir,
            "source": manifest.source,
            "endpoint": manifest.endpoint,
            "files": len(manifest.files),
            "total_bytes": manifest.total_bytes,
            "verified_at": manifest.verified_at,
            "manifest_sha256": hashlib.sha256(text.encode()).hexdigest(),
        }
        os.makedirs(self.spec.state_dir, exist_ok=True)
        core.atomic_write(self.spec.state_file(".json"), json.dumps(record, indent=1, sort_keys=True) + "\n")
