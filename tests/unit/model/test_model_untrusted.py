"""The model sync as root in a directory a container controls: links, FIFOs and devices
planted in local_dir (at a file, a directory on the way, a partial download, the journal, the manifest) and
in the state directory are removed by name or refused, never followed; the real sync runs against the Hub
stand-in and marker files outside local_dir must stay exactly as they were."""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

import pytest
import test_model_fetch
from test_model_fetch import fetch, run, spec_file

from hgxkit.model import core
from hgxkit.model.core import JOURNAL_PATH, MANIFEST_NAME, PARTIAL_DIR

hub, hub_root, xet_hub = test_model_fetch.hub, test_model_fetch.hub_root, test_model_fetch.xet_hub  # fixtures
CONFIG = "config.json"
SHARD = "model-00001-of-00003.safetensors"


def snapshot(root: Path) -> dict[str, tuple[str, bytes]]:
    """Everything under `root`, links not followed: kind and content (what must not change)."""
    out: dict[str, tuple[str, bytes]] = {}
    for dirpath, dirs, names in os.walk(root):
        for n in dirs + names:
            p = Path(dirpath, n)
            if p.is_symlink():
                out[str(p)] = ("link", os.readlink(p).encode())
            elif p.is_dir():
                out[str(p)] = ("dir", b"")
            else:
                out[str(p)] = ("file", p.read_bytes())
    return out


@pytest.fixture()
def url(request: pytest.FixtureRequest) -> str:
    """The Hub stand-in's URL."""
    return str(request.getfixturevalue("hub")[1])


@pytest.fixture()
def outside(tmp_path: Path) -> Path:
    """Stand-ins for /etc and /var/spool/cron, with files the sync must never touch."""
    root = tmp_path / "outside"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "passwd").write_text("root:x:0:0::/root:/bin/sh\n")
    (root / "etc" / "victim.json").write_text('{"marker": true}\n')
    (root / "cron").mkdir()
    return root


def model(tmp_path: Path) -> Path:
    return tmp_path / "models" / "tiny"


def sync(spec: str) -> tuple[int, dict]:
    """The real sync, in a thread with a deadline (a FIFO opened the old way would hang it forever)."""
    box: dict[str, tuple[int, dict]] = {}
    t = threading.Thread(target=lambda: box.setdefault("r", run(spec)), daemon=True)
    t.start()
    t.join(300)  # a sync takes about a second; a hung one never returns, and a thrashing machine took over 60 s
    assert not t.is_alive(), "the sync hung (a FIFO opened for reading?)"
    return box["r"]


