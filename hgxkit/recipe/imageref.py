"""Image references taken apart (the grammar itself is `schema.IMAGE_REFERENCE`).

Example:
    >>> repository("lmsysorg/sglang:dev-dspark"), repository("localhost:5000/x/y:1"), repository("a/b@sha256:00")
    ('lmsysorg/sglang', 'localhost:5000/x/y', 'a/b')
    >>> normalized("vllm-custom") == normalized("docker.io/library/vllm-custom:latest")
    True
"""

from __future__ import annotations


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
