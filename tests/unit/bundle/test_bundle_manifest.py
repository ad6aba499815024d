"""hgxkit bundle: the manifest and its verify (a flipped byte named, an edited manifest refused), the package
selection, the OCI layout from a registry, the node-side source the roles ask, and the model sync from a bundle."""

from __future__ import annotations

import hashlib
import json
import shutil
import threading
import tracemalloc
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import pytest
from pyinfra.api.exceptions import DeployError
from test_model_fetch import REPO, fetch, hub, hub_root, run, spec_file, status  # noqa: F401  (fixtures)

from hgxkit.bundle import aptbundle, manifest, ociimage, source
from hgxkit.cli import main
from hgxkit.errors import HgxkitError


def make_bundle(root: Path, files: dict[str, bytes]) -> dict:
    """A hand-made bundle: `files` plus a sealed bundle.json listing them."""
    for rel, body in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(body)
    doc = manifest.seal(
        {
            "schema_version": 1,
            "kind": "hgxkit-bundle",
            "key": {"fingerprint": "F" * 40, "file": "apt/bundle-key.asc"},
            "image": {"id": "sha256:" + "c" * 64},
            "model": {"dir": "model/m"},
            "artifacts": [manifest.artifact_entry(root, rel) for rel in manifest.list_files(root)],
        }
    )
    (root / "bundle.json").write_text(json.dumps(doc, indent=1, sort_keys=True))
    return doc


FILES = {"apt/nvidia/a_1_amd64.deb": b"deb" * 100, "model/m/config.json": b"{}", "wheels/requirements.txt": b"x\n"}


