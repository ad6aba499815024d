"""End-to-end: a bundle with the fleet's image cache on 2 simulated nodes: node1 gets the whole bundle and fills the
cache from its image/; node2 gets the bundle without image/, pulls the image through the cache by the manifest
digest the bundle records (its sim mirror refused) and runs the bundle's image ID. The CI sample of
`bench/bundle.py --image-cache` (its first half: the cache on); -s prints the bytes per node.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from sim_steps import cluster_name, node_sh

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from bundle import CONTAINER, cache_figures_lines, run_bundle_cache  # noqa: E402

pytestmark = pytest.mark.e2e

CLUSTER = cluster_name("bcache")


def test_behind_the_cache_the_second_node_gets_no_image_and_pulls_the_bundles_image_through_it(
    sim_nodes, tmp_path
) -> None:
    sim_nodes(2, cluster=CLUSTER)
    r = run_bundle_cache(CLUSTER, 2, node_sh, tmp_path, without=False)
    assert r["rc"] == 0, r["out"][-4000:]
    print("\n".join(cache_figures_lines(r, 2)))
    doc, out = r["doc"], r["out"]
    image_id = doc["image"]["id"]
    # Only the cache host holds image/; node2's copy is everything else, verified, and says where image/ comes from.
    assert (r["with"]["node1:image"], r["with"]["node2:image"]) == (True, False)
    image = sum(a["size"] for a in doc["artifacts"] if a["path"].startswith("image/"))
    assert r["with"]["node2"] < r["with"]["node1"] - image + 65536, r["with"]
    assert f"Copy the bundle {doc['bundle_sha256'][:16]} to {r['node_dir']} (image/ from the image cache)" in out
    image_files = sum(a["path"].startswith("image/") for a in doc["artifacts"])
    assert r["verify"]["node2"].splitlines() == [
        f"image/: {image_files} files ({image} bytes) not on this node, taken from the image cache (Docker checks "
        "each layer by digest, the role the image ID)",
        doc["bundle_sha256"],
    ]
    assert r["verify"]["node1"].splitlines() == [doc["bundle_sha256"]]  # node1 got image/: checked in full
    # node2 pulled by the bundle's manifest digest through the cache: every layer it served went to node2.
    assert f"Pull lmsysorg/sglang:dev-dspark through the image cache ({image_id[:19]})" in out
    to_node2 = {blob for addr, repo, blob, _ in r["served"] if repo == "lmsysorg/sglang" and addr != "127.0.0.1"}
    assert len(r["layers"]) >= 1 and set(r["layers"]) <= to_node2, (r["layers"], r["served"])
    # Both containers run the image the bundle vouches for.
    assert r["ids"] == {"node1": image_id, "node2": image_id}
    assert node_sh(CLUSTER, f"docker ps -q --filter name={CONTAINER}", node="node2").strip()
