"""``python3 -m hgxkit.sim.standin.vllm serve|api-server|install-shim …`` (simulated vLLM).

Example:
    python3 -m hgxkit.sim.standin.vllm serve /model -tp 4 --port 8000       # as `vllm serve`
    python3 -m hgxkit.sim.standin.vllm api-server --model /model   # as python3 -m vllm.entrypoints.openai.api_server
    python3 -m hgxkit.sim.standin.vllm ray start --head --port=6379   # as `ray start` (the image's `ray`)
    python3 -m hgxkit.sim.standin.vllm install-shim --site-packages DIR --bin-dir DIR --stub-root DIR
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hgxkit.sim.standin.vllm.launcher import api_server_main, serve_main

USAGE = "usage: python3 -m hgxkit.sim.standin.vllm {serve,api-server,ray,install-shim} ..."


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "serve":
        return serve_main(rest)
    if command == "api-server":
        return api_server_main(rest)
    if command == "ray":
        from hgxkit.sim.standin.vllm.cluster import ray_main

        return ray_main(rest)
    if command == "install-shim":
        from hgxkit.sim.standin.vllm.shim import default_stub_root, install_shim

        p = argparse.ArgumentParser(prog="python3 -m hgxkit.sim.standin.vllm install-shim")
        p.add_argument("--site-packages", type=Path, required=True)
        p.add_argument("--bin-dir", type=Path, default=None)
        p.add_argument("--stub-root", type=Path, default=default_stub_root())
        p.add_argument("--python", default="/usr/bin/python3", help="interpreter for the console script")
        p.add_argument("--overlay", type=Path, default=None, help="site-packages of a real vllm mounted later")
        a = p.parse_args(rest)
        for path in install_shim(a.site_packages, a.stub_root, a.bin_dir, a.python, a.overlay):
            print(path)
        return 0
    print(f"{USAGE}\nunknown command: {command}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
