"""The serving image by content: pull the recipe's tag once, read its repository digest, record it on the
node, and run containers as `repo@sha256:…` so a moved tag never changes a running deployment.

Example:
    >>> inspected = '{"repo": ["lmsysorg/sglang@sha256:' + "ab" * 32 + '"], "id": null}'
    >>> digest_from_inspect([inspected], "lmsysorg/sglang:x")[:13]
    'sha256:ababab'
    >>> digest_from_inspect(['{"repo": [], "id": "sha256:' + "cd" * 32 + '"}'], "my-build:1")[:19]
    'local:sha256:cdcdcd'
"""

from __future__ import annotations

import json
import re

from pyinfra.api import StringCommand

from hgxkit.hostcmd import argv, script
from hgxkit.recipe.spec import ImageRef

_DIGEST = re.compile(r"@(sha256:[0-9a-f]{64})$")
_ID = re.compile(r"sha256:[0-9a-f]{64}")
INSPECT_FORMAT = '{"repo": {{json .RepoDigests}}, "id": {{json .Id}}}'
LOCAL_PREFIX = "local:"  # a recorded "digest" that is the ID of an image built on the node
RECORD_NAME = "image.json"


def pull_and_inspect(reference: str) -> StringCommand:
    """Pull `reference` (quietly; a locally built image needs no registry) and print its repository digests
    and its image ID as JSON."""
    return script(
        "{pull} >/dev/null 2>&1; {inspect} 2>/dev/null || true",
        pull=argv("docker", "pull", "-q", reference),
        inspect=argv("docker", "image", "inspect", "--format", INSPECT_FORMAT, reference),
    )


def digest_from_inspect(lines: list[str], reference: str) -> str | None:
    """The `sha256:…` digest of `reference`'s repository in `docker image inspect`'s output; for an image
    built on the node (no registry, no repository digest) its image ID, `local:sha256:…`."""
    try:
        found = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {}
    except json.JSONDecodeError:
        return None
    repository = ImageRef(reference).repository
    for repo_digest in found.get("repo") or []:
        match = _DIGEST.search(str(repo_digest))
        if match and str(repo_digest).startswith(repository + "@"):
            return match.group(1)
    image_id = found.get("id")
    return f"{LOCAL_PREFIX}{image_id}" if isinstance(image_id, str) and _ID.fullmatch(image_id) else None


def image_to_run(reference: str, digest: str) -> str:
    """What `docker run` gets: `repo@sha256:…`, or the image ID of a locally built image."""
    if digest.startswith(LOCAL_PREFIX):
        return digest.removeprefix(LOCAL_PREFIX)
    return ImageRef(reference).at_digest(digest)


def image_record(reference: str, digest: str) -> str:
    """The node's record of the digest it runs for `reference` (`<serve_state_dir>/image.json`)."""
    return json.dumps({"reference": reference, "digest": digest}) + "\n"


def recorded_digest(record: dict | None, reference: str) -> str | None:
    """The digest the node already runs for `reference`, from its record (None when it runs another image)."""
    if not record or record.get("reference") != reference:
        return None
    digest = record.get("digest")
    return digest if isinstance(digest, str) and re.fullmatch(r"(local:)?sha256:[0-9a-f]{64}", digest) else None