def plant(path: Path, target: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink() or path.is_file():
        path.unlink()
    path.symlink_to(target)


def assert_synced(tmp_path: Path, result: dict) -> None:
    d = model(tmp_path)
    assert result["ok"], result
    doc = json.loads((d / MANIFEST_NAME).read_text())
    for f in doc["files"]:
        st = os.lstat(d / f["path"])
        assert stat.S_ISREG(st.st_mode) and st.st_size == f["size"], f["path"]
    assert stat.S_ISREG(os.lstat(d / MANIFEST_NAME).st_mode)


def test_a_link_at_a_files_final_name_is_replaced_not_written_through(url: str, tmp_path: Path, outside: Path) -> None:
    spec = spec_file(tmp_path, url)
    plant(model(tmp_path) / CONFIG, outside / "etc" / "passwd")
    plant(model(tmp_path) / SHARD, outside / "cron" / "root")  # a cron file the old sync would have written
    before = snapshot(outside)
    code, result = sync(spec)
    assert code == 0 and CONFIG in result["fetched"] and SHARD in result["fetched"]
    assert_synced(tmp_path, result)
    assert snapshot(outside) == before
    # after a verified sync: a link swapped in is "changed", re-fetched, and never hashed through
    plant(model(tmp_path) / CONFIG, outside / "etc" / "passwd")
    code, result = sync(spec)
    assert code == 0 and result["fetched"] == [CONFIG]
    assert_synced(tmp_path, result)
    assert snapshot(outside) == before


def test_a_link_at_a_directory_on_the_way_is_replaced(url: str, tmp_path: Path, outside: Path) -> None:
    """`.cache` -> outside: the journal, the partial files and their removal all go through it."""
    spec = spec_file(tmp_path, url)
    (outside / "etc" / "hgxkit" / "partial").mkdir(parents=True)
    (outside / "etc" / "hgxkit" / "partial" / "shadow").write_text("secret\n")  # the old sync emptied this dir
    plant(model(tmp_path) / ".cache", outside / "etc")
    before = snapshot(outside)
    code, result = sync(spec)
    assert code == 0
    assert_synced(tmp_path, result)
    assert not (model(tmp_path) / ".cache").is_symlink()
    assert snapshot(outside) == before


def test_a_link_at_hgxkits_own_directories_is_replaced(url: str, tmp_path: Path, outside: Path) -> None:
    spec = spec_file(tmp_path, url)
    (outside / "etc" / "keep").write_text("keep\n")
    plant(model(tmp_path) / ".cache" / "hgxkit", outside / "etc")
    plant(model(tmp_path) / ".cache" / "huggingface" / "download", outside / "etc")
    (outside / "etc" / "old.incomplete").write_text("x")  # remove_orphans would have removed *.incomplete there
    before = snapshot(outside)
    code, result = sync(spec)
    assert code == 0
    assert_synced(tmp_path, result)
    assert snapshot(outside) == before


def test_a_link_at_the_partial_file_is_replaced_not_truncated(url: str, tmp_path: Path, outside: Path) -> None:
    spec = spec_file(tmp_path, url)
    _, metas = fetch.hub_files(fetch.core.Spec.load(spec), None)
    partial = model(tmp_path) / PARTIAL_DIR
    for m in metas:  # every partial name: the old sync opened it O_CREAT (followed) and truncated it
        plant(partial / core.content_key(m), outside / "etc" / "passwd")
    plant(partial / "orphan", outside / "etc" / "victim.json")  # the old sync unlinked orphans through links
    before = snapshot(outside)
    code, result = sync(spec)
    assert code == 0 and len(result["fetched"]) == len(metas)
    assert_synced(tmp_path, result)
    assert snapshot(outside) == before


def test_a_partial_swapped_mid_download_is_not_installed(tmp_path: Path, outside: Path) -> None:
    """The file renamed into place must be the very inode written and hashed."""
    d = model(tmp_path)
    meta = core.FileMeta("sub/x.json", 2, None, "ab" * 20)
    part = fetch.Partial(str(d), meta)
    part.open()
    part.write(memoryview(b"{}"))
    plant(d / part.rel, outside / "etc" / "passwd")  # swapped for a link after the bytes were written
    plant(d / "sub", outside / "etc")  # and the directory on the way made a link too
    before = snapshot(outside)
    with pytest.raises(fetch.FetchError, match="the partial file was swapped"):
        part.install(meta.path)
    assert snapshot(outside) == before
    assert not (d / "sub").is_symlink()


def test_links_at_the_journal_and_the_manifest_are_replaced(url: str, tmp_path: Path, outside: Path) -> None:
    spec = spec_file(tmp_path, url)
    d = model(tmp_path)
    plant(d / JOURNAL_PATH, outside / "etc" / "victim.json")
    plant(d / MANIFEST_NAME, outside / "etc" / "victim.json")
    # the old code's temporary names were predictable (path.tmp.<pid>.<thread>) and opened without O_EXCL
    tid = threading.get_ident()
    plant(d / f"{MANIFEST_NAME}.tmp.{os.getpid()}.{tid}", outside / "cron" / "manifest")
    plant(d / f"{JOURNAL_PATH}.tmp.{os.getpid()}.{tid}", outside / "cron" / "journal")
    before = snapshot(outside)
    code, result = run(spec)  # on this thread: the one whose id the planted names carry
    assert code == 0
    assert_synced(tmp_path, result)
    assert not (d / JOURNAL_PATH).exists() and not (d / JOURNAL_PATH).is_symlink()  # removed by name at the end
    assert snapshot(outside) == before


@pytest.mark.parametrize("where", [CONFIG, MANIFEST_NAME, JOURNAL_PATH, f"{PARTIAL_DIR}/orphan"])
def test_a_fifo_in_place_of_a_file_neither_hangs_nor_stays(url: str, tmp_path: Path, where: str) -> None:
    spec = spec_file(tmp_path, url)
    path = model(tmp_path) / where
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    code, result = sync(spec)
    assert code == 0
    assert_synced(tmp_path, result)
    assert not path.is_fifo()


def test_a_device_in_place_of_a_file_is_never_opened(url: str, tmp_path: Path, outside: Path) -> None:
    spec = spec_file(tmp_path, url)
    path = model(tmp_path) / CONFIG
    path.parent.mkdir(parents=True)
    try:
        os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 3))  # /dev/null's numbers
    except PermissionError:
        if os.environ.get("CI") == "true":  # CI runs as root: a device node can always be made there
            pytest.fail("CI=true but mknod was refused (the test needs CAP_MKNOD)")
        pytest.skip("mknod needs CAP_MKNOD")
    code, result = sync(spec)
    assert code == 0 and CONFIG in result["fetched"]
    assert_synced(tmp_path, result)
    assert stat.S_ISREG(os.lstat(path).st_mode)


