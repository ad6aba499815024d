"""A bundle is trusted only for bytes its manifest vouches for: bundle.json is read once (storage that answers
differently on a second read gains nothing), and anything in the directory the manifest does not list, a symlink
anywhere (file or directory, listed or not), a special file, or a manifest path outside the bundle is refused,
by `hgxkit bundle verify`, by the deploy's plan-time check and by the node-side verifier alike."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pyinfra.api.exceptions import DeployError
from test_bundle_manifest import FILES, make_bundle

from hgxkit.bundle import aptbundle, manifest, source
from hgxkit.cli import main


@pytest.fixture(scope="module")
def key(tmp_path_factory: pytest.TempPathFactory) -> aptbundle.BundleKey:
    return aptbundle.BundleKey(tmp_path_factory.mktemp("gnupg") / "home")


@pytest.fixture(autouse=True)
def _fresh_plan_cache() -> Iterator[None]:
    source._loaded.clear()  # the deploy remembers a checked bundle per run; each case is its own run
    yield
    source._loaded.clear()


def signed_bundle(root: Path, key: aptbundle.BundleKey) -> tuple[dict, bytes, bytes]:
    """A bundle signed by `key`; and a forgery of it: one file swapped and bundle.json re-sealed to match (its
    hash is right, its signature is not): (signed doc, signed bytes, forged bytes)."""
    (root / "apt").mkdir(parents=True)
    key.write_keyring(root / manifest.KEYRING)
    doc = make_bundle(root, FILES)
    key.sign_detached(root / "bundle.json", root / manifest.SIGNATURE)
    signed = (root / "bundle.json").read_bytes()
    (root / "model/m/config.json").write_bytes(b'{"planted": true}')
    forged = dict(doc, artifacts=[manifest.artifact_entry(root, a["path"]) for a in doc["artifacts"]])
    return doc, signed, json.dumps(manifest.seal(forged)).encode()


def verdicts(root: Path, fingerprint: str) -> dict[str, object]:
    """What each consumer says of the bundle at `root`: the CLI's exit status, the deploy's plan-time check (the
    doc it would use, or its one line), the library's verify."""
    source._loaded.clear()
    cli = main(["bundle", "verify", str(root), "--fingerprint", fingerprint])
    try:
        deploy: object = source.bundle_of(str(root), fingerprint).doc
    except DeployError as err:
        deploy = str(err)
    return {"cli": cli, "deploy": deploy, "verify": manifest.verify(root, fingerprint=fingerprint)}


def storage_that_swaps_around_gpgv(monkeypatch: pytest.MonkeyPatch, path: Path, during: bytes, after: bytes) -> None:
    """`path` holds `during` while gpgv runs and `after` once it has: storage that answers each reader its own way."""
    real_run = subprocess.run

    def run(cmd, *args, **kwargs):
        if not (cmd and cmd[0] == "gpgv"):
            return real_run(cmd, *args, **kwargs)
        path.write_bytes(during)
        try:
            return real_run(cmd, *args, **kwargs)
        finally:
            path.write_bytes(after)

    monkeypatch.setattr(subprocess, "run", run)


@pytest.mark.parametrize("first", ["the forgery first", "the signed bytes first"])
def test_a_manifest_that_reads_differently_each_time_is_judged_as_signed_or_refused(
    tmp_path: Path, key, monkeypatch: pytest.MonkeyPatch, first: str
) -> None:
    doc, signed, forged = signed_bundle(tmp_path, key)
    (tmp_path / "bundle.json").write_bytes(forged if first == "the forgery first" else signed)
    storage_that_swaps_around_gpgv(monkeypatch, tmp_path / "bundle.json", during=signed, after=forged)
    got = verdicts(tmp_path, key.fingerprint)
    # Whatever a consumer uses is the signed document (the planted file is then named) or nothing at all.
    assert got["cli"] == 1
    assert got["deploy"] == doc or str(got["deploy"]).startswith("bundle knob: bundle.json.sig: no valid signature")
    found, problems = got["verify"]
    assert found in (doc, None) and problems


@pytest.fixture()
def fifo_manifest(tmp_path: Path, key) -> Iterator[tuple[Path, dict]]:
    """bundle.json as a FIFO whose writer answers each reader in turn: the forgery first, then the signed bytes."""
    doc, signed, forged = signed_bundle(tmp_path, key)
    (tmp_path / "bundle.json").unlink()
    os.mkfifo(tmp_path / "bundle.json")
    stop = threading.Event()

    def writer() -> None:
        for turn in range(1000):
            with open(tmp_path / "bundle.json", "wb", buffering=0) as pipe:  # blocks until a reader opens it
                if stop.is_set():
                    return
                with contextlib.suppress(BrokenPipeError):
                    pipe.write(forged if turn % 2 == 0 else signed)

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    yield tmp_path, doc
    stop.set()
    fd = os.open(tmp_path / "bundle.json", os.O_RDONLY | os.O_NONBLOCK)  # lets a blocked writer see `stop`
    thread.join(timeout=5)
    os.close(fd)


