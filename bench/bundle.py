"""Time `hgxkit bundle create` and `hgxkit bundle verify` for the seed recipe on simulated nodes, and print the
bundle's size by part (apt, image, model, wheels).

    python bench/bundle.py                      # starts one simulated node (cluster bundle-bench), removes it
    python bench/bundle.py --keep build/bundle  # keep the bundle there

The sim inventory's knobs (versions, repositories) are read from a running node, as `--inventory
inventories/sim.py` does; wheels come from PyPI (this machine needs that route, the nodes never do).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLUSTER = "bundle-bench"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--keep", help="make the bundle here and keep it")
    p.add_argument("--recipe", default="recipes/deepseek-v4-flash-dspark-marlin.yaml")
    args = p.parse_args(argv)
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
