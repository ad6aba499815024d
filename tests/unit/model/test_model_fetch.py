"""hgxkit/model/fetch/ built into the model role's host program (hgxkit_fetch.py) against the Hub stand-in on 127.0.0.1 (no systemd: `run` called directly)."""

from __future__ import annotations

import atexit
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from hgxkit.model import nodeprogram
from hgxkit.model.core import MANIFEST_NAME
from hgxkit.sim.hub.faults import FaultConfig
from hgxkit.sim.hub.makerepo import RepoSpec, make_repo
from hgxkit.sim.hub.server import HubHandler, HubServer, make_server

ROOT = Path(__file__).resolve().parents[3]
# The program as the role ships it (hgxkit.model.nodeprogram builds it), alone in a folder of its own.
FETCH = Path(tempfile.mkdtemp(prefix="hgxkit-fetch-")) / nodeprogram.PROGRAM_NAME
FETCH.write_bytes(nodeprogram.uploads()[nodeprogram.PROGRAM_NAME])
atexit.register(shutil.rmtree, FETCH.parent, True)
REPO, GATED, TOKEN = "org/tiny", "org/gated", "hf_unitGatedToken0123456789abcdef"
_spec = importlib.util.spec_from_file_location("hgxkit_fetch", FETCH)
assert _spec and _spec.loader
fetch = importlib.util.module_from_spec(_spec)
sys.modules["hgxkit_fetch"] = fetch
_spec.loader.exec_module(fetch)


@pytest.fixture(scope="module")
def hub_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hub")
    make_repo(root, RepoSpec(repo_id=REPO, total_bytes=6 << 20, shards=3, vocab_size=2048, extra_branches=("dev",)))
    make_repo(
        root, RepoSpec(repo_id=GATED, total_bytes=64 << 10, shards=1, vocab_size=2048, gated=True, tokens=(TOKEN,))
    )
    return root


@pytest.fixture()
def hub(hub_root: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[HubServer, str]]:
    server = make_server(hub_root)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    yield server, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def spec_file(tmp_path: Path, url: str, **kw: object) -> str:
    doc = {
        "repo_id": REPO,
        "local_dir": str(tmp_path / "models" / "tiny"),
        "allow_patterns": ["*.json", "*.safetensors"],
        "endpoint": url,
        "state_dir": str(tmp_path / "state"),
        "margin_gb": 0.001,
        "retries": 1,
        "backoff_s": 0.01,
        "workers": 2,
    }
    doc.update(kw)
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(doc))
    return str(path)


def run(spec: str, *extra: str) -> tuple[int, dict]:
    code = fetch.main(["run", "--spec", spec, *extra])
    state = json.loads(Path(spec).read_text())["state_dir"]
    name = Path(json.loads(Path(spec).read_text())["local_dir"]).name
    return code, json.loads(Path(state, f"{name}.result.json").read_text())


def status(spec: str, capsys: pytest.CaptureFixture[str]) -> dict:
    capsys.readouterr()
    fetch.main(["status", "--spec", spec])
    return json.loads(capsys.readouterr().out)


def bodies(server: HubServer) -> int:
    return sum(
        1 for r in server.state.requests if r.method == "GET" and r.path.startswith("/_lfs/") and r.status in (200, 206)
    )


