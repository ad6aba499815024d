"""End-to-end: `pyinfra -y inventories/sim.py deploys/model.py` on two simulated nodes with a 64 MB model disk,
against each node's Hub stand-in (hgxkit-sim-hub.service on 127.0.0.1:8088).

A too-small disk fails before any download; a fresh download; the re-run is a no-op whose check takes <= 2 s of
role time; a gated repo without access fails clearly, with the token it syncs; a rate-limited download is
attached to by a second run, killed mid-file, and resumed mid-file without re-fetching completed files; a
corrupted shard is re-fetched alone; node2 copies from node1 without touching its Hub; as a fleet, node2 streams
every file from node1, which read each from its Hub once; hf_xet's caches on a root file system too small for
them are refused before any download; the token appears in no output.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shlex
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from sim_steps import cluster_name, ssh_to

from hgxkit.sim import nodes as simnodes
from hgxkit.sim.hubrepos import GATED_TOKEN

ROOT = Path(__file__).resolve().parents[2]
PYINFRA = str(Path(sys.executable).parent / "pyinfra")
FAKE_TOKEN = "hf_e2eNotARealTokenButSecret0123456789"  # sent to non-gated repos too: must never show up
TINY_DIR = "/data/models/tiny"
pytestmark = pytest.mark.e2e

CAPTURED: list[str] = []  # every output of this module, grepped for tokens at the end


@pytest.fixture(scope="module")
def cluster(sim_session) -> Iterator[str]:
    name = cluster_name("model-e2e")
    sim_session.claim(name)  # removed by the next session if this one is killed
    simnodes.down(name)
    simnodes.up(2, cluster=name, model_disk="64m")
    yield name
    simnodes.down(name)


@pytest.fixture(scope="module")
def recipes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Recipes for the stand-in's repos: the shipped recipe with its model section swapped."""
    base = (ROOT / "recipes" / "deepseek-v4-flash-dspark-marlin.yaml").read_text()
    out = {}
    tmp = tmp_path_factory.mktemp("recipes")
    for key, repo, local_dir in [
        ("dspark", "deepseek-ai/DeepSeek-V4-Flash-DSpark", "/data/models/deepseek-v4-flash-dspark"),
        ("tiny", "hgxkit-sim/tiny", TINY_DIR),
        ("gated", "hgxkit-sim/gated", "/data/models/gated"),
    ]:
        text = base.replace("repo_id: deepseek-ai/DeepSeek-V4-Flash-DSpark", f"repo_id: {repo}")
        # the model's directory and the mount that serves it: a recipe the node's judgement accepts
        text = text.replace("/data/models/deepseek-v4-flash-dspark", local_dir)
        (tmp / f"{key}.yaml").write_text(text)
        out[key] = str(tmp / f"{key}.yaml")
    return out


def deploy(cluster: str, node: str, recipe: str, *data: str, token: str | None = FAKE_TOKEN, verbose: bool = True):
    argv = [PYINFRA, "-y", "inventories/sim.py", "deploys/model.py", "--limit", node, "--data", f"recipe={recipe}"]
    for item in ("model_disk_margin_gb=0.005", "model_poll_interval_s=0.5", "model_progress_every_s=1", *data):
        argv += ["--data", item]
    if verbose:
        argv.insert(2, "-vv")  # commands are printed too: the token must not be in any of them
    env = {k: v for k, v in os.environ.items() if k != "HF_TOKEN"}
    env.update(HGXKIT_SIM_CLUSTER=cluster, PYINFRA_PROGRESS="off")
    if token:
        env["HF_TOKEN"] = token
    before = children_cpu_s()
    res = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    CAPTURED.append(res.stdout + res.stderr)
    return res, children_cpu_s() - before


