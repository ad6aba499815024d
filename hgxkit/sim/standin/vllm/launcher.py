"""Start-up of the vLLM stand-in: parse like vLLM 0.33, check, log like vLLM, serve (simulated).

`serve_main` behaves like ``vllm serve [MODEL] …``; `api_server_main` like ``python3 -m
vllm.entrypoints.openai.api_server …``. The order is vLLM's: argument errors (argparse, exit 2), quick
argument checks, version and non-default-args lines, the port is bound (``Address already in use`` → exit 1),
then the engine config is built (model, max length, parallel sizes vs GPUs, KV memory → a traceback tail and
exit 1), the simulated engine "loads" for ``HGXKIT_SIM_READY_DELAY_S`` seconds (connections are refused
meanwhile, as the socket is bound but not listening), and the server starts with ``Starting vLLM server on
http://0.0.0.0:8000`` … ``Application startup complete.``. SIGTERM/SIGINT end it with uvicorn's shutdown
lines and exit 0. Every request's ground truth is a JSON line on stdout (or ``HGXKIT_SIM_TTFT_LOG``).

Example:
    >>> serve_main(["/nonexistent"], env={})  # doctest: +SKIP
    1
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Mapping
from datetime import datetime
from typing import IO

from hgxkit.sim.standin.common.engine import LatencyModel, report_gpu_load
from hgxkit.sim.standin.vllm import args as vargs
from hgxkit.sim.standin.vllm import checks, cluster, nixl
from hgxkit.sim.standin.vllm.server import VERSION_DEFAULT, VllmApp, VllmServer, make_server
from hgxkit.sim.standin.vllm.stats import VllmEngine

BANNER = (
    "hgxkit vLLM stand-in: SIMULATED server — no model is loaded and no GPU is used; "
    "timings follow the HGXKIT_SIM_* latency model"
)
READY_LINE = "Application startup complete."
ROUTES = {
    "/health": "GET",
    "/ping": "GET, POST",
    "/version": "GET",
    "/load": "GET",
    "/metrics": "GET",
    "/v1/models": "GET",
    "/v1/completions": "POST",
    "/v1/chat/completions": "POST",
    "/tokenize": "POST",
    "/detokenize": "POST",
}


class Log:
    """vLLM's log format: ``(APIServer pid=N) LEVEL MM-DD HH:MM:SS [file.py:line] message``."""

    def __init__(self, stream: IO[str] | None = None, process: str = "APIServer") -> None:
        self.stream = stream or sys.stderr
        self.process = process

    def __call__(self, msg: str, where: str = "api_server.py:0", level: str = "INFO") -> None:
        prefix = f"({self.process} pid={os.getpid()}) {level} {datetime.now():%m-%d %H:%M:%S} [{where}] "
        self.stream.write(prefix + msg + "\n")
        self.stream.flush()

    def uvicorn(self, msg: str) -> None:
        self.stream.write(f"(APIServer pid={os.getpid()}) INFO:     {msg}\n")
        self.stream.flush()


def _fail(log: Log, err: BaseException | checks.StartupError, where: str) -> int:
    """Print the end of a traceback like vLLM's process dies with; exit status 1."""
    text = str(err)
    log.stream.write("Traceback (most recent call last):\n")
    log.stream.write(f'  File "{where}", simulated by hgxkit (the vLLM stand-in)\n')
    log.stream.write(text + "\n")
    log.stream.flush()
    return 1


def _spec(ns: argparse.Namespace) -> tuple[str | None, int]:
    """(method, draft tokens k = num_speculative_tokens + 1) from ``--speculative-config``, or (None, 1)."""
    cfg = ns.speculative_config or {}
    if not isinstance(cfg, dict) or not cfg:
        return None, 1
    method = str(cfg.get("method") or ("draft_model" if cfg.get("model") else "ngram"))
    num = int(cfg.get("num_speculative_tokens") or 1)
    return method, num + 1


def serve_main(argv: list[str], env: Mapping[str, str] | None = None, stream: IO[str] | None = None) -> int:
    """``vllm serve ARGV…``; blocks while serving. argparse errors exit 2 (SystemExit)."""
    log = Log(stream)
    try:
        ns, warnings = vargs.parse_serve(argv)
    except vargs.ServeArgsError as err:
        return _fail(log, checks.StartupError("ValueError", str(err)), "vllm/utils/argparse_utils.py")
    for line in warnings:
        log(line, "argparse_utils.py:389", "WARNING")
    return run(ns, env, log)


