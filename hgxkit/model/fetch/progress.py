"""Progress and results: `<name>.progress.json` every second while a sync runs, `<name>.result.json` at the end."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from hgxkit.model import core


class Reporter:
    """Writes `<name>.progress.json` every second while a sync runs, and `<name>.result.json` at the end."""

    def __init__(self, spec: core.Spec, run_id: str) -> None:
        self.spec, self.run_id = spec, run_id
        self.progress = core.Progress("starting", run_id=run_id)
        self._samples: deque[tuple[float, int]] = deque(maxlen=10)
        self._inflight: Callable[[], int] = lambda: 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._last_log = 0.0
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> Reporter:
        self.write()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def phase(self, phase: str, total: int = 0, files_total: int = 0, detail: str = "") -> None:
        with self._lock:
            self.progress = core.Progress(
                phase, total_bytes=total, files_total=files_total, run_id=self.run_id, detail=detail
            )
            self._samples.clear()
            self._inflight = lambda: 0
        self.log(f"{phase} {detail}".strip())
        self.write()

    def track(self, inflight: Callable[[], int]) -> None:
        self._inflight = inflight

    def file_done(self, size: int) -> None:
        with self._lock:
            self.progress.done_bytes += size
            self.progress.files_done += 1

    def log(self, msg: str) -> None:
        print(f"hgxkit-fetch: {msg}", flush=True)

    def write(self) -> None:
        with self._lock:
            p = self.progress
            now = time.time()
            done = min(p.total_bytes or sys.maxsize, p.done_bytes + self._inflight())
            self._samples.append((now, done))
            t0, d0 = self._samples[0]
            rate = (done - d0) / (now - t0) if now - t0 > 0.5 else p.rate_bps
            snap = core.Progress(**{**asdict(p), "done_bytes": done, "rate_bps": max(rate, 0.0), "updated_at": now})
        core.atomic_write(self.spec.state_file(".progress.json"), json.dumps(asdict(snap)))
        if snap.total_bytes and now - self._last_log >= 10:
            self._last_log = now
            self.log(core.format_progress(snap))

    def _loop(self) -> None:
        while not self._stop.wait(1.0):
            try:
                self.write()
            except Exception as err:  # progress must never kill the sync
                print(f"hgxkit-fetch: progress: {err}", file=sys.stderr)

    def result(self, ok: bool, **fields: Any) -> None:
        doc = {"ok": ok, "run_id": self.run_id, "finished_at": time.time(), **fields}
        core.atomic_write(self.spec.state_file(".result.json"), json.dumps(doc, sort_keys=True))
