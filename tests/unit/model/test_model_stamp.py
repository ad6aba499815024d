"""The model check's shell fast path (hgxkit.model.facts.stamp_check) against the stamp the host program writes
(hgxkit.model.core.write_stamp): run for real with sh, stat, sha256sum and curl of this machine, on a temporary
copy and state directory; the branch cases ask the Hub stand-in on 127.0.0.1."""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from hgxkit.hostcmd import script
from hgxkit.model import core, nodeprogram
from hgxkit.model.facts import ModelSyncStatus, stamp_check
from hgxkit.sim.hub.makerepo import RepoSpec, make_repo
from hgxkit.sim.hub.server import HubServer, make_server

ROOT = Path(__file__).resolve().parents[3]
# The program as the role ships it (hgxkit.model.nodeprogram builds it), alone in a folder of its own.
FETCH = Path(tempfile.mkdtemp(prefix="hgxkit-fetch-")) / nodeprogram.PROGRAM_NAME
FETCH.write_bytes(nodeprogram.uploads()[nodeprogram.PROGRAM_NAME])
atexit.register(shutil.rmtree, FETCH.parent, True)
REPO = "org/stamped"
_spec = importlib.util.spec_from_file_location("hgxkit_fetch", FETCH)
assert _spec and _spec.loader
fetch = importlib.util.module_from_spec(_spec)
sys.modules["hgxkit_fetch"] = fetch
_spec.loader.exec_module(fetch)
COMMIT = "c0ffee" + "0" * 34


def fast(spec: core.Spec, env: dict[str, str] | None = None) -> tuple[int, str]:
    """The shell fast path alone: (exit status, stdout)."""
    command = stamp_check(spec)
    assert command is not None
    done = subprocess.run(["sh", "-c", command.get_raw_value()], capture_output=True, text=True, env=env, check=False)
    return done.returncode, done.stdout


def falls_through(spec: core.Spec) -> bool:
    """The fast path printed nothing of its own and the command after it ran."""
    command = script("{fast} || echo FALLBACK", fast=stamp_check(spec))  # type: ignore[arg-type]
    out = subprocess.run(["sh", "-c", command.get_raw_value()], capture_output=True, text=True, check=False).stdout
    return out == "FALLBACK\n"


def make_copy(tmp: Path, names: tuple[str, ...] = ("config.json", "sub/dir/w.safetensors"), **kw: object) -> core.Spec:
    """A verified copy as a sync leaves it (files, manifest, record) and its spec, pinned to COMMIT."""
    local = tmp / "models" / "m1"
    files = []
    for i, name in enumerate(names):
        path = local / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"w" * (100 + i))
        lfs = name.endswith(".safetensors")
        files.append(
            core.VerifiedFile(
                name, 100 + i, "a" * 64 if lfs else None, None if lfs else "b" * 40, path.stat().st_mtime_ns
            )
        )
    spec = core.Spec(
        **{
            "repo_id": REPO,
            "local_dir": str(local),
            "revision": COMMIT,
            "state_dir": str(tmp / "state"),
            "allow_patterns": ["*.json", "*.safetensors"],
            "program_sha": "1" * 64,
            **kw,
        }
    )  # type: ignore[arg-type]
    manifest = core.Manifest(REPO, spec.revision, COMMIT, list(spec.allow_patterns), "hub", "", files)
    core.write_under(str(local), core.MANIFEST_NAME, manifest.to_json())
    (tmp / "state").mkdir(exist_ok=True)
    Path(spec.state_file(".json")).write_text(json.dumps({"commit": COMMIT}))
    assert core.write_stamp(spec, manifest)
    time.sleep(0.02)  # past the kernel's coarse clock tick, so a change made now gets a later ctime
    return spec


