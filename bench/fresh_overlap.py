"""Fresh node -> serving, with the image pull overlapped with the model download and without, on simulated nodes.

    python bench/fresh_overlap.py [--size-gb 2] [--shards 20] [--hub-mbps 10] [--registry-mbps 1.5] [--rounds 1]

Each arm starts a FRESH simulated node (cluster `fresh-on` / `fresh-off`; nothing installed, no image, no
model), then times `deploys/reproduce.py --data verify=false` with the marlin recipe pointed at the bench repo
(bench/model_sync.py's synthetic repo, served by the Hub stand-in on the cluster network's gateway at
`--hub-mbps` MB/s per response), once with `image_prefetch=true` (the default: the image pull runs in a node-side
unit while the model downloads) and once with `image_prefetch=false` (pulled when the containers start, after
the model). The node's registry mirror (127.0.0.1:15000) is given a `--registry-mbps` link with `tc` on the
node's loopback: the stand-in image is about 40 MB of compressed layers, so at the default 1.5 MB/s its pull
takes about as long as the model's sync (both transfers matter, the case the overlap is for; at 6 MB/s it is
a fifth of the sync, about a real 30 GB image next to a 160 GB model). The arms alternate order each round.

Measured in each run: the wall time (pyinfra's start to its exit), the time spent in each phase (from the
operations' output, as `make demo` prints them), the model sync's own time (its unit's result file) and the
image pull's (overlapped: its unit's start and end in the node's journal; serial: from the rollout's start to
its line naming the pulled digest). The bound the issue sets is `longer of (model sync, image pull) + everything
else + 15%`, with the transfers and everything else (the wall time less the two transfers) from the serial run,
where each transfer runs alone. Simulated nodes: absolute times are this machine's; ratios are the figures.
The last lines are the figures, one per line.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from model_sync import LOCAL_DIR, REPO, STATE, bench_repo, serve, sh  # noqa: E402

from hgxkit.sim import nodes  # noqa: E402
from hgxkit.sim.demo import PhaseClock  # noqa: E402

PYINFRA = str(Path(sys.executable).parent / "pyinfra")
PULL_UNIT = "hgxkit-image-pull"  # roles/serve (hgxkit/serving/steps.py): the background pull's unit


def serving_recipe() -> str:
    """The shipped marlin recipe serving the bench repo: its model section and its containers' mount."""
    text = (ROOT / "recipes" / "deepseek-v4-flash-dspark-marlin.yaml").read_text()
    text = text.replace("repo_id: deepseek-ai/DeepSeek-V4-Flash-DSpark", f"repo_id: {REPO}")
    text = text.replace("/data/models/deepseek-v4-flash-dspark", LOCAL_DIR)
    recipe = Path(tempfile.mkdtemp()) / "fresh-overlap.yaml"
    recipe.write_text(text)
    return str(recipe)


def shape_registry(node: nodes.NodeInfo, mbps: float) -> None:
    """Limit what the node's registry mirror (port 15000 on its loopback) sends to `mbps` MB/s: an htb class for
    that port (the kernels here have htb and u32, not prio), everything else on the loopback unlimited. Set by a
    unit enabled at boot: bring-up reboots the node after the driver install, and a reboot starts a new network
    namespace without the qdisc."""
    rate = f"{int(mbps * 8)}mbit"
    shape = (
        "tc qdisc del dev lo root 2>/dev/null; tc qdisc add dev lo root handle 1: htb default 10 && "
        "tc class add dev lo parent 1: classid 1:10 htb rate 10gbit quantum 200000 && "
        f"tc class add dev lo parent 1: classid 1:20 htb rate {rate} ceil {rate} burst 256k quantum 65536 && "
        "tc filter add dev lo parent 1: protocol ip prio 1 u32 match ip sport 15000 0xffff flowid 1:20"
    )
    unit = (
        "[Unit]\nDescription=hgxkit bench: shape the registry mirror's link\nBefore=docker.service\n"
        f"[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/bin/sh -c {shlex.quote(shape)}\n"
        "[Install]\nWantedBy=multi-user.target\n"
    )
    sh(
        node,
        f"printf %s {shlex.quote(unit)} > /etc/systemd/system/hgxkit-bench-shape.service && "
        "systemctl daemon-reload && systemctl enable --now hgxkit-bench-shape.service >/dev/null 2>&1 && "
        "tc class show dev lo | grep -q 1:20",
    )


def registry_bytes(node: nodes.NodeInfo) -> int:
    """Bytes the shaped class sent since boot (proof the pull went through the shaped link)."""
    out = sh(node, "tc -s class show dev lo classid 1:20 | awk '/Sent/ {print $2; exit}'")
    return int(out.strip() or 0)


def reproduce(cluster: str, recipe: str, endpoint: str, prefetch: bool) -> tuple[float, PhaseClock, float | None]:
    """Run deploys/reproduce.py; its wall time, phase clock and (without prefetch) the pull's own time: from the
    rollout's start to its line naming the pulled digest (the few fact reads before the pull count with it)."""
    argv = [PYINFRA, "-y", "inventories/sim.py", "deploys/reproduce.py"]
    for item in (
        f"recipe={recipe}",
        "verify=false",
        f"hf_endpoint={endpoint}",
        "model_disk_margin_gb=0.1",
        "min_free_disk_gb=1",  # the preflight asks 400 GB for the real model
        f"image_prefetch={str(prefetch).lower()}",
    ):
        argv += ["--data", item]
    env = {**os.environ, "HGXKIT_SIM_CLUSTER": cluster, "PYINFRA_PROGRESS": "off", "PYTHONUNBUFFERED": "1"}
    env.pop("HF_TOKEN", None)
    start = time.monotonic()
    clock = PhaseClock(start)
    lines = []
    rollout_at = digest_at = None
    with subprocess.Popen(
        argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    ) as proc:
        assert proc.stdout is not None
        for raw in proc.stdout:
            now = time.monotonic()
            clock.feed(now, raw)
            lines.append(raw)
            if "--> Starting operation:" in raw and "Roll out" in raw and rollout_at is None:
                rollout_at = now
            if "containers run by this digest" in raw and digest_at is None:
                digest_at = now
        code = proc.wait()
    wall = time.monotonic() - start
    clock.finish(time.monotonic())
    if code != 0:
        sys.exit(f"deploys/reproduce.py failed on cluster {cluster}:\n{''.join(lines[-40:])}")
    pulled = digest_at - rollout_at if rollout_at is not None and digest_at is not None and not prefetch else None
    return wall, clock, pulled


