"""Fill the image cache's storage with one image, each blob read from its source once (stdlib only; runs on the
cache host as `python3 - SOURCE REPO REF STORAGE TIMEOUT_S REGISTRY`, sent by roles/docker).

The cache (hgxkit/node/imagecache.py) is Distribution in proxy mode, and Distribution 2.8's proxy reads a blob it
lacks from the upstream twice: one copy streamed to the client, one stored by a goroutine of its own
(registry/proxy/proxyblobstore.go ServeBlob), and once more for every client that asks while it is in flight. So the
fill does not go through the proxy: it starts a second Distribution on the same storage directory, not a proxy,
listening on loopback only for as long as the fill runs, and pushes into it what the nodes will ask for -- this
host's platform manifest (byte for byte: its digest is kept) and its config and layers, each streamed from SOURCE
once and stored by Distribution, which checks every blob against its digest before it links it (so does this
program, to name the blob that differs). SOURCE is the upstream registry (`http(s)://host[:port]`, a token asked
for as Docker does for a public image) or an OCI image layout (`oci:DIR`, the air-gapped bundle's image/). A
tag is pushed too when it names that manifest, so the cache can answer it when the upstream is out of reach.
The proxy then serves every blob from its storage (serveLocal: the blob is linked in the repository) and reads
nothing more from the upstream than the small manifests it revalidates. A blob already stored (under any
repository) is linked from the storage's own copy, not read again; with every blob and the manifest in place
nothing is started.

Example:
    >>> blob_path("/srv/c", "sha256:" + "ab" * 32).replace("ab" * 32, "<hex>")
    '/srv/c/docker/registry/v2/blobs/sha256/ab/<hex>/data'
    >>> platform_of("x86_64"), platform_of("aarch64")
    ('amd64', 'arm64')
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

ACCEPT = ", ".join(
    [
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    ]
)
INDEXES = ("application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.list.v2+json")
PIECE = 1 << 20
FILL_CONFIG = """version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: {storage}
http:
  addr: 127.0.0.1:{port}
"""


class FillError(Exception):
    """A fill that cannot go on: one line saying what and where."""


# A digest names a path under the cache's storage and the bundle's layout, and it comes from a manifest the
# upstream (or a mirror) wrote: only this shape becomes a path, so `sha256:../..` never leads root elsewhere.
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def checked(digest: object) -> str:
    """`digest` if it is a sha256 digest, else a FillError naming it."""
    if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
        raise FillError(f"a manifest names the digest {str(digest)[:80]!r}, not sha256:<64 hex>; refused")
    return digest


def blob_path(storage: str, digest: str) -> str:
    """Where Distribution's filesystem storage keeps a blob's bytes (registry/storage/paths.go)."""
    algo, hexdigest = checked(digest).split(":", 1)
    return f"{storage}/docker/registry/v2/blobs/{algo}/{hexdigest[:2]}/{hexdigest}/data"


def linked(storage: str, repo: str, kind: str, digest: str) -> bool:
    """Whether `repo` links `digest` as a layer (`_layers`) or a manifest revision (`_manifests/revisions`)."""
    algo, hexdigest = checked(digest).split(":", 1)
    return os.path.exists(f"{storage}/docker/registry/v2/repositories/{repo}/{kind}/{algo}/{hexdigest}/link")


def platform_of(machine: str) -> str:
    """Docker's architecture name for `uname -m`."""
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)


class _NoAuthOnRedirect(urllib.request.HTTPRedirectHandler):
    pass  # the token goes as an unredirected header: a registry's redirect to its CDN gets none