def test_an_unchanged_copy_is_answered_by_the_stamp(tmp_path: Path) -> None:
    spec = make_copy(tmp_path)
    code, out = fast(spec)
    assert code == 0
    assert json.loads(out) == {
        "name": "m1",
        "unit": "hgxkit-model-m1",
        "state": "complete",
        "commit": COMMIT,
        "elapsed_s": 0.0,
        "reason": f"verified 2 files at {COMMIT[:12]} (unchanged since verify, the stamp on the node)",
    }
    lines = Path(spec.state_file(".stamp")).read_text().splitlines()
    root = str(tmp_path / "models" / "m1")
    assert lines[2:] == [
        root,
        "config.json",
        root,
        f"{root}/sub",
        f"{root}/sub/dir",
        f"{root}/config.json",
        f"{root}/sub/dir/w.safetensors",
        f"{root}/{core.MANIFEST_NAME}",
        spec.state_file(".json"),
    ]
    assert lines[0] == f"{core.STAMP_SCHEMA} {core.stamp_key(spec)} {COMMIT} 2"
    assert Path(spec.state_file(".stamp")).stat().st_mode & 0o777 == 0o644


def _touch(f: Path) -> None:
    os.utime(f, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns + 1))


def _truncate(f: Path) -> None:
    f.write_bytes(f.read_bytes()[:-1])


