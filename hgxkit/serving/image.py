"""The serving image by content: pull the recipe's tag once, read its repository digest, record it on the
node, and run containers as `repo@sha256:…` so a moved tag never changes a running deployment.

Example:
    >>> digest_from_inspect(['["lmsysorg/sglang@sha256:' + "ab" * 32 + '"]'], "lmsysorg/sglang:dev-dspark")[:13]
    'sha256:ababab'
"""

from __future__ import annotations

import json
import re

from pyinfra.api import StringCommand

from hgxkit.hostcmd import argv, script
from hgxkit.recipe.model import ImageRef

_DIGEST = re.compile(r"@(sha256:[0-9a-f]{64})$")
RECORD_NAME = "image.json"


def pull_and_inspect(reference: str) -> StringCommand:
    """Pull `reference` (quietly) and print its repository digests as JSON."""
    return script(
        "{pull} >/dev/null 2>&1; {inspect} 2>/dev/null || true",
        pull=argv("docker", "pull", "-q", reference),
        inspect=argv("docker", "image", "inspect", "--format", "{{json .RepoDigests}}", reference),
    )


def digest_from_inspect(lines: list[str], reference: str) -> str | None:
    """The `sha256:…` digest of `reference`'s repository in `docker image inspect`'s RepoDigests output."""
    try:
        digests = json.loads(lines[-1]) if lines and lines[-1].startswith("[") else []
    except json.JSONDecodeError:
        return None
    repository = ImageRef(reference).repository
    for repo_digest in digests if isinstance(digests, list) else []:
        match = _DIGEST.search(str(repo_digest))
        if match and str(repo_digest).startswith(repository + "@"):
            return match.group(1)
    return None


def image_record(reference: str, digest: str) -> str:
    """The node's record of the digest it runs for `reference` (`<serve_state_dir>/image.json`)."""
    return json.dumps({"reference": reference, "digest": digest}) + "\n"


def recorded_digest(record: dict | None, reference: str) -> str | None:
    """The digest the node already runs for `reference`, from its record (None when it runs another image)."""
    if not record or record.get("reference") != reference:
        return None
    digest = record.get("digest")
    return digest if isinstance(digest, str) and re.fullmatch(r"sha256:[0-9a-f]{64}", digest) else None
