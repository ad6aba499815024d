"""An image by digest as an OCI image layout, read from a registry's HTTP API, that `docker load` also reads.

The layout holds the registry's own bytes: `blobs/sha256/<hex>` for the manifest (its digest is the
repository digest a pull reports), the config and every layer, each checked against its digest as it
arrives; `index.json` names the manifest with `org.opencontainers.image.ref.name`. Docker before 25 loads only
its own save format, so the layout also carries `manifest.json` (Config and Layers pointing into blobs/),
as Docker 25's own `docker save` does. The loaded image's ID is the config's digest: what serving runs on a
node fed from a bundle (`local:sha256:…`, hgxkit.serving.image).

Example:
    >>> ref_parts("lmsysorg/sglang:dev-dspark")
    ('registry-1.docker.io', 'lmsysorg/sglang', 'dev-dspark')
    >>> ref_parts("nvcr.io/nvidia/k8s/dcgm-exporter@sha256:" + "a" * 64)[:2]
    ('nvcr.io', 'nvidia/k8s/dcgm-exporter')
"""

from __future__ import annotations

import hashlib
import json
import re
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from hgxkit.errors import HgxkitError

MANIFEST_TYPES = ", ".join(
    [
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    ]
)
_INDEXES = ("application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.list.v2+json")


@dataclass(frozen=True)
class SavedImage:
    """What a layout holds: the reference, the manifest's digest (the repository digest), the config's (image ID)."""

    reference: str
    digest: str
    config: str
    size: int


def ref_parts(reference: str) -> tuple[str, str, str]:
    """(registry host, repository, tag or digest) of an image reference, with Docker Hub's defaults."""
    name, at, digest = reference.partition("@")
    first, slash, rest = name.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        host, path = first, rest
    else:
        host, path = "registry-1.docker.io", name
        if "/" not in path:
            path = f"library/{path}"
    tag = "latest"
    if ":" in path.rsplit("/", 1)[-1]:
        path, tag = path.rsplit(":", 1)
    return host, path, digest if at else tag


class _Registry:
    def __init__(self, base: str, repo: str) -> None:
        self.base, self.repo, self.token = base.rstrip("/"), repo, ""

    def get(self, path: str, accept: str = "") -> tuple[bytes, str]:
        url = f"{self.base}/v2/{self.repo}/{path}"
        for _ in range(2):
            req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
            if self.token:
                req.add_header("Authorization", f"Bearer {self.token}")
            try:
                with urllib.request.urlopen(req, timeout=60) as resp:
                    return resp.read(), resp.headers.get("Content-Type", "")
            except urllib.error.HTTPError as err:
                if err.code == 401 and not self.token:
                    self.token = _token(err.headers.get("WWW-Authenticate", ""), self.repo)
                    continue
                raise HgxkitError(f"{url}: HTTP {err.code}; check the image reference and the registry") from None
            except OSError as err:
                raise HgxkitError(f"{url}: {err}; is the registry reachable from this machine?") from None
        raise HgxkitError(f"{url}: the registry refused the token it issued")


def _token(challenge: str, repo: str) -> str:
    fields = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
    if "realm" not in fields:
        raise HgxkitError(f"the registry asks for credentials ({challenge or 'no challenge'}); a public image only")
    query = f"?service={fields.get('service', '')}&scope=repository:{repo}:pull"
    with urllib.request.urlopen(fields["realm"] + query, timeout=60) as resp:
        doc = json.loads(resp.read())
    return str(doc.get("token") or doc.get("access_token") or "")


def _put_blob(out: Path, data: bytes, digest: str) -> None:
    actual = "sha256:" + hashlib.sha256(data).hexdigest()
    if actual != digest:
        raise HgxkitError(f"blob {digest[:19]}… arrived as {actual[:19]}…: the registry sent other bytes; refused")
    path = out / "blobs" / "sha256" / digest.removeprefix("sha256:")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def save_layout(
    reference: str, out: Path, registry_url: str | None = None, platform: str = "linux/amd64"
) -> SavedImage:
    """Write `reference` (tag or digest) as an OCI layout in `out`, from `registry_url` (default: its registry)."""
    host, repo, ref = ref_parts(reference)
    reg = _Registry(registry_url or f"https://{host}", repo)
    body, kind = reg.get(f"manifests/{ref}", MANIFEST_TYPES)
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    if ref.startswith("sha256:") and digest != ref:
        raise HgxkitError(f"{reference}: the registry's manifest is {digest[:19]}…; refused")
    doc = json.loads(body)
    if (doc.get("mediaType") or kind) in _INDEXES:
        os_, arch = platform.split("/")
        pick = [
            m
            for m in doc.get("manifests", [])
            if m.get("platform", {}).get("os") == os_ and m.get("platform", {}).get("architecture") == arch
        ]
        if not pick:
            raise HgxkitError(f"{reference}: no {platform} image in its index")
        digest = pick[0]["digest"]
        body, kind = reg.get(f"manifests/{digest}", MANIFEST_TYPES)
        doc = json.loads(body)
    _put_blob(out, body, digest)
    config = doc["config"]["digest"]
    _put_blob(out, reg.get(f"blobs/{config}")[0], config)
    for layer in doc["layers"]:
        _put_blob(out, reg.get(f"blobs/{layer['digest']}")[0], layer["digest"])
    media = doc.get("mediaType") or kind.split(";")[0]
    (out / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}\n')
    index = {
        "schemaVersion": 2,
        "manifests": [
            {
                "mediaType": media,
                "digest": digest,
                "size": len(body),
                "annotations": {"org.opencontainers.image.ref.name": reference, "io.containerd.image.name": reference},
            }
        ],
    }
    (out / "index.json").write_text(json.dumps(index, indent=1) + "\n")
    blob = "blobs/sha256/"
    legacy = [
        {
            "Config": blob + config.removeprefix("sha256:"),
            "RepoTags": [reference] if "@" not in reference else [],
            "Layers": [blob + layer["digest"].removeprefix("sha256:") for layer in doc["layers"]],
        }
    ]
    (out / "manifest.json").write_text(json.dumps(legacy) + "\n")
    size = len(body) + int(doc["config"].get("size", 0)) + sum(int(x.get("size", 0)) for x in doc["layers"])
    return SavedImage(reference=reference, digest=digest, config=config, size=size)
