"""Time `hgxkit bundle create` and `hgxkit bundle verify` for the seed recipe on simulated nodes, and print the
bundle's size by part (apt, image, model, wheels).

    python bench/bundle.py                      # starts one simulated node (cluster bundle-bench), removes it
    python bench/bundle.py --keep build/bundle  # keep the bundle there
    python bench/bundle.py --image-cache [--nodes 2]   # the bundle's bytes per node with and without the cache

The sim inventory's knobs (versions, repositories) are read from a running node, as `--inventory
inventories/sim.py` does; wheels come from PyPI (this machine needs that route, the nodes never do).

`--image-cache`: a bundle of the sim's serving image (its OCI layout, as `bundle create` writes it, from the sim's
registry storage) and a filler file goes to N nodes with `image_cache=first` (air-gapped: upstream off): node1 gets
it whole and fills the cache from image/, the others get it without image/ and pull the image through the cache
(their sim mirror on 127.0.0.1:15000 refused, so it can come from nowhere else). Then the same bundle with the
cache off: those nodes get image/ too. Prints the bytes each node's bundle directory holds (what rsync sent it:
every file is new there) in both runs, and the ratio. tests/e2e/test_bundle_cache.py runs the first half (its CI
sample).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLUSTER = "bundle-bench"


IMAGE = "lmsysorg/sglang:dev-dspark"  # the sim's serving stand-in, a Docker Hub name: Docker asks its mirrors
CONTAINER = "hgxkit-bundle-cache"
NodeSh = Callable[..., str]  # (cluster, command, node="node1", timeout=300) -> stdout
DEPLOY = f"""from pyinfra import host
from pyinfra.operations import server

from hgxkit.bundle.source import delivered, load_image
from hgxkit.hostcmd import script
from hgxkit.runfailure import install
from roles.docker import docker_engine, fill_image_cache

install()
docker_engine()
b = delivered(host)
fill_image_cache(b.doc["image"]["reference"])  # the cache host only: from its copy's image/
load_image(host, b)  # loaded from the copy, or pulled through the cache and its ID checked
server.shell(name="Run the bundle's image", commands=[script(
    "docker rm -f {CONTAINER} >/dev/null 2>&1; docker run -d --name {CONTAINER} --entrypoint sleep {{i}} 600",
    i=b.image_id)])
