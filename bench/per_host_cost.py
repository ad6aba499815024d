"""What each host costs a no-op re-run of deploys/dspark.py: the controller's CPU, the node's CPU and SSH round
trips per host, side by side with pyinfra's minimal one-operation deploy, on 1, 4 and 8 simulated nodes.

    python bench/per_host_cost.py [--nodes 1,4,8] [--repeat 3] [--cores 16] [--keep] [--profile DIR] [--pin-model]
                                  [--no-slope]

For each node count N it starts cluster `costN-<suffix>` ($HGXKIT_SIM_TEST_SUFFIX, default "bench"), converges
it once with deploys/dspark.py --data verify=false (not measured), then runs, alternating, the no-op re-run of
deploys/dspark.py (it must change nothing) and bench/minimal_deploy.py (one fact, one no-op operation), each
through bench/counted_pyinfra.py, and prints medians of:
  controller CPU s/host  user+sys of the pyinfra process / hosts (not its children: the inventory's
                         `hgxkit sim status` is the simulation's, a real inventory has none)
  node CPU s/no-op       each node container's CPU cgroup (cpuacct.usage, or cpu.stat on cgroup v2) over the
                         run, less that node's idle rate (measured just before, same length) -- what the run
                         made the node do: sshd, the commands, dockerd answering them
    less remote stand-ins  the same less what the node's stand-ins for remote services used meanwhile (the Hub
                         answering which commit a branch is, the apt repository, the registry mirror: on a
                         real site huggingface.co's, NVIDIA's and the registry's CPU, not the node's), read
                         from the host's /proc for their processes (clock ticks: 10 ms steps per node)
  round trips/host       SSH exec channels (pyinfra's and hgxkit's run-lock holder's) + SFTP transfers to each host
  wall s                 the whole run
and their ratios to the minimal deploy. Then, on the largest cluster, each deploy's controller CPU for all its
hosts against `--limit node1` (same inventory, recipe and imports: the difference is what a further host costs;
`--no-slope` skips it), and from that a projection (on paper, labelled) for 100 and 1,000 hosts.
The seed recipe names the model's branch (`revision: main`): each run asks the Hub (the stand-in, on the node)
which commit that is, by design. `--pin-model` measures the recipe pinned to the commit the first converge
fetched (a copy of it in a temporary folder), where the model check is the stdlib-only fast path.
The pyinfra runs get a user's environment as to bytecode: PYTHONDONTWRITEBYTECODE, which this machine's
sessions set, is removed from it. With it, hgxkit leaves pyinfra's own "write no bytecode" switch on (see
hgxkit/__init__.py) and every run would compile roles/ and the editable hgxkit's modules from source again
(~0.14 s of the controller's CPU). The first, unmeasured converge writes the cache.
Nodes are simulated (`simulated: true`): absolute numbers are this machine's; the ratios are the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the checkout this bench belongs to, for the seed recipe's name and model path
COUNTED = str(ROOT / "bench" / "counted_pyinfra.py")
DSPARK, MINIMAL = "deploys/dspark.py", "bench/minimal_deploy.py"


def sim(*args: str) -> str:
    return subprocess.run(
        [sys.executable, "-m", "hgxkit", "sim", *args], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout


def node_containers(cluster: str) -> list[str]:
    out = subprocess.run(
        ["docker", "ps", "-q", "--no-trunc", "--filter", f"name=hgxkit-sim-{cluster}-node"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    return out.split()


def cgroup_cpu_s(container_id: str) -> float:
    """CPU seconds the container's cgroup has used (cgroup v1 cpuacct, or v2 cpu.stat)."""
    root = Path("/sys/fs/cgroup")
    for path in (
        root / "cpuacct" / "docker" / container_id / "cpuacct.usage",
        root / "cpu,cpuacct" / "docker" / container_id / "cpuacct.usage",
    ):
        if path.is_file():
            return int(path.read_text()) / 1e9
    for group in (root / "system.slice" / f"docker-{container_id}.scope", root / "docker" / container_id):
        if (group / "cpu.stat").is_file():
            stat = dict(line.split() for line in (group / "cpu.stat").read_text().splitlines())
            return int(stat["usage_usec"]) / 1e6
    sys.exit(f"no CPU cgroup found for container {container_id[:12]}")