def test_a_manifest_storage_that_answers_each_read_differently_is_refused(fifo_manifest, key) -> None:
    root, _ = fifo_manifest
    got = verdicts(root, key.fingerprint)
    assert got["cli"] == 1
    assert "not a regular file" in str(got["deploy"])
    assert got["verify"][0] is None


def _swap_for_link(root: Path, rel: str, to_dir: bool) -> None:
    """`rel` replaced by a symlink to an identical copy outside the bundle (so every listed hash still matches)."""
    outside = root.parent / f"outside-{rel.replace('/', '_')}"
    (shutil.copytree if to_dir else shutil.copyfile)(root / rel, outside)
    (shutil.rmtree if to_dir else os.unlink)(root / rel)
    (root / rel).symlink_to(outside)


# Everything a bundle directory may hold that its manifest does not vouch for: name -> (how, the line's start).
UNLISTED: dict[str, tuple[Callable[[Path], None], str]] = {
    "an unlisted file": (lambda r: (r / "wheels/evil.whl").write_bytes(b"x"), "wheels/evil.whl: not in the manifest"),
    "an unlisted top-level file": (lambda r: (r / "evil").write_bytes(b"x"), "evil: not in the manifest"),
    "an unlisted empty directory": (lambda r: (r / "model/m/hooks").mkdir(), "model/m/hooks/: a directory not in"),
    "an unlisted top-level directory": (lambda r: (r / "extra").mkdir(), "extra/: a directory not in the manifest"),
    "an unlisted directory with a file": (
        lambda r: ((r / "apt/evil").mkdir(), (r / "apt/evil/x.deb").write_bytes(b"x")),
        "apt/evil/: a directory not in the manifest",
    ),
    "a symlinked file": (lambda r: (r / "model/m/tokenizer.py").symlink_to("/etc/passwd"), "model/m/tokenizer.py: a"),
    "a symlinked directory": (lambda r: (r / "model/m/etc").symlink_to("/etc"), "model/m/etc: a symlink; refused"),
    "a top-level symlinked directory": (lambda r: (r / "root").symlink_to("/"), "root: a symlink; refused"),
    "a dangling symlink": (lambda r: (r / "apt/nvidia/x.deb").symlink_to("/nonexistent"), "apt/nvidia/x.deb: a sym"),
    "a symlink inside the bundle": (lambda r: (r / "wheels/again").symlink_to("../model"), "wheels/again: a symlink"),
    "a FIFO": (lambda r: os.mkfifo(r / "wheels/pipe"), "wheels/pipe: not a regular file; refused"),
    "a listed file that became a symlink": (
        lambda r: _swap_for_link(r, "model/m/config.json", False),
        "model/m/config.json: missing (or not a regular file); a symlink",
    ),
    "a listed directory that became a symlink": (
        lambda r: _swap_for_link(r, "model/m", True),
        "model/m/config.json: missing (or not a regular file); a symlink",
    ),
    "a listed top directory that became a symlink": (
        lambda r: _swap_for_link(r, "apt", True),
        "apt/nvidia/a_1_amd64.deb: missing (or not a regular file); a symlink",
    ),
}


@pytest.mark.parametrize("case", sorted(UNLISTED))
def test_what_the_manifest_does_not_vouch_for_is_refused_by_every_consumer(tmp_path: Path, case: str) -> None:
    root = tmp_path / "b"
    root.mkdir()
    doc = make_bundle(root, FILES)
    assert manifest.verify(root) == (doc, [])
    how, line = UNLISTED[case]
    how(root)
    found, problems = manifest.verify(root)
    assert found == doc and any(p.startswith(line) for p in problems), problems
    assert main(["bundle", "verify", str(root)]) == 1
    assert manifest.main([str(root), doc["bundle_sha256"]]) == 1  # the node's verifier, before anything installs


# Manifest paths that name no file inside the bundle, each given a real file with the right bytes to point at.
OUTSIDE = ["/tmp/hgxkit-outside", "../outside", "model/../../outside", "model/m/../../../outside", "", "."]
ODD = [
    "./model/m/config.json",
    "model//m/config.json",
    "model/m/./config.json",
    "model/m/config.json/",
    "model/m/config\0.json",
]