def _same_size_mtime_restored(f: Path) -> None:  # only the ctime (and what the bytes say) tell
    before = f.stat()
    f.write_bytes(b"X" * before.st_size)
    os.utime(f, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (f.stat().st_size, f.stat().st_mtime_ns, f.stat().st_ino) == (
        before.st_size,
        before.st_mtime_ns,
        before.st_ino,
    )


def _parent_becomes_a_link(f: Path) -> None:  # a container points sub/ at a tree of its choosing, same bytes
    sub = f.parents[1]
    shutil.copytree(sub, sub.with_name("elsewhere"), copy_function=shutil.copy2)
    shutil.rmtree(sub)
    sub.symlink_to(sub.with_name("elsewhere"))


@pytest.mark.parametrize("change", [_touch, _truncate, _same_size_mtime_restored, _parent_becomes_a_link])
def test_a_changed_file_falls_through(tmp_path: Path, change) -> None:  # type: ignore[no-untyped-def]
    spec = make_copy(tmp_path)
    change(tmp_path / "models" / "m1" / "sub" / "dir" / "w.safetensors")
    assert fast(spec) == (1, "")
    assert falls_through(spec)


def test_local_dir_swapped_falls_through(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    spec = make_copy(tmp_path / "real")
    link = tmp_path / "m1"
    link.symlink_to(tmp_path / "real" / "models" / "m1")
    linked = replace(spec, local_dir=str(link))
    record = json.loads(Path(spec.state_file(".json")).read_text())
    manifest = core.Manifest.from_json((link / core.MANIFEST_NAME).read_text())
    Path(spec.state_file(".json")).write_text(json.dumps(record))
    assert core.write_stamp(linked, manifest)
    time.sleep(0.02)
    assert fast(linked)[0] == 0
    # The link now names an identical copy elsewhere (mtimes kept): `pwd -P` is not the stamp's realpath.
    shutil.copytree(tmp_path / "real" / "models" / "m1", tmp_path / "copy", copy_function=shutil.copy2, symlinks=True)
    link.unlink()
    link.symlink_to(tmp_path / "copy")
    assert falls_through(linked)
    # The same path, a real directory again, replaced by an identical copy: the inodes and ctimes differ.
    link.unlink()
    shutil.copytree(tmp_path / "copy", link, copy_function=shutil.copy2)
    assert core.write_stamp(linked, manifest)
    time.sleep(0.02)
    assert fast(linked)[0] == 0
    shutil.rmtree(link)
    shutil.copytree(tmp_path / "copy", link, copy_function=shutil.copy2)
    assert falls_through(linked)


def test_the_manifest_edited_or_the_record_missing_falls_through(tmp_path: Path) -> None:
    spec = make_copy(tmp_path)
    manifest = tmp_path / "models" / "m1" / core.MANIFEST_NAME
    manifest.write_text(manifest.read_text())  # the same text, rewritten
    assert falls_through(spec)
    spec = make_copy(tmp_path / "again")
    Path(spec.state_file(".json")).unlink()
    assert falls_through(spec)


@pytest.mark.parametrize(
    "change", [{"allow_patterns": ["*.json"]}, {"program_sha": "2" * 64}, {"revision": "d" * 40}, {"endpoint": "x"}]
)
def test_another_spec_falls_through(tmp_path: Path, change: dict) -> None:
    spec = make_copy(tmp_path)
    assert fast(spec)[0] == 0
    assert falls_through(replace(spec, **change))


def test_a_sync_starting_or_running_falls_through(tmp_path: Path) -> None:
    """No `systemctl is-active`: a sync removes the stamp first, and what it changes first (the manifest, when the
    copy is not complete) is in the stat."""
    spec = make_copy(tmp_path)
    core.remove_under(spec.local_dir, core.MANIFEST_NAME)  # what Syncer.run does before it replaces a file
    assert falls_through(spec)
    spec = make_copy(tmp_path / "b", endpoint="http://127.0.0.1:9", retries=0)  # a Hub that is not there
    assert fetch.main(["run", "--spec", spec.to_json()]) == 1
    assert not Path(spec.state_file(".stamp")).exists()


def test_names_the_stamp_cannot_hold_are_refused_and_a_stale_stamp_removed(tmp_path: Path) -> None:
    spec = make_copy(tmp_path)
    stamp = Path(spec.state_file(".stamp"))
    manifest = core.Manifest.from_json((tmp_path / "models" / "m1" / core.MANIFEST_NAME).read_text())
    for bad in ("a\nb.json", "a|b.json"):
        (tmp_path / "models" / "m1" / bad).write_bytes(b"w" * 100)
        f = manifest.files[0]
        odd = replace(manifest, files=[*manifest.files, replace(f, path=bad)])
        assert core.stamp_paths(str(tmp_path / "models" / "m1"), odd, spec.state_file(".json")) is None
        assert core.write_stamp(spec, manifest) and stamp.exists()
        assert not core.write_stamp(spec, odd)
        assert not stamp.exists()


def test_a_file_that_differs_from_the_manifest_gets_no_stamp(tmp_path: Path) -> None:
    """The writer re-checks stat's sizes and mtimes against the manifest (a change between check and stamp)."""
    spec = make_copy(tmp_path)
    manifest = core.Manifest.from_json((tmp_path / "models" / "m1" / core.MANIFEST_NAME).read_text())
    _touch(tmp_path / "models" / "m1" / "config.json")
    assert not core.write_stamp(spec, manifest)
    assert not Path(spec.state_file(".stamp")).exists()


def test_no_fast_path_with_a_full_rehash_or_a_bundle_branch(tmp_path: Path) -> None:
    spec = make_copy(tmp_path)
    assert ".stamp" in ModelSyncStatus().command(python="py", script_path="p.py", spec=spec.to_json()).get_raw_value()
    assert stamp_check(replace(spec, full_rehash=True)) is None
    assert stamp_check(replace(spec, source="bundle", revision="main")) is None


# -- with the host program laid out as the role ships it, and the Hub stand-in -----------------------------------


@pytest.fixture(scope="module")
def hub_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hub")
    make_repo(root, RepoSpec(repo_id=REPO, total_bytes=64 << 10, shards=2, vocab_size=1024))
    return root


@contextlib.contextmanager
def serving(root: Path) -> Iterator[tuple[HubServer, str]]:
    """The Hub stand-in on a free port of 127.0.0.1 while the block runs."""
    server = make_server(root)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture()
def hub(hub_root: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[HubServer, str]]:
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with serving(hub_root) as served:
        yield served


def synced(tmp_path: Path, url: str, **kw: object) -> core.Spec:
    """The repo synced by the host program (which leaves a stamp), and its spec."""
    spec = core.Spec(
        **{
            "repo_id": REPO,
            "local_dir": str(tmp_path / "models" / "m1"),
            "endpoint": url,
            "allow_patterns": ["*.json", "*.safetensors"],
            "state_dir": str(tmp_path / "state"),
            "margin_gb": 0.001,
            "retries": 0,
            "workers": 2,
            **kw,
        }
    )  # type: ignore[arg-type]
    assert fetch.main(["run", "--spec", spec.to_json()]) == 0
    assert Path(spec.state_file(".stamp")).exists()
    return spec


def heads(server: HubServer) -> list[str]:
    return [r.path for r in server.state.requests if r.method == "HEAD"]


def test_a_branch_is_answered_by_the_stamp_and_one_head(hub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    server, url = hub
    spec = synced(tmp_path, url)
    server.state.requests.clear()
    code, out = fast(spec)
    doc = json.loads(out)
    assert code == 0 and doc["state"] == "complete" and len(doc["commit"]) == 40
    # The sync may leave a raced download of a pinned file (resolve/<commit>/…) arriving after it returns: what the
    # fast path asks is the branch, once, by HEAD.
    asked = [r for r in server.state.requests if r.method == "HEAD" or "/resolve/main/" in r.path]
    assert heads(server) == [f"/{REPO}/resolve/main/generation_config.json"] and len(asked) == 1
    # The endpoint from the host's HF_ENDPOINT when the spec names none, as spec.where reads it.
    monkeypatch.setenv("HF_ENDPOINT", url)
    spec = synced(tmp_path / "env", "")
    assert fast(spec, env={**os.environ, "HF_ENDPOINT": url})[0] == 0
    assert fast(spec, env={**os.environ, "HF_ENDPOINT": "http://127.0.0.1:9"}) == (1, "")


def test_a_moved_branch_or_a_hub_that_is_down_falls_through(hub_root: Path, tmp_path: Path) -> None:
    with serving(hub_root) as (_, url):
        spec = synced(tmp_path, url)
        assert fast(spec)[0] == 0
    assert falls_through(spec)  # nothing listens there now
    readme = hub_root / REPO / "refs" / "main" / "README.md"
    with serving(hub_root) as (_, url):
        moved = replace(spec, endpoint=url)
        assert core.write_stamp(moved, core.Manifest.from_json((Path(spec.local_dir) / core.MANIFEST_NAME).read_text()))
        assert fast(moved)[0] == 0
        old = readme.read_text()
        readme.write_text(old + "\nmoved\n")  # a new commit on main
        try:
            assert falls_through(moved)
        finally:
            readme.write_text(old)


def shipped(tmp_path: Path) -> tuple[Path, str]:
    """The host program laid out as the role uploads it (hgxkit_fetch.py with model_core.py beside it) in
    `tmp_path/lib`, and its `program_sha` as the role computes it."""
    lib = tmp_path / "lib"
    lib.mkdir()
    shutil.copy(FETCH, lib / "hgxkit_fetch.py")
    shutil.copy(Path(core.__file__), lib / "model_core.py")
    sha = hashlib.sha256()
    for name in ("hgxkit_fetch.py", "model_core.py"):
        sha.update(hashlib.sha256((lib / name).read_bytes()).digest())
    return lib, sha.hexdigest()


def test_the_fact_answers_from_the_stamp_and_each_python_tier_writes_it(hub, tmp_path: Path) -> None:
    """The whole command as a node runs it, with the program laid out as the role uploads it: the first pinned
    read is quickcheck's (it leaves a stamp), the second the shell's; the full `status` leaves one too."""
    _, url = hub
    lib, program_sha = shipped(tmp_path)
    spec = synced(tmp_path, url, program_sha=program_sha)
    commit = core.Manifest.from_json((tmp_path / "models" / "m1" / core.MANIFEST_NAME).read_text()).commit
    pinned = replace(spec, revision=commit)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def read(s: core.Spec) -> dict:
        command = ModelSyncStatus().command(
            python=sys.executable, script_path=str(lib / "hgxkit_fetch.py"), spec=s.to_json()
        )
        out = subprocess.run(["sh", "-c", command.get_raw_value()], env=env, capture_output=True, text=True, check=True)
        return ModelSyncStatus().process(out.stdout.splitlines())

    first = read(pinned)
    assert (first["state"], first["reason"]) == (
        "complete",
        f"verified 7 files at {commit[:12]} (unchanged since verify)",
    )
    second = read(pinned)
    assert (second["state"], second["reason"]) == (
        "complete",
        f"verified 7 files at {commit[:12]} (unchanged since verify, the stamp on the node)",
    )
    Path(spec.state_file(".stamp")).unlink()
    full = read(spec)  # a branch: the full status, which writes the stamp as well
    assert (full["state"], full["reason"]) == ("complete", f"verified 7 files at {commit[:12]}")
    assert "the stamp on the node" in read(spec)["reason"]
    (tmp_path / "models" / "m1" / "config.json").write_text("{}")
    changed = read(spec)
    assert changed["state"] == "incomplete" and not Path(spec.state_file(".stamp")).exists()


def test_a_dry_runs_check_leaves_the_stamp_as_it_is(hub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`pyinfra --dry` reads the model's state with the same fact: its Python tiers (quickcheck, `status`) answer as
    always but neither write a missing stamp nor remove a stale one; without --dry they do both."""
    _, url = hub
    lib, program_sha = shipped(tmp_path)
    spec = synced(tmp_path, url, program_sha=program_sha)
    commit = core.Manifest.from_json((tmp_path / "models" / "m1" / core.MANIFEST_NAME).read_text()).commit
    pinned = replace(spec, revision=commit)
    stamp = Path(spec.state_file(".stamp"))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def read(s: core.Spec, *, dry: bool) -> dict:
        monkeypatch.setattr(sys, "argv", ["pyinfra", "inv.py", "deploy.py", *(["--dry"] if dry else [])])
        command = ModelSyncStatus().command(
            python=sys.executable, script_path=str(lib / "hgxkit_fetch.py"), spec=s.to_json()
        )
        assert ("HGXKIT_MODEL_STAMP_READONLY=1" in command.get_raw_value()) is dry
        out = subprocess.run(["sh", "-c", command.get_raw_value()], env=env, capture_output=True, text=True, check=True)
        return ModelSyncStatus().process(out.stdout.splitlines())

    assert core.STAMP_READONLY_ENV == "HGXKIT_MODEL_STAMP_READONLY"
    stamp.unlink(missing_ok=True)
    for s in (pinned, spec):  # quickcheck's tier, then the full `status`
        assert read(s, dry=True)["state"] == "complete" and not stamp.exists()
    assert read(pinned, dry=False)["state"] == "complete" and stamp.exists()
    before = stamp.read_bytes()
    (tmp_path / "models" / "m1" / "config.json").write_text("{}")
    assert read(spec, dry=True)["state"] == "incomplete" and stamp.read_bytes() == before  # stale, but left
    assert read(spec, dry=False)["state"] == "incomplete" and not stamp.exists()


def test_with_a_token_the_shell_asks_the_gated_hub_with_it_and_no_process_sees_it(tmp_path: Path) -> None:
    """A branch of a gated repo, with the controller's token on stdin: the shell check answers from the stamp,
    asking the Hub with the token in a header curl reads from a pipe; no process gets the token in its argv or its
    environment (a curl on PATH records both, then runs the real one). A wrong token: the Hub refuses the HEAD,
    the shell check falls through to `status` (the token piped on to it)."""
    token = "hf_" + "t0ken" * 6
    root = tmp_path / "hub"
    make_repo(
        root, RepoSpec(repo_id="org/gated", total_bytes=32 << 10, shards=1, vocab_size=512, gated=True, tokens=(token,))
    )
    lib, _ = shipped(tmp_path)
    real = shutil.which("curl")
    assert real
    spy = tmp_path / "bin"
    spy.mkdir()
    seen = tmp_path / "seen"
    (spy / "curl").write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {seen}; env >> {seen}; exec {real} "$@"\n')
    (spy / "curl").chmod(0o755)
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "PATH": f"{spy}:{os.environ['PATH']}",
        "hgxkit_token": "from-the-environment",
    }
    with serving(root) as (_, url):
        spec = core.Spec(
            repo_id="org/gated",
            local_dir=str(tmp_path / "models" / "g"),
            endpoint=url,
            allow_patterns=["*.json", "*.safetensors"],
            state_dir=str(tmp_path / "state"),
            margin_gb=0.001,
            retries=0,
            workers=2,
        )
        token_file = tmp_path / "token"
        token_file.write_text(token)
        assert fetch.main(["run", "--spec", spec.to_json(), "--token-file", str(token_file)]) == 0
        assert Path(spec.state_file(".stamp")).exists()
        command = (
            ModelSyncStatus()
            .command(python=sys.executable, script_path=str(lib / "hgxkit_fetch.py"), spec=spec.to_json(), token=True)
            .get_raw_value()
        )
        assert token not in command

        def read(given: str) -> dict:
            out = subprocess.run(
                ["sh", "-c", command], input=given + "\n", env=env, capture_output=True, text=True, check=True
            )
            return ModelSyncStatus().process(out.stdout.splitlines())

        good = read(token)
        assert good["state"] == "complete" and good["reason"].endswith(
            "(unchanged since verify, the stamp on the node)"
        )
        assert seen.read_text().count("-H @-") == 1
        bad = read("hf_wrong")
        # The Hub lists a gated repo's files to anyone (as huggingface.co does), so `status` still finds the copy
        # complete; the shell check did not answer, its HEAD of a file was refused.
        assert bad["state"] == "complete" and "the stamp on the node" not in bad["reason"]
        assert seen.read_text().count("-H @-") == 2
    assert token not in seen.read_text() and "hf_wrong" not in seen.read_text()


def test_a_missing_file_gets_no_stamp_and_the_writer_does_not_raise(tmp_path: Path) -> None:
    """`stat` fails on a path that is gone: no stamp, and a stale one is removed."""
    spec = make_copy(tmp_path)
    manifest = core.Manifest.from_json((tmp_path / "models" / "m1" / core.MANIFEST_NAME).read_text())
    (tmp_path / "models" / "m1" / "config.json").unlink()
    assert core.write_stamp(spec, manifest) is False
    assert not Path(spec.state_file(".stamp")).exists()


def test_a_dry_runs_check_writes_no_stamp_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = make_copy(tmp_path)
    manifest = core.Manifest.from_json((tmp_path / "models" / "m1" / core.MANIFEST_NAME).read_text())
    stamp = Path(spec.state_file(".stamp"))
    stamp.unlink()
    monkeypatch.setenv(core.STAMP_READONLY_ENV, "1")
    assert core.write_stamp(spec, manifest) is False and not stamp.exists()


def _copy_and_manifest(tmp: Path) -> tuple[core.Spec, core.Manifest, Path]:
    spec = make_copy(tmp)
    manifest = core.Manifest.from_json((tmp / "models" / "m1" / core.MANIFEST_NAME).read_text())
    return spec, manifest, Path(spec.state_file(".stamp"))


def test_a_full_rehash_or_a_branch_manifest_gets_no_stamp_and_a_stale_one_is_removed(tmp_path: Path) -> None:
    """A full rehash answers by hashing every time, and the stamp's head needs the commit itself."""
    spec, manifest, stamp = _copy_and_manifest(tmp_path)
    assert core.write_stamp(replace(spec, full_rehash=True), manifest) is False and not stamp.exists()
    assert core.write_stamp(spec, manifest) and stamp.exists()
    assert core.write_stamp(spec, replace(manifest, commit="main")) is False and not stamp.exists()


def test_without_stat_on_path_no_stamp_is_written_and_the_writer_does_not_raise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec, manifest, stamp = _copy_and_manifest(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    assert core.write_stamp(spec, manifest) is False and not stamp.exists()


def test_stat_runs_in_the_c_locale_whatever_the_hosts_language(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`%F` is a word in the locale's language ("Verzeichnis" in German); the writer, like the shell check, reads
    the C locale's."""
    spec, manifest, stamp = _copy_and_manifest(tmp_path)
    stamp.unlink()
    for name in ("LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANG", "C.UTF-8")
    monkeypatch.setenv("LANGUAGE", "de")
    kind = subprocess.run(["stat", "--printf", "%F", "--", str(tmp_path)], capture_output=True, text=True, check=True)
    if kind.stdout == "directory":
        why = "this machine's stat prints no German (no C.UTF-8 locale or coreutils translations)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {why}: Debian's coreutils carries them")
        pytest.skip(why)
    assert core.write_stamp(spec, manifest) and stamp.exists()


def test_a_local_dir_whose_name_is_not_utf8_gets_no_stamp_and_the_writer_does_not_raise(tmp_path: Path) -> None:
    """`stat` prints the name's bytes as they are; the stamp, a text file, cannot hold them."""
    spec, manifest, stamp = _copy_and_manifest(tmp_path)
    moved = tmp_path / os.fsdecode(b"mod\xffels")
    (tmp_path / "models").rename(moved)
    assert core.write_stamp(replace(spec, local_dir=str(moved / "m1")), manifest) is False and not stamp.exists()