def pull_seconds(node: nodes.NodeInfo) -> float | None:
    """The background pull unit's run time, from its start and end in the node's journal (None: no unit ran)."""
    out = sh(node, f"journalctl -u {PULL_UNIT} -o short-unix --no-pager 2>/dev/null || true")
    stamps = [
        float(line.split()[0])
        for line in out.splitlines()
        if line[:1].isdigit()
        and any(w in line for w in ("Started", "Deactivated", "Succeeded", "Finished", "Consumed"))
    ]
    return max(stamps) - min(stamps) if len(stamps) > 1 else None


def one_arm(prefetch: bool, args: argparse.Namespace, store: Path) -> dict[str, float]:
    cluster = "fresh-on" if prefetch else "fresh-off"
    nodes.down(cluster)  # fresh: no package, image or model left from an earlier arm
    (node,) = nodes.up(1, cluster=cluster, memory_gib=3072, model_disk=f"{int(args.size_gb * 1.5) + 2}g")
    try:
        shape_registry(node, args.registry_mbps)
        server, endpoint = serve(store, cluster, rate_bps=int(args.hub_mbps * 1e6))
        try:
            wall, clock, pulled = reproduce(cluster, serving_recipe(), endpoint, prefetch)
        finally:
            server.shutdown()
        sync = float(json.loads(sh(node, f"cat {STATE}.result.json"))["seconds"])
        row = {"wall": wall, "sync": sync, **{f"phase {k}": v for k, v in clock.spent.items()}}
        shaped = registry_bytes(node)
        if shaped < 1_000_000:
            sys.exit(f"the registry link carried {shaped} bytes since the node's last boot: the pull was not shaped")
        if prefetch and (pull := pull_seconds(node)) is not None:
            row["pull"] = pull  # in its unit, while the model downloads
        if pulled is not None:
            row["pull"] = pulled  # alone, in the rollout
        print(
            f"  image_prefetch={str(prefetch).lower():5s}: fresh node -> serving {wall:6.1f} s; "
            f"model sync {sync:.1f} s"
            + (f", image pull {row['pull']:.1f} s" if "pull" in row else "")
            + f" ({shaped / 1e6:.0f} MB through the shaped registry link); phases "
            + ", ".join(f"{k} {v:.1f} s" for k, v in clock.spent.items()),
            flush=True,
        )
        return row
    finally:
        if not args.keep:
            nodes.down(cluster)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-gb", type=float, default=2.0)
    parser.add_argument("--shards", type=int, default=20)
    parser.add_argument("--hub-mbps", type=float, default=10.0, help="MB/s per response from the Hub stand-in")
    parser.add_argument("--registry-mbps", type=float, default=1.5, help="MB/s of the node's registry mirror link")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--keep", action="store_true", help="leave the last nodes running")
    args = parser.parse_args()
    print("simulated: true (hgxkit sim nodes; the Hub and registry links are shaped, times are this machine's)")
    store = bench_repo(args.size_gb, args.shards)
    rows: dict[bool, list[dict[str, float]]] = {True: [], False: []}
    for r in range(args.rounds):
        print(f"round {r + 1}:", flush=True)
        for prefetch in (True, False) if r % 2 == 0 else (False, True):
            rows[prefetch].append(one_arm(prefetch, args, store))
    on, off = rows[True], rows[False]

    def med(arm: list[dict[str, float]], key: str) -> float:
        return statistics.median(row[key] for row in arm)

    wall_on, wall_off = med(on, "wall"), med(off, "wall")
    if not all("pull" in row for row in on + off):
        sys.exit(f"a run without its pull's times ({PULL_UNIT}'s journal, or the rollout's digest line)")
    # The transfers as they run alone (the serial arm): overlapped, each shares the node's 2 cores with the other.
    sync, pull = med(off, "sync"), med(off, "pull")
    rest = wall_off - sync - pull  # the serial run less its two transfers
    bound = max(sync, pull) + rest
    print(
        f"model: {args.size_gb:g} GB in {args.shards} shards at {args.hub_mbps:g} MB/s per response; image: the "
        f"SGLang stand-in over a {args.registry_mbps:g} MB/s registry link"
    )
    print(
        f"median of {args.rounds}: with overlap {wall_on:.1f} s, without {wall_off:.1f} s; alone (serial run): model "
        f"sync {sync:.1f} s, image pull {pull:.1f} s, everything else {rest:.1f} s -> longer transfer + everything "
        f"else {bound:.1f} s, +15% {bound * 1.15:.1f} s; overlapped: sync {med(on, 'sync'):.1f} s, pull "
        f"{med(on, 'pull'):.1f} s"
    )
    print(f"fresh node -> serving, with overlap vs without: {wall_on / wall_off:.2f}")
    print(
        f"fresh node -> serving with overlap vs (longer of sync, pull) + everything else (target <= 1.15): "
        f"{wall_on / bound:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