"""
# A node's sim mirror refused (as tests/e2e/test_bundle.py does): the image can come through the cache only.
NO_SIM_MIRROR = (
    "iptables -C OUTPUT -o lo -p tcp --dport 15000 -j REJECT 2>/dev/null || "
    "iptables -A OUTPUT -o lo -p tcp --dport 15000 -j REJECT"
)
CACHE_BLOB = re.compile(r'"GET /v2/([^ ]+)/blobs/(sha256:[0-9a-f]{64}) HTTP/[\d.]+" 200 (\d+)')


def make_image_bundle(out: Path, filler_mb: int = 8) -> dict:
    """A bundle of the sim's serving image (OCI layout from the sim's registry storage, read-only, as create
    reads it) and a filler of `filler_mb` MB, sealed; its bundle.json."""
    from hgxkit.bundle import manifest, ociimage
    from hgxkit.sim.standin import registry

    port = registry._free_port()
    with tempfile.TemporaryDirectory(prefix="hgxkit-bundle-cache-registry-") as tmp:
        cfg = Path(tmp) / "config.yml"
        cfg.write_text(registry.CONFIG.format(root=registry.storage_dir(), port=port, readonly="true"))
        proc = subprocess.Popen(
            [shutil.which("docker-registry") or "docker-registry", "serve", str(cfg)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            registry._wait_v2(port, proc)
            saved = ociimage.save_layout(IMAGE, out / "image", f"http://127.0.0.1:{port}")
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    (out / "model/m").mkdir(parents=True)
    (out / "model/m/weights.bin").write_bytes(os.urandom(filler_mb << 20))
    doc = manifest.seal(
        {
            "schema_version": manifest.SCHEMA_VERSION,
            "kind": "hgxkit-bundle",
            "image": {"reference": IMAGE, "digest": saved.digest, "id": saved.config, "dir": "image"},
            "model": {"dir": "model/m"},
            "artifacts": [manifest.artifact_entry(out, rel) for rel in manifest.list_files(out)],
        }
    )
    (out / manifest.MANIFEST).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return doc


def _deploy(cluster: str, deploy: Path, *data: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HGXKIT_SIM_CLUSTER": cluster, "PYINFRA_PROGRESS": "off", "PYTHONPATH": str(ROOT)}
    argv = [str(Path(sys.executable).parent / "pyinfra"), "-y", "inventories/sim.py", str(deploy)]
    for item in data:
        argv += ["--data", item]
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False)


def run_bundle_cache(cluster: str, nodes: int, node_sh: NodeSh, workdir: Path, without: bool = True) -> dict:
    """The scenario on a started cluster of `nodes` nodes (module doc); its figures."""
    bundle = workdir / "bundle"
    doc = make_image_bundle(bundle)
    node_dir = f"/var/lib/hgxkit/bundle/{doc['bundle_sha256'][:16]}"
    names = [f"node{i}" for i in range(1, nodes + 1)]
    for name in names[1:]:
        node_sh(cluster, f"{NO_SIM_MIRROR}; docker rmi -f {doc['image']['id']} >/dev/null 2>&1; true", node=name)
    deploy = workdir / "bundle_cache.py"
    deploy.write_text(DEPLOY)

    def sizes() -> dict[str, int]:
        du = f"du -sb {node_dir} 2>/dev/null | cut -f1; test -d {node_dir}/image && echo image || echo no-image"
        said = {n: node_sh(cluster, du, node=n).split() for n in names}
        found = {n: int(s[0]) if s and s[0].isdigit() else 0 for n, s in said.items()}
        return found | {f"{n}:image": bool(s) and s[-1] == "image" for n, s in said.items()}

    started = time.monotonic()
    cached = _deploy(cluster, deploy, f"bundle={bundle}", "image_cache=first", "image_cache_upstream=off")
    manifest_blob = bundle / "image/blobs/sha256" / doc["image"]["digest"].removeprefix("sha256:")
    layers = [layer["digest"] for layer in json.loads(manifest_blob.read_text())["layers"]]
    r: dict = {
        "doc": doc,
        "node_dir": node_dir,
        "layers": layers,
        "rc": cached.returncode,
        "out": cached.stdout + cached.stderr,
        "cached_s": time.monotonic() - started,
        "with": sizes(),
    }
    r["ids"] = {
        n: node_sh(cluster, f"docker inspect --format '{{{{.Image}}}}' {CONTAINER}", node=n).strip() for n in names
    }
    r["verify"] = {
        n: node_sh(
            cluster,
            f"python3 /var/lib/hgxkit/bundle/hgxkit_bundle_verify.py {node_dir} "
            f"{doc['bundle_sha256']} --from-cache image 2>&1",
            node=n,
        )
        for n in names
    }
    log = node_sh(cluster, "journalctl -u hgxkit-image-cache --no-pager -o cat")
    r["served"] = [
        (addr, repo, blob, int(size))
        for addr, repo, blob, size in re.findall(r"^(\S+) - .*?" + CACHE_BLOB.pattern, log, re.M)
    ]
    if without and r["rc"] == 0:
        off = _deploy(cluster, deploy, f"bundle={bundle}", "image_cache=off")
        r["off_rc"], r["off_out"], r["without"] = off.returncode, off.stdout + off.stderr, sizes()
    return r


def cache_figures_lines(r: dict, nodes: int) -> list[str]:
    """Per node, the bundle's bytes the controller sent with the cache and without, and the ratio."""
    names = [f"node{i}" for i in range(1, nodes + 1)]
    image = sum(a["size"] for a in r["doc"]["artifacts"] if a["path"].startswith("image/"))
    whole = sum(a["size"] for a in r["doc"]["artifacts"])
    lines = [
        f"# bundle + image cache, {nodes} simulated nodes, image {image / 1e6:.1f} MB of a {whole / 1e6:.1f} MB "
        "bundle (bytes in each node's bundle dir: what rsync sent it)"
    ]
    for n in names:
        w, wo = r["with"][n], r.get("without", {}).get(n)
        lines.append(
            f"{n}: with the cache {w / 1e6:8.1f} MB, without {wo / 1e6:8.1f} MB, ratio {w / wo:.2f}x"
            if wo
            else f"{n}: with the cache {w / 1e6:8.1f} MB"
        )
    total_w = sum(r["with"][n] for n in names)
    total_wo = sum(r.get("without", {}).get(n, 0) for n in names)
    served = sum(s for *_, s in r["served"])
    lines.append(
        f"fleet: the controller sent {total_w / 1e6:.1f} MB with the cache"
        + (f", {total_wo / 1e6:.1f} MB without, ratio {total_w / total_wo:.2f}x" if total_wo else "")
        + f"; the cache served {served / 1e6:.1f} MB of blobs to the other nodes"
    )
    return lines