def test_sync_then_metadata_only_status(hub, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    server, url = hub
    spec = spec_file(tmp_path, url)
    assert status(spec, capsys)["state"] == "incomplete"
    code, result = run(spec)
    assert code == 0 and result["ok"] and len(result["commit"]) == 40
    assert len(result["fetched"]) == 8 and result["rehashed"] == []
    manifest = json.loads((tmp_path / "models" / "tiny" / MANIFEST_NAME).read_text())
    assert manifest["commit"] == result["commit"] and manifest["source"] == "hub"
    record = json.loads((tmp_path / "state" / "tiny.json").read_text())
    assert record["commit"] == result["commit"] and record["files"] == 8
    progress = json.loads((tmp_path / "state" / "tiny.progress.json").read_text())
    assert progress["phase"] == "done"
    before = bodies(server)
    st = status(spec, capsys)
    assert st["state"] == "complete" and st["elapsed_s"] < 2
    code, result = run(spec)  # a second run hashes nothing and fetches nothing
    assert code == 0 and result["already"] is True and bodies(server) == before


def test_branch_moved_is_seen(hub, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, url = hub
    assert run(spec_file(tmp_path, url))[0] == 0
    st = status(spec_file(tmp_path, url, revision="dev"), capsys)
    assert st["state"] == "incomplete" and st["reason"].startswith("revision moved: synced ")


def test_corrupted_file_on_disk_is_refetched_alone(hub, tmp_path: Path) -> None:
    server, url = hub
    spec = spec_file(tmp_path, url)
    assert run(spec)[0] == 0
    shard = tmp_path / "models" / "tiny" / "model-00002-of-00003.safetensors"
    data = bytearray(shard.read_bytes())
    data[5000] ^= 0xFF
    shard.write_bytes(bytes(data))
    before = bodies(server)
    code, result = run(spec)
    assert code == 0 and result["rehashed"] == [shard.name] and result["fetched"] == [shard.name]
    assert bodies(server) == before + 1


def test_server_corruption_fails_clearly_and_marks_nothing_complete(hub, tmp_path: Path) -> None:
    server, url = hub
    server.state.faults.set(FaultConfig(corrupt_offset=100, paths="model-00001-*"))
    spec = spec_file(tmp_path, url, corrupt_refetch=1)
    code, result = run(spec)
    assert code == 1
    assert result["error"].startswith("model-00001-of-00003.safetensors is corrupted (sha256 ")
    assert result["error"].endswith(f"after 2 fetches from {url}: the server sends a bad copy; try another mirror")
    assert not (tmp_path / "models" / "tiny" / MANIFEST_NAME).exists()
    server.state.faults.set(FaultConfig())
    before = bodies(server)
    code, result = run(spec)  # the good files were journaled: only the bad one is fetched again
    assert code == 0 and result["fetched"] == ["model-00001-of-00003.safetensors"]
    assert bodies(server) == before + 1


def test_dropped_connection_is_retried(hub, tmp_path: Path) -> None:
    server, url = hub
    server.state.faults.set(FaultConfig(drop_after_bytes=1000, drop_count=3, paths="*.safetensors"))
    code, result = run(spec_file(tmp_path, url, retries=3))
    assert code == 0 and len(result["fetched"]) == 8


def test_network_failure_gives_up_with_one_line(tmp_path: Path) -> None:
    code, result = run(spec_file(tmp_path, "http://127.0.0.1:9", retries=1))
    assert code == 1
    assert result["error"].startswith(
        "network failure reading the file list from http://127.0.0.1:9: [Errno 111] Connection refused"
    )
    assert result["error"].endswith("(gave up after 2 attempts): check the network and re-run")
    assert "\n" not in result["error"]


@pytest.mark.parametrize(
    ("kw", "error"),
    [
        (
            {"repo_id": "org/nope"},
            "repository org/nope not found at {url} (or private and the token cannot read it): check model.repo_id in the recipe",
        ),
        ({"revision": "v9"}, "revision 'v9' of org/tiny not found at {url}: check model.revision in the recipe"),
        (
            {"allow_patterns": ["*.gguf"]},
            "no file of org/tiny@main matches allow_patterns ['*.gguf']: check model.allow_patterns in the recipe",
        ),
        ({"margin_gb": 100000}, "need 100000.0 GB, "),
    ],
)
def test_clear_errors(hub, tmp_path: Path, kw: dict, error: str) -> None:
    _, url = hub
    code, result = run(spec_file(tmp_path, url, **kw))
    assert code == 1 and result["error"].startswith(error.format(url=url))
    assert not (tmp_path / "models" / "tiny" / MANIFEST_NAME).exists()


def test_permission_denied(hub, tmp_path: Path) -> None:
    _, url = hub
    code, result = run(spec_file(tmp_path, url, local_dir="/proc/hgxkit-model"))
    assert code == 1
    assert result["error"].startswith(("cannot write to /proc/hgxkit-model", "permission denied at /proc/hgxkit-model"))


def test_gated_repo_and_token_file(hub, tmp_path: Path) -> None:
    _, url = hub
    spec = spec_file(tmp_path, url, repo_id=GATED, local_dir=str(tmp_path / "models" / "gated"), margin_gb=0)
    code, result = run(spec)
    assert code == 1 and result["error"].startswith(f"{GATED} is gated and the token has no access")
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    code, result = run(spec, "--token-file", str(token_file))
    assert code == 0 and result["ok"]
    assert not token_file.exists()  # read once, deleted at once
    for f in (tmp_path / "state").iterdir():
        assert TOKEN not in f.read_text()
    assert TOKEN not in (tmp_path / "models" / "gated" / MANIFEST_NAME).read_text()


def test_dir_source_only_verifies(hub, tmp_path: Path) -> None:
    _, url = hub
    assert run(spec_file(tmp_path, url))[0] == 0
    (tmp_path / "models" / "tiny" / MANIFEST_NAME).unlink()
    (tmp_path / "models" / "tiny" / "config.json").unlink()
    code, result = run(spec_file(tmp_path, url, source="dir"))
    assert code == 1
    assert result["error"] == (
        f"1 of 8 files missing or wrong in {tmp_path}/models/tiny (config.json: missing); "
        "model_source dir only verifies: copy the model there, or use model_source hub"
    )


def lfs_gets(server: HubServer) -> list:
    return [
        r for r in server.state.requests if r.method == "GET" and r.path.startswith("/_lfs/") and r.status in (200, 206)
    ]


def test_a_fresh_sync_hashes_as_the_bytes_arrive(hub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No file is read back after it was written: each is hashed on its way in."""
    reads: list[str] = []
    real = fetch.core.verify_file
    monkeypatch.setattr(
        fetch.core, "verify_file", lambda root, path, meta: reads.append(path) or real(root, path, meta)
    )
    code, result = run(spec_file(tmp_path, hub[1]))
    assert code == 0 and len(result["fetched"]) == 8 and reads == []
    assert not (tmp_path / "models" / "tiny" / ".cache" / "hgxkit" / "partial").exists()


def test_a_cut_file_resumes_mid_file_in_the_next_run(hub, tmp_path: Path) -> None:
    server, url = hub
    shard = "model-00001-of-00003.safetensors"
    server.state.faults.set(FaultConfig(drop_after_bytes=1_000_000, drop_count=1, paths=shard))
    spec = spec_file(tmp_path, url, retries=0)
    code, result = run(spec)
    assert code == 1 and "gave up after 1 attempts" in result["error"]
    partial = list((tmp_path / "models" / "tiny" / ".cache" / "hgxkit" / "partial").iterdir())
    assert [p.stat().st_size for p in partial] == [1_000_000]
    server.state.requests.clear()
    code, result = run(spec)
    assert code == 0 and result["fetched"] == [shard] and result["resumed"] == [shard]
    (get,) = lfs_gets(server)
    size = (tmp_path / "models" / "tiny" / shard).stat().st_size
    assert (get.range, get.status, get.body_bytes) == ("bytes=1000000-", 206, size - 1_000_000)


def test_a_dropped_connection_resumes_where_it_stopped(hub, tmp_path: Path) -> None:
    server, url = hub
    server.state.faults.set(FaultConfig(drop_after_bytes=300_000, drop_count=2, paths="*.safetensors"))
    code, result = run(spec_file(tmp_path, url, retries=2))
    assert code == 0 and result["resumed"] == []  # resumed inside the run: no byte sent twice
    sizes = sum(p.stat().st_size for p in (tmp_path / "models" / "tiny").glob("*.safetensors"))
    assert sum(r.body_bytes for r in lfs_gets(server) if "safetensors" in r.path) == sizes


def test_a_listing_with_an_unsafe_name_is_refused(hub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = fetch._model_info

    def evil(spec, token):  # a mirror that lists a name outside local_dir
        doc = real(spec, token)
        doc["siblings"].append(
            {"rfilename": "../escape.safetensors", "size": 3, "lfs": {"sha256": "0" * 64, "size": 3}}
        )
        return doc

    monkeypatch.setattr(fetch, "_model_info", evil)
    code, result = run(spec_file(tmp_path, hub[1]))
    assert code == 1
    assert result["error"].startswith(f"the file list from {hub[1]} names '../escape.safetensors', which has a '..'")
    assert not (tmp_path / "models" / "escape.safetensors").exists() and bodies(hub[0]) == 0


class XetHeaders(HubHandler):
    """The stand-in, saying that its LFS files are in Xet storage (X-Xet-Hash on their /resolve/ answers, as the
    Hub does for Xet-backed files)."""

    def end_headers(self) -> None:
        if "/resolve/" in self.path and ".safetensors" in self.path:
            self.send_header("X-Xet-Hash", "ab" * 32)
            self.send_header("X-Xet-Refresh-Route", "/api/models/org/tiny/xet-read-token/main")
        super().end_headers()


@pytest.fixture()
def xet_hub(hub_root: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[HubServer, str]]:
    server = make_server(hub_root)
    server.RequestHandlerClass = XetHeaders
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    yield server, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_xet_caches_on_a_small_file_system_are_refused_before_the_download(xet_hub, tmp_path: Path) -> None:
    server, url = xet_hub
    other_fs = Path("/dev/shm")
    if not other_fs.is_dir() or other_fs.stat().st_dev == tmp_path.stat().st_dev:
        if os.environ.get("CI") == "true":  # CI's hosts (Debian, Docker) have /dev/shm as its own tmpfs
            pytest.fail("CI=true but /dev/shm is missing or on the tmp dir's file system (the test needs another)")
        pytest.skip("needs /dev/shm on another file system than the test's tmp dir")
    cache = other_fs / f"hgxkit-test-xet-{os.getpid()}"
    spec = spec_file(tmp_path, url, xet_cache_dir=str(cache), xet_chunk_cache_gb=100000, xet_shard_cache_gb=16)
    code, result = run(spec)
    assert code == 1
    assert re.match(
        rf"need 100016\.0 GB, [\d.]+ GB free at {cache} \(hf_xet's caches at {cache}: chunk 100000 GB \+ shard 16 GB",
        result["error"],
    ), result["error"]
    assert result["error"].endswith("or choose another model.local_dir or model_xet_cache_dir")
    assert bodies(server) == 0 and not cache.exists()


def test_xet_caches_on_the_models_disk_add_up_with_the_files(xet_hub, tmp_path: Path) -> None:
    _, url = xet_hub
    code, result = run(spec_file(tmp_path, url, xet_chunk_cache_gb=100000, xet_shard_cache_gb=0))
    models = tmp_path / "models" / "tiny"
    assert code == 1 and result["error"].startswith("need 100000.0 GB, ")
    assert (
        f"free at {models} (8 files, 0.01 GB to fetch + margin; hf_xet's caches at {models}/.cache/huggingface/xet:"
        in result["error"]
    )


def test_xet_files_go_to_hf_xet_and_are_hashed_after(
    xet_hub, hub_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server, url = xet_hub
    landed: list[str] = []

    def hf_xet(self, meta, local_dir: str) -> None:  # stands in for hf_hub_download: the file lands, as hf_xet
        landed.append(meta.path)  # would write it, in the staging directory it was given
        assert local_dir.startswith(f"{self.spec.local_dir}/.cache/hgxkit/xet-stage/")
        target = Path(local_dir, meta.path)
        target.write_bytes((hub_root / REPO / "refs" / "main" / meta.path).read_bytes())

    monkeypatch.setattr(fetch.HubBodies, "fetch_xet", hf_xet)
    code, result = run(spec_file(tmp_path, url, xet_chunk_cache_gb=0.001, xet_shard_cache_gb=0.001))
    assert code == 0 and len(result["fetched"]) == 8
    assert sorted(landed) == sorted(f for f in result["fetched"] if f.endswith(".safetensors"))
    assert [r for r in lfs_gets(server) if "safetensors" in r.path] == []  # none of them over plain HTTP


@pytest.mark.parametrize("bad_copies", [1, 2])
def test_a_corrupt_xet_file_is_caught_by_its_hash_and_fetched_again(
    xet_hub, hub_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bad_copies: int
) -> None:
    """hf_xet writes a file with one byte flipped: the hash check after it catches the copy, fetches it again,
    and after `corrupt_refetch + 1` bad copies fails naming the file, with nothing marked complete."""
    _, url = xet_hub
    shard = "model-00002-of-00003.safetensors"
    landed: list[str] = []

    def hf_xet(self, meta, local_dir: str) -> None:  # a bad copy of `shard` the first `bad_copies` times
        data = bytearray((hub_root / REPO / "refs" / "main" / meta.path).read_bytes())
        if meta.path == shard and landed.count(shard) < bad_copies:
            data[5000] ^= 0xFF
        landed.append(meta.path)
        Path(local_dir, meta.path).write_bytes(bytes(data))

    monkeypatch.setattr(fetch.HubBodies, "fetch_xet", hf_xet)
    code, result = run(spec_file(tmp_path, url, corrupt_refetch=1))
    models = tmp_path / "models" / "tiny"
    assert landed.count(shard) == 2
    if bad_copies == 1:
        assert code == 0 and len(result["fetched"]) == 8
        good = (hub_root / REPO / "refs" / "main" / shard).read_bytes()
        assert (models / shard).read_bytes() == good
        assert (models / MANIFEST_NAME).exists()
    else:
        assert code == 1
        assert result["error"].startswith(f"{shard} is corrupted (sha256 ")
        assert result["error"].endswith(f"after 2 fetches from {url}: the server sends a bad copy; try another mirror")
        assert not (models / MANIFEST_NAME).exists()


def test_without_xet_xet_files_stream_over_http(xet_hub, tmp_path: Path) -> None:
    code, result = run(spec_file(tmp_path, xet_hub[1], xet=False, xet_chunk_cache_gb=100000))
    assert code == 0 and len(result["fetched"]) == 8


def test_xet_settings_put_the_caches_on_the_models_disk() -> None:
    env = fetch.core.Spec(repo_id="o/m", local_dir="/data/models/m").xet_env()
    assert env == {
        "HF_XET_CACHE": "/data/models/m/.cache/huggingface/xet",
        "HF_XET_CHUNK_CACHE_SIZE_BYTES": "10000000000",
        "HF_XET_SHARD_CACHE_SIZE_LIMIT": "16000000000",
        "HF_HOME": "/data/models/m/.cache/huggingface",
        "HF_XET_HIGH_PERFORMANCE": "1",
    }


# -- peer and fleet copies, with `ssh` replaced by a script that runs the remote command here ----------------

FAKE_SSH = """#!/bin/sh
# test stand-in for ssh: skip the options and the target, run the remote command on this machine
while [ $# -gt 0 ]; do
  case "$1" in
    -i|-o|-p|-l|-c|-S) shift 2 ;;
    -*) shift ;;
    *) break ;;
  esac
done
shift
exec sh -c "$*"
"""


def fleet_env(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "ssh").write_text(FAKE_SSH)
    (bin_dir / "ssh").chmod(0o755)
    root = str(ROOT)
    return {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "PYTHONPATH": root,
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    }


def host_spec(
    tmp_path: Path, url: str, name: str, parent: str = "", children: tuple[str, ...] = (), **kw: object
) -> str:
    """Host `name` of a fleet on this machine: its model in tmp/<name>/<name> (so its state files in the shared
    state dir are <name>.*), copying from `parent` and serving `children` (fleet_port 0: any free port)."""
    doc = {
        "repo_id": REPO,
        "local_dir": str(tmp_path / name / name),
        "allow_patterns": ["*.json", "*.safetensors"],
        "endpoint": url,
        "state_dir": str(tmp_path / "state"),
        "margin_gb": 0.001,
        "retries": 2,
        "backoff_s": 0.01,
        "workers": 2,
        "source": "fleet",
        "peer_wait_s": 30,
        "host_name": name,
        "fleet_port": 0,
        "fleet_bind": "127.0.0.1",
        "fleet_children": list(children),
    }
    if parent:
        doc.update(
            peer_name=parent,
            peer_address="127.0.0.1",
            peer_key="/dev/null",
            peer_dir=str(tmp_path / parent / parent),
            peer_program=f"{sys.executable} {FETCH}",
        )
    doc.update(kw)
    path = tmp_path / f"{name}.spec.json"
    path.write_text(json.dumps(doc))
    return str(path)


def start(spec: str, env: dict[str, str]) -> subprocess.Popen[str]:
    argv = [sys.executable, str(FETCH), "run", "--spec", spec]
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def result_of(tmp_path: Path, name: str) -> dict:
    return json.loads((tmp_path / "state" / f"{name}.result.json").read_text())


def manifest_at(tmp_path: Path, name: str) -> dict:
    return json.loads((tmp_path / name / name / MANIFEST_NAME).read_text())


@pytest.mark.parametrize("port", [0, -1], ids=["http", "ssh"])
def test_a_fleet_streams_down_a_tree_and_asks_the_hub_once_per_file(hub, tmp_path: Path, port: int) -> None:
    server, url = hub
    server.state.faults.set(FaultConfig(rate_bps=4_000_000, paths="*.safetensors"))  # the root takes a while
    env = fleet_env(tmp_path)
    tree = {"n1": "", "n2": "n1", "n3": "n1", "n4": "n2"}
    kids = {n: tuple(c for c, p in tree.items() if p == n) for n in tree}
    specs = {n: host_spec(tmp_path, url, n, p, kids[n], fleet_port=port) for n, p in tree.items()}
    procs = {n: start(specs[n], env) for n in reversed(tree)}  # leaves first: they wait for their parents
    outs = {n: p.communicate(timeout=120)[0] for n, p in procs.items()}
    for n in tree:
        assert procs[n].returncode == 0, outs[n]
    root = manifest_at(tmp_path, "n1")
    assert root["source"] == "hub"
    for n, p in tree.items():
        if p:
            copy = manifest_at(tmp_path, n)
            assert copy["source"] == f"fleet:{p}" and copy["commit"] == root["commit"]
            assert copy["files"] == [
                {**f, "mtime_ns": g["mtime_ns"]} for f, g in zip(root["files"], copy["files"], strict=True)
            ]
            assert len(result_of(tmp_path, n)["fetched"]) == 8
    served = [(r.method, r.path.split("?")[0]) for r in server.state.requests if r.status in (200, 206)]
    gets = [p for m, p in served if m == "GET" and ("/_lfs/" in p or "/resolve/" in p)]
    assert len(gets) == len(set(gets)) == 8  # every file's bytes served once (all to the root)
    if port == 0:  # the parents served over HTTP, and are gone
        assert "served 0.01 GB" in outs["n1"] and "served 0.01 GB" in outs["n2"]
        assert not list((tmp_path / "state").glob("*.serve.json"))


def test_a_fleet_host_checks_the_bytes_against_the_hubs_hashes(hub, tmp_path: Path) -> None:
    _, url = hub
    env = fleet_env(tmp_path)
    assert start(host_spec(tmp_path, url, "n1"), env).wait(timeout=60) == 0
    shard = tmp_path / "n1" / "n1" / "model-00002-of-00003.safetensors"
    data = bytearray(shard.read_bytes())
    data[10] ^= 0xFF
    shard.write_bytes(bytes(data))  # the parent's copy went bad after it verified it
    child = start(host_spec(tmp_path, url, "n2", "n1", corrupt_refetch=1), env)
    out = child.communicate(timeout=60)[0]
    assert child.returncode == 1, out
    error = result_of(tmp_path, "n2")["error"]
    assert error.startswith("model-00002-of-00003.safetensors is corrupted (sha256 ")
    assert error.endswith("after 2 fetches from n1: re-sync n1")


def test_a_peer_copy_touches_no_hub_and_refuses_unsafe_names(hub, tmp_path: Path) -> None:
    server, url = hub
    env = fleet_env(tmp_path)
    assert start(host_spec(tmp_path, url, "n1", source="hub"), env).wait(timeout=60) == 0
    server.state.requests.clear()
    peer = host_spec(tmp_path, "http://127.0.0.1:9", "n2", "n1", source="peer")
    out = start(peer, env).communicate(timeout=60)[0]
    assert result_of(tmp_path, "n2")["ok"], out
    assert manifest_at(tmp_path, "n2")["source"] == "peer:n1"
    assert server.state.requests == []
    manifest = tmp_path / "n1" / "n1" / MANIFEST_NAME
    doc = json.loads(manifest.read_text())
    doc["files"][0]["path"] = "../../n3/owned.json"
    manifest.write_text(json.dumps(doc))
    evil = host_spec(tmp_path, "http://127.0.0.1:9", "n3", "n1", source="peer")
    assert start(evil, env).wait(timeout=60) == 1
    assert result_of(tmp_path, "n3")["error"] == (
        "peer n1 lists '../../n3/owned.json', which has a '..', '.' or empty part: refusing its listing"
    )
    assert not (tmp_path / "n3" / "owned.json").exists()


def fleet_get(base: str, path: str, secret: str | None, **headers: str) -> tuple[int, bytes]:
    """GET `path` from a fleet server, signed with `secret` (None: unsigned)."""
    if secret:
        headers.update(fetch.fleet_auth(secret, "GET", path, headers.get("Range", "")))
    req = urllib.request.Request(base + path, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, b""


def test_a_fleet_server_answers_only_with_its_secret_and_only_verified_files(hub, tmp_path: Path) -> None:
    spec_path = spec_file(tmp_path, hub[1], source="fleet", fleet_port=0, fleet_bind="127.0.0.1")
    assert run(spec_path)[0] == 0
    spec = fetch.core.Spec.load(spec_path)
    syncer = fetch.Syncer(spec, None, fetch.Reporter(spec, "t"))
    syncer.manifest = fetch.load_manifest(spec.local_dir)
    server = fetch.FleetServer(spec, syncer)
    serve_file = tmp_path / "state" / "tiny.serve.json"
    doc = json.loads(serve_file.read_text())
    assert serve_file.stat().st_mode & 0o777 == 0o600
    base = f"http://127.0.0.1:{doc['port']}"

    def get(path: str, secret: str | None = doc["secret"], **headers: str) -> tuple[int, bytes]:
        return fleet_get(base, path, secret, **headers)

    try:
        config = (tmp_path / "models" / "tiny" / "config.json").read_bytes()
        assert get("/state", None)[0] == 403 and get("/files/config.json", "wrong")[0] == 403
        assert get("/files/config.json") == (200, config)
        assert get("/files/config.json", Range="bytes=10-") == (206, config[10:])
        assert get("/files/../../etc/passwd")[0] == 404 and get("/files/%2E%2E/spec.json")[0] == 404
        assert get("/files/.hgxkit-manifest.json")[0] == 404  # only files of the model, verified
        state = json.loads(get("/state")[1])["state"]
        assert state["commit"] == syncer.manifest.commit and len(state["files"]) == 8
    finally:
        server.close()
    assert not serve_file.exists()


# -- the status check's fast path (hgxkit/model/quickcheck.py, inside ModelSyncStatus's command) ----------------


def status_by_fact(spec: str, env: dict[str, str]) -> dict:
    """ModelSyncStatus's command, run by a shell as on a node (the full check is fetch.py, loaded as a module)."""
    from hgxkit.model.facts import ModelSyncStatus

    fact = ModelSyncStatus()
    command = fact.command(python=sys.executable, script_path=str(FETCH), spec=Path(spec).read_text(), token=False)
    out = subprocess.run(["bash", "-c", command.get_raw_value()], env=env, capture_output=True, text=True, check=True)
    return fact.process(out.stdout.splitlines())


def hub_requests(server: HubServer) -> int:
    return len(server.state.requests)


def hub_requests_once_served(server: HubServer, expected: int, deadline_s: float = 30) -> int:
    """The hub's request count once it reaches `expected` (or at `deadline_s`): the hub logs a request after
    its answer went out, so the client can be done before its handler thread has counted it."""
    end = time.monotonic() + deadline_s
    while hub_requests(server) < expected and time.monotonic() < end:
        time.sleep(0.01)
    return hub_requests(server)


@pytest.fixture()
def pinned(hub, tmp_path: Path) -> tuple[HubServer, str, dict[str, str]]:
    """A verified copy of the repo, and a spec that pins the commit it was synced at."""
    server, url = hub
    code, result = run(spec_file(tmp_path, url))
    assert code == 0
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    return server, spec_file(tmp_path, url, revision=result["commit"]), env


def test_a_pinned_unchanged_copy_is_answered_by_the_fast_path_without_the_hub(pinned) -> None:
    from hgxkit.model import quickcheck

    server, spec, env = pinned
    commit = json.loads(Path(spec).read_text())["revision"]
    quick = quickcheck.quick_status(json.loads(Path(spec).read_text()), str(FETCH))
    assert quick is not None
    assert (quick["state"], quick["commit"], quick["name"], quick["unit"]) == (
        "complete",
        commit,
        "tiny",
        "hgxkit-model-tiny",
    )
    assert quick["reason"] == f"verified 8 files at {commit[:12]} (unchanged since verify)"
    before = hub_requests(server)
    st = status_by_fact(spec, env)
    assert st["reason"] == quick["reason"] and st["state"] == "complete"
    assert hub_requests(server) == before


@pytest.mark.parametrize("change", ["one byte, same size", "size"])
def test_a_changed_file_is_never_answered_by_the_fast_path(pinned, tmp_path: Path, change: str) -> None:
    from hgxkit.model import quickcheck

    _, spec, env = pinned
    target = sorted((tmp_path / "models" / "tiny").glob("*.safetensors"))[0]
    data = bytearray(target.read_bytes())
    if change == "size":
        data += b"x"
    else:
        data[100] ^= 0xFF
    before = target.stat()
    target.write_bytes(bytes(data))
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
    assert (target.stat().st_size == before.st_size) == (change != "size")
    assert quickcheck.quick_status(json.loads(Path(spec).read_text()), str(FETCH)) is None
    st = status_by_fact(spec, env)  # the full check ran: its reason, not the fast path's
    assert st["state"] == "incomplete"
    assert st["reason"] == f"1 file(s) changed since verify: {target.name}"


def test_a_changed_record_or_program_falls_back_to_the_full_check(pinned, tmp_path: Path) -> None:
    from hgxkit.model import quickcheck

    _, spec, _ = pinned
    doc = json.loads(Path(spec).read_text())
    assert quickcheck.quick_status({**doc, "program_sha": "0" * 64}, str(FETCH)) is None
    assert quickcheck.quick_status({**doc, "full_rehash": True}, str(FETCH)) is None
    assert quickcheck.quick_status({**doc, "allow_patterns": ["*.json"]}, str(FETCH)) is None
    (tmp_path / "state" / "tiny.json").unlink()
    assert quickcheck.quick_status(doc, str(FETCH)) is None


def test_a_branch_revision_still_asks_the_hub(pinned, hub, tmp_path: Path) -> None:
    from hgxkit.model import quickcheck
    from hgxkit.model.facts import ModelSyncStatus

    server, url = hub
    _, _, env = pinned
    spec = spec_file(tmp_path, url, revision="main")
    assert quickcheck.quick_status(json.loads(Path(spec).read_text()), str(FETCH)) is None
    raw = ModelSyncStatus().command(python="py", script_path="p.py", spec=Path(spec).read_text()).get_raw_value()
    assert "quick_status" not in raw  # no fast path for a branch: the command is the full check alone
    before = hub_requests(server)
    st = status_by_fact(spec, env)  # the stamp the sync left, and one HEAD for the commit main names now
    assert (st["state"], st["reason"]) == (
        "complete",
        f"verified 8 files at {st['commit'][:12]} (unchanged since verify, the stamp on the node)",
    )
    assert hub_requests_once_served(server, before + 1) == before + 1
    (tmp_path / "state" / "tiny.stamp").unlink()
    st = status_by_fact(spec, env)  # the full check
    assert st["state"] == "complete" and st["reason"] == "verified 8 files at " + st["commit"][:12]
    assert hub_requests_once_served(server, before + 2) == before + 2