def test_a_fresh_bundle_verifies_and_a_flipped_byte_is_named(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    doc = make_bundle(tmp_path, FILES)
    assert manifest.verify(tmp_path) == (doc, [])
    assert main(["bundle", "verify", str(tmp_path)]) == 0
    assert capsys.readouterr().out.startswith(f"{tmp_path}: bundle {doc['bundle_sha256']} verified: 3 files")
    deb = tmp_path / "apt/nvidia/a_1_amd64.deb"
    body = bytearray(deb.read_bytes())
    body[7] ^= 1
    deb.write_bytes(bytes(body))
    digest = hashlib.sha256(body).hexdigest()
    _, problems = manifest.verify(tmp_path)
    assert problems == [
        f"apt/nvidia/a_1_amd64.deb: sha256 {digest[:16]}…, the manifest says "
        f"{hashlib.sha256(FILES['apt/nvidia/a_1_amd64.deb']).hexdigest()[:16]}…; "
        "the file changed after create: re-copy it"
    ]
    assert main(["bundle", "verify", str(tmp_path)]) == 1
    assert capsys.readouterr().err == f"{tmp_path}/{problems[0]}\n"


def test_missing_resized_and_unlisted_files_are_each_named(tmp_path: Path) -> None:
    make_bundle(tmp_path, FILES)
    (tmp_path / "model/m/config.json").unlink()
    (tmp_path / "wheels/requirements.txt").write_bytes(b"xy\n")
    (tmp_path / "wheels/extra.whl").write_bytes(b"planted")
    assert manifest.verify(tmp_path)[1] == [
        "model/m/config.json: missing (or not a regular file); re-copy the bundle",
        "wheels/requirements.txt: 3 bytes, the manifest says 2; re-copy it",
        "wheels/extra.whl: not in the manifest; remove it or re-create the bundle",
    ]


def test_a_manifest_whose_hash_was_edited_is_refused_before_any_artifact_is_read(tmp_path: Path) -> None:
    doc = make_bundle(tmp_path, FILES)
    # Someone swaps a file and writes its new sha256 into bundle.json: the bundle's own hash no longer matches.
    (tmp_path / "model/m/config.json").write_bytes(b"[]")
    doc["artifacts"][1]["sha256"] = hashlib.sha256(b"[]").hexdigest()
    (tmp_path / "bundle.json").write_text(json.dumps(doc))
    refused = (
        "bundle.json: its bundle_sha256 does not match its content (edited after create?); refused: "
        "re-create the bundle"
    )
    assert manifest.verify(tmp_path) == (None, [refused])
    # ... and the deploy stops at plan time, before any operation (the `bundle` knob).
    host = SimpleNamespace(name="node1", data={"bundle": str(tmp_path)})
    with pytest.raises(DeployError, match=r"^bundle knob: bundle.json: its bundle_sha256 does not match"):
        source.delivered(host)
    # The node-side verifier refuses it too, and a copy other than the controller's.
    assert manifest.main([str(tmp_path)]) == 1
    good = make_bundle(tmp_path / "b", FILES)
    assert manifest.main([str(tmp_path / "b"), "0" * 64]) == 1
    assert manifest.main([str(tmp_path / "b"), good["bundle_sha256"]]) == 0


def test_the_node_side_paths_the_roles_read(tmp_path: Path) -> None:
    doc = make_bundle(tmp_path, {**FILES, "apt/bundle-key.asc": b"KEY"})
    b = source.bundle_of(str(tmp_path))
    node = f"/var/lib/hgxkit/bundle/{doc['bundle_sha256'][:16]}"
    assert (b.node_dir, b.stamp) == (node, f"{node}.verified")
    assert (b.apt_url("nvidia-container"), b.key_url) == (
        f"file://{node}/apt/nvidia-container/",
        f"file://{node}/apt/bundle-key.asc",
    )
    assert b.key_sha256 == hashlib.sha256(b"KEY").hexdigest()
    assert (b.model_dir, b.image_layout) == (f"{node}/model/m", f"{node}/image")
    assert b.image_digest() == "local:sha256:" + "c" * 64
    assert [str(c) for c in b.pip_install("/opt/v/bin/pip")] == [
        f"/opt/v/bin/pip install --quiet --disable-pip-version-check --no-index --find-links {node}/wheels "
        f"--require-hashes -r {node}/wheels/requirements.txt"
    ]
    assert (
        source.delivered(SimpleNamespace(name="n", data={})) is None
    )  # no knob: every role reads from its usual sources


PACKAGES = """Package: nvidia-open
Version: 580.105.08-1
Depends: nvidia-driver-cuda (= 580.105.08-1), nvidia-kernel-open-dkms | nvidia-kernel-dkms
Filename: ./nvidia-open_580.105.08-1_amd64.deb
SHA256: 01
Size: 10

Package: nvidia-open
Version: 580.95.05-1
Filename: ./nvidia-open_580.95.05-1_amd64.deb
SHA256: 02
Size: 10

Package: nvidia-driver-cuda
Version: 580.95.05-1
Filename: ./a.deb
SHA256: 03
Size: 1

Package: nvidia-driver-cuda
Version: 580.105.08-1
Pre-Depends: libc6
Filename: ./b.deb
SHA256: 04
Size: 1

Package: nvidia-kernel-open-dkms
Version: 580.105.08-1
Filename: ./c.deb
SHA256: 05
Size: 1
"""


def test_pinned_packages_and_their_dependencies_at_the_pinned_version() -> None:
    chosen = aptbundle.select(aptbundle.parse_packages(PACKAGES), {"nvidia-open": "580.105.08-*"})
    assert [(d.name, d.version) for d in chosen] == [
        ("nvidia-driver-cuda", "580.105.08-1"),
        ("nvidia-kernel-open-dkms", "580.105.08-1"),
        ("nvidia-open", "580.105.08-1"),
    ]
    with pytest.raises(HgxkitError, match=r"^package nvidia-open=590\.\* is not in the repository"):
        aptbundle.select(aptbundle.parse_packages(PACKAGES), {"nvidia-open": "590.*"})


def _blob(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@pytest.fixture()
def registry() -> Iterator[tuple[str, dict[str, bytes], str]]:
    layer, config = b"layer-bytes", b'{"rootfs": {"diff_ids": []}}'
    manifest_body = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
            "config": {"digest": _blob(config), "size": len(config)},
            "layers": [{"digest": _blob(layer), "size": len(layer)}],
        }
    ).encode()
    blobs = {_blob(layer): layer, _blob(config): config, _blob(manifest_body): manifest_body}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            ref = self.path.rsplit("/", 1)[-1]
            body = manifest_body if "/manifests/" in self.path else blobs.get(ref)  # any tag or digest: this one
            self.send_response(200 if body is not None else 404)
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", blobs, _blob(manifest_body)
    server.shutdown()
    server.server_close()


