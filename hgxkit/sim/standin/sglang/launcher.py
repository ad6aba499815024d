"""Start-up of the SGLang stand-in: parse, check, log like SGLang, serve (simulated).

`serve_main` behaves like ``sglang serve [MODEL] …`` (a leading positional becomes ``--model-path``;
``--model-type`` is accepted and ignored); `launch_server_main` behaves like
``python3 -m sglang.launch_server …``; argparse names both `sglang serve`, as sglang 0.5.23 parses both with
the one parser `prepare_server_args` builds. Both return the process exit status: 2 for argument errors (from
argparse), 1 for a refused start, 0 after a clean shutdown (SIGTERM/SIGINT).

Example:
    >>> launch_server_main(["--model-path", "/nonexistent"])  # doctest: +SKIP
    1
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import sys
import threading
import time
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import IO

from hgxkit.engines.sglang_serve import SERVE_OPTIONS
from hgxkit.sim.standin.common.engine import Engine, LatencyModel, report_gpu_load
from hgxkit.sim.standin.common.options import other_version, without_unread
from hgxkit.sim.standin.sglang import checks, disagg, rendezvous
from hgxkit.sim.standin.sglang.args import ModelFacts, build_parser, merge_config, resolve
from hgxkit.sim.standin.sglang.server import VERSION_DEFAULT, StubApp, make_dummy_health_server, make_server

BANNER = (
    "hgxkit SGLang stand-in: SIMULATED server — no model is loaded and no GPU is used; "
    "timings follow the HGXKIT_SIM_* latency model"
)
READY_LINE = "The server is fired up and ready to roll!"


def log(msg: str, stream: IO[str] | None = None) -> None:
    """One log line in SGLang's format: ``[YYYY-mm-dd HH:MM:SS] message``."""
    out = stream or sys.stderr
    out.write(f"[{datetime.now():%Y-%m-%d %H:%M:%S}] {msg}\n")
    out.flush()


def _normalize_serve_argv(argv: list[str]) -> list[str]:
    """Drop ``--model-type X`` and turn a leading positional into ``--model-path``, as `sglang serve` does."""
    out: list[str] = []
    it = iter(argv)
    for arg in it:
        if arg == "--model-type":
            next(it, None)
        elif not arg.startswith("--model-type="):
            out.append(arg)
    if out and not out[0].startswith("-"):
        out = ["--model-path", out[0], *out[1:]]
    return out


def _lost(why: str) -> None:
    log(f"Scheduler hit an exception: {why}")
    os._exit(1)


def _form_group(args: Mapping[str, object], env: Mapping[str, str], version: str) -> int | None:
    """Join or gather the nodes of a multi-node group (see rendezvous). Rank 0 returns None once every rank
    joined (then it serves); a rank >= 1 serves SGLang's dummy health server until the group ends, and
    returns its exit status. A group that does not form returns 1, with SGLang's kind of message."""
    model_dir = Path(str(args["model_path"]))
    model = hashlib.sha256((model_dir / "config.json").read_bytes()).hexdigest()[:12]
    hello = rendezvous.Hello.of(args, version=version, model=model)
    timeout = float(args.get("dist_timeout") or env.get("HGXKIT_SIM_DIST_TIMEOUT", "600"))
    try:
        if hello.rank == 0:
            rendezvous.watch(rendezvous.head_wait(args, hello, log, timeout), _lost)
            return None
        link = rendezvous.join(args, hello, log, timeout)
    except rendezvous.RendezvousError as err:
        log(str(err))
        print(f"Initialization failed. Please see the error messages above. {err}", file=sys.stderr, flush=True)
        return 1
    rendezvous.watch([link], _lost)
    server = make_dummy_health_server(str(args["host"]), int(args["port"]))
    log(f"Dummy health check server started in background thread at {args['host']}:{args['port']}")
    server.serve_forever()
    return 0


def _start_bootstrap(host: str, pd: disagg.Disaggregation) -> object | None:
    """The prefill server's bootstrap server; None (logged like the bind error SGLang's aiohttp server raises)
    when its port cannot be bound: the decode side could never reach this prefill."""
    assert pd.rooms is not None
    try:
        server = disagg.start_bootstrap_server(host, pd.bootstrap_port, pd.rooms)
    except OSError as err:
        log(
            f"Scheduler hit an exception: OSError: [Errno {err.errno}] error while attempting to bind on address "
            f"('{host}', {pd.bootstrap_port}): {(err.strerror or str(err)).lower()}"
        )
        return None
    log(f"KV bootstrap server started on {host}:{server.server_address[1]} (simulated transfer)")
    return server


