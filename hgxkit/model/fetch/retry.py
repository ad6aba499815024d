"""Retrying transient failures: huggingface_hub's exceptions classified, exponential backoff, one clear error."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from hgxkit.model import core

from .errors import FetchError, XetFile

T = TypeVar("T")


def _hub_error(err: Exception, spec: core.Spec, what: str) -> FetchError:
    """Turn a huggingface_hub exception into a one-line FetchError (transient ones are retried)."""
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        RemoteEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    repo = spec.repo_id
    if isinstance(err, GatedRepoError):
        return FetchError(
            f"{repo} is gated and the token has no access (or none was given): accept its terms at "
            f"{spec.where}/{repo} and set HF_TOKEN on the controller (or hf_token_file in the inventory)"
        )
    if isinstance(err, RepositoryNotFoundError):
        return FetchError(
            f"repository {repo} not found at {spec.where} (or private and the token cannot read it): "
            "check model.repo_id in the recipe"
        )
    if isinstance(err, RevisionNotFoundError):
        return FetchError(
            f"revision {spec.revision!r} of {repo} not found at {spec.where}: check model.revision in the recipe"
        )
    if isinstance(err, RemoteEntryNotFoundError):
        return FetchError(f"{what}: not in {repo}@{spec.revision} at {spec.where}: the file list changed; re-run")
    status = getattr(getattr(err, "response", None), "status_code", None)
    if isinstance(err, HfHubHTTPError) and status in (401, 403):
        return FetchError(f"{spec.where} refused {what} (HTTP {status}): check HF_TOKEN's access to {repo}")
    short = str(err).strip().splitlines()[0][:160] if str(err).strip() else type(err).__name__
    return FetchError(f"network failure {what} from {spec.where}: {short}", transient=True)


def with_retries(spec: core.Spec, what: str, fn: Callable[[], T], log: Callable[[str], None] = print) -> T:
    """Call `fn`, retrying transient failures with exponential backoff; raise one clear FetchError at the end."""
    attempt = 0
    while True:
        try:
            return fn()
        except FetchError as err:
            failure = err
        except XetFile:
            raise
        except Exception as err:  # huggingface_hub/httpx raise many kinds; classify them
            failure = _hub_error(err, spec, what)
        if not failure.transient or attempt >= spec.retries:
            if failure.transient:
                raise FetchError(f"{failure} (gave up after {attempt + 1} attempts): check the network and re-run")
            raise failure
        delay = min(60.0, spec.backoff_s * 2**attempt) * (0.75 + random.random() / 2)
        log(f"retrying {what} in {delay:.1f}s ({attempt + 1}/{spec.retries}): {failure}")
        time.sleep(delay)
        attempt += 1