def test_links_at_the_state_and_record_files_are_replaced(url: str, tmp_path: Path, outside: Path) -> None:
    spec = spec_file(tmp_path, url)
    state = tmp_path / "state"
    tid = threading.get_ident()
    for suffix in (".json", ".progress.json", ".result.json"):
        plant(state / f"tiny{suffix}", outside / "etc" / "victim.json")
        plant(state / f"tiny{suffix}.tmp.{os.getpid()}.{tid}", outside / "cron" / f"tiny{suffix}")
    before = snapshot(outside)
    code, _ = run(spec)  # on this thread: the one whose id the planted names carry
    assert code == 0
    for suffix in (".json", ".progress.json", ".result.json"):
        assert stat.S_ISREG(os.lstat(state / f"tiny{suffix}").st_mode)
    assert snapshot(outside) == before


def test_the_status_check_reads_no_planted_link(
    url: str, tmp_path: Path, outside: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = spec_file(tmp_path, url)
    assert sync(spec)[0] == 0
    good = (model(tmp_path) / MANIFEST_NAME).read_text()
    (outside / "etc" / "m.json").write_text(good)
    plant(model(tmp_path) / MANIFEST_NAME, outside / "etc" / "m.json")  # a manifest from elsewhere
    capsys.readouterr()
    fetch.main(["status", "--spec", spec])
    assert json.loads(capsys.readouterr().out)["state"] == "incomplete"


def test_hf_xet_writes_into_a_fresh_staging_directory_not_through_a_link(
    request: pytest.FixtureRequest, hub_root: Path, tmp_path: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """huggingface_hub opens files by path: it gets a fresh directory this code made, and each file is renamed
    into place through directory fds."""
    url = request.getfixturevalue("xet_hub")[1]

    def hf_xet(self, meta, local_dir: str) -> None:  # type: ignore[no-untyped-def]  # lands as hf_xet writes it
        Path(local_dir, meta.path).write_bytes((hub_root / "org/tiny/refs/main" / meta.path).read_bytes())

    monkeypatch.setattr(fetch.HubBodies, "fetch_xet", hf_xet)
    plant(model(tmp_path) / core.STAGE_DIR, outside / "etc")
    plant(model(tmp_path) / SHARD, outside / "cron" / "root")
    before = snapshot(outside)
    code, result = sync(spec_file(tmp_path, url, xet_chunk_cache_gb=0.001, xet_shard_cache_gb=0.001))
    assert code == 0 and SHARD in result["fetched"]
    assert_synced(tmp_path, result)
    assert snapshot(outside) == before
    assert not (model(tmp_path) / core.STAGE_DIR).exists()
