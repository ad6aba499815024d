"""A 4-node fleet model sync vs a 1-node sync, with the Hub stand-in's access log, on simulated nodes.

    python bench/model_fleet.py [--nodes 4] [--size-gb 1] [--shards 10] [--hub-mbps 12] [--rounds 2] [--keep]

The Hub stand-in serves a synthetic repo (cached like bench/model_sync.py's) from this machine on the cluster
network's gateway, each response limited to `--hub-mbps` MB/s: the site's link to the Hub, slower than the
links between nodes, as on a real fleet (the 8 connections of one sync share about 8x that). On this machine
every simulated node shares the same CPUs, so without that limit N nodes would only take N times the CPU; the
limit is printed with the figures. Then, `--rounds` times in alternating order:

- 1-node: `deploys/model.py` on node1 with model_source hub;
- fleet: `deploys/model.py` on every node with model_source fleet (a binary tree over node1..nodeN: node1 from
  the Hub, node2 and node3 from node1, node4 from node2, each file as soon as its parent verified it).

A sync's time is its units' own: from the first unit's start to the last unit's end. After each fleet run the
access log is read: every file's bytes must have been served exactly once (one GET, the file's size), all to
node1; the other nodes asked only for the file list. The last lines are the figures, one per line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from model_sync import LOCAL_DIR, REPO, STATE, bench_recipe, bench_repo, deploy, serve, sh  # noqa: E402

from hgxkit.sim import nodes  # noqa: E402

CLUSTER = "model-fleet-bench"


def unit_span(members: list[nodes.NodeInfo], names: int) -> tuple[float, float]:
    """(first start, last end) of the sync units on `members`, from their result files; prints each unit's."""
    spans = []
    for n in members:
        result = json.loads(sh(n, f"cat {STATE}.result.json"))
        if not result.get("ok") or len(result.get("fetched", [])) != names:
            sys.exit(f"{n.name}: the sync did not fetch every file: {result}")
        spans.append((result["finished_at"] - result["seconds"], result["finished_at"]))
    first = min(s for s, _ in spans)
    if len(members) > 1:
        print(
            "  units (start-end, s): "
            + ", ".join(f"{n.name} {s - first:.1f}-{e - first:.1f}" for n, (s, e) in zip(members, spans, strict=True))
        )
    return first, max(e for _, e in spans)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--size-gb", type=float, default=1.0)
    parser.add_argument("--shards", type=int, default=10)
    parser.add_argument("--hub-mbps", type=float, default=12.0, help="MB/s per response from the Hub stand-in")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--keep", action="store_true", help="leave the nodes running")
    args = parser.parse_args()
    store = bench_repo(args.size_gb, args.shards)
    members = nodes.up(args.nodes, cluster=CLUSTER, model_disk=f"{int(args.size_gb * 1.5) + 2}g")
    try:
        server, endpoint = serve(store, CLUSTER, rate_bps=int(args.hub_mbps * 1e6))
        recipe = bench_recipe()
        ip = {n.name: sh(n, "hostname -i").split()[0] for n in members}
        info = json.loads(sh(members[0], f"curl -sf '{endpoint}/api/models/{REPO}?blobs=true'"))
        files = {s["rfilename"]: s for s in info["siblings"] if s["rfilename"].endswith((".json", ".safetensors"))}
        by_sha = {s["lfs"]["sha256"]: name for name, s in files.items() if s.get("lfs")}
        gb = sum(s["size"] for s in files.values()) / 1e9

        def clean() -> None:
            for n in members:
                sh(n, f"rm -rf {LOCAL_DIR} {STATE}.json {STATE}.result.json")
            server.state.requests.clear()

        # Warm-up: the venv, the program and the peer keys on every node, with the fleet's own deploy of
        # config.json alone (so the timed runs measure the syncs, not pip).
        deploy(CLUSTER, bench_recipe("/data/models/warmup", only="config.json"), endpoint, "model_source=fleet")
        for n in members:
            sh(n, "rm -rf /data/models/warmup /var/lib/hgxkit/model/warmup.*")

        def one_node() -> float:
            clean()
            deploy(CLUSTER, recipe, endpoint, limit="node1")
            start, end = unit_span(members[:1], len(files))
            return end - start

        def fleet() -> tuple[float, Counter[str], Counter[str], set[str], set[str]]:
            clean()
            deploy(CLUSTER, recipe, endpoint, "model_source=fleet")
            start, end = unit_span(members, len(files))
            reads: Counter[str] = Counter()
            served: Counter[str] = Counter()
            clients: set[str] = set()
            for r in server.state.requests:
                if r.method != "GET" or r.status not in (200, 206):
                    continue
                path = r.path.split("?")[0]
                name = by_sha.get(path.split("/")[-1]) if path.startswith("/_lfs/") else None
                if name is None and "/resolve/" in path:
                    name = path.split("/resolve/")[1].split("/", 1)[1]
                if name is not None:
                    reads[name] += 1
                    served[name] += r.body_bytes
                    clients.add(r.client)
            listers = {r.client for r in server.state.requests if r.path.startswith(f"/api/models/{REPO}")}
            return end - start, reads, served, clients, listers

        pairs: list[tuple[float, float]] = []
        proofs = []
        for r in range(args.rounds):
            if r % 2 == 0:
                single = one_node()
                many, reads, served, clients, listers = fleet()
            else:
                many, reads, served, clients, listers = fleet()
                single = one_node()
            pairs.append((many, single))
            proofs.append((reads, served, clients, listers))
            print(f"round {r + 1}: 1-node {single:6.2f} s   {args.nodes}-node fleet {many:6.2f} s", flush=True)
        print(
            f"model: {REPO} (simulated), {len(files)} files, {gb:.2f} GB; Hub stand-in at {endpoint}, "
            f"{args.hub_mbps:g} MB/s per response; nodes: " + ", ".join(f"{k} {v}" for k, v in ip.items())
        )
        ok = True
        for reads, served, clients, _ in proofs:
            once = set(reads) == set(files) and set(reads.values()) == {1}
            whole = all(served[name] == files[name]["size"] for name in files)
            only_root = clients == {ip["node1"]}
            ok = ok and once and whole and only_root
        last_reads, _, last_clients, last_listers = proofs[-1]
        print(
            f"Hub access log, last fleet run: {len(last_reads)} of {len(files)} files read, GETs per file "
            f"min {min(last_reads.values(), default=0)} max {max(last_reads.values(), default=0)}, "
            f"all by {sorted(last_clients)}; the file list asked by {len(last_listers)} hosts (one request each)"
        )
        print(
            f"fleet sync time vs 1-node sync time (median of {args.rounds} rounds): "
            f"{statistics.median(m / s for m, s in pairs):.2f}"
        )
        print(
            f"Hub reads per file in every fleet run (access log; 1 = each file once, whole, to node1 only): "
            f"{1 if ok else 'NOT 1'}"
        )
        server.shutdown()
    finally:
        if not args.keep:
            nodes.down(CLUSTER)
    return 0


if __name__ == "__main__":
    sys.exit(main())