def serve_main(argv: list[str], prog: str = "sglang serve", env: Mapping[str, str] | None = None) -> int:
    """``sglang serve`` semantics."""
    return launch_server_main(_normalize_serve_argv(argv), prog=prog, env=env, command=["sglang", "serve", *argv])


def launch_server_main(
    argv: list[str],
    prog: str = "sglang serve",
    env: Mapping[str, str] | None = None,
    command: list[str] | None = None,
) -> int:
    """``python3 -m sglang.launch_server`` semantics; blocks while serving."""
    env = os.environ if env is None else env
    args = merge_config(argv)
    if other := other_version():
        args, unread = without_unread(args, SERVE_OPTIONS)
        for flag in unread:
            print(f"SIMULATED: {other} runs another SGLang; {flag} is taken unread", file=sys.stderr, flush=True)
    ns = build_parser(prog).parse_args(args)  # exits 2 with argparse's message, like SGLang
    print(BANNER, file=sys.stderr, flush=True)
    try:
        checks.run_checks(vars(ns), env)
        facts = ModelFacts.load(Path(ns.model_path))
        args = resolve(ns, facts)
        plan = checks.memory_plan(args, env, facts.kv_bytes_per_token)
        log(f"server_args={args}")
        for rank in range(min(plan.ranks, 8)):
            log(f"[TP{rank}] Load weight begin. avail mem=139.80 GB (simulated)")
        log(
            f"[TP0] KV Cache is allocated. #tokens: {plan.max_total_num_tokens}, "
            f"K size: {plan.kv_pool_bytes_per_rank / 2 / (1 << 30):.2f} GB, "
            f"V size: {plan.kv_pool_bytes_per_rank / 2 / (1 << 30):.2f} GB (simulated)"
        )
        if args["enable_hierarchical_cache"]:
            checks.check_host_memory(plan, env)
            log(
                f"[TP0] Allocating MLA hierarchical KV host pool: {plan.host_pool_tokens} tokens, "
                f"{plan.host_pool_bytes_per_rank / (1 << 30):.2f} GB host memory. (simulated)"
            )
    except checks.StartupError as err:
        log(f"Scheduler hit an exception: {err}")
        print(str(err), file=sys.stderr, flush=True)
        return 1
    seed = int(args["random_seed"])
    model = LatencyModel.from_env(env, args["speculative_algorithm"], args.get("speculative_num_draft_tokens"), seed)
    max_running = int(args["max_running_requests"] or 2048)
    log_stream: IO[str] = sys.stdout
    if env.get("HGXKIT_SIM_TTFT_LOG"):
        log_stream = open(env["HGXKIT_SIM_TTFT_LOG"], "a", encoding="utf-8")  # noqa: SIM115 - lives with the server
    engine = Engine(model, max_running=max_running, log=log_stream)
    report_gpu_load(engine, env)
    argv0 = command or ["python3", "-m", "sglang.launch_server", *argv]
    version = env.get("HGXKIT_SIM_VERSION", VERSION_DEFAULT)
    if int(args["nnodes"]) > 1:
        status = _form_group(args, env, version)
        if status is not None:
            return status
    pd = disagg.Disaggregation.from_args(args, env)
    if pd is not None and pd.rooms is not None and _start_bootstrap(str(args["host"]), pd) is None:
        return 1
    app = StubApp(args, facts, plan, engine, argv0, version=version, pd=pd)
    try:
        server = make_server(app, args["host"], int(args["port"]))
    except OSError as err:
        log(f"ERROR: [Errno {err.errno}] error while attempting to bind on address ({args['host']}, {args['port']})")
        return 1
    log(f"Uvicorn running on http://{args['host']}:{server.server_address[1]} (Press CTRL+C to quit)")

    def become_ready() -> None:
        time.sleep(model.ready_delay_s)
        app.ready_event.set()
        engine.ready = True
        log(READY_LINE)

    threading.Thread(target=become_ready, daemon=True).start()

    def stop(signum: int, frame: object) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    with contextlib.suppress(ValueError):  # signal only works in the main thread
        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
    server.serve_forever()
    server.server_close()
    return 0
