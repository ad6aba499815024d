"""Where a recipe may put its model on a node: inside `models_dir` (or a directory the inventory allows), as
written and after the node resolves its symlinks — the downloader writes there as root, so a recipe that
names `/etc`, `/root/.ssh` or a symlink out of the models disk is refused before anything is written.

Example:
    >>> [p.code for p in model_dir_problems("/etc/cron.d", ["/data/models"], "/etc/cron.d", ["/data/models"])]
    ['model-dir']
    >>> model_dir_problems("/data/models/x", ["/data/models"], "/data/models/x", ["/data/models"])
    []
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence

from hgxkit.problems import Problem


def _inside(path: str, root: str) -> bool:
    """True when `path` is a directory strictly below `root` (both normalised, absolute)."""
    root = root.rstrip("/") or "/"
    return path != root and path.startswith(root + "/" if root != "/" else "/")


def model_dir_problems(
    local_dir: str, roots: Sequence[str], resolved: str | None, resolved_roots: Sequence[str | None]
) -> list[Problem]:
    """Why `local_dir` may not hold a model (empty when it may). `resolved`/`resolved_roots` are the same paths
    with the node's symlinks resolved (None where the node could not say)."""
    allowed = ", ".join(roots)
    remedy = f"put model.local_dir under {allowed}, or add its parent to model_dirs_allowed in the inventory"
    normal = posixpath.normpath(local_dir)
    if not local_dir.startswith("/") or normal != local_dir.rstrip("/") or "/../" in f"{local_dir}/":
        return [Problem("model-dir", f"model.local_dir {local_dir!r} is not an absolute, normalised path", remedy)]
    if not any(_inside(normal, posixpath.normpath(root)) for root in roots):
        return [Problem("model-dir", f"model.local_dir {local_dir} is not inside {allowed}", remedy)]
    real_roots = [r for r in resolved_roots if r]
    if resolved and real_roots and not any(_inside(resolved, root) for root in real_roots):
        return [
            Problem(
                "model-dir",
                f"model.local_dir {local_dir} resolves to {resolved} on the node (a symlink leaves {allowed})",
                "remove the symlink, or point model.local_dir at the real directory",
            )
        ]
    return []