@pytest.mark.parametrize("rel", [*OUTSIDE, *ODD, 7, None])
def test_a_manifest_path_outside_the_bundle_or_not_normal_is_refused(tmp_path: Path, rel: object) -> None:
    root = tmp_path / "b"
    root.mkdir()
    doc = make_bundle(root, FILES)
    body = FILES["model/m/config.json"]
    (tmp_path / "outside").write_bytes(body)
    entry = {"path": rel, "size": len(body), "sha256": manifest.file_sha256(root / "model/m/config.json")}
    (root / "bundle.json").write_text(json.dumps(manifest.seal({**doc, "artifacts": [*doc["artifacts"], entry]})))
    found, problems = manifest.verify(root)
    assert found is not None and problems and problems[0].startswith(f"{rel}: not a path inside the bundle"), problems
    assert main(["bundle", "verify", str(root)]) == 1


def test_a_file_listed_twice_is_refused(tmp_path: Path) -> None:
    doc = make_bundle(tmp_path, FILES)
    (tmp_path / "bundle.json").write_text(
        json.dumps(manifest.seal({**doc, "artifacts": [*doc["artifacts"], doc["artifacts"][0]]}))
    )
    assert manifest.verify(tmp_path)[1] == [
        f"{doc['artifacts'][0]['path']}: listed twice in the manifest; refused: re-create the bundle"
    ]


def test_a_symlinked_manifest_or_signature_is_refused(tmp_path: Path, key) -> None:
    doc, _signed, _ = signed_bundle(tmp_path / "b", key)
    root = tmp_path / "b"
    (root / "model/m/config.json").write_bytes(FILES["model/m/config.json"])
    assert verdicts(root, key.fingerprint)["verify"] == (doc, [])
    for name in ("bundle.json", manifest.SIGNATURE):
        real = tmp_path / f"real-{name}"
        shutil.copyfile(root / name, real)
        (root / name).unlink()
        (root / name).symlink_to(real)
        got = verdicts(root, key.fingerprint)
        assert got["cli"] == 1 and got["verify"][0] is None and str(got["deploy"]).startswith("bundle knob:"), got
        (root / name).unlink()
        shutil.copyfile(real, root / name)


def test_create_lists_regular_files_prunes_empty_directories_and_stops_at_a_symlink(tmp_path: Path) -> None:
    from hgxkit.bundle.create import _regular_files_only
    from hgxkit.errors import HgxkitError

    (tmp_path / "model/m/.cache/deep").mkdir(parents=True)  # left empty by a tool: verify would refuse it
    (tmp_path / "model/m/config.json").write_bytes(b"{}")
    assert _regular_files_only(tmp_path) == ["model/m/config.json"]
    assert not (tmp_path / "model/m/.cache").exists()
    (tmp_path / "model/m/link").symlink_to("/etc")
    with pytest.raises(HgxkitError, match=r"model/m/link: a symlink or special file; a bundle holds neither"):
        _regular_files_only(tmp_path)


def _replace(root: Path, rel: str, how: Callable[[Path], object]) -> None:
    (root / rel).unlink()
    how(root / rel)


MISSING = "missing (or not a regular file); a symlink or special file is refused: re-copy the bundle"
# What the manifest does not vouch for, each with every line verify gives it: a path is named once.
EXACTLY: dict[str, tuple[Callable[[Path], object], list[str]]] = {
    "a listed file that became a symlink": (
        lambda r: _swap_for_link(r, "model/m/config.json", False),
        [f"model/m/config.json: {MISSING}"],
    ),
    "a listed file that became a FIFO": (
        lambda r: _replace(r, "model/m/config.json", os.mkfifo),
        [f"model/m/config.json: {MISSING}"],
    ),
    "a listed file that became a directory": (
        lambda r: _replace(r, "model/m/config.json", Path.mkdir),
        [
            f"model/m/config.json: {MISSING}",
            "model/m/config.json/: a directory not in the manifest; remove it or re-create the bundle",
        ],
    ),
    "unlisted directories nested in a listed one": (
        lambda r: ((r / "model/m/hooks/deep/deeper").mkdir(parents=True), (r / "model/m/hooks/deep/x").write_text("")),
        [
            "model/m/hooks/: a directory not in the manifest; remove it or re-create the bundle",
            "model/m/hooks/deep/x: not in the manifest; remove it or re-create the bundle",
        ],
    ),
    "unlisted directories nested at the top": (
        lambda r: (r / "extra/deep/deeper").mkdir(parents=True),
        ["extra/: a directory not in the manifest; remove it or re-create the bundle"],
    ),
}


@pytest.mark.parametrize("case", sorted(EXACTLY))
def test_what_the_manifest_does_not_vouch_for_is_named_once_at_its_topmost_path(tmp_path: Path, case: str) -> None:
    root = tmp_path / "b"
    root.mkdir()
    doc = make_bundle(root, FILES)
    how, lines = EXACTLY[case]
    how(root)
    assert manifest.verify(root) == (doc, lines)