def children_cpu_s() -> float:
    """CPU seconds of the finished subprocesses so far: a run's own work, however busy the machine is."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def out(res: subprocess.CompletedProcess[str]) -> str:
    return res.stdout + res.stderr


def node_sh(cluster: str, node: str, command: str) -> str:
    res = subprocess.run(ssh_to(cluster, node, command), capture_output=True, text=True, timeout=120, check=False)
    CAPTURED.append(res.stdout + res.stderr)
    assert res.returncode != 255, f"ssh to {node} failed (did the Docker engine restart?): {res.stderr[-300:]}"
    return res.stdout


def hub(cluster: str, node: str, method: str, path: str, body: dict | None = None) -> object:
    data = f"-H 'Content-Type: application/json' -d '{json.dumps(body)}'" if body is not None else ""
    return json.loads(node_sh(cluster, node, f"curl -s -X {method} {data} http://127.0.0.1:8088{path}"))


def body_reads(cluster: str, node: str, manifest: dict) -> Counter[str]:
    """How often the node's Hub served each file's content (LFS bodies by sha256, small files by /resolve/ path)."""
    by_sha = {f["sha256"]: f["path"] for f in manifest["files"] if f["sha256"]}
    got: Counter[str] = Counter()
    for r in hub(cluster, node, "GET", "/_hubsim/requests"):
        if r["method"] != "GET" or r["status"] not in (200, 206):
            continue
        if r["path"].startswith("/_lfs/"):
            got[by_sha.get(r["path"].split("/")[2].split("?")[0], r["path"])] += 1
        elif "/resolve/" in r["path"]:
            got[r["path"].split("/resolve/")[1].split("/", 1)[1].split("?")[0]] += 1
    return got


def fetched_bodies(cluster: str, node: str, manifest: dict) -> set[str]:
    """Files whose content the node's Hub served."""
    return set(body_reads(cluster, node, manifest))


def manifest_of(cluster: str, node: str, local_dir: str = TINY_DIR) -> dict:
    return json.loads(node_sh(cluster, node, f"cat {local_dir}/.hgxkit-manifest.json"))


def totals(res: subprocess.CompletedProcess[str]) -> tuple[int, int, int, int]:
    m = re.search(r"Grand total\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)", out(res))
    assert m, out(res)[-3000:]
    return tuple(0 if v == "-" else int(v) for v in m.groups())  # type: ignore[return-value]


def test_too_small_disk_fails_before_download(cluster: str, recipes: dict[str, str]) -> None:
    hub(cluster, "node1", "DELETE", "/_hubsim/requests")
    res, _ = deploy(cluster, "node1", recipes["dspark"])
    assert res.returncode != 0
    assert re.search(
        r"need 0\.07\d+ GB, 0\.06\d+ GB free at /data/models/deepseek-v4-flash-dspark \(\d+ files", out(res)
    )
    assert (
        node_sh(cluster, "node1", "ls -A /data/models/deepseek-v4-flash-dspark | grep -v '^.cache$' | wc -l").strip()
        == "0"
    )
    bodies = [
        r
        for r in hub(cluster, "node1", "GET", "/_hubsim/requests")
        if "/resolve/" in r["path"] or "/_lfs/" in r["path"]
    ]
    assert bodies == []
    node_sh(cluster, "node1", "rm -rf /data/models/deepseek-v4-flash-dspark")


