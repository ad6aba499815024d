"""Model sync throughput vs `curl`, and verify-only time, on a simulated node (roles/model, deploys/model.py).

    python bench/model_sync.py [--size-gb 5] [--shards 50] [--keep]

Builds (once, cached under the sim state dir) a synthetic repo of `--size-gb` GB in `--shards` safetensors
shards plus its small JSON files, serves it from this machine with the Hub stand-in on the cluster network's
gateway, starts one simulated node (cluster `model-bench`), then, in the same run against the same server:

1. `curl` fetches every file the recipe selects (8 in parallel, as the downloader's 8 workers) into the node's
   /data/models, timed, then deleted;
2. `deploys/model.py` syncs the model (download + sha256 verify of every file), timed by the unit itself;
3. a re-run with `model_full_rehash=True` times verify-only (every file re-hashed against the Hub's metadata);
4. a plain re-run times the metadata-only check.

/data/models on a node is a tmpfs: the model lives in RAM (mind 5 GB on a small machine). Simulated: absolute
times are this machine's; the ratio against curl is the figure to compare.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hgxkit.sim import nodes, paths  # noqa: E402
from hgxkit.sim.hub.makerepo import RepoSpec, make_repo  # noqa: E402
from hgxkit.sim.hub.server import make_server  # noqa: E402

PYINFRA = str(Path(sys.executable).parent / "pyinfra")
CLUSTER = "model-bench"
REPO = "hgxkit-bench/model"
LOCAL_DIR = "/data/models/bench"


def sh(node: nodes.NodeInfo, command: str) -> str:
    res = subprocess.run(nodes.ssh_argv(node, [command]), capture_output=True, text=True, check=False)
    if res.returncode != 0:
        sys.exit(f"on {node.name}: {command[:80]}: {res.stderr.strip()[-500:]}")
    return res.stdout


def deploy(recipe: str, endpoint: str, *data: str) -> tuple[float, str]:
    argv = [PYINFRA, "-y", "inventories/sim.py", "deploys/model.py", "--data", f"recipe={recipe}"]
    for item in (f"hf_endpoint={endpoint}", "model_disk_margin_gb=0.1", *data):
        argv += ["--data", item]
    env = {**os.environ, "HGXKIT_SIM_CLUSTER": CLUSTER, "PYINFRA_PROGRESS": "off"}
    env.pop("HF_TOKEN", None)
    start = time.perf_counter()
    res = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        sys.exit(f"deploys/model.py failed:\n{(res.stdout + res.stderr)[-3000:]}")
    return time.perf_counter() - start, res.stdout + res.stderr


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-gb", type=float, default=5.0)
    parser.add_argument("--shards", type=int, default=50)
    parser.add_argument("--keep", action="store_true", help="leave the node running")
    args = parser.parse_args()

    store = paths.state_dir() / "bench-hub" / f"{args.size_gb:g}g-{args.shards}"
    if not (store / ".complete").is_file():
        print(f"building the {args.size_gb:g} GB bench repo in {store} (once)", flush=True)
        make_repo(store, RepoSpec(repo_id=REPO, total_bytes=int(args.size_gb * 2**30), shards=args.shards))
        (store / ".complete").write_text("ok\n")
    (node,) = nodes.up(1, cluster=CLUSTER, model_disk=f"{int(args.size_gb * 2.5) + 2}g")
    try:
        net = nodes.client().networks.get(f"{nodes.PREFIX}-{CLUSTER}")
        gateway = net.attrs["IPAM"]["Config"][0]["Gateway"]
        server = make_server(store, gateway, 0)  # the cluster network only
        threading.Thread(target=server.serve_forever, daemon=True).start()
        endpoint = f"http://{gateway}:{server.server_address[1]}"
        text = (ROOT / "recipes" / "deepseek-v4-flash-dspark-marlin.yaml").read_text()
        text = text.replace("repo_id: deepseek-ai/DeepSeek-V4-Flash-DSpark", f"repo_id: {REPO}")
        text = text.replace("local_dir: /data/models/deepseek-v4-flash-dspark", f"local_dir: {LOCAL_DIR}")
        recipe = Path(tempfile.mkdtemp()) / "bench.yaml"
        recipe.write_text(text)

        sh(node, f"rm -rf {LOCAL_DIR} /data/models/curl /var/lib/hgxkit/model/bench.*")
        info = json.loads(sh(node, f"curl -sf '{endpoint}/api/models/{REPO}?blobs=true'"))
        names = [s["rfilename"] for s in info["siblings"] if s["rfilename"].endswith((".json", ".safetensors"))]
        total = sum(s["size"] for s in info["siblings"] if s["rfilename"] in names)
        urls = "\n".join(f"{endpoint}/{REPO}/resolve/{info['sha']}/{n}" for n in names)
        curl = (
            "mkdir -p /data/models/curl && cd /data/models/curl && "
            f"printf '%s\\n' {' '.join(repr(u) for u in urls.splitlines())} | "
            'xargs -P 8 -n 1 sh -c \'curl -sfL -o "$(basename "$0")" "$0"\''
        )
        start = time.perf_counter()
        sh(node, curl)
        curl_s = time.perf_counter() - start
        got = int(sh(node, "du -sb /data/models/curl | cut -f1").strip())
        sh(node, "rm -rf /data/models/curl")

        deploy_s, _ = deploy(str(recipe), endpoint)
        result = json.loads(sh(node, "cat /var/lib/hgxkit/model/bench.result.json"))
        sync_s = float(result["seconds"])
        _, _ = deploy(str(recipe), endpoint, "model_full_rehash=True")
        verify = json.loads(sh(node, "cat /var/lib/hgxkit/model/bench.result.json"))
        _, log = deploy(str(recipe), endpoint)
        check = re.search(r"check took ([\d.]+)s", log)

        gb = total / 1e9
        verify_s = float(verify["seconds"])
        check_s = float(check.group(1)) if check else float("nan")
        print(f"model: {REPO} (simulated), {len(names)} files, {gb:.2f} GB; server: Hub stand-in at {endpoint}")
        print(
            f"curl, 8 parallel, no verify:        {curl_s:7.2f} s {gb / curl_s * 1000:8.1f} MB/s ({got / 1e9:.2f} GB)"
        )
        print(f"hgxkit sync, 8 workers + sha256:    {sync_s:7.2f} s {gb / sync_s * 1000:8.1f} MB/s")
        print(f"  (the whole first deploy, venv install included: {deploy_s:.1f} s)")
        print(f"throughput ratio hgxkit/curl:       {curl_s / sync_s:7.2f}")
        print(f"verify-only, full sha256 re-hash:   {verify_s:7.2f} s {gb / verify_s * 1000:8.1f} MB/s")
        print(f"no-op re-run check, metadata only:  {check_s:7.2f} s")
        server.shutdown()
    finally:
        if not args.keep:
            nodes.down(CLUSTER)
    return 0


if __name__ == "__main__":
    sys.exit(main())
