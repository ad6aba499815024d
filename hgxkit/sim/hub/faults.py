"""Fault switches of the simulated Hub: drop a download mid-way, corrupt a byte, limit the rate, hide repos.

Set at start from environment variables, and at run time with ``POST /_hubsim/faults`` (a JSON object
with the same field names; ``GET`` shows the current state). They apply to file bodies (``/resolve`` and
the LFS redirect target) whose repo path matches `paths` (an fnmatch pattern).

| Variable | Field | Meaning |
|---|---|---|
| ``HGXKIT_HUB_FAULT_DROP_AFTER_BYTES`` | ``drop_after_bytes`` | cut the connection at file offset N |
| ``HGXKIT_HUB_FAULT_DROP_COUNT`` | ``drop_count`` | how many responses to drop (default 1; -1 = all) |
| ``HGXKIT_HUB_FAULT_CORRUPT_OFFSET`` | ``corrupt_offset`` | flip every bit of the byte at this file offset |
| ``HGXKIT_HUB_FAULT_RATE_BPS`` | ``rate_bps`` | send at most N bytes per second per response |
| ``HGXKIT_HUB_FAULT_PATHS`` | ``paths`` | fnmatch pattern of repo paths affected (default ``*``) |
| ``HGXKIT_HUB_FAULT_MISSING_REPOS`` | ``missing_repos`` | fnmatch pattern of repo ids answered ``RepoNotFound`` |

``missing_repos`` is how a test gets "no such model": the stand-in generates a repository for any id it is
asked for (`store.RepoStore`). It applies to every endpoint of the matching repos.

Example:
    >>> f = FaultConfig.from_env({"HGXKIT_HUB_FAULT_DROP_AFTER_BYTES": "1000"})
    >>> f.drop_after_bytes, f.drop_count, f.paths
    (1000, 1, '*')
"""

from __future__ import annotations

import fnmatch
import threading
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any


@dataclass
class FaultConfig:
    """The fault switches; all off by default."""

    drop_after_bytes: int | None = None
    drop_count: int = 1
    corrupt_offset: int | None = None
    rate_bps: int | None = None
    paths: str = "*"
    missing_repos: str = ""

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> FaultConfig:
        def opt_int(name: str) -> int | None:
            value = env.get(name, "").strip()
            return int(value) if value else None

        count = opt_int("HGXKIT_HUB_FAULT_DROP_COUNT")
        return cls(
            drop_after_bytes=opt_int("HGXKIT_HUB_FAULT_DROP_AFTER_BYTES"),
            drop_count=1 if count is None else count,
            corrupt_offset=opt_int("HGXKIT_HUB_FAULT_CORRUPT_OFFSET"),
            rate_bps=opt_int("HGXKIT_HUB_FAULT_RATE_BPS"),
            paths=env.get("HGXKIT_HUB_FAULT_PATHS", "*") or "*",
            missing_repos=env.get("HGXKIT_HUB_FAULT_MISSING_REPOS", ""),
        )

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> FaultConfig:
        known = {f.name for f in fields(cls)}
        unknown = set(doc) - known
        if unknown:
            raise ValueError(f"unknown fault field(s): {sorted(unknown)}; known: {sorted(known)}")
        return cls(**dict(doc))

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class FaultState:
    """Thread-safe holder; `take_drop` consumes one of the `drop_count` drops."""

    def __init__(self, config: FaultConfig) -> None:
        self._lock = threading.Lock()
        self._config = config

    @property
    def config(self) -> FaultConfig:
        with self._lock:
            return FaultConfig(**asdict(self._config))

    def set(self, config: FaultConfig) -> None:
        with self._lock:
            self._config = config

    def hides(self, repo_id: str) -> bool:
        """True when `repo_id` must answer RepoNotFound (the ``missing_repos`` switch)."""
        pattern = self.config.missing_repos
        return bool(pattern) and fnmatch.fnmatch(repo_id, pattern)

    def applies(self, repo_path: str) -> bool:
        return fnmatch.fnmatch(repo_path, self.config.paths)

    def take_drop(self, repo_path: str, start: int = 0) -> int | None:
        """File offset at which to drop a response starting at `start`, or None; counts the drop as used."""
        with self._lock:
            cfg = self._config
            if cfg.drop_after_bytes is None or cfg.drop_count == 0 or start >= cfg.drop_after_bytes:
                return None
            if not fnmatch.fnmatch(repo_path, cfg.paths):
                return None
            if cfg.drop_count > 0:
                cfg.drop_count -= 1
            return cfg.drop_after_bytes