def test_fresh_download_then_noop_rerun(cluster: str, recipes: dict[str, str]) -> None:
    res, _ = deploy(cluster, "node1", recipes["tiny"])
    assert res.returncode == 0, out(res)[-3000:]
    assert "model tiny: done hgxkit-sim/tiny@" in out(res)
    manifest = manifest_of(cluster, "node1")
    assert manifest["repo_id"] == "hgxkit-sim/tiny" and len(manifest["commit"]) == 40
    assert len(manifest["files"]) == 11 and manifest["source"] == "hub"
    record = json.loads(node_sh(cluster, "node1", "cat /var/lib/hgxkit/model/tiny.json"))
    assert record["commit"] == manifest["commit"] and record["revision"] == "main"
    assert (
        node_sh(
            cluster,
            "node1",
            "/opt/hgxkit/hf-venv/bin/python -c 'import huggingface_hub, hf_xet; print(huggingface_hub.__version__)'",
        ).strip()
        == "2.4.0"
    )

    minimal_argv = [PYINFRA, "-y", "inventories/sim.py", "bench/minimal_deploy.py", "--limit", "node1"]
    env = {**os.environ, "HGXKIT_SIM_CLUSTER": cluster, "PYINFRA_PROGRESS": "off"}
    before = children_cpu_s()
    subprocess.run(minimal_argv, cwd=ROOT, env=env, capture_output=True, check=True, timeout=120)
    baseline = children_cpu_s() - before
    again, cpu = deploy(cluster, "node1", recipes["tiny"], verbose=False)
    assert again.returncode == 0, out(again)[-3000:]
    assert totals(again) == (0, 0, 0, 0)  # not one operation: the check is one fact
    # With the token (stdin), the node's shell answers from the stamp the sync left, asking the Hub with the token.
    checked = (
        r"model tiny: verified 11 files at \w+ \(unchanged since verify, the stamp on the node\); check took ([\d.]+)s"
    )
    assert re.search(checked, out(again)), out(again)[-3000:]
    # The controller's CPU, not the wall time, which a busy machine stretches for one run and not the other.
    assert cpu <= 1.5 * baseline, f"no-op re-run {cpu:.2f} CPU s vs minimal deploy {baseline:.2f} CPU s"
    # No token: the node's shell answers from the stamp the checks left (one stat, one HEAD for what `main` names).
    quiet, _ = deploy(cluster, "node1", recipes["tiny"], token=None, verbose=False)
    assert quiet.returncode == 0 and totals(quiet) == (0, 0, 0, 0), out(quiet)[-3000:]
    stamped = r"model tiny: verified 11 files at (\w+) \(unchanged since verify, the stamp on the node\); check took"
    assert re.search(stamped, out(quiet)).group(1) == manifest["commit"][:12]  # type: ignore[union-attr]


def test_gated_repo(cluster: str, recipes: dict[str, str]) -> None:
    denied, _ = deploy(cluster, "node1", recipes["gated"])
    assert denied.returncode != 0
    assert (
        "hgxkit-sim/gated is gated and the token has no access (or none was given): accept its terms at http://127.0.0.1:8088/hgxkit-sim/gated"
        in out(denied)
    )
    ok, _ = deploy(cluster, "node1", recipes["gated"], token=GATED_TOKEN)
    assert ok.returncode == 0, out(ok)[-3000:]
    again, _ = deploy(cluster, "node1", recipes["gated"], token=GATED_TOKEN)
    assert totals(again) == (0, 0, 0, 0)
    assert "(unchanged since verify, the stamp on the node)" in out(again)  # the shell asked the Hub with the token
    assert node_sh(cluster, "node1", "ls -A /run/hgxkit/model 2>/dev/null | wc -l").strip() == "0"  # token file gone


def test_killed_download_resumes_without_refetching_completed_files(cluster: str, recipes: dict[str, str]) -> None:
    node_sh(cluster, "node1", f"rm -rf {TINY_DIR} /var/lib/hgxkit/model/tiny.json")
    hub(cluster, "node1", "POST", "/_hubsim/faults", {"rate_bps": 1_000_000})
    slow = ("model_download_workers=1", "model_wait_timeout_s=2")
    first, _ = deploy(cluster, "node1", recipes["tiny"], *slow)
    assert first.returncode != 0
    assert "stopped waiting; the download goes on in hgxkit-model-tiny; re-run to attach" in out(first)
    assert "the sync is still running in hgxkit-model-tiny (downloading" in out(first)
    second, _ = deploy(cluster, "node1", recipes["tiny"], *slow)
    assert "attached to the running download (hgxkit-model-tiny)" in out(second)
    assert re.search(r"model tiny: downloading \d+\.\d\d/0\.0\d GB \(\d+%\) at [\d.]+ MB/s, ETA \d+:\d\d", out(second))
    processes = node_sh(cluster, "node1", "ps -eo args")
    assert "hgxkit_fetch.py run" in processes
    assert node_sh(cluster, "node1", "systemctl is-active hgxkit-model-tiny").strip() == "active"
    deadline = time.monotonic() + 300  # a busy machine slows the sync: kill it once a shard is verified, not after 1 s
    while not any(p.endswith(".safetensors") for p in journal_paths(cluster)):
        assert time.monotonic() < deadline, "no shard verified within 300 s of the attached download"
        time.sleep(0.5)
    node_sh(cluster, "node1", "systemctl kill -s KILL hgxkit-model-tiny")
    completed = journal_paths(cluster)
    assert any(p.endswith(".safetensors") for p in completed) and len(completed) < 11
    hub(cluster, "node1", "POST", "/_hubsim/faults", {})
    hub(cluster, "node1", "DELETE", "/_hubsim/requests")
    partial = node_sh(cluster, "node1", f"stat -c %s {TINY_DIR}/.cache/hgxkit/partial/* 2>/dev/null").split()
    resumed, _ = deploy(cluster, "node1", recipes["tiny"])
    assert resumed.returncode == 0, out(resumed)[-3000:]
    manifest = manifest_of(cluster, "node1")
    assert fetched_bodies(cluster, "node1", manifest) == {f["path"] for f in manifest["files"]} - completed
    ranges = [r["range"] for r in hub(cluster, "node1", "GET", "/_hubsim/requests") if r["status"] == 206]
    assert partial and ranges == [f"bytes={n}-" for n in partial if int(n) > 0]  # the cut file resumed mid-file


