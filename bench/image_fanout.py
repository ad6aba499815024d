"""The serving image to N simulated nodes through the fleet's image cache vs one node's pull straight from the
upstream, through the same shaped upstream link, side by side in one run; the upstream's GETs per blob.

    python bench/image_fanout.py [--nodes 4] [--layer-mb 300] [--mbps 10] [--keep]

On node1: an upstream registry (Debian's docker-registry, standing in for Docker Hub) on 127.0.0.1:15002 gets an
image with one LAYER_MB layer of random bytes (incompressible) on the seeded busybox; its port is shaped to MBPS
MB/s with `tc` on node1's loopback (as tests/e2e/test_pull_progress.py shapes its registry). The docker role runs
with `image_cache=first`: node1 runs the pull-through cache on its fabric address and every node's daemon.json
lists it first in `registry-mirrors`. The pull phase is the fill (roles/docker `fill_image_cache` on node1: each
blob read from the upstream once, hgxkit/node/cachefill.py) and then all N nodes pulling at once from the cache.
Then the upstream's access log is read (GETs per blob digest), and last, one node's pull straight from the shaped
upstream (by its 127.0.0.1:15002 name: no mirror) is timed. Prints one line with both and the ratio.
tests/e2e/test_image_cache.py runs the same scenario with a small layer (its CI sample).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
UPSTREAM = "127.0.0.1:15002"
IMAGE = "hgxkit-test/cached:1"  # a Docker Hub name: Docker asks its mirrors for it
BLOB_GET = re.compile(r'"GET /v2/hgxkit-test/cached/blobs/(sha256:[0-9a-f]{64}) HTTP/[\d.]+" 200 (\d+)')
TIMES = re.compile(r"\[(node\d+)\] (fill|fan-out) (\d+\.\d\d) s (ok|FAILED.*)")
NodeSh = Callable[..., str]  # (cluster, command, node="node1", timeout=300) -> stdout


def setup_script(layer_mb: int, mbps: float) -> str:
    """node1: the upstream registry with the test image pushed, its port shaped to `mbps` MB/s."""
    port = UPSTREAM.rsplit(":", 1)[1]
    return f"""set -e
mkdir -p /var/tmp/upstream /var/tmp/upctx
printf 'version: 0.1\\nlog:\\n  accesslog:\\n    disabled: false\\nstorage:\\n  filesystem:\\n    rootdirectory: \
/var/tmp/upstream\\nhttp:\\n  addr: {UPSTREAM}\\n' > /var/tmp/upstream.yml
systemd-run --unit hgxkit-test-upstream --collect docker-registry serve /var/tmp/upstream.yml
head -c {layer_mb}M /dev/urandom > /var/tmp/upctx/blob
printf 'FROM hgxkit-sim/busybox:latest\\nCOPY blob /blob\\n' > /var/tmp/upctx/Dockerfile
docker build -q -t {UPSTREAM}/{IMAGE} /var/tmp/upctx >/dev/null
for i in 1 2 3 4 5 6 7 8 9 10; do curl -fsS http://{UPSTREAM}/v2/ >/dev/null 2>&1 && break; sleep 1; done
docker push {UPSTREAM}/{IMAGE} >/dev/null
docker rmi {UPSTREAM}/{IMAGE} >/dev/null
rm -rf /var/tmp/upctx
tc qdisc del dev lo root 2>/dev/null || true
tc qdisc add dev lo root handle 1: htb default 10
tc class add dev lo parent 1: classid 1:10 htb rate 10gbit quantum 200000
tc class add dev lo parent 1: classid 1:20 htb rate {mbps * 8:g}mbit ceil {mbps * 8:g}mbit burst 256k quantum 65536
tc filter add dev lo parent 1: protocol ip prio 1 u32 match ip sport {port} 0xffff flowid 1:20
echo ready
"""


DEPLOY = f"""import time

from pyinfra import host
from pyinfra.api.output import echo
from pyinfra.operations import python

from hgxkit.hostcmd import HostRunner, argv
from hgxkit.runfailure import install
from roles.docker import docker_engine, fill_image_cache

install()
docker_engine()
marks = {{}}
python.call(name="Fill starts", function=lambda: marks.setdefault(host.name, time.monotonic()))
fill_image_cache({IMAGE!r})  # node1 only
python.call(name="Fill time",
            function=lambda: echo(f"[{{host.name}}] fill {{time.monotonic() - marks[host.name]:.2f}} s ok"))


def pull(label):
    started = time.monotonic()
    ok, out = HostRunner(host).status(argv("docker", "pull", "-q", {IMAGE!r}))
    said = "ok" if ok else "FAILED " + " ".join(out)
    echo(f"[{{host.name}}] {{label}} {{time.monotonic() - started:.2f}} s {{said}}")


