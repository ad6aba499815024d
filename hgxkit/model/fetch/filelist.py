"""The Hub's file list: the revision resolved to a commit and the files matching the allow patterns."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import asdict
from typing import Any
from urllib.parse import quote

from hgxkit.model import core

from .bundle import bundle_files
from .errors import FetchError
from .retry import with_retries


class HubAnswer(Exception):
    """An error answer of the Hub API, classified by its X-Error-Code header (as huggingface_hub does)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code = status, code


def _model_info(spec: core.Spec, token: str | None) -> dict[str, Any]:
    """`GET /api/models/{repo}/revision/{rev}?blobs=true` with the stdlib: the status check stays fast (no
    huggingface_hub import); downloads use huggingface_hub (and hf_xet)."""
    url = f"{spec.where.rstrip('/')}/api/models/{spec.repo_id}/revision/{quote(spec.revision, safe='')}?blobs=true"
    req = urllib.request.Request(url, headers={"User-Agent": "hgxkit-fetch/1"})
    if token:
        req.add_unredirected_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return dict(json.loads(resp.read()))
    except urllib.error.HTTPError as err:
        code = err.headers.get("X-Error-Code", "") if err.headers else ""
        raise HubAnswer(err.code, code, err.headers.get("X-Error-Message", "") if err.headers else "") from None


def _answer_error(err: HubAnswer, spec: core.Spec) -> FetchError:
    repo = spec.repo_id
    if err.code == "GatedRepo":
        return FetchError(
            f"{repo} is gated and the token has no access (or none was given): accept its terms at "
            f"{spec.where}/{repo} and set HF_TOKEN on the controller (or hf_token_file in the inventory)"
        )
    if err.code == "RepoNotFound" or (err.status in (401, 404) and not err.code):
        return FetchError(
            f"repository {repo} not found at {spec.where} (or private and the token cannot read it): "
            "check model.repo_id in the recipe"
        )
    if err.code == "RevisionNotFound":
        return FetchError(
            f"revision {spec.revision!r} of {repo} not found at {spec.where}: check model.revision in the recipe"
        )
    if err.status in (401, 403):
        return FetchError(f"{spec.where} refused the file list (HTTP {err.status}): check HF_TOKEN's access to {repo}")
    return FetchError(f"network failure reading the file list from {spec.where}: HTTP {err.status}", transient=True)


def hub_files(spec: core.Spec, token: str | None, retry: bool = True) -> tuple[str, list[core.FileMeta]]:
    """Resolve the revision to a commit and list the files matching the allow patterns, with their hashes."""
    if spec.source == "bundle":
        return bundle_files(spec)

    def ask() -> dict[str, Any]:
        try:
            return _model_info(spec, token)
        except HubAnswer as err:
            raise _answer_error(err, spec) from None
        except (OSError, ValueError) as err:
            reason = getattr(err, "reason", None) or err
            raise FetchError(
                f"network failure reading the file list from {spec.where}: {reason}", transient=True
            ) from None

    info = with_retries(spec if retry else core.Spec(**{**asdict(spec), "retries": 0}), "reading the file list", ask)
    files = []
    for s in info.get("siblings") or []:
        lfs = s.get("lfs") or None
        size = s.get("size", lfs.get("size") if lfs else 0)
        files.append(
            core.FileMeta(
                path=s["rfilename"],
                size=int(size or 0),
                sha256=lfs.get("sha256") if lfs else None,
                git_oid=None if lfs else s.get("blobId"),
            )
        )
    chosen = core.select_files(files, spec.allow_patterns)
    if not chosen:
        raise FetchError(
            f"no file of {spec.repo_id}@{spec.revision} matches allow_patterns {spec.allow_patterns}: "
            "check model.allow_patterns in the recipe"
        )
    return str(info["sha"]), chosen