def journal_paths(cluster: str) -> set[str]:
    """The files the unfinished sync has verified (its journal, written whole by a rename; none yet: empty)."""
    text = node_sh(cluster, "node1", f"cat {TINY_DIR}/.cache/hgxkit/verified.json 2>/dev/null || true")
    return {f["path"] for f in json.loads(text)["files"]} if text.strip() else set()


def test_corrupted_shard_is_refetched_alone(cluster: str, recipes: dict[str, str]) -> None:
    shard = "model-00003-of-00006.safetensors"
    node_sh(
        cluster,
        "node1",
        f"python3 -c \"f=open('{TINY_DIR}/{shard}','r+b'); f.seek(4096); b=f.read(1); f.seek(4096); f.write(bytes([b[0]^255]))\"",
    )
    hub(cluster, "node1", "DELETE", "/_hubsim/requests")
    res, _ = deploy(cluster, "node1", recipes["tiny"])
    assert res.returncode == 0, out(res)[-3000:]
    result = json.loads(node_sh(cluster, "node1", "cat /var/lib/hgxkit/model/tiny.result.json"))
    assert result["rehashed"] == [shard] and result["fetched"] == [shard]
    assert fetched_bodies(cluster, "node1", manifest_of(cluster, "node1")) == {shard}


def test_peer_copy_from_node1(cluster: str, recipes: dict[str, str]) -> None:
    hub(cluster, "node2", "DELETE", "/_hubsim/requests")
    peer = ("model_source=peer", "model_peer=node1")
    res, _ = deploy(cluster, "node2", recipes["tiny"], *peer)
    assert res.returncode == 0, out(res)[-3000:]
    copy, original = manifest_of(cluster, "node2"), manifest_of(cluster, "node1")
    assert copy["source"] == "peer:node1" and copy["commit"] == original["commit"]
    assert [(f["path"], f["sha256"]) for f in copy["files"]] == [(f["path"], f["sha256"]) for f in original["files"]]
    served = [
        r["path"] for r in hub(cluster, "node2", "GET", "/_hubsim/requests") if not r["path"].startswith("/_hubsim")
    ]
    assert served == []  # nothing from node2's Hub
    assert "hgxkit-model-peer@node2" in node_sh(cluster, "node1", "cat /root/.ssh/authorized_keys")
    again, _ = deploy(cluster, "node2", recipes["tiny"], *peer)
    assert totals(again) == (0, 0, 0, 0)