def api_server_main(
    argv: list[str], prog: str = "api_server.py", env: Mapping[str, str] | None = None, stream: IO[str] | None = None
) -> int:
    """``python3 -m vllm.entrypoints.openai.api_server ARGV…`` (a positional model is ignored, as in 0.33)."""
    log = Log(stream)
    log.stream.write(
        "<frozen runpy>:128: DeprecationWarning: The `python -m vllm.entrypoints.openai.api_server` command is "
        "deprecated and may be removed in a future release. Please use `vllm server` instead.\n"
    )
    try:
        ns, warnings = vargs.parse_api_server(argv, prog)
    except vargs.ServeArgsError as err:
        return _fail(log, checks.StartupError("ValueError", str(err)), "vllm/utils/argparse_utils.py")
    for line in warnings:
        log(line, "argparse_utils.py:389", "WARNING")
    return run(ns, env, log)


def run(ns: argparse.Namespace, env: Mapping[str, str] | None, log: Log) -> int:
    """Check, bind, build the simulated engine, become ready, serve (module doc)."""
    env = os.environ if env is None else env
    prepared = prepare(ns, env, log)
    if isinstance(prepared, int):
        return prepared
    server, delay = prepared
    try:
        _form_group(ns, env, log)
    except cluster.ClusterError as err:
        if server is not None:
            server.server_close()
        kind, _, message = str(err).partition(": ")
        return _fail(log, checks.StartupError(kind, message), "vllm/v1/engine/core_client.py")
    if server is None:
        return _headless(ns, log)
    return _serve(server, delay, log, env)


def _form_group(ns: argparse.Namespace, env: Mapping[str, str], log: Log) -> None:
    """Wait for the rest of a multi-node group (see cluster): the Ray cluster's GPUs, or the other hosts' data
    parallel ranks; a host that leaves later ends this one. Nothing for a server on one host."""

    def lost(why: str) -> None:
        log(f"EngineCore encountered a fatal error: {why}", "core.py:1043", "ERROR")
        os._exit(1)

    if ns.distributed_executor_backend == "ray" and not ns.headless:
        need = checks.world_size(ns) * int(ns.data_parallel_size or 1)
        if cluster.wait_for_ray(need, env, lambda line: log(line, "ray_utils.py:212")):
            cluster.watch_ray(need, env, lost)
    elif cluster.spans_hosts(ns):
        hello = cluster.dp_hello(ns, str(ns.model), env.get("HGXKIT_SIM_VERSION", VERSION_DEFAULT))
        say = lambda line: log(line, "core_client.py:1003")  # noqa: E731
        links = [cluster.dp_join(ns, hello, env, say)] if ns.headless else cluster.dp_head_wait(ns, hello, env, say)
        cluster.watch(links, lost)


