"""The simulated Hugging Face Hub against the real `huggingface_hub` client, on 127.0.0.1."""

from __future__ import annotations

import hashlib
import json
import struct
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from huggingface_hub import HfApi, hf_hub_download, snapshot_download
from huggingface_hub.errors import GatedRepoError, RevisionNotFoundError

from hgxkit.sim.hub import tokenizer_gen
from hgxkit.sim.hub.makerepo import RepoSpec, make_repo
from hgxkit.sim.hub.server import HubServer, _parse_range, make_server

REPO = "deepseek-ai/DeepSeek-V4-Flash-DSpark"
GATED = "org/gated-model"
TOKEN = "hf_sim_allowed"
# huggingface_hub reads 10 MiB chunks, so a drop must come after the first chunk for a Range resume.
SHARD_MB = 12


@pytest.fixture(scope="module")
def hub_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hub")
    make_repo(root, RepoSpec(repo_id=REPO, total_bytes=2 * SHARD_MB << 20, shards=2, extra_branches=("dev",)))
    make_repo(root, RepoSpec(repo_id=GATED, total_bytes=64 << 10, shards=1, gated=True, tokens=(TOKEN,)))
    return root


@pytest.fixture()
def hub(hub_root: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[HubServer, str]]:
    server = make_server(hub_root)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    yield server, url
    server.shutdown()
    server.server_close()


def _source(root: Path, path: str, branch: str = "main") -> Path:
    return root / REPO / "refs" / branch / path


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _is_body(path: str) -> bool:
    return "/resolve/" in path or path.startswith("/_lfs/")


def _post_faults(url: str, doc: dict[str, object]) -> None:
    req = urllib.request.Request(url + "/_hubsim/faults", data=json.dumps(doc).encode(), method="POST")
    with urllib.request.urlopen(req) as resp:
        assert resp.status == 200


def test_snapshot_download_fetches_identical_bytes(hub: tuple[HubServer, str], hub_root: Path, tmp_path: Path) -> None:
    _, url = hub
    path = Path(snapshot_download(REPO, endpoint=url, cache_dir=tmp_path))
    names = sorted(p.name for p in path.iterdir())
    assert names == sorted(p.name for p in (hub_root / REPO / "refs" / "main").iterdir())
    for name in names:
        assert _sha256(path / name) == _sha256(_source(hub_root, name)), name
    config = json.loads((path / "config.json").read_text())
    assert config["dspark_block_size"] == 5
    assert config["dspark_target_layer_ids"] == [1, 21, 41]
    assert {"dspark_markov_rank", "dspark_noise_token_id"} <= set(config)


