"""Image references taken apart (the grammar itself is `schema.IMAGE_REFERENCE`).

Example:
    >>> repository("lmsysorg/sglang:dev-dspark"), repository("localhost:5000/x/y:1"), repository("a/b@sha256:00")
    ('lmsysorg/sglang', 'localhost:5000/x/y', 'a/b')
    >>> normalized("vllm-custom") == normalized("docker.io/library/vllm-custom:latest")
    True
"""

from __future__ import annotations

import re

_VERSION = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?")


def repository(reference: str) -> str:
    """The reference without tag or digest (a registry port, `host:5000/x`, is kept)."""
    repo = reference.split("@", 1)[0]
    last = repo.rsplit("/", 1)[-1]
    return repo[: len(repo) - len(last)] + last.split(":", 1)[0]


def normalized(reference: str) -> str:
    """The reference as Docker resolves it, for comparing two spellings: `X` = `X:latest` =
    `docker.io/library/X:latest`, `docker.io/org/x` = `org/x` (`index.docker.io` too); a digest is kept."""
    repo, at, digest = reference.partition("@")
    name = repository(repo)
    tag = repo[len(name) + 1 :] or ("" if at else "latest")
    for hub in ("docker.io/", "index.docker.io/", "registry-1.docker.io/"):
        if name.startswith(hub):
            name = name[len(hub) :]
            break
    if name.startswith("library/") and name.count("/") == 1:
        name = name[len("library/") :]
    return name + (f":{tag}" if tag else "") + (f"@{digest}" if at else "")


def image_version(reference: str) -> tuple[int, ...] | None:
    """The engine version an image tag names (`v0.5.23-cu129` -> (0, 5, 23)); None for `latest`, no tag or a
    tag without a version (`dev`, `nightly`): today's engine."""
    tag = reference.split("@", 1)[0][len(repository(reference)) + 1 :]
    match = _VERSION.match(tag)
    return tuple(int(part) for part in match.groups() if part is not None) if match else None


def at_least(reference: str, version: tuple[int, ...]) -> bool:
    """True when the image runs `version` or later (an image without a version is today's engine)."""
    found = image_version(reference)
    return found is None or found >= version