def prepare(
    ns: argparse.Namespace, env: Mapping[str, str], log: Log, truth_log: IO[str] | None = None
) -> tuple[VllmServer | None, float] | int:
    """Everything up to "ready": the bound (not yet listening) server and the simulated load time, or the exit
    status of a refused start (module doc). ``--headless`` binds no port (vLLM starts no API server there): the
    server is None. Ground truth goes to `truth_log`, else ``HGXKIT_SIM_TTFT_LOG``, else stdout."""
    if ns.api_key is None and env.get("VLLM_API_KEY"):
        ns.api_key = [env["VLLM_API_KEY"]]
    print(BANNER, file=log.stream, flush=True)
    try:
        checks.check_arguments(ns)
    except checks.StartupError as err:
        return _fail(log, err, "vllm/entrypoints/common/cli_args.py")
    server: VllmServer | None = None
    if not ns.headless:
        log(f"vLLM server version {VERSION_DEFAULT}, serving model {ns.model}", "launcher.py:367")
        log(f"non-default args: {vargs.non_default(ns)}", "startup.py:96")
        try:
            server = make_server(_placeholder_app(), ns.host or "", int(ns.port), listen=False)
        except OSError as err:
            return _fail(log, checks.StartupError("OSError", f"[Errno {err.errno}] {err.strerror}"), "launcher.py")
    try:
        problem = nixl.config_problem(ns.kv_transfer_config or {})
        if problem:
            raise checks.StartupError("ValueError", problem)
        facts = checks.resolve_model(ns, env)
        checks.check_quantization(ns)
        length = checks.max_model_len(ns, facts, env)
        gpus = checks.check_parallel(ns, facts, env)
        plan = checks.memory_plan(ns, facts, length, env)
    except checks.StartupError as err:
        if server is not None:
            server.server_close()
        log(f"EngineCore failed to start: {err}", "core.py:1043", "ERROR")
        return _fail(log, err, "vllm/v1/engine/core.py")
    method, k = _spec(ns)
    served = list(ns.served_model_name or [ns.model])
    log(
        f"Initializing a V1 LLM engine (v{VERSION_DEFAULT}) with config: model='{ns.model}', "
        f"speculative_config={ns.speculative_config}, tokenizer='{ns.tokenizer or ns.model}', "
        f"max_seq_len={length}, tensor_parallel_size={ns.tensor_parallel_size}, "
        f"pipeline_parallel_size={ns.pipeline_parallel_size}, data_parallel_size={ns.data_parallel_size}, "
        f"served_model_name={served[0]}, resolved model path={facts.path} (simulated)",
        "core.py:98",
    )
    log(
        f"Model loading took {plan.weights_per_gpu / checks.GIB:.4f} GiB memory per GPU on {gpus} simulated "
        "H200(s) (simulated)",
        "gpu_model_runner.py:4512",
    )
    log(
        f"GPU KV cache size: {plan.kv_tokens:,} tokens, Maximum concurrency for {length:,} tokens per request: "
        f"{plan.max_concurrency:.2f}x (simulated)",
        "kv_cache_utils.py:1148",
    )
    if server is None:
        return None, 0.0
    connector = _side_channel(ns, env, server, log)
    if isinstance(connector, int):
        return connector
    seed = int(ns.seed) if ns.seed is not None else 0
    model = LatencyModel.from_env(env, method, k if method else None, seed)
    max_running = int(ns.max_num_seqs or 1024)  # 0.33's default for H100/H200-class GPUs
    out: IO[str] = truth_log or sys.stdout
    if truth_log is None and env.get("HGXKIT_SIM_TTFT_LOG"):
        out = open(env["HGXKIT_SIM_TTFT_LOG"], "a", encoding="utf-8")  # noqa: SIM115 - lives with the server
    engine = VllmEngine(model, max_running=max_running, log=out, kv_tokens=plan.kv_tokens, max_model_len=length)
    report_gpu_load(engine, env)
    server.app = VllmApp(
        served_names=served,
        model_path=str(ns.model),
        max_model_len=length,
        engine=engine,
        tokenizer=facts.tokenizer,
        api_keys=list(ns.api_key or []),
        spec=method is not None,
        version=env.get("HGXKIT_SIM_VERSION", VERSION_DEFAULT),
        log_stats=not ns.disable_log_stats,
        per_request_metrics=bool(ns.enable_per_request_metrics),
        force_include_usage=bool(ns.enable_force_include_usage),
        nixl=connector,
    )
    return server, model.ready_delay_s


def _side_channel(
    ns: argparse.Namespace, env: Mapping[str, str], server: VllmServer, log: Log
) -> nixl.Nixl | int | None:
    """NixlConnector's side channel, bound once the KV cache is registered (None without NIXL), or the exit status
    when its port is taken: the engine core dies with ZMQ's error."""
    connector = nixl.Nixl.from_config(ns.kv_transfer_config, env, int(ns.tensor_parallel_size or 1), 0)
    if connector is None:
        return None
    try:
        connector.bind()
    except OSError:
        server.server_close()
        err = checks.StartupError("zmq.error.ZMQError", connector.bind_error())
        log(f"EngineCore failed to start: {err}", "core.py:1043", "ERROR")
        return _fail(log, err, "vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py")
    log(f"NIXL side channel on {connector.host}:{connector.port} (simulated)", "nixl_connector.py:0")
    return connector


def announce(server: VllmServer, log: Log) -> None:
    """vLLM's lines from "Starting vLLM server" up to uvicorn's start-up; the socket listens before the last."""
    host, port = server.server_address[:2]
    shown = f"[{host}]" if ":" in str(host) else (host or "0.0.0.0")
    log(f"Starting vLLM server on http://{shown}:{port}", "entry.py:139")
    log("Available routes are:", "launcher.py:188")
    for route, methods in ROUTES.items():
        log(f"Route: {route}, Methods: {methods}", "launcher.py:197")
    log.uvicorn(f"Started server process [{os.getpid()}]")
    log.uvicorn("Waiting for application startup.")
    server.activate()
    log.uvicorn(READY_LINE)