class Upstream:
    """A registry's pull API for one repository, with the anonymous token dance Docker does for a public image."""

    def __init__(self, base: str, repo: str, timeout: float) -> None:
        self.base, self.repo, self.timeout, self.token = base.rstrip("/"), repo, timeout, ""
        self.opener = urllib.request.build_opener(_NoAuthOnRedirect)

    def open(self, path: str, accept: str = ""):
        url = f"{self.base}/v2/{self.repo}/{path}"
        for attempt in range(2):
            req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
            if self.token:
                req.add_unredirected_header("Authorization", f"Bearer {self.token}")
            try:
                return self.opener.open(req, timeout=self.timeout)
            except urllib.error.HTTPError as err:
                if err.code == 401 and attempt == 0:  # no token yet, or it expired (Docker Hub's last 5 min)
                    self.token = self._token(err.headers.get("WWW-Authenticate", ""))
                    continue
                raise FillError(f"{url}: HTTP {err.code} from the upstream registry") from None
            except OSError as err:
                raise FillError(f"{url}: {err}; is the upstream registry reachable from the cache host?") from None
        raise FillError(f"{url}: the upstream registry refused the token it issued")

    def _token(self, challenge: str) -> str:
        fields = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
        if "realm" not in fields:
            raise FillError(f"{self.base}: the upstream asks for credentials ({challenge or 'no challenge'})")
        query = urllib.parse.urlencode({"service": fields.get("service", ""), "scope": f"repository:{self.repo}:pull"})
        with urllib.request.urlopen(f"{fields['realm']}?{query}", timeout=self.timeout) as resp:
            doc = json.loads(resp.read())
        return str(doc.get("token") or doc.get("access_token") or "")

    def manifest(self, ref: str) -> tuple[bytes, str]:
        with self.open(f"manifests/{ref}", ACCEPT) as resp:
            return resp.read(), resp.headers.get("Content-Type", "").split(";")[0]

    def blob(self, digest: str):
        return self.open(f"blobs/{digest}")


class Layout:
    """An OCI image layout (the bundle's image/): index.json names the manifest, blobs/ holds every blob."""

    def __init__(self, path: str) -> None:
        self.path = path

    def manifest(self, ref: str) -> tuple[bytes, str]:
        if ref.startswith("sha256:"):
            digest = ref
        else:
            with open(f"{self.path}/index.json", "rb") as f:
                entries = json.load(f).get("manifests", [])
            if not entries:
                raise FillError(f"{self.path}/index.json names no image")
            digest = entries[0]["digest"]
        with open(self.blob_file(digest), "rb") as f:
            body = f.read()
        return body, str(json.loads(body).get("mediaType", ""))

    def blob_file(self, digest: str) -> str:
        return f"{self.path}/blobs/{checked(digest).replace(':', '/', 1)}"

    def blob(self, digest: str):
        try:
            return open(self.blob_file(digest), "rb")
        except OSError as err:
            raise FillError(f"{self.path}: blob {digest} missing ({err.strerror})") from None


class Hashing:
    """A reader that hashes what passes through it (the caller compares the digest with the descriptor's)."""

    def __init__(self, raw, deadline: float) -> None:
        self.raw, self.deadline, self.sha, self.count = raw, deadline, hashlib.sha256(), 0

    def read(self, size: int = PIECE) -> bytes:
        """Up to 1 MiB whatever `size` asks (http.client asks 8 KiB at a time; it sends what it gets)."""
        if time.monotonic() > self.deadline:
            raise FillError("the fill ran past its time limit (image_cache_fill_s)")
        data = self.raw.read(PIECE)
        self.sha.update(data)
        self.count += len(data)
        return data


