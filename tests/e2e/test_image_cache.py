"""End-to-end: 4 simulated nodes behind the fleet's image cache fetch each layer from upstream once; the fill, bound
by the shaped link, takes about one direct pull. The CI sample of bench/image_fanout.py (its scenario, a smaller
layer): about 1.5-2 min here; -s prints the figures line.

The issue's target, the 4-node pull phase within 1.5x of one node's pull, is the bench's figure on a quiet machine
(1.42x there). Here the fan-out half is four nodes unpacking on the same 2 cores beside CI's other sessions (1.60x
seen in CI), so this sample bounds what the link decides: the fill (two upstream reads per blob took 2x) and the
phase at 2x, which the old fill alone exceeded.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from sim_steps import cluster_name, node_sh

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from image_fanout import figures_line, run_fanout  # noqa: E402

pytestmark = pytest.mark.e2e

CLUSTER = cluster_name("cache")
NODES = 4
LAYER_MB = 80
UPSTREAM_MBPS = 10


def test_four_nodes_fetch_each_layer_from_upstream_once_through_the_cache(sim_nodes, tmp_path) -> None:
    sim_nodes(NODES, cluster=CLUSTER)
    r = run_fanout(CLUSTER, NODES, LAYER_MB, UPSTREAM_MBPS, node_sh, tmp_path)
    assert r["rc"] == 0, r["out"][-3000:]
    print(f"node1 fill: {r['filled']}")
    print(figures_line(r, NODES, LAYER_MB, UPSTREAM_MBPS))
    assert all(status == "ok" for _, status in r["times"].values()), r["times"]
    assert sorted(node for node, label in r["times"] if label == "fan-out") == [f"node{i}" for i in range(1, 5)]
    assert ":5050" in r["mirrors"]  # node4's Docker mirrors node1's cache
    # The image config, busybox's layer and the big one: each crossed the upstream link once, in full.
    assert len(r["sent"]) == 3 and all(len(sizes) == 1 for sizes in r["sent"].values()), r["sent"]
    assert max(sizes[0] for sizes in r["sent"].values()) >= LAYER_MB * 2**20
    assert r["filled"].endswith("0 from the cache's own copies") and "3 of 3 blobs stored" in r["filled"]
    assert r["fill"] <= 1.3 * r["direct"], figures_line(r, NODES, LAYER_MB, UPSTREAM_MBPS)
    assert r["phase"] <= 2.0 * r["direct"], figures_line(r, NODES, LAYER_MB, UPSTREAM_MBPS)
