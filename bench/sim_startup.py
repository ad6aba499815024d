"""Time simulated-node start-up: cold (image build) and warm starts of 1 and 4 nodes.

    sudo .venv/bin/python bench/sim_startup.py            # cold = rebuild base+node images (minutes)
    .venv/bin/python bench/sim_startup.py --skip-cold     # warm starts only (cached image)

"up" is `hgxkit sim up` until every node booted systemd and answers SSH; "down" removes everything.
Uses cluster name "bench" so it never touches other simulated nodes.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

from hgxkit.sim import image, nodes


def _timed(label: str, fn) -> float:  # type: ignore[no-untyped-def]
    t = time.monotonic()
    fn()
    dt = time.monotonic() - t
    print(f"{label:<44} {dt:8.1f} s", flush=True)
    return dt


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--skip-cold", action="store_true", help="do not rebuild the images")
    p.add_argument("--sizes", default="1,4", help="node counts to time (default 1,4)")
    args = p.parse_args(argv)
    c = nodes.client()
    print(f"# hgxkit sim start-up, {os.cpu_count()} CPUs, {platform.platform()}", flush=True)
    nodes.down("bench")
    if not args.skip_cold:
        base, node = image.base_tag(), image.node_tag()
        for tag in (node, base):
            if image._exists(c, tag):
                c.images.remove(tag, force=True)
        quiet = lambda _msg: None  # noqa: E731
        _timed("cold: mmdebstrap + import base image", lambda: image.build_base(c, base, quiet))
        _timed("cold: build node image from base", lambda: image.build_node(c, node, base, quiet))
    for n in (int(x) for x in args.sizes.split(",")):
        _timed(f"warm: sim up --nodes {n} (until SSH answers)", lambda n=n: nodes.up(n, cluster="bench"))
        _timed(f"warm: sim down ({n} nodes)", lambda: nodes.down("bench"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
