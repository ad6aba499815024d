"""Command line of the simulated Hub: ``serve`` and ``make-repo`` (stdlib only; simulated).

Example:
    python3 -m hgxkit.sim.hub make-repo --root /srv/hub deepseek-ai/DeepSeek-V4-Flash-DSpark \\
        --size-mb 256 --shards 4
    python3 -m hgxkit.sim.hub make-repo --root /srv/hub org/gated-model --gated --token hf_sim_ok
    python3 -m hgxkit.sim.hub serve --root /srv/hub --host 0.0.0.0 --port 8088
        (repos not under --root are generated on first use under --auto-root; --no-auto-repos turns that off)
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from pathlib import Path

from hgxkit.sim.hub.faults import FaultConfig
from hgxkit.sim.hub.makerepo import RepoSpec, make_repo
from hgxkit.sim.hub.server import make_server

BANNER = "hgxkit hub stand-in: SIMULATED Hugging Face Hub (synthetic repositories, no real weights)"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python3 -m hgxkit.sim.hub", description=BANNER)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve repositories under --root over HTTP")
    serve.add_argument("--root", required=True, type=Path)
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8088)
    serve.add_argument(
        "--auto-root",
        type=Path,
        default=Path(os.environ.get("HGXKIT_HUB_AUTO_ROOT") or Path(tempfile.gettempdir()) / "hgxkit-sim-hub-auto"),
        help="writable directory for repos generated on demand (default $HGXKIT_HUB_AUTO_ROOT or TMPDIR/…)",
    )
    serve.add_argument("--no-auto-repos", dest="auto_repos", action="store_false", help="unknown repos: 401")
    make = sub.add_parser("make-repo", help="generate a synthetic DeepSeek-V4-Flash-DSpark-shaped repo")
    make.add_argument("repo_id", help="org/name")
    make.add_argument("--root", required=True, type=Path)
    make.add_argument("--size-mb", type=float, default=64.0, help="total size of the safetensors shards")
    make.add_argument("--shards", type=int, default=4)
    make.add_argument("--vocab-size", type=int, default=16384)
    make.add_argument("--branch", default="main")
    make.add_argument("--extra-branch", action="append", default=[], help="another branch (distinct commit)")
    make.add_argument("--gated", action="store_true", help="refuse downloads without an allowed --token")
    make.add_argument("--token", action="append", default=[], help="token allowed on a gated repo")
    make.add_argument("--seed", type=int, default=0)
    make.add_argument(
        "--shape", choices=["deepseek_v4_dspark", "generic"], default="deepseek_v4_dspark", help="config.json shape"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "make-repo":
        spec = RepoSpec(
            repo_id=args.repo_id,
            total_bytes=int(args.size_mb * (1 << 20)),
            shards=args.shards,
            vocab_size=args.vocab_size,
            branch=args.branch,
            gated=args.gated,
            tokens=tuple(args.token),
            extra_branches=tuple(args.extra_branch),
            seed=args.seed,
            shape=args.shape,
        )
        print(make_repo(args.root, spec))
        return 0
    auto_root = args.auto_root if args.auto_repos else None
    server = make_server(args.root, args.host, args.port, FaultConfig.from_env(os.environ), auto_root)
    host, port = server.server_address[:2]
    auto = f" (any other repo id generated under {auto_root})" if auto_root else ""
    print(f"{BANNER}\nserving {args.root}{auto} on http://{host}:{port}", file=sys.stderr, flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
