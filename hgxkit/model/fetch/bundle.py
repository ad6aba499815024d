"""Source bundle: the model a bundle carries, listed from its manifest and copied into local_dir."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from hgxkit.model import core

from .errors import FetchError
from .localdir import _check_name


def bundle_files(spec: core.Spec) -> tuple[str, list[core.FileMeta]]:
    """Source bundle: the commit and files of the model a bundle carries, from the downloader's own manifest in
    it (whose bytes the bundle's verified bundle.json vouches for); no network at all."""
    try:
        made = core.Manifest.from_json(Path(spec.bundle_dir, core.MANIFEST_NAME).read_text())
    except OSError as err:  # not copied yet (a plan-time status check before the run delivers it): not final
        raise FetchError(f"no bundle model manifest in {spec.bundle_dir} ({err.strerror})", transient=True) from None
    except (ValueError, TypeError, KeyError) as err:
        raise FetchError(
            f"the bundle's model manifest in {spec.bundle_dir} is unreadable ({err}): re-copy the bundle"
        ) from None
    if made.repo_id != spec.repo_id or (core.is_commit(spec.revision) and made.commit != spec.revision):
        raise FetchError(
            f"the bundle holds {made.repo_id}@{made.commit[:12]}, the recipe wants "
            f"{spec.repo_id}@{spec.revision}: make a bundle for this recipe"
        )
    files = [core.FileMeta(f.path, f.size, f.sha256, f.git_oid) for f in made.files]
    return made.commit, core.select_files(files, spec.allow_patterns)


def copy_from_bundle(spec: core.Spec, metas: list[core.FileMeta]) -> None:
    """Copy `metas` from the bundle into local_dir: each to a new file beside its place, then renamed over it
    (no link in local_dir followed); the caller hashes them against the manifest afterwards."""
    for m in metas:
        _check_name(m.path)
        tmp = f"{m.path}.hgxkit-bundle-copy"
        with (
            open(os.path.join(spec.bundle_dir, m.path), "rb") as src,
            core.parent_of(spec.local_dir, tmp, create=True) as (dfd, name),
        ):
            fd = core.create_new(dfd, name)
            with os.fdopen(fd, "wb") as dst:
                shutil.copyfileobj(src, dst, core.BUFFER)
        core.move_under(spec.local_dir, tmp, m.path)