def test_an_artifact_that_is_not_an_object_is_refused_with_one_line_each(tmp_path: Path) -> None:
    doc = make_bundle(tmp_path, FILES)
    (tmp_path / "bundle.json").write_text(
        json.dumps(manifest.seal({**doc, "artifacts": [*doc["artifacts"], "wheels/a.whl", 7]}))
    )
    assert manifest.verify(tmp_path)[1] == ["None: not a path inside the bundle; refused"] * 2


@pytest.mark.parametrize("make", [os.mkfifo, Path.mkdir], ids=["a FIFO", "a directory"])
def test_a_bundle_json_that_is_not_a_regular_file_is_refused_with_one_line(
    tmp_path: Path, make: Callable[[Path], object]
) -> None:
    make_bundle(tmp_path, FILES)
    _replace(tmp_path, "bundle.json", make)
    assert manifest.verify(tmp_path) == (
        None,
        [
            f"{tmp_path}/bundle.json: unreadable or not a regular file (not a regular file); refused: re-create or "
            "re-copy the bundle"
        ],
    )


def _at_once(fifo: Path, call: Callable[[], object]) -> object:
    """What `call` returns or raises; a call still waiting on `fifo` after 30 s is released and fails the test (a
    bound, so a regression fails instead of hanging the suite)."""
    got: list[object] = []

    def run() -> None:
        try:
            got.append(call())
        except Exception as err:  # what it raised is the answer
            got.append(err)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout=30)
    if thread.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # a writer lets the blocked open return
        thread.join()
        pytest.fail(f"waited on the FIFO {fifo}")
    return got[0]


def test_a_bundle_path_that_is_a_fifo_is_refused_at_once_never_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "b"
    os.mkfifo(fifo)
    found, problems = _at_once(fifo, lambda: manifest.verify(fifo))  # type: ignore[misc]
    assert found is None and problems[0].startswith(f"{fifo}/bundle.json: unreadable or not a regular file ("), problems
    assert isinstance(_at_once(fifo, lambda: manifest.list_files(fifo)), NotADirectoryError)


def test_the_sites_fingerprint_may_be_written_in_groups_and_in_lower_case(tmp_path: Path, key) -> None:
    doc, _, _ = signed_bundle(tmp_path, key)
    (tmp_path / "model/m/config.json").write_bytes(FILES["model/m/config.json"])
    spaced = " ".join(key.fingerprint[i : i + 4] for i in range(0, 40, 4)).lower()  # as gpg prints it
    assert manifest.verify(tmp_path, fingerprint=spaced) == (doc, [])


def test_a_signature_file_with_a_bad_signature_beside_the_good_one_is_refused(tmp_path: Path, key) -> None:
    signed_bundle(tmp_path / "b", key)
    root = tmp_path / "b"
    (root / "model/m/config.json").write_bytes(FILES["model/m/config.json"])
    (tmp_path / "other").write_bytes(b"not bundle.json")
    key.sign_detached(tmp_path / "other", tmp_path / "other.sig")
    # gpgv reports the good one (VALIDSIG) and fails on the other: the file as a whole is not a valid signature.
    with open(root / manifest.SIGNATURE, "ab") as sig:
        sig.write((tmp_path / "other.sig").read_bytes())
    refused = "bundle.json.sig: no valid signature of bundle.json by the bundle's key; refused: re-copy or re-create it"
    assert manifest.verify(root, fingerprint=key.fingerprint) == (None, [refused])


def test_a_node_without_gpgv_is_told_to_install_it(tmp_path: Path, key, monkeypatch: pytest.MonkeyPatch) -> None:
    signed_bundle(tmp_path / "b", key)
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert manifest.verify(tmp_path / "b", fingerprint=key.fingerprint) == (
        None,
        ["gpgv not found: apt-get install gpgv"],
    )


def test_gpgv_status_that_is_not_utf8_is_still_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The key is the bundle's own file, so its user ID (which gpgv prints) holds whatever bytes its maker wrote.
    root = tmp_path / "b"
    (root / "apt").mkdir(parents=True)
    (root / manifest.KEYRING).write_bytes(b"keyring")
    doc = make_bundle(root, FILES)
    (root / manifest.SIGNATURE).write_bytes(b"signature")
    fpr = "AB" * 20
    status = tmp_path / "status"
    status.write_bytes(b"[GNUPG:] GOODSIG 0123 J\xe9r\xf4me <j@x>\n[GNUPG:] VALIDSIG " + fpr.encode() + b" 2026 0\n")
    gpgv = tmp_path / "bin/gpgv"
    gpgv.parent.mkdir()
    gpgv.write_text(f"#!/bin/sh\ncat >/dev/null\ncat {status}\n")
    gpgv.chmod(0o755)
    monkeypatch.setenv("PATH", f"{gpgv.parent}:{os.environ['PATH']}")
    assert manifest.verify(root, fingerprint=fpr) == (doc, [])
