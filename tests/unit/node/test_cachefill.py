"""The image cache's fill against real Distribution processes (Debian's docker-registry, on 127.0.0.1): an upstream
registry, the pull-through cache on its own storage, the fill; the upstream's access log counts what crossed.

Required under CI=true (the CI machine has docker-registry, as the simulated nodes do); else skipped without it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from hgxkit.bundle.ociimage import save_layout
from hgxkit.node.cachefill import FillError, Layout, blob_path, fill, free_port, linked, platform_of
from hgxkit.node.imagecache import cache_config

REGISTRY = shutil.which("docker-registry") or "/usr/bin/docker-registry"
REPO = "hgxkit-test/img"
MEDIA = "application/vnd.docker.distribution.manifest.v2+json"
BLOB_GET = re.compile(r'"GET /v2/hgxkit-test/img/blobs/(sha256:[0-9a-f]{64}) HTTP/[\d.]+" 200')


@pytest.fixture(scope="module", autouse=True)
def _registry_binary() -> None:
    if not os.path.exists(REGISTRY):
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but docker-registry is not installed (apt-get install docker-registry)")
        pytest.skip("docker-registry is not installed")


def serve(tmp: Path, name: str, config: str) -> tuple[str, Path, subprocess.Popen]:
    """Start `docker-registry serve` with `config` (its {port}); (base URL, its log, the process)."""
    port = free_port()
    (tmp / f"{name}.yml").write_text(config.format(port=port))
    log = tmp / f"{name}.log"
    proc = subprocess.Popen(
        [REGISTRY, "serve", str(tmp / f"{name}.yml")], stdout=log.open("wb"), stderr=subprocess.STDOUT
    )
    base = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            urllib.request.urlopen(f"{base}/v2/", timeout=2).close()
            return base, log, proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"{name} did not start: {log.read_text()[-500:]}")


def plain(storage: Path) -> str:
    return (
        f"version: 0.1\nlog:\n  accesslog:\n    disabled: false\nstorage:\n  filesystem:\n    rootdirectory: "
        f"{storage}\nhttp:\n  addr: 127.0.0.1:{{port}}\n"
    )


def put(base: str, path: str, data: bytes, kind: str = "application/octet-stream") -> None:
    req = urllib.request.Request(f"{base}{path}", data=data, method="PUT", headers={"Content-Type": kind})
    urllib.request.urlopen(req, timeout=30).close()


def push_image(base: str, layers: list[bytes], repo: str = REPO) -> tuple[str, list[str], int]:
    """Push a schema2 image (a config and `layers`) as `repo`:1; (manifest digest, blob digests, their bytes)."""
    config = json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": []}})
    descriptors = []
    for data, kind in [(config.encode(), "application/vnd.docker.container.image.v1+json")] + [
        (layer, "application/vnd.docker.image.rootfs.diff.tar.gzip") for layer in layers
    ]:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        req = urllib.request.Request(f"{base}/v2/{repo}/blobs/uploads/", method="POST")
        with urllib.request.urlopen(req, timeout=30) as resp:
            location = resp.headers["Location"]
        sep = "&" if "?" in location else "?"
        put("", f"{urllib.parse.urljoin(base, location)}{sep}digest={digest}", data)
        descriptors.append({"mediaType": kind, "size": len(data), "digest": digest})
    manifest = json.dumps(
        {"schemaVersion": 2, "mediaType": MEDIA, "config": descriptors[0], "layers": descriptors[1:]}
    ).encode()
    put(base, f"/v2/{repo}/manifests/1", manifest, MEDIA)
    digest = "sha256:" + hashlib.sha256(manifest).hexdigest()
    return digest, [d["digest"] for d in descriptors], sum(d["size"] for d in descriptors)


def pull(base: str, ref: str, blobs: list[str]) -> list[bool]:
    """What a node's Docker asks the mirror for: the manifest, then every blob; whether each blob's bytes match."""
    req = urllib.request.Request(f"{base}/v2/{REPO}/manifests/{ref}", headers={"Accept": MEDIA})
    urllib.request.urlopen(req, timeout=30).close()
    ok = []
    for blob in blobs:
        with urllib.request.urlopen(f"{base}/v2/{REPO}/blobs/{blob}", timeout=30) as resp:
            ok.append("sha256:" + hashlib.sha256(resp.read()).hexdigest() == blob)
    return ok


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[dict]:
    """An upstream holding REPO:1 and a pull-through cache of it, each its own Distribution."""
    procs = []
    upstream, up_log, proc = serve(tmp_path, "upstream", plain(tmp_path / "up"))
    procs.append(proc)
    layers = [os.urandom(3 << 20), os.urandom(1 << 20)]
    digest, blobs, size = push_image(upstream, layers)
    storage = tmp_path / "cache"
    config = cache_config("127.0.0.1", 0, upstream, str(storage)).replace(':0"', ':{port}"')
    cache, _, proc = serve(tmp_path, "cache", config)
    procs.append(proc)
    yield {
        "upstream": upstream,
        "up_log": up_log,
        "digest": digest,
        "blobs": blobs,
        "size": size,
        "layers": layers,
        "storage": storage,
        "cache": cache,
        "tmp": tmp_path,
    }
    for proc in procs:
        proc.terminate()
        proc.wait(timeout=10)


def upstream_blob_gets(log: Path) -> Counter:
    return Counter(BLOB_GET.findall(log.read_text()))


def test_the_fill_reads_each_blob_from_upstream_once_and_four_pulls_add_none(fleet: dict) -> None:
    said = fill(fleet["upstream"], REPO, "1", str(fleet["storage"]), 60, REGISTRY)
    assert said == (
        f"cached {REPO}@{fleet['digest']}: 3 of 3 blobs stored, {fleet['size']} bytes read from the "
        "upstream, 0 from the cache's own copies"
    )
    with ThreadPoolExecutor(4) as pool:  # four nodes at once, by tag and by the pinned digest
        pulls = list(pool.map(lambda ref: pull(fleet["cache"], ref, fleet["blobs"]), ["1", "1", fleet["digest"], "1"]))
    assert pulls == [[True, True, True]] * 4
    assert upstream_blob_gets(fleet["up_log"]) == dict.fromkeys(fleet["blobs"], 1)
    again = fill(fleet["upstream"], REPO, "1", str(fleet["storage"]), 60, REGISTRY)
    assert again == f"cached {REPO}@{fleet['digest']}: all 3 blobs already there, none read"
    assert upstream_blob_gets(fleet["up_log"]) == dict.fromkeys(fleet["blobs"], 1)


def test_a_blob_another_repository_holds_is_linked_from_the_cache_s_own_copy(fleet: dict) -> None:
    fill(fleet["upstream"], REPO, "1", str(fleet["storage"]), 60, REGISTRY)
    other = "hgxkit-test/other"
    digest, blobs, _ = push_image(fleet["upstream"], [fleet["layers"][0], os.urandom(1 << 19)], other)
    said = fill(fleet["upstream"], other, "1", str(fleet["storage"]), 60, REGISTRY)
    shared = (3 << 20) + len(
        json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": []}})
    )
    assert said == (
        f"cached {other}@{digest}: 3 of 3 blobs stored, {1 << 19} bytes read from the upstream, "
        f"{shared} from the cache's own copies"
    )
    gets = Counter(
        re.findall(r'"GET /v2/hgxkit-test/other/blobs/(sha256:[0-9a-f]{64}) HTTP', fleet["up_log"].read_text())
    )
    assert gets == {blobs[2]: 1}


def test_the_proxy_alone_reads_a_missing_blob_twice(fleet: dict) -> None:
    # Why the fill exists (Distribution 2.8, registry/proxy/proxyblobstore.go): one pull through the cold proxy.
    assert pull(fleet["cache"], "1", fleet["blobs"][1:2]) == [True]
    for _ in range(100):  # the proxy's own storing copy finishes in the background
        if upstream_blob_gets(fleet["up_log"]) == {fleet["blobs"][1]: 2}:
            break
        time.sleep(0.1)
    assert upstream_blob_gets(fleet["up_log"]) == {fleet["blobs"][1]: 2}


def test_a_bundle_layout_fills_an_air_gapped_cache_that_answers_the_tag_offline(fleet: dict) -> None:
    layout = fleet["tmp"] / "layout"
    saved = save_layout(f"{REPO}:1", layout, fleet["upstream"])
    storage = fleet["tmp"] / "gapped"
    # No upstream: a plain registry (Distribution 2.8's proxy panics at start when its upstream does not answer).
    cache, _, proc = serve(
        fleet["tmp"], "gapped", cache_config("127.0.0.1", 0, None, str(storage)).replace(':0"', ':{port}"')
    )
    try:
        said = fill(f"oci:{layout}", REPO, "1", str(storage), 60, REGISTRY)
        assert said.startswith(f"cached {REPO}@{saved.digest}: 3 of 3 blobs stored, ") and "from the layout" in said
        assert pull(cache, "1", fleet["blobs"]) == [True, True, True]
        assert pull(cache, saved.digest, fleet["blobs"]) == [True, True, True]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_blob_with_other_bytes_is_refused_naming_it(fleet: dict) -> None:
    layout = fleet["tmp"] / "layout"
    save_layout(f"{REPO}:1", layout, fleet["upstream"])
    bad = fleet["blobs"][2]
    path = layout / "blobs" / "sha256" / bad.removeprefix("sha256:")
    path.write_bytes(os.urandom(path.stat().st_size))
    with pytest.raises(FillError, match=f"blob {bad} arrived as sha256:[0-9a-f]{{64}}: other bytes; refused"):
        fill(f"oci:{layout}", REPO, "1", str(fleet["tmp"] / "other"), 60, REGISTRY)


def test_a_hub_like_upstream_gets_a_token_and_its_cdn_redirect_gets_none(tmp_path: Path) -> None:
    # Docker Hub's way: 401 with a Bearer challenge, a token from the realm, each blob a redirect to a CDN that
    # refuses a request carrying the registry's token. Here a stdlib server plays both.
    import http.server
    import threading

    layer = os.urandom(1 << 20)
    config = b'{"architecture":"amd64","os":"linux"}'
    blobs = {"sha256:" + hashlib.sha256(b).hexdigest(): b for b in (config, layer)}
    digests = list(blobs)
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": MEDIA,
            "config": {
                "mediaType": "application/vnd.docker.container.image.v1+json",
                "size": len(config),
                "digest": digests[0],
            },
            "layers": [
                {
                    "mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip",
                    "size": len(layer),
                    "digest": digests[1],
                }
            ],
        }
    ).encode()
    seen: list[str] = []

    class Hub(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def send(self, code: int, body: bytes = b"", headers: dict | None = None) -> None:
            self.send_response(code)
            for key, value in {"Content-Length": str(len(body)), **(headers or {})}.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            auth = self.headers.get("Authorization", "")
            seen.append(f"{self.path.split('?')[0]} {auth or '-'}")
            port = self.server.server_address[1]
            if self.path.startswith("/token?"):
                assert "scope=repository%3Ahgxkit-test%2Fimg%3Apull" in self.path
                return self.send(200, b'{"token": "t1"}')
            if self.path.startswith("/cdn/"):
                return self.send(400 if auth else 200, b"" if auth else blobs[self.path[5:]])
            if auth != "Bearer t1":
                realm = f'Bearer realm="http://127.0.0.1:{port}/token",service="hub"'
                return self.send(401, b"{}", {"WWW-Authenticate": realm})
            if self.path == f"/v2/{REPO}/manifests/1":
                return self.send(200, manifest, {"Content-Type": MEDIA})
            digest = self.path.rsplit("/", 1)[1]
            return self.send(307, b"", {"Location": f"http://127.0.0.1:{port}/cdn/{digest}"})

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        said = fill(f"http://127.0.0.1:{server.server_address[1]}", REPO, "1", str(tmp_path / "s"), 60, REGISTRY)
    finally:
        server.shutdown()
    assert said.endswith(
        f"2 of 2 blobs stored, {len(config) + len(layer)} bytes read from the upstream, 0 from the cache's own copies"
    )
    assert seen == [
        f"/v2/{REPO}/manifests/1 -",
        "/token -",
        f"/v2/{REPO}/manifests/1 Bearer t1",
        f"/v2/{REPO}/blobs/{digests[0]} Bearer t1",
        f"/cdn/{digests[0]} -",
        f"/v2/{REPO}/blobs/{digests[1]} Bearer t1",
        f"/cdn/{digests[1]} -",
    ]


def manifest_bytes(base: str, repo: str, ref: str) -> bytes:
    req = urllib.request.Request(f"{base}/v2/{repo}/manifests/{ref}", headers={"Accept": MEDIA})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return resp.read()


def test_a_multi_arch_tag_fills_this_platform_only_and_the_index_digest_still_resolves(fleet: dict) -> None:
    up, mine = fleet["upstream"], fleet["digest"]
    arch = platform_of(os.uname().machine)
    other, other_blobs, _ = push_image(up, [os.urandom(1 << 20)], "hgxkit-test/other")  # another platform's image
    for blob in other_blobs:  # cross-repository mount: REPO holds the other platform's blobs too
        url = f"{up}/v2/{REPO}/blobs/uploads/?mount={blob}&from=hgxkit-test/other"
        urllib.request.urlopen(urllib.request.Request(url, method="POST"), timeout=30).close()
    put(up, f"/v2/{REPO}/manifests/{other}", manifest_bytes(up, "hgxkit-test/other", "1"), MEDIA)
    kind = "application/vnd.docker.distribution.manifest.list.v2+json"
    index = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": kind,
            "manifests": [
                {
                    "mediaType": MEDIA,
                    "size": len(manifest_bytes(up, REPO, d)),
                    "digest": d,
                    "platform": {"architecture": a, "os": "linux"},
                }
                for d, a in ((other, "riscv64" if arch != "riscv64" else "arm64"), (mine, arch))
            ],
        }
    ).encode()
    put(up, f"/v2/{REPO}/manifests/multi", index, kind)
    pinned = "sha256:" + hashlib.sha256(index).hexdigest()
    said = fill(up, REPO, "multi", str(fleet["storage"]), 60, REGISTRY)
    assert said.startswith(f"cached {REPO}@{mine}: 3 of 3 blobs stored")
    for ref in ("multi", pinned):  # what a node's Docker does: the index (by tag or pinned), then its platform's
        req = urllib.request.Request(f"{fleet['cache']}/v2/{REPO}/manifests/{ref}", headers={"Accept": kind})
        with urllib.request.urlopen(req, timeout=30) as resp:
            assert "sha256:" + hashlib.sha256(resp.read()).hexdigest() == pinned
        assert pull(fleet["cache"], mine, fleet["blobs"]) == [True, True, True]
    assert upstream_blob_gets(fleet["up_log"]) == dict.fromkeys(fleet["blobs"], 1)  # no other platform's blob


@pytest.mark.parametrize("digest", ["sha256:../../../../etc/shadow", "sha256:" + "A" * 64, "sha512:" + "ab" * 64, 7])
def test_a_digest_that_is_not_sha256_hex_never_becomes_a_path(tmp_path: Path, digest: object) -> None:
    """The upstream (or a mirror) writes the manifests whose digests name files under the cache's storage and the
    bundle's layout, read by root: only `sha256:<64 hex>` becomes a path."""
    (tmp_path / "etc").mkdir()
    for reach in (
        lambda: blob_path(str(tmp_path), digest),
        lambda: linked(str(tmp_path), "r", "_layers", digest),
        lambda: Layout(str(tmp_path)).blob(digest),
    ):
        with pytest.raises(FillError, match=r"not sha256:<64 hex>; refused"):
            reach()
    good = "sha256:" + "ab" * 32
    assert blob_path("/s", good) == f"/s/docker/registry/v2/blobs/sha256/ab/{'ab' * 32}/data"