def test_an_image_becomes_an_oci_layout_docker_load_reads(tmp_path: Path, registry) -> None:
    url, blobs, digest = registry
    saved = ociimage.save_layout("org/img:v1", tmp_path, url)
    assert saved.digest == digest and saved.config == _blob(b'{"rootfs": {"diff_ids": []}}')
    assert sorted(p.name for p in (tmp_path / "blobs/sha256").iterdir()) == sorted(d[7:] for d in blobs)
    index = json.loads((tmp_path / "index.json").read_text())
    assert index["manifests"][0]["digest"] == digest
    assert index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"] == "org/img:v1"
    legacy = json.loads((tmp_path / "manifest.json").read_text())
    assert legacy == [
        {
            "Config": "blobs/sha256/" + saved.config[7:],
            "RepoTags": ["org/img:v1"],
            "Layers": ["blobs/sha256/" + _blob(b"layer-bytes")[7:]],
        }
    ]
    with pytest.raises(HgxkitError, match=r"^org/img@sha256:0+: the registry's manifest is sha256:"):
        ociimage.save_layout("org/img@sha256:" + "0" * 64, tmp_path / "x", url)


def test_the_model_syncs_from_a_bundle_with_no_hub(hub, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:  # noqa: F811
    _, url = hub
    (tmp_path / "made").mkdir()
    (tmp_path / "node").mkdir()
    code, made = run(spec_file(tmp_path / "made", url))  # what `bundle create` does, into the bundle
    assert code == 0
    carried = tmp_path / "made" / "models" / "tiny"
    # On the node: no endpoint at all, only the bundle's copy (and its manifest) and an empty local_dir.
    spec = spec_file(tmp_path / "node", "http://127.0.0.1:9/", source="bundle", bundle_dir=str(carried))
    assert status(spec, capsys)["state"] == "incomplete"
    code, result = run(spec)
    assert code == 0 and result["commit"] == made["commit"] and len(result["fetched"]) == 8
    local = tmp_path / "node" / "models" / "tiny"
    assert json.loads((local / ".hgxkit-manifest.json").read_text())["source"] == "bundle"
    assert status(spec, capsys)["state"] == "complete"
    assert run(spec)[1]["already"] is True  # a re-run copies nothing
    # A carried file that changed is caught by the hashes the model role always checks.
    victim = sorted(p for p in carried.iterdir() if p.suffix == ".safetensors")[0]
    victim.write_bytes(b"\0" + victim.read_bytes()[1:])
    (local / victim.name).unlink()
    code, result = run(spec)
    assert code == 1 and victim.name in result["error"]


def test_bundle_create_and_verify_json_follow_their_schemas(tmp_path: Path, capsys) -> None:
    from jsonschema import Draft202012Validator

    from hgxkit.cli.bundle import create_schema, verify_schema

    for schema in (create_schema(), verify_schema()):
        Draft202012Validator.check_schema(schema)
    # real verdicts, a passing and a failing one (`bundle create --json`'s is checked by tests/e2e/test_bundle.py)
    key = aptbundle.BundleKey(tmp_path / "gnupg")
    root = tmp_path / "b"
    (root / "apt").mkdir(parents=True)
    key.write_keyring(root / manifest.KEYRING)
    make_bundle(root, FILES)
    key.sign_detached(root / "bundle.json", root / manifest.SIGNATURE)
    validator = Draft202012Validator(verify_schema())
    for fingerprint, code in ((key.fingerprint, 0), ("A" * 40, 1)):
        assert main(["bundle", "verify", str(root), "--fingerprint", fingerprint, "--json"]) == code
        verdict = json.loads(capsys.readouterr().out.splitlines()[-1])
        assert verdict["ok"] is (code == 0) and list(validator.iter_errors(verdict)) == []
    assert list(validator.iter_errors({**verdict, "ok": "yes"}))  # the schema can refuse


def test_a_signed_manifest_is_checked_against_the_fingerprint_the_site_holds(tmp_path: Path, capsys) -> None:
    key = aptbundle.BundleKey(tmp_path / "gnupg")
    root = tmp_path / "b"
    root.mkdir()
    (root / "apt").mkdir()
    key.write_keyring(root / manifest.KEYRING)
    doc = make_bundle(root, FILES)
    key.sign_detached(root / "bundle.json", root / manifest.SIGNATURE)
    assert manifest.verify(root) == (doc, [])  # the signature and the keyring are the bundle's own files
    assert main(["bundle", "verify", str(root), "--fingerprint", key.fingerprint]) == 0
    assert main(["bundle", "verify", str(root), "--fingerprint", "A" * 40, "--json"]) == 1
    verdict = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert verdict["fingerprint_checked"] is True and verdict["problems"] == [
        f"bundle.json: signed by key {key.fingerprint}, not the expected {'A' * 40}; refused: is this the bundle "
        "you made?"
    ]
    # What the hash alone cannot catch: a file swapped and bundle.json re-sealed to match it.
    (root / "model/m/config.json").write_bytes(b"[]")
    doc["artifacts"] = [manifest.artifact_entry(root, a["path"]) for a in doc["artifacts"]]
    (root / "bundle.json").write_text(json.dumps(manifest.seal(doc)))
    assert manifest.verify(root)[1] == []
    refused = "bundle.json.sig: no valid signature of bundle.json by the bundle's key; refused: re-copy or re-create it"
    assert manifest.verify(root, fingerprint=key.fingerprint) == (None, [refused])
    host = SimpleNamespace(name="node1", data={"bundle": str(root), "bundle_fingerprint": key.fingerprint})
    with pytest.raises(DeployError, match=r"^bundle knob: bundle\.json\.sig: no valid signature"):
        source.delivered(host)


IMAGE_FILES = {"image/index.json": b'{"manifests": []}', "image/blobs/sha256/aa": b"layer" * 50}
IMAGE = {"reference": "lmsysorg/sglang:dev-dspark", "digest": "sha256:" + "d" * 64, "id": "sha256:" + "c" * 64}


def test_behind_the_image_cache_only_the_cache_host_gets_image_and_the_others_pull_by_the_manifest_digest() -> None:
    pull = source.cache_pull_reference(IMAGE)
    assert pull == "lmsysorg/sglang@sha256:" + "d" * 64
    assert source.cache_pull_reference({**IMAGE, "reference": "ubuntu"}) == "library/ubuntu@sha256:" + "d" * 64
    assert source.cache_pull_reference({**IMAGE, "reference": "nvcr.io/nim/x:1"}) is None  # no mirror asked
    assert source.cache_pull_reference({**IMAGE, "digest": None}) is None
    hosts = ["node1", "node2", "node3"]
    assert [source.gets_image(h, "node1", pull) for h in hosts] == [True, False, False]
    assert [source.gets_image(h, None, pull) for h in hosts] == [
        True,
        True,
        True,
    ]  # the cache off: every node gets the image
    assert [source.gets_image(h, "node1", None) for h in hosts] == [True, True, True]  # an image no mirror serves
    assert source.rsync_flags(True) == ["-a", "--delete", "--chmod=D755,F644"]
    assert source.rsync_flags(False) == [
        "-a",
        "--delete",
        "--chmod=D755,F644",
        "--exclude=/image/",
        "--delete-excluded",
    ]
    assert (source.stamp_text("ab" * 32, True), source.stamp_text("ab" * 32, False)) == (
        "ab" * 32,
        "ab" * 32 + " without-image",
    )
    assert source.verify_args("/d", "ab", False) == ["/d", "ab", "--from-cache", "image"]
    assert source.verify_args("/d", "ab", True) == ["/d", "ab"]


def test_a_pulled_image_whose_id_differs_from_the_bundles_is_refused_with_one_line() -> None:
    want, other = "sha256:" + "c" * 64, "sha256:" + "e" * 64
    assert source.image_id_problem("node2", want, want) is None
    assert source.image_id_problem("node2", want, other) == (
        f"node2: the image pulled through the image cache is {other}, the bundle says {want}; refused: no container "
        "was changed (check the cache host's fill, or set image_cache off)"
    )
    assert source.image_id_problem("node2", want, None).startswith(
        "node2: the image pulled through the image cache is (none), the bundle says sha256:"
    )


def test_a_copy_without_image_verifies_what_it_got_and_says_image_comes_from_the_cache(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    src, dst = tmp_path / "b", tmp_path / "node"
    doc = make_bundle(src, {**FILES, **IMAGE_FILES})
    (dst / "image").mkdir(parents=True)
    (dst / "image/stale").write_bytes(b"from a copy made before the cache was on")
    import subprocess

    subprocess.run(["rsync", *source.rsync_flags(False), f"{src}/", str(dst)], check=True)
    assert not (dst / "image").exists()  # excluded, and the stale copy deleted
    assert sorted(manifest.list_files(dst)) == sorted(FILES)
    assert manifest.verify(dst)[1] == [
        f"{rel}: missing (or not a regular file); re-copy the bundle" for rel in sorted(IMAGE_FILES)
    ]
    assert manifest.verify(dst, ("image",)) == (doc, [])
    assert manifest.main(source.verify_args(str(dst), doc["bundle_sha256"], False)) == 0
    size = sum(len(v) for v in IMAGE_FILES.values())
    assert capsys.readouterr().out == (
        f"image/: 2 files ({size} bytes) not on this node, taken from the image cache "
        f"(Docker checks each layer by digest, the role the image ID)\n"
        f"{doc['bundle_sha256']}\n"
    )
    # Never a silent skip: a file of image/ that did arrive is checked like any other; the rest still verified.
    (dst / "image/blobs/sha256").mkdir(parents=True)
    (dst / "image/blobs/sha256/aa").write_bytes(b"x")
    (dst / "model/m/config.json").write_bytes(b"[]")
    assert manifest.verify(dst, ("image",))[1] == [
        f"image/blobs/sha256/aa: 1 bytes, the manifest says {len(IMAGE_FILES['image/blobs/sha256/aa'])}; re-copy it",
        "model/m/config.json: sha256 "
        + hashlib.sha256(b"[]").hexdigest()[:16]
        + "…, the manifest says "
        + hashlib.sha256(b"{}").hexdigest()[:16]
        + "…; the file changed after create: re-copy it",
    ]


def test_the_pull_through_the_cache_refuses_an_image_that_is_not_the_bundles(monkeypatch: pytest.MonkeyPatch) -> None:
    want, other = "sha256:" + "c" * 64, "sha256:" + "e" * 64
    ran: list[str] = []

    class Runner:
        def __init__(self, host: object) -> None:
            pass

        def status(self, command: object) -> tuple[bool, list[str]]:
            ran.append(str(command))
            return True, [found]

    monkeypatch.setattr(source, "HostRunner", Runner)
    monkeypatch.setattr(source, "current_host", SimpleNamespace(name="node2"))
    pull = "lmsysorg/sglang@sha256:" + "d" * 64
    found = want
    source._pull_through_cache(pull, want)
    assert ran == [f"docker pull -q {pull}", f"docker image inspect --format '{{{{.Id}}}}' {pull}"]
    found = other
    with pytest.raises(DeployError) as err:
        source._pull_through_cache(pull, want)
    assert str(err.value) == source.image_id_problem("node2", want, other)


def test_the_bundle_hash_is_the_sha256_of_its_canonical_json_so_anyone_can_recompute_it() -> None:
    doc = {"schema_version": 1, "artifacts": [{"path": "a", "size": 1, "sha256": "0" * 64}], "bundle_sha256": "x"}
    # Sorted keys, no spaces, bundle_sha256 left out: the bytes a verifier in any language rebuilds.
    canonical = b'{"artifacts":[{"path":"a","sha256":"' + b"0" * 64 + b'","size":1}],"schema_version":1}'
    assert manifest.manifest_hash(doc) == hashlib.sha256(canonical).hexdigest()


NOT_A_MANIFEST = {
    "a list": [],
    "another schema_version": manifest.seal({"schema_version": 2, "artifacts": []}),
    "no artifacts": manifest.seal({"schema_version": 1}),
    "artifacts not a list": manifest.seal({"schema_version": 1, "artifacts": {"model/m/config.json": 2}}),
}


@pytest.mark.parametrize("case", sorted(NOT_A_MANIFEST))
def test_a_bundle_json_that_is_not_a_schema_1_manifest_is_refused_with_one_line(tmp_path: Path, case: str) -> None:
    make_bundle(tmp_path, FILES)
    (tmp_path / "bundle.json").write_text(json.dumps(NOT_A_MANIFEST[case]))
    line = "bundle.json: not an hgxkit bundle manifest of schema_version 1; re-create the bundle"
    assert manifest.verify(tmp_path) == (None, [line])
    assert manifest.main([str(tmp_path)]) == 1


def test_a_directory_without_bundle_json_is_asked_whether_it_is_a_bundle(tmp_path: Path) -> None:
    assert manifest.verify(tmp_path) == (
        None,
        [f"{tmp_path}/bundle.json: no bundle manifest here; is {tmp_path} a bundle (`hgxkit bundle create`)?"],
    )


def test_the_node_side_verifier_prints_the_hash_when_verified_and_each_problem_on_stderr_otherwise(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = make_bundle(tmp_path, FILES)
    digest = doc["bundle_sha256"]
    # As the node runs it: `python3 hgxkit_bundle_verify.py DIR EXPECTED_HASH`.
    monkeypatch.setattr("sys.argv", ["hgxkit_bundle_verify.py", str(tmp_path), digest])
    assert manifest.main() == 0
    assert capsys.readouterr() == (f"{digest}\n", "")
    assert manifest.main([str(tmp_path)]) == 0  # no hash from the controller: the bundle's own is checked
    assert capsys.readouterr() == (f"{digest}\n", "")
    (tmp_path / "model/m/config.json").write_bytes(b"[]")
    assert manifest.main([str(tmp_path), "f" * 64]) == 1
    # Nothing on stdout (the controller reads a hash there only from a verified bundle); the copy's mismatch first.
    assert capsys.readouterr() == (
        "",
        f"{tmp_path}: bundle {digest[:16]}…, the controller's is {'f' * 16}…\n"
        f"model/m/config.json: sha256 {hashlib.sha256(b'[]').hexdigest()[:16]}…, the manifest says "
        f"{hashlib.sha256(b'{}').hexdigest()[:16]}…; the file changed after create: re-copy it\n",
    )


def test_from_cache_takes_exactly_one_directory_wherever_it_stands(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    doc = make_bundle(tmp_path, {**FILES, **IMAGE_FILES})
    shutil.rmtree(tmp_path / "image")
    digest, size = doc["bundle_sha256"], sum(len(v) for v in IMAGE_FILES.values())
    note = (
        f"image/: 2 files ({size} bytes) not on this node, taken from the image cache "
        "(Docker checks each layer by digest, the role the image ID)\n"
    )
    assert manifest.main([str(tmp_path), "--from-cache", "image"]) == 0
    assert capsys.readouterr().out == note + f"{digest}\n"
    assert manifest.main([str(tmp_path), "--from-cache", "image", digest]) == 0
    assert capsys.readouterr().out == note + f"{digest}\n"
    assert manifest.main([str(tmp_path), "--from-cache", "image", "0" * 64]) == 1  # the hash after it still counts


def test_the_cache_note_counts_the_files_absent_from_the_directories_taken_from_the_cache(tmp_path: Path) -> None:
    doc = make_bundle(tmp_path, {**FILES, **IMAGE_FILES})
    (tmp_path / "image/blobs/sha256/aa").unlink()  # image/index.json arrived, the blob did not
    blob = len(IMAGE_FILES["image/blobs/sha256/aa"])
    tail = "not on this node, taken from the image cache (Docker checks each layer by digest, the role the image ID)"
    assert manifest.elsewhere_note(tmp_path, doc["artifacts"], ("image",)) == f"image/: 1 files ({blob} bytes) {tail}"
    shutil.rmtree(tmp_path / "model")
    both = len(FILES["model/m/config.json"]) + blob
    assert manifest.elsewhere_note(tmp_path, doc["artifacts"], ("image", "model")) == (
        f"image/, model/: 2 files ({both} bytes) {tail}"
    )
    # An entry whose size the manifest does not give counts no bytes; the note is still written.
    assert manifest.elsewhere_note(tmp_path, [{"path": "image/x"}], ("image",)) == f"image/: 1 files (0 bytes) {tail}"
    assert manifest.elsewhere_note(tmp_path, doc["artifacts"], ("wheels",)) is None


def test_hashing_a_file_holds_one_piece_of_it_in_memory_never_the_whole(tmp_path: Path) -> None:
    size = 32 << 20  # model weights run to tens of GiB: a verify that read a whole file would not fit a node
    doc = make_bundle(tmp_path, {"model/m/w.safetensors": b"\1" * size})
    tracemalloc.start()
    try:
        digest = manifest.file_sha256(tmp_path / "model/m/w.safetensors")
        hashed_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        verified = manifest.verify(tmp_path)
        verified_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert digest == hashlib.sha256(b"\1" * size).hexdigest() and verified == (doc, [])
    assert hashed_peak < size // 8 and verified_peak < size // 8, (hashed_peak, verified_peak)
