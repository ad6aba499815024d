"""Image references taken apart (the grammar itself is `schema.IMAGE_REFERENCE`).

Example:
    >>> repository("lmsysorg/sglang:dev-dspark"), repository("localhost:5000/x/y:1"), repository("a/b@sha256:00")
    ('lmsysorg/sglang', 'localhost:5000/x/y', 'a/b')
"""

from __future__ import annotations


def repository(reference: str) -> str:
    """The reference without tag or digest (a registry port, `host:5000/x`, is kept)."""
    repo = reference.split("@", 1)[0]
    last = repo.rsplit("/", 1)[-1]
    return repo[: len(repo) - len(last)] + last.split(":", 1)[0]