def test_fleet_node2_streams_each_file_from_node1(cluster: str, recipes: dict[str, str]) -> None:
    for node in ("node1", "node2"):
        node_sh(cluster, node, f"rm -rf {TINY_DIR} /var/lib/hgxkit/model/tiny.json")
        hub(cluster, node, "DELETE", "/_hubsim/requests")
    res, _ = deploy(cluster, "node*", recipes["tiny"], "model_source=fleet")
    assert res.returncode == 0, out(res)[-3000:]
    root, copy = manifest_of(cluster, "node1"), manifest_of(cluster, "node2")
    assert root["source"] == "hub" and copy["source"] == "fleet:node1" and copy["commit"] == root["commit"]
    assert [(f["path"], f["sha256"]) for f in copy["files"]] == [(f["path"], f["sha256"]) for f in root["files"]]
    reads = body_reads(cluster, "node1", root)
    assert set(reads) == {f["path"] for f in root["files"]} and set(reads.values()) == {1}  # each file once
    node2_hub = [r["path"] for r in hub(cluster, "node2", "GET", "/_hubsim/requests") if r["path"][:9] != "/_hubsim/"]
    assert node2_hub and all(p.startswith("/api/models/hgxkit-sim/tiny") for p in node2_hub)  # the file list only
    assert "hgxkit-model-peer@node2" in node_sh(cluster, "node1", "cat /root/.ssh/authorized_keys")
    again, _ = deploy(cluster, "node*", recipes["tiny"], "model_source=fleet")
    assert totals(again) == (0, 0, 0, 0)


# A stand-in for a Hub that keeps files in Xet storage: the node's Hub behind a proxy that says so on every HEAD.
XET_PROXY = """
import http.client, http.server
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def _go(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)) or None
        c = http.client.HTTPConnection("127.0.0.1", 8088)
        c.request(self.command, self.path, body=body, headers={k: v for k, v in self.headers.items() if k.lower() != "host"})
        r = c.getresponse()
        data = r.read()
        self.send_response(r.status)
        for k, v in r.getheaders():
            if k.lower() not in ("transfer-encoding", "connection"):
                self.send_header(k, v)
        if self.command == "HEAD":
            self.send_header("X-Xet-Hash", "ab" * 32)
            self.send_header("X-Xet-Refresh-Route", "/api/models/hgxkit-sim/tiny/xet-read-token/main")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
    do_GET = do_HEAD = do_POST = _go
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", 8089), H).serve_forever()
"""


def test_xet_caches_on_a_small_root_file_system_are_refused(cluster: str, recipes: dict[str, str]) -> None:
    cache = "/root/.cache/huggingface/xet"
    node_sh(cluster, "node1", f"rm -rf {TINY_DIR} /var/lib/hgxkit/model/tiny.json")
    node_sh(cluster, "node1", "mkdir -p /root/.cache && mount -t tmpfs -o size=1g hgxkit-e2e /root/.cache")
    node_sh(
        cluster,
        "node1",
        f"printf %s {shlex.quote(XET_PROXY)} > /run/hgxkit-e2e-xet-proxy.py && "
        "systemd-run --unit=hgxkit-e2e-xet-proxy python3 /run/hgxkit-e2e-xet-proxy.py && sleep 1",
    )
    try:
        hub(cluster, "node1", "DELETE", "/_hubsim/requests")
        xet = ("hf_endpoint=http://127.0.0.1:8089", f"model_xet_cache_dir={cache}")
        res, _ = deploy(cluster, "node1", recipes["tiny"], *xet)
        assert res.returncode != 0
        assert re.search(
            rf"need 26\.0 GB, 1\.\d+ GB free at {cache} \(hf_xet's caches at {cache}: chunk 10 GB \+ shard 16 GB",
            out(res),
        ), out(res)[-3000:]
        served = hub(cluster, "node1", "GET", "/_hubsim/requests")
        assert [r for r in served if r["method"] == "GET" and ("/resolve/" in r["path"] or "/_lfs/" in r["path"])] == []
        assert any(r["method"] == "HEAD" for r in served)  # it asked where each file is, and read none
    finally:
        node_sh(cluster, "node1", "systemctl stop hgxkit-e2e-xet-proxy; umount /root/.cache; rm -rf /data/models/tiny")


