"""Which files may be fetched now: all from the Hub, or each as soon as the parent has verified it."""

from __future__ import annotations

import time
from collections.abc import Callable

from hgxkit.model import core

from .errors import FetchError
from .localdir import _ids
from .parent import ParentLink
from .retry import with_retries


class Feed:
    """Which files may be fetched now: all at once from the Hub; from a parent, each as soon as the parent has
    verified it (the same ids as this host's list), so a fleet streams down the tree file by file. `commit` is
    this host's, `started` when its sync began (a parent's failure before that is an older run's)."""

    def __init__(
        self,
        spec: core.Spec,
        metas: list[core.FileMeta],
        link: ParentLink,
        log: Callable[[str], None],
        commit: str,
        started: float,
    ) -> None:
        self.spec, self.link, self.log, self.commit, self.started = spec, link, log, commit, started
        self.waiting = {m.path: m for m in metas}
        self.parent = spec.from_parent
        self._next_poll = 0.0
        self._seen = -1
        self._deadline = time.time() + spec.peer_wait_s
        self._last_note = 0.0

    def ready(self) -> list[core.FileMeta]:
        if not self.waiting:
            return []
        if not self.parent:
            out = sorted(self.waiting.values(), key=lambda m: (-m.size, m.path))  # largest first: short tail
            self.waiting.clear()
            return out
        now = time.time()
        if now < self._next_poll:
            return []
        self._next_poll = now + 0.5
        spec = self.spec
        state = with_retries(spec, f"reading {spec.peer_name}'s progress", self.link.state, self.log)
        if state is not None and state.error and state.error_at >= self.started:
            raise FetchError(f"{spec.peer_name}, which this host copies from, failed: {state.error}")
        out = []
        if state is not None and state.commit == self.commit:
            out = [m for m in self.waiting.values() if state.verified.get(m.path) == _ids(m)]
            for m in out:
                del self.waiting[m.path]
        have = len(state.verified) if state is not None else 0
        if have != self._seen:
            self._seen, self._deadline = have, now + spec.peer_wait_s
        elif now > self._deadline:
            held = f"holds commit {state.commit[:12]}" if state and state.commit else "has not started its sync"
            raise FetchError(
                f"{spec.peer_name} {held}; waited {spec.peer_wait_s:.0f}s for {len(self.waiting)} files of "
                f"{self.commit[:12]}: deploy the model to {spec.peer_name} too (same recipe), then re-run"
            )
        if self.waiting and not out and now - self._last_note >= 10:
            self._last_note = now
            self.log(f"waiting for {spec.peer_name}: {len(self.waiting)} files not there yet")
        return sorted(out, key=lambda m: (-m.size, m.path))
