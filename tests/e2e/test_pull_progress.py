"""End-to-end: a large image pull through a shaped link prints its progress (bytes, rate, ETA) as it goes.

On one simulated node: a writable registry of its own on 127.0.0.1:15001 (Debian's docker-registry, as the
node's read-only mirror on 15000) gets an image with one layer of random bytes (incompressible), built from the
seeded busybox; the local copy is removed, the registry's port is shaped to PULL_MBPS with `tc` on the node's
loopback (as bench/fresh_overlap.py shapes the mirror), and the serve role's pull step (hgxkit/serving/steps.py
`pull`, the pull unit running hgxkit/serving/pullprogress.py) pulls it in a pyinfra run.

`make bench` (HGXKIT_BENCH=1) pulls 1.05 GB at 15 MB/s (about 3-4 min here: building and pushing the layer, then
the shaped pull); CI (CI=true) pulls 0.31 GB at 5 MB/s, as many progress lines for a third of the building and
pushing; a developer's `make test` skips it. tests/unit/serving/test_pullprogress.py checks the node program and
the line format fast.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sim_steps import cluster_name, node_sh

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        os.environ.get("HGXKIT_BENCH") != "1" and os.environ.get("CI") != "true",
        reason="slow: runs in CI and with HGXKIT_BENCH=1 (make bench)",
    ),
]

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = cluster_name("pull")
REF = "127.0.0.1:15001/hgxkit-test/big:1"
WHOLE = os.environ.get("HGXKIT_BENCH") == "1"
LAYER_MIB, PULL_MBPS = (1000, 15) if WHOLE else (300, 5)
SETUP = f"""set -e
mkdir -p /var/tmp/bigreg /var/tmp/bigctx
printf 'version: 0.1\\nstorage:\\n  filesystem:\\n    rootdirectory: /var/tmp/bigreg\\nhttp:\\n  addr: 127.0.0.1:15001\\n' \
  > /var/tmp/bigreg.yml
systemd-run --unit hgxkit-test-registry --collect docker-registry serve /var/tmp/bigreg.yml
head -c {LAYER_MIB}M /dev/urandom > /var/tmp/bigctx/blob
printf 'FROM hgxkit-sim/busybox:latest\\nCOPY blob /blob\\n' > /var/tmp/bigctx/Dockerfile
docker build -q -t {REF} /var/tmp/bigctx >/dev/null
for i in 1 2 3 4 5 6 7 8 9 10; do curl -fsS http://127.0.0.1:15001/v2/ >/dev/null 2>&1 && break; sleep 1; done
docker push {REF} >/dev/null
docker rmi {REF} >/dev/null
rm -rf /var/tmp/bigctx
tc qdisc del dev lo root 2>/dev/null || true
tc qdisc add dev lo root handle 1: htb default 10
tc class add dev lo parent 1: classid 1:10 htb rate 10gbit quantum 200000
tc class add dev lo parent 1: classid 1:20 htb rate {PULL_MBPS * 8}mbit ceil {PULL_MBPS * 8}mbit burst 256k quantum 65536
tc filter add dev lo parent 1: protocol ip prio 1 u32 match ip sport 15001 0xffff flowid 1:20
echo ready
"""
DEPLOY = f"""from pyinfra import host
from pyinfra.api.output import echo
from pyinfra.operations import python

from hgxkit.runfailure import install
from hgxkit.serving.steps import pull

install()
python.call(name="Pull the big image", function=lambda: echo("digest " + pull(host, {REF!r})))
"""
LINE = re.compile(
    r"\[node1\] pulling 127\.0\.0\.1:15001/hgxkit-test/big:1: (\d+\.\d\d)/(\d+\.\d\d) GB \(\d+%\) "
    r"at (\d+\.\d) MB/s, ETA \d+:\d\d, \d+/\d+ layers"
)


def test_a_large_pull_through_a_shaped_link_prints_rate_and_eta(sim_nodes, tmp_path) -> None:
    sim_nodes(1, cluster=CLUSTER)
    started = time.monotonic()
    assert node_sh(CLUSTER, SETUP, timeout=900).strip().endswith("ready")
    print(f"image built and pushed in {time.monotonic() - started:.0f} s")
    deploy = tmp_path / "pull_big.py"
    deploy.write_text(DEPLOY)
    env = {**os.environ, "HGXKIT_SIM_CLUSTER": CLUSTER, "PYINFRA_PROGRESS": "off", "PYTHONPATH": str(ROOT)}
    argv = [
        str(Path(sys.executable).parent / "pyinfra"),
        "-y",
        "inventories/sim.py",
        str(deploy),
        "--data",
        "serve_pull_progress_every_s=5",
    ]
    started = time.monotonic()
    result = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    took = time.monotonic() - started
    out = result.stdout + result.stderr
    lines = [m for m in LINE.finditer(out)]
    print(*[m.group(0) for m in lines], f"pull took {took:.0f} s", sep="\n")
    assert result.returncode == 0, out[-3000:]
    assert len(lines) >= 5
    assert float(lines[-1].group(2)) >= round(LAYER_MIB * 2**20 / 1e9, 2)  # GB known: the whole layer
    rates = [float(m.group(3)) for m in lines[1:]]
    assert max(rates) <= PULL_MBPS * 1.2  # the shaped link, as measured on the node
    assert "digest sha256:" in out
