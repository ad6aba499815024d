"""``python3 -m hgxkit.sim.standin.sglang serve|launch-server|install-shim …`` (simulated SGLang).

Example:
    python3 -m hgxkit.sim.standin.sglang serve /model --tp 4 --port 30000      # as `sglang serve`
    python3 -m hgxkit.sim.standin.sglang launch-server --model-path /model  # = python3 -m sglang.launch_server
    python3 -m hgxkit.sim.standin.sglang install-shim --site-packages DIR --bin-dir DIR --stub-root DIR
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hgxkit.sim.standin.sglang.launcher import launch_server_main, serve_main
from hgxkit.sim.standin.sglang.shim import default_stub_root, install_shim

USAGE = "usage: python3 -m hgxkit.sim.standin.sglang {serve,launch-server,install-shim} ..."


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "serve":
        return serve_main(rest)
    if command == "launch-server":
        return launch_server_main(rest)
    if command == "install-shim":
        p = argparse.ArgumentParser(prog="python3 -m hgxkit.sim.standin.sglang install-shim")
        p.add_argument("--site-packages", type=Path, required=True)
        p.add_argument("--bin-dir", type=Path, default=None)
        p.add_argument("--stub-root", type=Path, default=default_stub_root())
        p.add_argument("--python", default="/usr/bin/python3", help="interpreter for the console script")
        p.add_argument("--version", default="0.5.23")
        p.add_argument("--overlay", type=Path, default=None, help="site-packages of a real sglang mounted later")
        a = p.parse_args(rest)
        for path in install_shim(a.site_packages, a.stub_root, a.bin_dir, a.python, a.version, a.overlay):
            print(path)
        return 0
    print(f"{USAGE}\nunknown command: {command}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
