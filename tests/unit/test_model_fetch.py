"""hgxkit/model/fetch.py (the model role's host program) against the Hub stand-in on 127.0.0.1 (no systemd: `run` called directly)."""

from __future__ import annotations

import importlib.util
import json
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from hgxkit.model.core import MANIFEST_NAME
from hgxkit.sim.hub.faults import FaultConfig
from hgxkit.sim.hub.makerepo import RepoSpec, make_repo
from hgxkit.sim.hub.server import HubServer, make_server

FETCH = Path(__file__).resolve().parents[2] / "hgxkit" / "model" / "fetch.py"
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
    return sum(1 for r in server.state.requests if r.method == "GET" and r.path.startswith("/_lfs/") and r.status in (200, 206))


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
    assert result["error"].startswith("network failure reading the file list from http://127.0.0.1:9: [Errno 111] Connection refused")
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
