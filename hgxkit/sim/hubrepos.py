"""The synthetic model repositories every simulated node's Hub stand-in serves (simulated: no real weights).

Built once on the machine running `hgxkit sim up` (under `state_dir()/hub/<digest>`, keyed by the list below
and the generator's code), bind-mounted read-only into each node at /srv/hgxkit-sim-hub, and served there by
`hgxkit-sim-hub.service` on http://127.0.0.1:8088 (`python3 -m hgxkit.sim.hub serve`).

| repo | shape | for |
|---|---|---|
| deepseek-ai/DeepSeek-V4-Flash-DSpark | 64 MB in 4 shards, branches main and dev | the shipped recipes |
| hgxkit-sim/tiny | 24 MB in 6 shards | fast end-to-end tests |
| hgxkit-sim/gated | 1 MB, gated; token `GATED_TOKEN` may read it | credential handling |
| any other `org/name` | 3 MB in 3 shards, Llama-shaped, generated on first use | imported posts naming any model |

The last row is the Hub stand-in's auto repos (`hgxkit.sim.hub.store.RepoStore`): the service generates them
under /tmp on the node (the mount is read-only), deterministically per repo id. ``HGXKIT_HUB_FAULT_MISSING_REPOS``
(an fnmatch pattern) makes matching ids answer RepoNotFound again.

Example:
    >>> [r.repo_id for r in SIM_HUB_REPOS][:2]
    ['deepseek-ai/DeepSeek-V4-Flash-DSpark', 'hgxkit-sim/tiny']
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from hgxkit.sim.hub.makerepo import RepoSpec, make_repo

NODE_DIR = "/srv/hgxkit-sim-hub"
NODE_PY_DIR = "/usr/lib/hgxkit-sim-py"  # the hgxkit package is mounted here as `hgxkit/` (the hub is stdlib-only)
HUB_URL = "http://127.0.0.1:8088"
GATED_TOKEN = "hf_simGatedAccess0123456789abcdef"  # a throwaway token of the simulated gated repo
SIM_HUB_REPOS = (
    RepoSpec(repo_id="deepseek-ai/DeepSeek-V4-Flash-DSpark", total_bytes=64 << 20, shards=4, extra_branches=("dev",)),
    RepoSpec(repo_id="hgxkit-sim/tiny", total_bytes=24 << 20, shards=6, vocab_size=4096),
    RepoSpec(
        repo_id="hgxkit-sim/gated", total_bytes=1 << 20, shards=1, vocab_size=4096, gated=True, tokens=(GATED_TOKEN,)
    ),
)
_HUB_CODE = Path(__file__).parent / "hub"


def _digest() -> str:
    h = hashlib.sha256(repr(SIM_HUB_REPOS).encode())
    for f in sorted(_HUB_CODE.glob("*.py")):
        if f.name in ("makerepo.py", "tokenizer_gen.py", "store.py"):
            h.update(f.read_bytes())
    return h.hexdigest()[:16]


def build_hub_store(base: Path) -> Path:
    """The repo store for the nodes' Hub stand-in, built under `base` when missing (safe to race)."""
    root = base / _digest()
    if (root / ".complete").is_file():
        return root
    tmp = base / f".build-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    for spec in SIM_HUB_REPOS:
        make_repo(tmp, spec)
    (tmp / ".complete").write_text("ok\n")
    try:
        tmp.rename(root)
    except OSError:  # another `sim up` finished first
        shutil.rmtree(tmp, ignore_errors=True)
    return root