def test_safetensors_headers_are_valid(hub_root: Path) -> None:
    shard = _source(hub_root, "model-00001-of-00002.safetensors")
    data = shard.read_bytes()
    (header_len,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + header_len])
    ends = [v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"]
    assert 8 + header_len + max(ends) == len(data)
    assert header["__metadata__"]["format"] == "pt"
    index = json.loads(_source(hub_root, "model.safetensors.index.json").read_text())
    assert set(index["weight_map"].values()) == {
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
    }


def test_model_info_files_metadata_and_revisions(hub: tuple[HubServer, str], hub_root: Path) -> None:
    _, url = hub
    api = HfApi(endpoint=url)
    info = api.model_info(REPO, files_metadata=True)
    by_name = {s.rfilename: s for s in info.siblings or []}
    shard = "model-00002-of-00002.safetensors"
    assert by_name[shard].size == _source(hub_root, shard).stat().st_size
    assert by_name[shard].lfs is not None
    assert by_name[shard].lfs.sha256 == _sha256(_source(hub_root, shard))
    assert by_name["config.json"].lfs is None
    assert info.sha is not None and len(info.sha) == 40
    # branch -> commit; the commit itself resolves to the same; another branch has another commit
    assert api.model_info(REPO, revision="main").sha == info.sha
    assert api.model_info(REPO, revision=info.sha).sha == info.sha
    dev = api.model_info(REPO, revision="dev").sha
    assert dev != info.sha
    refs = {b.name: b.target_commit for b in api.list_repo_refs(REPO).branches}
    assert refs == {"main": info.sha, "dev": dev}
    with pytest.raises(RevisionNotFoundError):
        api.model_info(REPO, revision="no-such-branch")


def test_tree_and_paths_info(hub: tuple[HubServer, str], hub_root: Path) -> None:
    _, url = hub
    api = HfApi(endpoint=url)
    tree = {f.path: f for f in api.list_repo_tree(REPO, recursive=True)}
    cfg = _source(hub_root, "config.json").read_bytes()
    assert tree["config.json"].blob_id == hashlib.sha1(b"blob %d\0" % len(cfg) + cfg).hexdigest()
    assert tree["tokenizer.json"].lfs is not None  # .gitattributes marks it LFS, as on the Hub
    [info] = api.get_paths_info(REPO, ["config.json"])
    assert info.size == len(cfg)


def test_commit_hash_is_stable_per_content(tmp_path: Path) -> None:
    from hgxkit.sim.hub.store import RepoStore

    spec = RepoSpec(repo_id="a/b", total_bytes=64 << 10, shards=1)
    make_repo(tmp_path / "one", spec)
    make_repo(tmp_path / "two", spec)
    first = RepoStore(tmp_path / "one").get("a/b")
    second = RepoStore(tmp_path / "two").get("a/b")
    assert first is not None and second is not None
    assert first.snapshot("main").commit == second.snapshot("main").commit
    (tmp_path / "two" / "a/b/refs/main/README.md").write_text("changed")
    assert first.snapshot("main").commit != second.snapshot("main").commit


def test_resume_after_dropped_connection_uses_range(hub: tuple[HubServer, str], hub_root: Path, tmp_path: Path) -> None:
    server, url = hub
    shard = "model-00001-of-00002.safetensors"
    drop_at = 11 << 20
    _post_faults(url, {"drop_after_bytes": drop_at, "drop_count": 1, "paths": shard})
    path = hf_hub_download(REPO, shard, endpoint=url, cache_dir=tmp_path)
    assert _sha256(Path(path)) == _sha256(_source(hub_root, shard))
    gets = [r for r in server.state.requests if r.method == "GET" and shard in r.path]
    assert [g.status for g in gets] == [200, 206]
    assert gets[0].body_bytes == drop_at
    assert gets[1].range is not None and gets[1].range.startswith("bytes=")
    resumed_from = int(gets[1].range[6:].split("-")[0])
    assert 0 < resumed_from <= drop_at
    assert gets[1].body_bytes == _source(hub_root, shard).stat().st_size - resumed_from


def test_failed_snapshot_resumes_without_refetching_completed_files(
    hub: tuple[HubServer, str], hub_root: Path, tmp_path: Path
) -> None:
    server, url = hub
    shard = "model-00002-of-00002.safetensors"
    _post_faults(url, {"drop_after_bytes": 11 << 20, "drop_count": -1, "paths": shard})
    with pytest.raises(Exception, match=r"peer closed|incomplete|Consistency|RemoteProtocol"):
        snapshot_download(REPO, endpoint=url, cache_dir=tmp_path, max_workers=1)
    completed = {
        r.path
        for r in server.state.requests
        if r.method == "GET" and r.status == 200 and _is_body(r.path) and shard not in r.path
    }
    assert completed  # some files made it before the failure
    _post_faults(url, {})
    server.state.requests.clear()
    path = Path(snapshot_download(REPO, endpoint=url, cache_dir=tmp_path, max_workers=1))
    assert _sha256(path / shard) == _sha256(_source(hub_root, shard))
    gets = [r for r in server.state.requests if r.method == "GET" and _is_body(r.path)]
    assert not completed & {r.path for r in gets}  # nothing completed is fetched again
    [again] = [r for r in gets if shard in r.path]
    # huggingface_hub 2.x deletes its per-process partial file on failure (PR #4228), so across runs the
    # broken shard starts again from byte 0; within a run it resumes with Range (test above).
    assert again.status == 200
    assert again.body_bytes == _source(hub_root, shard).stat().st_size


def test_corrupt_byte_and_rate_limit_switches(hub: tuple[HubServer, str], hub_root: Path, tmp_path: Path) -> None:
    _, url = hub
    _post_faults(url, {"corrupt_offset": 100, "paths": "config.json"})
    path = Path(hf_hub_download(REPO, "config.json", endpoint=url, cache_dir=tmp_path))
    good, bad = _source(hub_root, "config.json").read_bytes(), path.read_bytes()
    assert len(good) == len(bad)
    assert [i for i in range(len(good)) if good[i] != bad[i]] == [100]
    assert bad[100] == good[100] ^ 0xFF


def test_gated_repo_needs_an_allowed_token(hub: tuple[HubServer, str], tmp_path: Path) -> None:
    _, url = hub
    with pytest.raises(GatedRepoError) as no_token:
        snapshot_download(GATED, endpoint=url, cache_dir=tmp_path / "a", token=False)
    assert no_token.value.response is not None and no_token.value.response.status_code == 401
    with pytest.raises(GatedRepoError) as bad_token:
        snapshot_download(GATED, endpoint=url, cache_dir=tmp_path / "b", token="hf_wrong")
    assert bad_token.value.response is not None and bad_token.value.response.status_code == 403
    path = Path(snapshot_download(GATED, endpoint=url, cache_dir=tmp_path / "c", token=TOKEN))
    assert (path / "config.json").exists()


def test_resolve_headers_match_the_hub(hub: tuple[HubServer, str], hub_root: Path) -> None:
    _, url = hub
    opener = urllib.request.build_opener(_NoRedirect())
    req = urllib.request.Request(f"{url}/{REPO}/resolve/main/model-00001-of-00002.safetensors", method="HEAD")
    with pytest.raises(urllib.error.HTTPError) as redirect:
        opener.open(req)
    headers = redirect.value.headers
    assert redirect.value.code == 302
    shard = _source(hub_root, "model-00001-of-00002.safetensors")
    assert headers["X-Linked-Etag"] == f'"{_sha256(shard)}"'
    assert headers["X-Linked-Size"] == str(shard.stat().st_size)
    assert len(headers["X-Repo-Commit"]) == 40
    assert not any(k.lower().startswith("x-xet") for k in headers)
    req = urllib.request.Request(f"{url}/{REPO}/resolve/main/config.json", headers={"Range": "bytes=10-19"})
    with urllib.request.urlopen(req) as resp:
        assert resp.status == 206
        assert resp.read() == _source(hub_root, "config.json").read_bytes()[10:20]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def test_parse_range() -> None:
    assert _parse_range("bytes=0-", 10) == (0, 9)
    assert _parse_range("bytes=5-100", 10) == (5, 9)
    assert _parse_range("bytes=-3", 10) == (7, 9)
    assert _parse_range("bytes=10-", 10) is None
    assert _parse_range("items=0-1", 10) is None


def test_tokenizer_loads_with_tokenizers(hub_root: Path) -> None:
    import tokenizers  # a test dependency (pyproject's `test` extra): never skipped

    tok = tokenizers.Tokenizer.from_file(str(_source(hub_root, "tokenizer.json")))
    words = [tokenizer_gen.pseudo_word(i) for i in (0, 5, 4000)]
    enc = tok.encode(" ".join(words))
    assert enc.ids[0] == 0 and len(enc.ids) == 4
    assert tok.decode(enc.ids, skip_special_tokens=True) == " ".join(words)


def test_pseudo_words_are_unique() -> None:
    vocab = tokenizer_gen.build_vocab(20000)
    assert len(vocab) == 20000 and len(set(vocab.values())) == 20000


# -- any repo id: generated on first use (auto repos) ---------------------------------------------------------


@pytest.fixture()
def auto_hub(hub_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[HubServer, str, Path]]:
    auto = tmp_path / "auto"
    server = make_server(hub_root, auto_root=auto)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    yield server, f"http://127.0.0.1:{server.server_address[1]}", auto
    server.shutdown()
    server.server_close()


def test_any_repo_id_gets_a_small_working_repo(auto_hub: tuple[HubServer, str, Path], tmp_path: Path) -> None:
    import tokenizers

    _, url, auto = auto_hub
    path = Path(snapshot_download("Qwen/Qwen3-8B", endpoint=url, cache_dir=tmp_path / "c"))
    names = sorted(p.name for p in path.iterdir())
    assert names == [
        ".gitattributes",
        "README.md",
        "config.json",
        "generation_config.json",
        "model-00001-of-00003.safetensors",
        "model-00002-of-00003.safetensors",
        "model-00003-of-00003.safetensors",
        "model.safetensors.index.json",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    config = json.loads((path / "config.json").read_text())
    assert config["model_type"] == "llama" and config["hgxkit_simulated"] is True
    assert config["num_attention_heads"] % 8 == 0  # -tp 8 fits, as for the real 8B-class models
    assert sum((path / n).stat().st_size for n in names if n.endswith(".safetensors")) < 4 << 20
    assert "Qwen/Qwen3-8B (SIMULATED)" in (path / "README.md").read_text()
    tok = tokenizers.Tokenizer.from_file(str(path / "tokenizer.json"))
    assert len(tok.encode("ba be").ids) == 3
    assert (auto / "Qwen/Qwen3-8B/.complete").is_file()  # generated once, under the auto root, not the store


def test_auto_repos_are_deterministic_per_id(hub_root: Path, tmp_path: Path) -> None:
    from hgxkit.sim.hub.store import RepoStore

    one = RepoStore(hub_root, tmp_path / "one").get("meta-llama/Llama-3.1-8B-Instruct")
    two = RepoStore(hub_root, tmp_path / "two").get("meta-llama/Llama-3.1-8B-Instruct")
    other = RepoStore(hub_root, tmp_path / "two").get("mistralai/Mistral-7B-v0.3")
    assert one is not None and two is not None and other is not None
    a, b = one.snapshot("main"), two.snapshot("main")
    assert a.commit == b.commit and {p: f.git_oid for p, f in a.files.items()} == {
        p: f.git_oid for p, f in b.files.items()
    }
    assert other.snapshot("main").commit != a.commit
    assert (
        a.files["model-00001-of-00003.safetensors"].sha256
        != other.snapshot("main").files["model-00001-of-00003.safetensors"].sha256
    )  # the filler is seeded by the id


def test_existing_repos_win_over_auto_repos_and_stay_gated(auto_hub: tuple[HubServer, str, Path]) -> None:
    _, url, auto = auto_hub
    api = HfApi(endpoint=url)
    assert api.model_info(REPO).config["model_type"] == "deepseek_v4"  # the store's repo, not a generated one
    with pytest.raises(GatedRepoError):
        hf_hub_download(GATED, "config.json", endpoint=url, token=False)
    assert not (auto / REPO).exists() and not (auto / GATED).exists()


@pytest.mark.parametrize("repo_id", ["a/b..c", "-a/b", "a/b.git", "a" * 97 + "/b"])
def test_invalid_ids_are_not_generated(hub_root: Path, tmp_path: Path, repo_id: str) -> None:
    from hgxkit.sim.hub.store import RepoStore

    assert RepoStore(hub_root, tmp_path / "auto").get(repo_id) is None
    assert not (tmp_path / "auto").exists()


def test_missing_repos_switch_and_no_auto_root_answer_repo_not_found(
    hub: tuple[HubServer, str], auto_hub: tuple[HubServer, str, Path]
) -> None:
    from huggingface_hub.errors import RepositoryNotFoundError

    _, plain_url = hub
    with pytest.raises(RepositoryNotFoundError):  # without an auto root: unknown ids are unknown
        HfApi(endpoint=plain_url).model_info("org/unknown-model")
    _, url, _ = auto_hub
    assert HfApi(endpoint=url).model_info("org/unknown-model").sha is not None
    _post_faults(url, {"missing_repos": "org/*"})
    with pytest.raises(RepositoryNotFoundError):
        HfApi(endpoint=url).model_info("org/unknown-model")
    with pytest.raises(RepositoryNotFoundError):
        HfApi(endpoint=url).model_info("org/another")
    assert HfApi(endpoint=url).model_info(REPO).sha  # other repos unaffected


def test_serve_command_generates_by_default() -> None:
    from hgxkit.sim.hub.__main__ import _parser

    args = _parser().parse_args(["serve", "--root", "/srv/hub"])
    assert args.auto_repos and args.auto_root.name == "hgxkit-sim-hub-auto"
    assert not _parser().parse_args(["serve", "--root", "/r", "--no-auto-repos"]).auto_repos