def image_cache_main(nodes_count: int, keep: bool) -> int:
    """`--image-cache`: start the nodes, run the scenario, print the figures."""
    sys.path.insert(0, str(ROOT / "tests" / "e2e"))
    from sim_steps import cluster_name, node_sh

    from hgxkit.sim import nodes

    cluster = cluster_name("bundlecache")
    nodes.down(cluster)
    nodes.up(nodes_count, cluster=cluster)
    try:
        with tempfile.TemporaryDirectory(prefix="hgxkit-bundle-cache-") as tmp:
            r = run_bundle_cache(cluster, nodes_count, node_sh, Path(tmp))
        if r["rc"] != 0 or r.get("off_rc", 0) != 0:
            print((r.get("off_out") or r["out"])[-3000:], file=sys.stderr)
            return 1
        print("\n".join(cache_figures_lines(r, nodes_count)))
        return 0
    finally:
        if not keep:
            nodes.down(cluster)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--keep", help="make the bundle here and keep it")
    p.add_argument("--recipe", default="recipes/deepseek-v4-flash-dspark-marlin.yaml")
    p.add_argument("--image-cache", action="store_true", help="bytes per node with and without the image cache")
    p.add_argument("--nodes", type=int, default=2, help="with --image-cache")
    args = p.parse_args(argv)
    if args.image_cache:
        return image_cache_main(args.nodes, bool(args.keep))
    from hgxkit.bundle import manifest
    from hgxkit.sim import nodes

    env = {**os.environ, "HGXKIT_SIM_CLUSTER": CLUSTER, "PYTHONPATH": str(ROOT)}
    hgxkit = [sys.executable, "-m", "hgxkit"]
    work = Path(tempfile.mkdtemp(prefix="hgxkit-bundle-bench-"))
    out = Path(args.keep) if args.keep else work / "bundle"
    try:
        nodes.up(1, cluster=CLUSTER)
        started = time.monotonic()
        subprocess.run(
            [
                *hgxkit,
                "bundle",
                "create",
                "--recipe",
                args.recipe,
                "--inventory",
                "inventories/sim.py",
                "-o",
                str(out),
                "--key-home",
                str(work / "gnupg"),
            ],
            cwd=ROOT,
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        create_s = time.monotonic() - started
        started = time.monotonic()
        subprocess.run(
            [*hgxkit, "bundle", "verify", str(out)], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL
        )
        verify_s = time.monotonic() - started
        doc, problems = manifest.verify(out)
        assert doc is not None and not problems, problems
        parts: dict[str, int] = {}
        for a in doc["artifacts"]:
            top = a["path"].split("/")[0]
            parts[top] = parts.get(top, 0) + int(a["size"])
        total = sum(parts.values())
        print(f"# hgxkit bundle, seed recipe ({Path(args.recipe).name}), simulated nodes, {os.cpu_count()} CPUs")
        print(
            f"bundle size   {total / 1e6:8.1f} MB in {len(doc['artifacts'])} files ("
            + ", ".join(f"{k} {v / 1e6:.1f} MB" for k, v in sorted(parts.items()))
            + ")"
        )
        print(f"create        {create_s:8.1f} s")
        print(f"verify        {verify_s:8.1f} s")
    finally:
        nodes.down(CLUSTER)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
