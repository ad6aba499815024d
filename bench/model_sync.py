"""Model sync throughput vs `curl` and `hf download`, and verify-only vs a full re-hash, on a simulated node.

    python bench/model_sync.py [--size-gb 5] [--shards 50] [--rounds 5] [--workers 8] [--keep]

Builds (once, cached under the sim state dir) a synthetic repo of `--size-gb` GB in `--shards` safetensors
shards plus its small JSON files, serves it from this machine with the Hub stand-in on the cluster network's
gateway, starts one simulated node (cluster `model-bench`), then, against the same server, `--rounds` times
with the order rotated each round (this machine is shared: a neighbour's load lands on every tool alike):

- `curl`: every file the recipe selects, `--workers` in parallel (the downloader's parallelism), no hashing;
- `hf download`: the same files with `--max-workers` `--workers`, huggingface_hub's CLI from the node's venv;
- hgxkit: `deploys/model.py` syncs the model (download + sha256/git-oid of every byte), timed by the unit
  (the controller polls it every 5 s: here the controller's pyinfra shares the node's CPUs, as it would not).

Then verify-only, the metadata-only check of a no-op re-run (sizes and mtimes against the manifest), side by
side with a full re-hash (`model_full_rehash=True`: every file hashed again against the Hub's ids).
/data/models on a node is a tmpfs: the model lives in RAM (5 GB needs ~13 GB free on this machine).
Simulated: absolute times are this machine's; the ratios are the figures to compare. The last lines are the
ratios, one per line.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hgxkit.sim import nodes, paths  # noqa: E402
from hgxkit.sim.hub.makerepo import RepoSpec, make_repo  # noqa: E402
from hgxkit.sim.hub.server import HubServer, make_server  # noqa: E402

PYINFRA = str(Path(sys.executable).parent / "pyinfra")
CLUSTER = "model-bench"
REPO = "hgxkit-bench/model"
LOCAL_DIR = "/data/models/bench"
STATE = "/var/lib/hgxkit/model/bench"
HF = "/opt/hgxkit/hf-venv/bin/hf"


def sh(node: nodes.NodeInfo, command: str) -> str:
    res = subprocess.run(nodes.ssh_argv(node, [command]), capture_output=True, text=True, check=False)
    if res.returncode != 0:
        sys.exit(f"on {node.name}: {command[:80]}: {res.stderr.strip()[-500:]}")
    return res.stdout


def timed(node: nodes.NodeInfo, command: str) -> float:
    """Seconds `command` took on the node, timed there (no SSH setup in the figure)."""
    out = sh(node, f"s=$(date +%s.%N); {command}; e=$(date +%s.%N); echo; echo $s $e")
    start, end = out.split()[-2:]
    return float(end) - float(start)


def deploy(cluster: str, recipe: str, endpoint: str, *data: str, limit: str = "") -> str:
    argv = [PYINFRA, "-y", "inventories/sim.py", "deploys/model.py", "--data", f"recipe={recipe}"]
    if limit:
        argv += ["--limit", limit]
    for item in (f"hf_endpoint={endpoint}", "model_disk_margin_gb=0.1", *data):
        argv += ["--data", item]
    env = {**os.environ, "HGXKIT_SIM_CLUSTER": cluster, "PYINFRA_PROGRESS": "off"}
    env.pop("HF_TOKEN", None)
    res = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        sys.exit(f"deploys/model.py failed:\n{(res.stdout + res.stderr)[-3000:]}")
    return res.stdout + res.stderr


def bench_repo(size_gb: float, shards: int) -> Path:
    store = paths.state_dir() / "bench-hub" / f"{size_gb:g}g-{shards}"
    if not (store / ".complete").is_file():
        print(f"building the {size_gb:g} GB bench repo in {store} (once)", flush=True)
        make_repo(store, RepoSpec(repo_id=REPO, total_bytes=int(size_gb * 2**30), shards=shards))
        (store / ".complete").write_text("ok\n")
    return store


def serve(store: Path, cluster: str, **faults: int) -> tuple[HubServer, str]:
    """The Hub stand-in on the cluster network's gateway (reachable from the nodes only), in this process."""
    from hgxkit.sim.hub.faults import FaultConfig

    net = nodes.client().networks.get(f"{nodes.PREFIX}-{cluster}")
    gateway = net.attrs["IPAM"]["Config"][0]["Gateway"]
    server = make_server(store, gateway, 0, FaultConfig(**faults))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://{gateway}:{server.server_address[1]}"


def bench_recipe(local_dir: str = LOCAL_DIR, only: str = "") -> str:
    """The shipped recipe with its model section pointed at the bench repo (`only`: one file pattern)."""
    text = (ROOT / "recipes" / "deepseek-v4-flash-dspark-marlin.yaml").read_text()
    text = text.replace("repo_id: deepseek-ai/DeepSeek-V4-Flash-DSpark", f"repo_id: {REPO}")
    text = text.replace("local_dir: /data/models/deepseek-v4-flash-dspark", f"local_dir: {local_dir}")
    if only:
        text = re.sub(r"allow_patterns:\n(  - .*\n)+", f"allow_patterns:\n  - '{only}'\n", text)
    recipe = Path(tempfile.mkdtemp()) / "bench.yaml"
    recipe.write_text(text)
    return str(recipe)


