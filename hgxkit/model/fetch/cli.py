"""The command line: `status`, `run`, `result` and `peer-serve`, and the run of one sync in its unit."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
import traceback
from pathlib import Path

from hgxkit.model import core

from .errors import FetchError
from .fleetserver import FleetRefused, FleetServer
from .localdir import link_refused
from .peerserve import peer_serve
from .progress import Reporter
from .status import report_result, status
from .sync import Syncer

DESCRIPTION = (
    "hgxkit_fetch: sync one model into a directory on this host (shipped to the host and started by roles/model)."
)


def read_token(args: argparse.Namespace) -> str | None:
    """The token from stdin or from a file that is deleted at once; never from argv or the environment."""
    token = None
    if getattr(args, "token_stdin", False):
        token = sys.stdin.read().strip() or None
    elif getattr(args, "token_file", None):
        path = Path(args.token_file)
        try:
            token = path.read_text().strip() or None
        except FileNotFoundError:
            token = None
        path.unlink(missing_ok=True)
    return token


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hgxkit_fetch.py", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True)
    p_status = sub.add_parser("status", help="metadata-only check; prints one JSON line")
    p_status.add_argument("--spec", required=True)
    p_status.add_argument("--token-stdin", action="store_true")
    p_run = sub.add_parser("run", help="sync (resolve, check disk, fetch, verify, write the manifest)")
    p_run.add_argument("--spec", required=True)
    p_run.add_argument("--token-file")
    p_run.add_argument("--run-id", default="")
    p_result = sub.add_parser("result", help="how the latest sync ended (exit 1 unless it succeeded)")
    p_result.add_argument("--spec", required=True)
    p_peer = sub.add_parser("peer-serve", help="answer a read of a host below (the forced command of its SSH key)")
    p_peer.add_argument("--dir", required=True)
    p_peer.add_argument("--state-dir", required=True)
    p_peer.add_argument("request", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.command == "peer-serve":
        original = os.environ.get("SSH_ORIGINAL_COMMAND")
        if original is not None:  # under the forced command: only the words after `peer-serve` count
            try:
                words = shlex.split(original)
            except ValueError:
                words = []
            request = words[words.index("peer-serve") + 1 :] if "peer-serve" in words else words
        else:
            request = args.request
        return peer_serve(args.dir, args.state_dir, request)
    token = read_token(args)
    spec = core.Spec.load(args.spec)
    if args.command == "status":
        print(json.dumps(status(spec, token)))
        return 0
    if args.command == "result":
        return report_result(spec)
    os.makedirs(spec.state_dir, exist_ok=True)
    core.remove_stamp(spec)  # first: from now on only this run says whether the copy is complete
    os.environ.update(spec.xet_env())  # before huggingface_hub (and hf_xet) read their settings
    run_id = args.run_id or f"{os.getpid()}-{int(time.time())}"
    rep = Reporter(spec, run_id)
    with rep:
        syncer = Syncer(spec, token, rep)
        server, code = None, 1
        if spec.source == "fleet" and spec.fleet_port >= 0 and spec.fleet_children:
            try:
                server = FleetServer(spec, syncer)
            except OSError as err:  # the hosts below copy over SSH instead
                rep.log(f"cannot serve the hosts below on port {spec.fleet_port} ({err.strerror}): they use SSH")
            except FleetRefused as err:
                rep.log(f"not serving the hosts below over HTTP: it {err}; they use SSH")
        try:
            code = _sync(spec, syncer, rep)
        finally:
            if server is not None:
                server.linger(spec.fleet_children, rep)
                server.close()
                if code == 0:
                    rep.phase(
                        "done", detail=f"{spec.repo_id}@{syncer.commit[:12]}, served {server.served / 1e9:.2f} GB"
                    )
    return code


def _sync(spec: core.Spec, syncer: Syncer, rep: Reporter) -> int:
    """Run the sync, write its result; 0 when the copy is complete and verified."""
    try:
        result = syncer.run()
    except FetchError as err:
        return _failed(syncer, rep, str(err))
    except core.LinkOnPath as err:  # local_dir swapped for a link while the sync ran: refused at that use
        return _failed(syncer, rep, str(link_refused(spec.local_dir, err)))
    except Exception as err:
        traceback.print_exc()
        unit = core.unit_name(spec.local_dir)
        return _failed(syncer, rep, f"unexpected {type(err).__name__}: {str(err)[:200]}; see journalctl -u {unit}")
    rep.phase("done", detail=f"{spec.repo_id}@{result['commit'][:12]}")
    rep.result(True, **result)
    syncer.link.done()
    return 0


def _failed(syncer: Syncer, rep: Reporter, msg: str) -> int:
    rep.phase("failed", detail=msg)
    rep.result(False, error=msg)
    syncer.result = {"ok": False, "error": msg, "finished_at": time.time()}
    print(f"hgxkit-fetch: error: {msg}", file=sys.stderr, flush=True)
    return 1