def _placeholder_app() -> VllmApp:
    return VllmApp(served_names=["-"], model_path="-", max_model_len=1, engine=VllmEngine(LatencyModel(), 1))


def _headless(ns: argparse.Namespace, log: Log) -> int:
    """``--headless``: no API server; the (simulated) engine or workers run until SIGTERM/SIGINT, exit 0."""
    stop = threading.Event()
    with contextlib.suppress(ValueError):
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        signal.signal(signal.SIGINT, lambda *_: stop.set())
    if int(ns.node_rank or 0) > 0:
        log(
            f"Launching vLLM (v{VERSION_DEFAULT}) headless multiproc executor, with head node address "
            f"{ns.master_addr}:{ns.master_port} for torch.distributed process group. (simulated)",
            "serve.py:224",
        )
    else:
        local = ns.data_parallel_size_local if ns.data_parallel_size_local is not None else ns.data_parallel_size
        address = ns.data_parallel_address or "127.0.0.1"
        log(
            f"Launching {local} data parallel engine(s) in headless mode, with head node address "
            f"tcp://{address}:{ns.data_parallel_rpc_port or 29550}. (simulated)",  # 29550: vLLM's default
            "serve.py:238",
        )
    stop.wait()
    return 0


def _serve(server: VllmServer, delay: float, log: Log, env: Mapping[str, str]) -> int:
    stop = threading.Event()
    serving = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()
        if serving.is_set():
            threading.Thread(target=server.shutdown, daemon=True).start()

    with contextlib.suppress(ValueError):  # signals only work in the main thread
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
    if stop.wait(delay):  # stopped while "loading": like an interrupted start-up
        server.server_close()
        return 0
    announce(server, log)
    serving.set()
    threading.Thread(target=log_stats, args=(server, log, env, stop), daemon=True).start()
    if stop.is_set():  # a signal between the wait and `serving.set()`
        threading.Thread(target=server.shutdown, daemon=True).start()
    server.serve_forever()
    stop.set()
    log.uvicorn("Shutting down")
    log.uvicorn("Waiting for application shutdown.")
    log.uvicorn("Application shutdown complete.")
    log.uvicorn(f"Finished server process [{os.getpid()}]")
    server.server_close()
    return 0


def _counters(engine: VllmEngine) -> tuple[int, int, int, int, int, list[int]]:
    return (
        engine.prompt_tokens_total,
        engine.generation_tokens_total,
        engine.verify_calls_total,
        engine.spec_draft_tokens_total,
        engine.spec_accepted_tokens_total,
        list(engine.spec_accepted_per_pos),
    )


def log_stats(server: VllmServer, log: Log, env: Mapping[str, str], stop: threading.Event) -> None:
    """vLLM's periodic engine-stats line (and the spec-decode line), every ``VLLM_LOG_STATS_INTERVAL`` seconds."""
    interval = float(env.get("VLLM_LOG_STATS_INTERVAL", "10") or 10)
    app = server.app
    engine = app.engine
    last = _counters(engine)
    while not stop.wait(interval):
        if not app.log_stats:
            continue
        now = _counters(engine)
        state = engine.snapshot()
        if now[:2] == last[:2] and not state["running"] and not state["queued"]:
            continue  # idle: vLLM does not repeat the line
        log(
            f"Engine 000: Avg prompt throughput: {(now[0] - last[0]) / interval:.1f} tokens/s, Avg generation "
            f"throughput: {(now[1] - last[1]) / interval:.1f} tokens/s, Running: {state['running']} reqs, Waiting: "
            f"{state['queued']} reqs, GPU KV cache usage: {engine.kv_cache_usage * 100:.1f}%, Prefix cache hit "
            "rate: 0.0% (simulated)",
            "loggers.py:271",
        )
        drafts = now[2] - last[2]
        if app.spec and drafts:
            accepted, drafted = now[4] - last[4], now[3] - last[3]
            rates = ", ".join(f"{(b - a) / drafts:.3f}" for a, b in zip(last[5], now[5], strict=True))
            log(
                f"SpecDecoding metrics: Mean acceptance length: {1 + accepted / drafts:.2f}, Accepted throughput: "
                f"{accepted / interval:.2f} tokens/s, Drafted throughput: {drafted / interval:.2f} tokens/s, "
                f"Accepted: {accepted} tokens, Drafted: {drafted} tokens, Per-position acceptance rate: {rates}, "
                f"Avg Draft acceptance rate: {100.0 * accepted / max(drafted, 1):.1f}% (simulated)",
                "metrics.py:120",
            )
        last = now