python.call(name="Every node's pull", function=pull, label="fan-out")
"""
DIRECT = f"""set -e
docker rmi -f {IMAGE} >/dev/null
start=$(date +%s.%N); docker pull -q {UPSTREAM}/{IMAGE} >/dev/null; end=$(date +%s.%N)
echo "$start $end" | awk '{{printf "%.2f\\n", $2 - $1}}'
"""


def run_fanout(cluster: str, nodes: int, layer_mb: int, mbps: float, node_sh: NodeSh, workdir: Path) -> dict:
    """The scenario on a started cluster of `nodes` nodes; its figures (times in s, upstream GETs per blob)."""
    started = time.monotonic()
    ready = node_sh(cluster, setup_script(layer_mb, mbps), timeout=600).strip()
    if not ready.endswith("ready"):
        raise RuntimeError(f"upstream setup on node1 failed: {ready[-500:]}")
    built = time.monotonic() - started
    deploy = workdir / "cache_pull.py"
    deploy.write_text(DEPLOY)
    env = {**os.environ, "HGXKIT_SIM_CLUSTER": cluster, "PYINFRA_PROGRESS": "off", "PYTHONPATH": str(ROOT)}
    argv = [
        str(Path(sys.executable).parent / "pyinfra"),
        "-y",
        "inventories/sim.py",
        str(deploy),
        "--data",
        "image_cache=first",
        "--data",
        f"image_cache_upstream=http://{UPSTREAM}",
    ]
    result = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False)
    out = result.stdout + result.stderr
    times = {(m.group(1), m.group(2)): (float(m.group(3)), m.group(4)) for m in TIMES.finditer(out)}
    log = node_sh(cluster, "journalctl -u hgxkit-test-upstream --no-pager -o cat")
    sent: dict[str, list[int]] = {}
    for blob, size in BLOB_GET.findall(log):
        sent.setdefault(blob, []).append(int(size))
    filled = re.findall(r"\[node1\] image cache: (.*)", out)
    # Last: node1 pulls straight from the shaped upstream (its 127.0.0.1 name is no Docker Hub name: no mirror).
    direct = float(node_sh(cluster, DIRECT, timeout=600).strip().splitlines()[-1])
    fill = times.get(("node1", "fill"), (float("nan"), ""))[0]
    fanout = max((t for (_, label), (t, _) in times.items() if label == "fan-out"), default=float("nan"))
    return {
        "rc": result.returncode,
        "out": out,
        "times": times,
        "sent": sent,
        "direct": direct,
        "fill": fill,
        "fanout": fanout,
        "phase": fill + fanout,
        "built": built,
        "filled": filled[0] if filled else "",
        "mirrors": node_sh(cluster, "cat /etc/docker/daemon.json", node=f"node{nodes}"),
    }


def figures_line(r: dict, nodes: int, layer_mb: int, mbps: float) -> str:
    """The run's figures, side by side, as one line."""
    per_blob = sorted(len(sizes) for sizes in r["sent"].values())
    return (
        f"image fan-out, {layer_mb} MB layer, upstream shaped to {mbps:g} MB/s: one node's pull straight from "
        f"the upstream {r['direct']:.1f} s; {nodes}-node pull phase behind the cache {r['phase']:.1f} s (fill "
        f"{r['fill']:.1f} s, then all {nodes} at once {r['fanout']:.1f} s); ratio {r['phase'] / r['direct']:.2f}x; "
        f"upstream GETs per blob {per_blob} ({len(r['sent'])} blobs, "
        f"{sum(sum(s) for s in r['sent'].values()) / 1e6:.1f} MB sent)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--layer-mb", type=int, default=300)
    parser.add_argument("--mbps", type=float, default=10.0, help="the upstream link, MB/s")
    parser.add_argument("--keep", action="store_true", help="leave the nodes running")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "tests" / "e2e"))
    import tempfile

    from sim_steps import cluster_name, node_sh

    from hgxkit.sim import nodes

    cluster = cluster_name("fanout")
    nodes.down(cluster)
    nodes.up(args.nodes, cluster=cluster)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            r = run_fanout(cluster, args.nodes, args.layer_mb, args.mbps, node_sh, Path(tmp))
        if r["rc"] != 0:
            print(r["out"][-3000:], file=sys.stderr)
            return 1
        print(f"node1 fill: {r['filled']}")
        print(figures_line(r, args.nodes, args.layer_mb, args.mbps))
        return 0
    finally:
        if not args.keep:
            nodes.down(cluster)


if __name__ == "__main__":
    sys.exit(main())