def test_token_never_appears(cluster: str) -> None:
    for node in ("node1", "node2"):
        node_sh(
            cluster,
            node,
            "journalctl --no-pager -o cat -u 'hgxkit-model-*'; cat /var/lib/hgxkit/model/* /data/models/*/.hgxkit-manifest.json; "
            "cat /data/models/*/.cache/hgxkit/*.json 2>/dev/null; ls -la /run/hgxkit/model; ps -eo args",
        )
    text = "\n".join(CAPTURED)
    assert "hgxkit-fetch: done" in text or "model tiny: done" in text  # the journal and run logs are in there
    assert len(CAPTURED) > 20
    assert FAKE_TOKEN not in text and GATED_TOKEN not in text


# Run on the fleet server's own node as root: read its serve file, then (signed with its secret, as a child signs)
# ask /state until a file is verified, fetch that file, plant a symlink at its name and fetch it again.
FLEET_PROBE = r"""
import hashlib, hmac, http.client, json, os, secrets, sys, time
serve = json.load(open(sys.argv[1]))
local_dir = sys.argv[2]
def ask(path, signed=True):
    headers = {}
    if signed:
        stamp, nonce = str(int(time.time())), secrets.token_hex(12)
        msg = "\n".join(("GET", path, "", stamp, nonce)).encode() + b"\n"
        mac = hmac.new(serve["secret"].encode(), msg, hashlib.sha256).hexdigest()
        headers = {"X-Hgxkit-Time": stamp, "X-Hgxkit-Nonce": nonce, "Authorization": "hgxkit-hmac " + mac}
    c = http.client.HTTPConnection(serve["address"], serve["port"], timeout=10)
    c.request("GET", path, headers=headers)
    r = c.getresponse()
    return r.status, r.read()
out = {"unsigned": ask("/state", signed=False)[0]}
for _ in range(120):
    status, body = ask("/state")
    files = [f["path"] for f in ((json.loads(body).get("state") or {}).get("files") or [])] if status == 200 else []
    if files:
        break
    time.sleep(0.5)
name = sorted(files, key=len)[0]
out["file"], out["real"] = name, ask("/files/" + name)[0]
path = os.path.join(local_dir, name)
os.rename(path, path + ".hgxkit-e2e-aside")
try:
    os.symlink("/etc/hostname", path)
    out["symlink"] = ask("/files/" + name)[0]
finally:
    os.unlink(path)
    os.rename(path + ".hgxkit-e2e-aside", path)
print(json.dumps(out))
"""

# Run on a child node: open `count` TCP connections to the server, send nothing, and time when each is closed.
IDLE_FLOOD = r"""
import json, select, socket, sys, time
host, port, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
socks, failed = [], 0
start = time.monotonic()
for _ in range(count):
    s = socket.socket()
    s.settimeout(5)
    try:
        s.connect((host, port))
        s.setblocking(False)
        socks.append(s)
    except OSError:
        failed += 1
        s.close()
opened = len(socks)
closed_at = []
open_now = list(socks)
while open_now and time.monotonic() - start < 40:
    ready, _, _ = select.select(open_now, [], [], 0.5)
    for s in ready:
        try:
            data = s.recv(4096)
        except OSError:
            data = b""
        if not data:
            closed_at.append(time.monotonic() - start)
            open_now.remove(s)
            s.close()
print(json.dumps({"opened": opened, "failed": failed, "closed": len(closed_at),
                  "last_close_s": max(closed_at, default=0.0), "still_open": len(open_now)}))
"""