def resolve(source, ref: str, arch: str) -> tuple[bytes, str, str, bool]:
    """(manifest bytes, media type, digest, whether `ref` named an index) of `ref`'s image for linux/`arch`, each
    manifest checked against its digest."""
    body, kind = source.manifest(ref)
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    if ref.startswith("sha256:") and digest != ref:
        raise FillError(f"manifest {ref} arrived as {digest}: other bytes; refused")
    doc = json.loads(body)
    kind = doc.get("mediaType") or kind
    index = kind in INDEXES or "manifests" in doc
    if index:
        mine = [
            m
            for m in doc.get("manifests", [])
            if m.get("platform", {}).get("architecture") == arch and m.get("platform", {}).get("os", "linux") == "linux"
        ]
        if not mine:
            raise FillError(f"{ref}: its index has no linux/{arch} image")
        digest = mine[0]["digest"]
        body, kind = source.manifest(digest)
        if "sha256:" + hashlib.sha256(body).hexdigest() != digest:
            raise FillError(f"manifest {digest} arrived as other bytes; refused")
        kind = json.loads(body).get("mediaType") or kind
    return body, kind or "application/vnd.oci.image.manifest.v1+json", digest, index


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Pusher:
    """A Distribution (not a proxy) on the cache's storage, on loopback, for as long as the fill runs."""

    def __init__(self, registry: str, storage: str, repo: str, timeout: float) -> None:
        self.port, self.repo, self.timeout = free_port(), repo, timeout
        self.config = tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False)  # noqa: SIM115
        self.config.write(FILL_CONFIG.format(storage=json.dumps(storage), port=self.port))
        self.config.close()
        self.proc = subprocess.Popen(
            [registry, "serve", self.config.name], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        self.base = f"http://127.0.0.1:{self.port}"
        for _ in range(100):
            try:
                urllib.request.urlopen(f"{self.base}/v2/", timeout=2).close()
                return
            except OSError:
                if self.proc.poll() is not None:
                    raise FillError(f"{registry} serve stopped: {self.proc.stderr.read().decode()[-300:]}") from None
                time.sleep(0.1)
        raise FillError(f"{registry} serve did not answer on 127.0.0.1:{self.port} in 10 s")

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        os.unlink(self.config.name)

    def request(self, method: str, url: str, body=None, headers: dict | None = None):
        req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
        try:
            return urllib.request.urlopen(req, timeout=self.timeout)
        except urllib.error.HTTPError as err:
            said = err.read().decode(errors="replace")[:300]
            path = urllib.parse.urlsplit(url).path
            raise FillError(f"the cache refused {method} {path}: HTTP {err.code} {said}") from None

    def blob(self, reader, digest: str, size: int, deadline: float) -> int:
        """Stream `size` bytes from `reader` into the cache as `digest`; the bytes it read."""
        with self.request("POST", f"{self.base}/v2/{self.repo}/blobs/uploads/") as resp:
            location = urllib.parse.urljoin(self.base, resp.headers["Location"])
        sep = "&" if "?" in location else "?"
        hashing = Hashing(reader, deadline)
        headers = {"Content-Length": str(size), "Content-Type": "application/octet-stream"}
        try:
            self.request("PUT", f"{location}{sep}digest={digest}", body=hashing, headers=headers).close()
        except FillError:
            actual = "sha256:" + hashing.sha.hexdigest()
            if hashing.count == size and actual != digest:
                raise FillError(f"blob {digest} arrived as {actual}: other bytes; refused") from None
            raise
        return hashing.count

    def manifest(self, ref: str, body: bytes, kind: str) -> None:
        self.request(
            "PUT", f"{self.base}/v2/{self.repo}/manifests/{ref}", body=body, headers={"Content-Type": kind}
        ).close()


def fill(source_spec: str, repo: str, ref: str, storage: str, timeout_s: float, registry: str) -> str:
    """Put `repo`:`ref` (this host's platform) into the cache at `storage`; one line saying what crossed."""
    deadline = time.monotonic() + timeout_s
    source = Layout(source_spec[4:]) if source_spec.startswith("oci:") else Upstream(source_spec, repo, 600)
    body, kind, digest, index = resolve(source, ref, platform_of(os.uname().machine))
    doc = json.loads(body)
    blobs = [doc["config"], *doc["layers"]]
    missing = [b for b in blobs if not linked(storage, repo, "_layers", b["digest"])]
    tag = None if ref.startswith("sha256:") or index else ref  # the cache answers the tag as the source does
    if not missing and linked(storage, repo, "_manifests/revisions", digest):
        return f"cached {repo}@{digest}: all {len(blobs)} blobs already there, none read"
    pusher = Pusher(registry, storage, repo, 600)
    fetched = local = 0
    try:
        for b in missing:
            stored = os.path.exists(blob_path(storage, b["digest"]))
            with open(blob_path(storage, b["digest"]), "rb") if stored else source.blob(b["digest"]) as reader:
                count = pusher.blob(reader, b["digest"], int(b["size"]), deadline)
            local, fetched = (local + count, fetched) if stored else (local, fetched + count)
        pusher.manifest(digest, body, kind)
        if tag:
            pusher.manifest(tag, body, kind)
    finally:
        pusher.close()
    return (
        f"cached {repo}@{digest}: {len(missing)} of {len(blobs)} blobs stored, {fetched} bytes read from "
        f"{'the layout' if isinstance(source, Layout) else 'the upstream'}, {local} from the cache's own copies"
    )


def main(args: list[str]) -> int:
    """`SOURCE REPO REF STORAGE TIMEOUT_S REGISTRY`: fill, print one line; a failure is one line, exit 1."""
    if len(args) != 6:
        print("usage: cachefill.py SOURCE REPO REF STORAGE TIMEOUT_S REGISTRY", file=sys.stderr)
        return 2
    try:
        print(fill(args[0], args[1], args[2], args[3], float(args[4]), args[5]))
    except (FillError, OSError, ValueError, KeyError) as err:
        print(f"image cache fill: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