# Processes of a simulated node that stand in for services a real node reaches over the network (the Hub, NVIDIA's
# apt repository, a registry mirror): their CPU is the remote side's, which a real node does not spend.
REMOTE_STANDINS = re.compile(r"-m hgxkit\.sim\.hub |-m http\.server .*/srv/hgxkit-sim-repo|docker-registry serve")


def remote_standin_pids(container_id: str) -> list[int]:
    """Host PIDs of the container's processes that stand in for remote services (`REMOTE_STANDINS`)."""
    out = subprocess.run(
        ["docker", "top", container_id, "-eo", "pid,args"], capture_output=True, text=True, check=False
    ).stdout
    return [int(line.split()[0]) for line in out.splitlines()[1:] if REMOTE_STANDINS.search(line)]


def process_cpu_s(pids: list[int]) -> float:
    """CPU seconds the processes (and their waited-for children) have used, from the host's /proc."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(v) for v in fields[11:15])  # utime stime cutime cstime, in clock ticks
    return total / os.sysconf("SC_CLK_TCK")


def run(cluster: str, deploy: str, *data: str, profile: str | None = None, limit: str | None = None) -> dict:
    """One pyinfra run through counted_pyinfra.py; its counts, CPU, wall time and the nodes' CPU. `limit`: only
    that inventory host (pyinfra's --limit; the inventory, recipe and imports are the same as for all)."""
    ids = node_containers(cluster)
    env = {**os.environ, "HGXKIT_SIM_CLUSTER": cluster, "PYINFRA_PROGRESS": "off"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # a user's environment (see the docstring)
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        argv = [
            sys.executable,
            COUNTED,
            out.name,
            *(["--profile", profile] if profile else []),
            "-y",
            "inventories/sim.py",
            deploy,
        ]
        for item in data:
            argv += ["--data", item]
        if limit:
            argv += ["--limit", limit]
        standins = {cid: remote_standin_pids(cid) for cid in ids}
        idle = _idle_rates(ids, 2.0)
        before = {cid: cgroup_cpu_s(cid) for cid in ids}
        remote_before = {cid: process_cpu_s(standins[cid]) for cid in ids}
        start = time.perf_counter()
        result = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - start
        node_cpu = [cgroup_cpu_s(cid) - before[cid] - idle[cid] * wall for cid in ids]
        remote = [process_cpu_s(standins[cid]) - remote_before[cid] for cid in ids]
        log = result.stdout + result.stderr
        if result.returncode != 0:
            sys.exit(f"{deploy} failed on cluster {cluster}:\n{log[-3000:]}")
        counts = json.loads(Path(out.name).read_text())
    trips = list(counts["round_trips"].values())
    return {
        "wall": wall,
        "cpu_host": counts["cpu_s"] / len(ids),
        "cpu": counts["cpu_s"],
        "node_cpu": statistics.mean(node_cpu),
        "node_cpu_own": statistics.mean(n - r for n, r in zip(node_cpu, remote, strict=True)),
        "trips": statistics.mean(trips) if trips else 0.0,
        "changed": changed_ops(log),
        "commands": counts.get("commands", []),
    }


def pinned_recipe(cluster: str, folder: str) -> str:
    """A copy of the seed recipe with `revision:` set to the commit the cluster's first node verified."""
    from hgxkit.knobs import SEED_RECIPE
    from hgxkit.model.core import model_name
    from hgxkit.recipe.read import load_recipe

    recipe = load_recipe(str(ROOT / SEED_RECIPE))
    record = f"/var/lib/hgxkit/model/{model_name(recipe.model.local_dir)}.json"
    shown = subprocess.run(
        ["docker", "exec", node_containers(cluster)[0], "cat", record], capture_output=True, text=True, check=True
    ).stdout
    commit = json.loads(shown)["commit"]
    text = (ROOT / SEED_RECIPE).read_text()
    pinned, count = re.subn(r"(?m)^(  revision: ).*$", lambda m: m.group(1) + commit, text)
    if count != 1 or not re.fullmatch(r"[0-9a-f]{40}", commit):
        sys.exit(f"{SEED_RECIPE}: cannot pin the model (revision lines: {count}, commit {commit!r})")
    path = Path(folder) / Path(SEED_RECIPE).name
    path.write_text(pinned)
    return str(path)


def _idle_rates(ids: list[str], seconds: float) -> dict[str, float]:
    first = {cid: cgroup_cpu_s(cid) for cid in ids}
    time.sleep(seconds)
    return {cid: max(0.0, (cgroup_cpu_s(cid) - first[cid]) / seconds) for cid in ids}


def changed_ops(log: str) -> int:
    match = re.search(r"Grand total\s+\S+\s+(\S+)\s+(\S+)", log)
    if not match:
        sys.exit("no Grand total line in pyinfra's output")
    return sum(0 if v == "-" else int(v) for v in match.groups())


METRICS = (
    ("cpu_host", "controller CPU s/host", 3),
    ("node_cpu", "node CPU s/no-op", 3),
    ("node_cpu_own", "  less remote stand-ins", 3),
    ("trips", "round trips/host", 1),
    ("wall", "wall s", 2),
)


def report(nodes: int, samples: dict[str, list[dict]]) -> dict[str, dict[str, float]]:
    med = {d: {k: statistics.median(s[k] for s in samples[d]) for k, _, _ in METRICS} for d in samples}
    for key, label, digits in METRICS:
        a, b = med[DSPARK][key], med[MINIMAL][key]
        ratio = f"{a / b:.2f}x" if b > 0 else "n/a"
        print(f"{nodes} node(s)  {label:<22} dspark {a:8.{digits}f}  minimal {b:8.{digits}f}  ratio {ratio}")
    return med


def fit(points: dict[int, float]) -> tuple[float, float]:
    """(fixed, per host) of total = fixed + per_host * hosts, least squares over the measured node counts (one
    count: all of it per host, nothing fixed)."""
    if len(points) < 2:
        ((n, total),) = points.items()
        return 0.0, total / n
    xs, ys = list(points), list(points.values())
    mx, my = statistics.mean(xs), statistics.mean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    return my - slope * mx, slope


def limit_slope(cluster: str, nodes: int, repeat: int, data: list[str]) -> dict[str, tuple[float, float]]:
    """(fixed, per host) of each deploy's controller CPU on one cluster: runs of all `nodes` hosts against runs
    limited to the first (`--limit node1`), alternating. Both load the same inventory, recipe and modules, so
    their difference is what the other hosts add; a fit across clusters also carries each cluster's own state."""
    runs: dict[str, dict[str, list[float]]] = {d: {"all": [], "one": []} for d in (DSPARK, MINIMAL)}
    for _ in range(repeat):
        for deploy, extra in ((DSPARK, data), (MINIMAL, [])):
            runs[deploy]["one"].append(run(cluster, deploy, *extra, limit="node1")["cpu"])
            runs[deploy]["all"].append(run(cluster, deploy, *extra)["cpu"])
    out = {}
    for deploy, got in runs.items():
        one, every = statistics.median(got["one"]), statistics.median(got["all"])
        per_host = (every - one) / (nodes - 1)
        out[deploy] = (one - per_host, per_host)
        print(
            f"{nodes} node(s)  controller CPU s, {deploy}: all {nodes} hosts {every:.3f}, --limit node1 {one:.3f} "
            f"(medians of {repeat}): {per_host:.3f} s per further host"
        )
    return out


def projection(
    meds: dict[int, dict[str, dict[str, float]]], cores: int, slopes: dict[str, tuple[float, float]] | None = None
) -> None:
    """Print, labelled as a projection, the controller's CPU for 100 and 1,000 hosts from the measured costs."""
    counts = sorted(meds)
    fits = {d: fit({n: meds[n][d]["cpu_host"] * n for n in counts}) for d in (DSPARK, MINIMAL)}
    if slopes:
        fits = dict(slopes)
    trips = meds[counts[-1]][DSPARK]["trips"]
    unresolved = []
    for deploy, (_, per_host) in fits.items():
        if per_host <= 0:  # the per-host part is below this machine's noise at these counts: say so, count none
            fits[deploy] = (statistics.mean(meds[n][deploy]["cpu_host"] * n for n in counts), 0.0)
            unresolved.append(deploy)
    (a, b), (ma, mb) = fits[DSPARK], fits[MINIMAL]
    source = (
        f"from the {max(counts)}-node cluster's runs of all hosts against --limit node1"
        if slopes
        else f"fitted to the {'/'.join(map(str, counts))}-node medians"
    )
    print(
        f"PROJECTION (on paper, not measured; model {source}): "
        f"controller CPU = fixed + per-host x hosts; dspark {a:.2f} s + {b:.3f} s/host, minimal {ma:.2f} s + "
        f"{mb:.3f} s/host. pyinfra runs every host in one process (gevent greenlets on one core): its CPU work is "
        "serial whatever --parallel says (--parallel only caps the hosts in flight); SSH round trips of different "
        "hosts overlap, so on a big fleet the controller's CPU is the floor of the plan time. With "
        f"{cores} cores the inventory is split into {cores} pyinfra processes (--limit slices), each paying the "
        "fixed part."
        + "".join(
            f" {d}: the fit's per-host part came out <= 0 (below the noise at these "
            "counts): its measured mean taken as fixed, nothing per host."
            for d in unresolved
        )
    )
    for hosts in (100, 1000):
        one, split = a + b * hosts, a + b * hosts / cores
        print(
            f"PROJECTION {hosts} hosts: dspark no-op controller CPU {one:.1f} s in one process, {split:.1f} s "
            f"wall on {cores} cores ({cores} processes); {hosts * trips:.0f} SSH round trips ({trips:.1f}/host); "
            f"minimal deploy {ma + mb * hosts:.1f} s in one process"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", default="1,4,8", help="node counts, comma-separated (default 1,4,8)")
    parser.add_argument("--repeat", type=int, default=3, help="measured runs of each deploy (median printed)")
    parser.add_argument("--cores", type=int, default=16, help="controller cores for the projection (default 16)")
    parser.add_argument("--keep", action="store_true", help="leave the bench clusters running (and reuse them)")
    parser.add_argument("--profile", metavar="DIR", help="write a cProfile of one dspark no-op per node count")
    parser.add_argument("--pin-model", action="store_true", help="the seed recipe pinned to the commit it fetched")
    parser.add_argument(
        "--no-slope",
        action="store_true",
        help="skip the per-host slope runs (all hosts against --limit node1) on the largest cluster",
    )
    args = parser.parse_args()
    counts = [int(n) for n in args.nodes.split(",") if n.strip()]
    suffix = os.environ.get("HGXKIT_SIM_TEST_SUFFIX", "bench")
    print("simulated: true (hgxkit sim nodes; absolute numbers are this machine's, the ratios are the figures)")
    pinned = "pinned to the commit the first run fetched (fast path)" if args.pin_model else "revision: main"
    print(f"model: {pinned}")
    print("controller: bytecode as a user's environment has it (PYTHONDONTWRITEBYTECODE removed from the runs)")
    meds: dict[int, dict[str, dict[str, float]]] = {}
    slopes: dict[str, tuple[float, float]] | None = None
    folder = tempfile.TemporaryDirectory()
    try:
        for nodes in counts:
            cluster = f"cost{nodes}-{suffix}"
            if len(node_containers(cluster)) != nodes:
                sim("up", "--nodes", str(nodes), "--memory-gib", "3072", "--cluster", cluster)
            data = ["verify=false"]
            run(cluster, DSPARK, *data)  # converge (or confirm converged); not measured
            if args.pin_model:
                data.append(f"recipe={pinned_recipe(cluster, folder.name)}")
                run(cluster, DSPARK, *data)  # the same node state, the pinned recipe; not measured
            if args.profile:
                Path(args.profile).mkdir(parents=True, exist_ok=True)
                profiled = run(cluster, DSPARK, *data, profile=f"{args.profile}/dspark-{nodes}.prof")
                print(f"{nodes} node(s)  round trips of one host (dspark no-op):", *profiled["commands"], sep="\n  ")
            samples: dict[str, list[dict]] = {DSPARK: [], MINIMAL: []}
            for _ in range(args.repeat):
                sample = run(cluster, DSPARK, *data)
                if sample["changed"]:
                    sys.exit(f"{DSPARK} re-run changed something on {cluster}")
                samples[DSPARK].append(sample)
                samples[MINIMAL].append(run(cluster, MINIMAL))
            meds[nodes] = report(nodes, samples)
            if nodes == max(counts) and nodes > 1 and not args.no_slope:
                slopes = limit_slope(cluster, nodes, args.repeat, data)
            if not args.keep:
                sim("down", "--cluster", cluster)
        projection(meds, args.cores, slopes)
    finally:
        folder.cleanup()
        if not args.keep:
            for nodes in counts:
                subprocess.run(
                    [sys.executable, "-m", "hgxkit", "sim", "down", "--cluster", f"cost{nodes}-{suffix}"],
                    cwd=ROOT,
                    capture_output=True,
                    check=False,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