def test_fleet_server_binds_its_fabric_address_drops_idle_connections_and_refuses_a_symlink(
    cluster: str, recipes: dict[str, str]
) -> None:
    """The parent's server, while the fleet copy runs (the parent's Hub slowed so the server stays up): it
    listens on the fabric address only (`ss -ltn`); 500 idle, unauthenticated connections from the child are
    all closed within its socket timeout (10 s, hgxkit/model/fetch.py FLEET_TIMEOUT_S) while its process holds
    no more than its cap (32, FLEET_MAX_CONNECTIONS) threads above what it ran before; unsigned requests get
    403; a signed request for a verified file whose name now is a symlink (to /etc/hostname) gets 404."""
    timeout_s, cap = 10.0, 32
    serve_file = "/var/lib/hgxkit/model/tiny.serve.json"
    for node in ("node1", "node2"):
        node_sh(
            cluster, node, f"rm -rf {TINY_DIR} /var/lib/hgxkit/model/tiny.json /var/lib/hgxkit/model/tiny.serve.json"
        )
        hub(cluster, node, "DELETE", "/_hubsim/requests")
    hub(cluster, "node1", "POST", "/_hubsim/faults", {"rate_bps": 300_000})  # 24 MB: about 80 s of sync
    argv = [
        PYINFRA,
        "-y",
        "inventories/sim.py",
        "deploys/model.py",
        "--limit",
        "node*",
        "--data",
        f"recipe={recipes['tiny']}",
    ]
    for item in (
        "model_disk_margin_gb=0.005",
        "model_poll_interval_s=0.5",
        "model_source=fleet",
        "model_download_workers=1",
    ):
        argv += ["--data", item]
    env = {k: v for k, v in os.environ.items() if k != "HF_TOKEN"}
    env.update(HGXKIT_SIM_CLUSTER=cluster, PYINFRA_PROGRESS="off", HF_TOKEN=FAKE_TOKEN)
    run = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 180
        while not node_sh(cluster, "node1", f"cat {serve_file} 2>/dev/null").strip():
            assert time.monotonic() < deadline and run.poll() is None, "node1's fleet server never started"
            time.sleep(1)
        serve = json.loads(node_sh(cluster, "node1", f"cat {serve_file}"))
        port = serve["port"]
        fabric_ip = node_sh(cluster, "node2", f"getent hosts {serve['address']} | cut -d' ' -f1").split()[0]
        listening = [line.split()[3] for line in node_sh(cluster, "node1", "ss -ltnH").splitlines() if line.split()]
        on_port = [local for local in listening if local.rsplit(":", 1)[1] == str(port)]
        assert on_port == [f"{fabric_ip}:{port}"], listening

        pids = "pgrep -f 'hgxkit_fetch.py run'"
        threads = f"for p in $({pids}); do awk '/^Threads/ {{print $2}}' /proc/$p/status; done | sort -n | tail -1"
        before = int(node_sh(cluster, "node1", threads).strip())
        flood_argv = [
            sys.executable,
            "-m",
            "hgxkit",
            "sim",
            "ssh",
            "node2",
            "--cluster",
            cluster,
            "--",
            f"python3 -c {shlex.quote(IDLE_FLOOD)} {serve['address']} {port} 500",
        ]
        flood = subprocess.Popen(flood_argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        most = before
        while flood.poll() is None:
            sample = node_sh(cluster, "node1", threads).strip()
            most = max(most, int(sample or 0))
            time.sleep(0.3)
        stdout, stderr = flood.communicate()
        CAPTURED.append(stdout + stderr)
        result = json.loads(stdout.strip().splitlines()[-1])
        assert result["opened"] + result["failed"] == 500 and result["opened"] >= 450, result
        assert result["closed"] == result["opened"] and result["still_open"] == 0, result
        assert result["last_close_s"] <= timeout_s + 5, result  # the flood's own open time plus the timeout
        assert most - before <= cap, (before, most)

        probe = (
            node_sh(cluster, "node1", f"python3 -c {shlex.quote(FLEET_PROBE)} {serve_file} {TINY_DIR}")
            .strip()
            .splitlines()
        )
        found = json.loads(probe[-1])
        assert (found["unsigned"], found["real"], found["symlink"]) == (403, 200, 404), found
    finally:
        hub(cluster, "node1", "POST", "/_hubsim/faults", {})
        try:
            output, _ = run.communicate(timeout=600)
        except subprocess.TimeoutExpired:
            run.kill()
            output, _ = run.communicate()
        CAPTURED.append(output)
    assert run.returncode == 0, output[-3000:]
    assert manifest_of(cluster, "node2")["commit"] == manifest_of(cluster, "node1")["commit"]
    print(
        f"fleet server: listens on {on_port[0]}; threads {before} -> at most {most} (cap {cap}) under "
        f"{result['opened']} idle connections, all closed by {result['last_close_s']:.1f} s; {found}"
    )