def selected(node: nodes.NodeInfo, endpoint: str) -> tuple[str, list[str], int]:
    """The commit, the files the recipe selects (*.json, *.safetensors) and their total size."""
    info = json.loads(sh(node, f"curl -sf {shlex.quote(f'{endpoint}/api/models/{REPO}?blobs=true')}"))
    names = [s["rfilename"] for s in info["siblings"] if s["rfilename"].endswith((".json", ".safetensors"))]
    return info["sha"], names, sum(s["size"] for s in info["siblings"] if s["rfilename"] in names)


def median_ratio(pairs: list[tuple[float, float]]) -> float:
    return statistics.median(a / b for a, b in pairs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-gb", type=float, default=5.0)
    parser.add_argument("--shards", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--keep", action="store_true", help="leave the node running")
    args = parser.parse_args()
    store = bench_repo(args.size_gb, args.shards)
    (node,) = nodes.up(1, cluster=CLUSTER, model_disk=f"{int(args.size_gb * 2.5) + 2}g")
    try:
        server, endpoint = serve(store, CLUSTER)
        recipe = bench_recipe()
        w = str(args.workers)
        sh(node, f"rm -rf {LOCAL_DIR} /data/models/curl /data/models/hf {STATE}.*")
        commit, names, total = selected(node, endpoint)
        gb = total / 1e9
        urls = [f"{endpoint}/{REPO}/resolve/{commit}/{n}" for n in names]
        curl = (
            "mkdir -p /data/models/curl && cd /data/models/curl && printf '%s\\n' "
            + " ".join(shlex.quote(u) for u in urls)
            + f' | xargs -P {w} -n 1 sh -c \'curl -sfL -o "$(basename "$0")" "$0"\''
        )
        hf = (
            f"HF_ENDPOINT={endpoint} HF_HUB_DISABLE_PROGRESS_BARS=1 HF_HUB_DISABLE_TELEMETRY=1 "
            f"HF_HOME=/data/models/hf/.home {HF} download {REPO} --revision {commit} --include '*.json' "
            f"--include '*.safetensors' --local-dir /data/models/hf --max-workers {w} >/dev/null"
        )

        def run_curl() -> float:
            t = timed(node, curl)
            got = int(sh(node, "du -sb /data/models/curl | cut -f1").strip())
            sh(node, "rm -rf /data/models/curl")
            if got < total:
                sys.exit(f"curl fetched {got} of {total} bytes")
            return t

        def run_hf() -> float:
            t = timed(node, hf)
            sh(node, "rm -rf /data/models/hf")
            return t

        def run_sync() -> float:
            sh(node, f"rm -rf {LOCAL_DIR} {STATE}.json {STATE}.result.json")
            deploy(CLUSTER, recipe, endpoint, f"model_download_workers={w}", "model_poll_interval_s=5")
            result = json.loads(sh(node, f"cat {STATE}.result.json"))
            if result.get("already") or len(result.get("fetched", [])) != len(names):
                sys.exit(f"the sync did not fetch every file: {result}")
            return float(result["seconds"])

        # The first deploy installs the venv (hf download needs it): a warm-up sync of config.json alone.
        deploy(CLUSTER, bench_recipe("/data/models/warmup", only="config.json"), endpoint)
        sh(node, "rm -rf /data/models/warmup /var/lib/hgxkit/model/warmup.*")
        tools = {"sync": run_sync, "curl": run_curl, "hf": run_hf}
        order = ["sync", "curl", "hf"]
        rows: list[dict[str, float]] = []
        for r in range(args.rounds):
            row = {}
            for name in order[r % 3 :] + order[: r % 3]:
                row[name] = tools[name]()
            rows.append(row)
            print(
                f"round {r + 1}: " + "  ".join(f"{k} {row[k]:6.2f} s {gb / row[k] * 1000:7.1f} MB/s" for k in order),
                flush=True,
            )
        # verify-only (the metadata check of a no-op re-run) vs a full re-hash
        deploy(CLUSTER, recipe, endpoint, "model_full_rehash=True")
        rehash_s = float(json.loads(sh(node, f"cat {STATE}.result.json"))["seconds"])
        log = deploy(CLUSTER, recipe, endpoint)
        check = re.search(r"check took ([\d.]+)s", log)
        check_s = float(check.group(1)) if check else float("nan")

        best = [(min(row["curl"], row["hf"]), row["sync"]) for row in rows]
        print(f"model: {REPO} (simulated), {len(names)} files, {gb:.2f} GB; server: Hub stand-in at {endpoint}")
        for k, label in (("curl", f"curl, {w} parallel, no hashing"), ("hf", f"hf download --max-workers {w}")):
            s = statistics.median(row[k] for row in rows)
            print(f"{label:38s} median {s:7.2f} s {gb / s * 1000:8.1f} MB/s")
        s = statistics.median(row["sync"] for row in rows)
        print(f"{'hgxkit sync, ' + w + ' workers, sha256 inline':38s} median {s:7.2f} s {gb / s * 1000:8.1f} MB/s")
        print(f"{'full re-hash (model_full_rehash)':38s} {rehash_s:14.2f} s {gb / rehash_s * 1000:8.1f} MB/s")
        print(f"{'verify-only: no-op re-run check':38s} {check_s:14.2f} s")
        print("per-round sync vs best(curl, hf download): " + " ".join(f"{b / s:.2f}" for b, s in best))
        print(
            f"sync throughput vs best of curl x{w} and hf download (median of {args.rounds} rounds): "
            f"{median_ratio(best):.2f}"
        )
        print(f"verify-only (metadata check) time vs full re-hash time: {check_s / rehash_s:.3f}")
        server.shutdown()
    finally:
        if not args.keep:
            nodes.down(CLUSTER)
    return 0


if __name__ == "__main__":
    sys.exit(main())
