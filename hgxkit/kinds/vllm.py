"""vLLM as a server kind: flags, endpoints, API key variable, benchmark clients, /metrics names, multi-node flags.

The image's entrypoint is `vllm serve`; its client is `vllm bench serve` (posts also use the older
benchmarks/benchmark_serving.py).

Example:
    >>> VLLM.canonical_flag("-tp"), VLLM.canonical_flag("--enable_expert_parallel"), VLLM.bench.suffix
    ('--tensor-parallel-size', '--enable-expert-parallel', 'json')
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from hgxkit.imageref import at_least
from hgxkit.kinds.base import (
    CONNECTION_FLAGS,
    BenchCell,
    BenchClient,
    DataParallelHosts,
    KindMetrics,
    PDRouter,
    PostedClient,
    PrefillDecode,
    RayCluster,
    ServerKind,
    SideChannel,
    extra_flags,
    length_args,
    load_args,
)
from hgxkit.kinds.lengths import SPREAD
from hgxkit.kinds.options import VLLM_OPTIONS

if TYPE_CHECKING:
    from hgxkit.results.bench import BenchRecord


def client_argv(cell: BenchCell, output_dir: str, warmups: str) -> list[str]:
    """`vllm bench serve` arguments for one cell (hgxkit.verify.plan.client_argv says what they mean)."""
    load, seed = load_args(cell)
    dataset = cell.dataset if cell.dataset not in (None, "random-ids") else "random"
    return [
        "--backend",
        "vllm",
        "--base-url",
        f"http://127.0.0.1:{cell.port}",
        "--endpoint",
        "/v1/completions",
        *(["--model", cell.served_name] if cell.served_name else []),
        *(["--tokenizer", cell.tokenizer] if cell.tokenizer else []),
        "--dataset-name",
        dataset,
        *length_args(cell, SPREAD),
        "--num-prompts",
        str(cell.num_prompts),
        *load,
        *seed,
        "--num-warmups",
        warmups,
        "--percentile-metrics",
        "ttft,tpot,itl,e2el",
        "--metric-percentiles",
        "50,90,99",
        "--save-result",
        "--save-detailed",
        "--append-result",
        "--result-dir",
        output_dir,
        "--result-filename",
        cell.file,
        *cell.extra_args,
    ]


def parse_output(text: str, cell: BenchCell) -> list[BenchRecord]:
    """The client's --save-result JSON (one object per run, with --append-result)."""
    from hgxkit.results.vllm_bench import parse_vllm_result  # loaded only where verify reads output

    return parse_vllm_result(text, source=cell.file, input_len=cell.input_len, output_len=cell.output_len)


_SETTINGS = {
    "backend": ("--backend", "--endpoint-type"),
    "dataset": ("--dataset-name",),
    "input_len": ("--random-input-len", "--input-len"),
    "output_len": ("--random-output-len", "--output-len"),
    "range_ratio": ("--random-range-ratio",),
    "num_prompts": ("--num-prompts",),
    "concurrency": ("--max-concurrency",),
    "request_rate": ("--request-rate",),
    "warmups": ("--num-warmups",),
    "seed": ("--seed",),
}
_SWITCHES = frozenset(
    {
        "--ignore-eos",
        "--save-result",
        "--save-detailed",
        "--append-result",
        "--trust-remote-code",
        "--disable-tqdm",
        "--profile",
    }
)

POSTED_CLIENTS = (
    PostedClient(
        "vllm bench serve",
        (("vllm", "bench", "serve"),),
        _SETTINGS,
        # vllm 0.33 `vllm bench serve` (reference notes §4).
        {"dataset": "random", "input_len": 1024, "output_len": 128, "range_ratio": 0.0, "num_prompts": 1000},
        _SWITCHES,
        CONNECTION_FLAGS,
        (
            "--save-result",
            "--save-detailed",
            "--append-result",
            "--result-dir",
            "--result-filename",
            "--label",
            "--metadata",
        ),
        version="vllm 0.33",
        others=(
            "--endpoint",
            "--dataset-path",
            "--burstiness",
            "--percentile-metrics",
            "--metric-percentiles",
            "--goodput",
            "--temperature",
            "--top-p",
            "--top-k",
            "--random-prefix-len",
            "--header",
            "--ready-check-timeout-sec",
            "--tokenizer-mode",
            "--request-id-prefix",
        ),
        printed=r"vllm bench serve",
    ),
    PostedClient(
        "benchmark_serving.py",
        (),  # `python3 [path/]benchmark_serving.py`: matched by `script`
        _SETTINGS,
        # vllm 0.9.2's benchmarks/benchmark_serving.py (the repository script before `vllm bench serve`).
        {"dataset": "sharegpt", "input_len": 1024, "output_len": 128, "range_ratio": 0.0, "num_prompts": 1000},
        _SWITCHES,
        CONNECTION_FLAGS,
        ("--save-result", "--save-detailed", "--append-result", "--result-dir", "--result-filename", "--metadata"),
        version="vllm 0.9.2",
        others=(
            "--endpoint",
            "--dataset-path",
            "--burstiness",
            "--percentile-metrics",
            "--metric-percentiles",
            "--goodput",
            "--temperature",
            "--top-p",
            "--top-k",
            "--random-prefix-len",
            "--tokenizer-mode",
        ),
        script=r"^(?:\S*/)?benchmark_serving\.py$",
        printed=r"benchmarks?/benchmark_serving\.py",
    ),
)

_BOOL_VALUE = re.compile(r"(?i)true|false|yes|no|on|off|0|1")


def refuses_flag(word: str, image: str) -> str | None:
    """What vLLM's parser refuses as it reads: from 0.10 (`latest` included) boolean flags are
    `BooleanOptionalAction`s, so `--enable-chunked-prefill=False` is `ignored explicit argument 'False'`."""
    name, has_value, value = word.partition("=")
    if not (has_value and name.startswith("--enable-") and _BOOL_VALUE.fullmatch(value) and at_least(image, (0, 10))):
        return None
    switch = name if value.lower() in ("true", "yes", "on", "1") else f"--no-{name[2:]}"
    return (
        f"{word}: vLLM >= 0.10 ({image}) parses {name} as a switch and exits with `ignored explicit argument "
        f"'{value}'`; write {switch}"
    )


# vLLM's `_FLOAT16_NOT_SUPPORTED_MODELS` (vllm/config/model.py) keys model types; the import has the model's
# name, not its config, so the names of those types' releases stand for them (`gemma-3n` is another type).
_NO_FLOAT16 = re.compile(r"(?i)(?:^|[/_-])(?:shield)?gemma-?[23](?!n)(?:[-_.]|$)")
_FLOAT16 = ("half", "float16")


def model_value(model: str, uses: Sequence[Sequence[str]]) -> tuple[str, str] | None:
    """What vLLM's dtype check refuses for the model: float16 for Gemma 2 and 3 ("Numerical instability").

    >>> model_value("google/gemma-2-9b-it", [("--dtype", "half")])[0]
    '--dtype'
    >>> model_value("google/gemma-3n-E4B-it", [("--dtype", "half")]) is None
    True
    """
    name = model.rstrip("/").rsplit("/", 1)[-1]
    for words in uses:
        flag, _, value = words[0].partition("=")
        value = value or (words[1] if len(words) > 1 else "")
        if flag == "--dtype" and value.strip("'\"").lower() in _FLOAT16 and _NO_FLOAT16.search(name):
            return flag, (
                f'--dtype {value}: vLLM refuses float16 for {name}, a Gemma 2 or 3 model (it exits with "does '
                'not support float16. Reason: Numerical instability"); use --dtype bfloat16 (float32 on GPUs '
                "without bfloat16)"
            )
    return None


VLLM = ServerKind(
    name="vllm",
    title="vLLM",
    images=("vllm/vllm-openai", "docker.io/vllm/vllm-openai"),
    programs=(("vllm", "serve"), ("python3", "-m", "vllm.entrypoints.openai.api_server")),
    flag_aliases={
        "-tp": "--tensor-parallel-size",
        "-pp": "--pipeline-parallel-size",
        "-dp": "--data-parallel-size",
        "-q": "--quantization",
        "-ep": "--enable-expert-parallel",
        "-sc": "--speculative-config",
        "-cc": "--compilation-config",
        "-n": "--nnodes",
        "-r": "--node-rank",
        "-asc": "--api-server-count",
        "-dcp": "--decode-context-parallel-size",
        "-pcp": "--prefill-context-parallel-size",
        "-dpl": "--data-parallel-size-local",
        "-dpa": "--data-parallel-address",
        "-dpp": "--data-parallel-rpc-port",
        "-dpn": "--data-parallel-rank",
        "-dpr": "--data-parallel-start-rank",
        "-dpb": "--data-parallel-backend",
    },
    underscores_are_dashes=True,
    positional_model=True,  # `vllm serve MODEL`; the 0.33 image's ENTRYPOINT is `vllm serve`
    model_flag="--model",
    tp_flag="--tensor-parallel-size",
    pp_flag="--pipeline-parallel-size",
    dp_flag="--data-parallel-size",
    ep_switch="--enable-expert-parallel",
    import_path_flags=(
        "--middleware",
        "--logits-processors",
        "--worker-cls",
        "--worker-extension-cls",
        "--scheduler-cls",
    ),
    default_host="0.0.0.0",  # host None: the socket binds every IPv4 interface
    default_port=8000,
    health_path="/health",
    ready_path="/health",
    info_path="/version",
    metrics_path="/metrics",
    metrics_flag=None,
    api_key_env="VLLM_API_KEY",
    client="vllm bench serve",
    client_backend="vllm",
    flush_cache=False,
    default_image="vllm/vllm-openai:latest",
    bench=BenchClient(
        modules=(("vllm.entrypoints.cli.main", ("bench", "serve")),),
        suffix="json",
        lengths=SPREAD,
        argv=client_argv,
        parse=parse_output,
        extra_flags=extra_flags(POSTED_CLIENTS[0]),  # `vllm bench serve`, the client verify runs
    ),
    # vllm/v1/metrics/loggers.py (PrometheusStatLogger) and its SpecDecodingProm; counters end in `_total` on the
    # wire. `vllm:gpu_cache_usage_perc` is the pre-0.10 name of `vllm:kv_cache_usage_perc`.
    metrics=KindMetrics(
        running="vllm:num_requests_running",
        waiting="vllm:num_requests_waiting",
        generation_tokens="vllm:generation_tokens_total",
        prompt_tokens="vllm:prompt_tokens_total",
        kv_usage=("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        accepted_tokens="vllm:spec_decode_num_accepted_tokens_total",
        drafts="vllm:spec_decode_num_drafts_total",
        prefix_cache_hits="vllm:prefix_cache_hits_total",
        prefix_cache_queries="vllm:prefix_cache_queries_total",
        ttft_histogram="vllm:time_to_first_token_seconds",
        e2e_histogram="vllm:e2e_request_latency_seconds",
        # v1/metrics/loggers.py: vllm:time_per_output_token_seconds before the rename
        itl_histograms=("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
        tpot_histogram="vllm:request_time_per_output_token_seconds",
        # NixlConnector's NixlPromMetrics (distributed/kv_transfer/kv_connector/v1/nixl_connector.py), on the decode
        kv_transfer_histogram="vllm:nixl_xfer_time_seconds",
    ),
    posted_clients=POSTED_CLIENTS,
    image_entrypoint=("vllm", "serve"),  # 0.33-era images; words after the image are `MODEL flags`
    speculative_flags=("--speculative-config",),
    # --lora-modules' JSON form (LoRAModulePath: path), --speculative-config's draft (model, tokenizer)
    json_path_keys=("path", "model", "tokenizer"),
    # a KV connector's producer (prefill) or consumer (decode) side; kv_both is also a cache offload's role
    disaggregation=("--kv-transfer-config", r".*[\"']?kv_role[\"']?\s*:\s*[\"']?kv_(?:producer|consumer)\b.*"),
    # A group's side is the kv_role of its own --kv-transfer-config (groups.server_args): kv_producer is the prefill,
    # kv_consumer the decode. vLLM's NIXL docs give both sides kv_both and let the proxy decide, as NixlConnector
    # reads only each request's kv_transfer_params; it takes either role (config/kv_transfer.py's KVRole), so
    # the recipe names each side with it and the router is told the same sides. kv_both stays a server that
    # does both (an offload connector's role too); a post whose two NIXL servers both say it takes their sides
    # from its router or proxy command (`either`, `posted_router`, hgxkit/importing/pd_sides.py). No bootstrap
    # port: the prefill's answer names the side channel (VLLM_NIXL_SIDE_CHANNEL_HOST:PORT, 5600 by default) that
    # every NIXL worker binds, each its own on a host.
    prefill_decode=PrefillDecode(
        "kv_producer",
        "kv_consumer",
        None,
        None,
        "--kv-transfer-config",
        "",
        ("NixlConnector",),
        # vllm-router 0.1.17: --prefill URL with no bootstrap port (none), --kv-connector nixl (its default). In PD
        # mode it checks no client's key and sends every worker `Bearer $OPENAI_API_KEY` (its --api-key is for
        # intra-node DP routing), measured against the real router: a keyed split behind it would be open.
        PDRouter(
            "vllm_router.launch_router",
            "--vllm-pd-disaggregation",
            ("random", "round_robin", "power_of_two", "cache_aware"),
            bootstrap=False,
            extra=("--kv-connector", "nixl"),
            image="vllm/vllm-router:v0.1.17",
            program=("vllm-router",),
            keyless="vllm-router 0.1.17 checks no client's API key in PD mode (it sends each worker its own "
            "OPENAI_API_KEY), so a keyed split behind it would answer anyone who reaches the router",
        ),
        role_key="kv_role",
        backend_key="kv_connector",
        side_channel=SideChannel("VLLM_NIXL_SIDE_CHANNEL_PORT", 5600),
        either="kv_both",  # the docs' and the recipes' form: the posted router or proxy decides
        posted_router=lambda words: posted_router_ports(words),
        router_programs=("vllm-router",),
    ),
    env_report=("vllm", "collect-env"),
    multinode_flags=("--nnodes", "--node-rank", "--master-addr"),
    head_flag="--master-addr",
    head_port_flag="--master-port",
    default_dist_port=29501,
    worker_flags=("--headless",),  # ranks >= 1 start no API server (vLLM multiprocessing across nodes)
    # vLLM's own data-parallel deployment over hosts (docs/serving/data_parallel_deployment.md); 29550 is its
    # default data_parallel_rpc_port
    dp_hosts=DataParallelHosts(
        "--data-parallel-size-local",
        "--data-parallel-start-rank",
        "--data-parallel-address",
        "--data-parallel-rpc-port",
        29550,
    ),
    # vLLM on a Ray cluster (examples/online_serving/run_cluster.sh: `ray start --block --head --port=6379`)
    ray=RayCluster(("--distributed-executor-backend", "ray")),
    refuses_flag=refuses_flag,
    unknown_flags=VLLM_OPTIONS.unknown_flags,
    unchecked_flag=VLLM_OPTIONS.unchecked_flag,
    is_option=VLLM_OPTIONS.is_option,
    option_started=VLLM_OPTIONS.started,
    switch_value=VLLM_OPTIONS.switch_value,
    value_count=VLLM_OPTIONS.value_count,
    value_choice=VLLM_OPTIONS.value_choice,
    model_value=model_value,
)


# A posted router's flags that list where prefills and decodes go: vllm-router's `--prefill URL` / `--decode URL`
# (each repeats), vLLM's toy proxy (tests/v1/kv_connector/nixl_integration/toy_proxy_server.py)
# `--prefiller-ports P…` / `--decoder-ports P…` (`--prefiller-port` / `--decoder-port` in its older form).
_ROUTER_URLS = {"--prefill": "prefill", "--decode": "decode"}
_PROXY_PORTS = {
    "--prefiller-ports": "prefill",
    "--prefiller-port": "prefill",
    "--decoder-ports": "decode",
    "--decoder-port": "decode",
}
_URL_PORT = re.compile(r"^[a-z]+://[^/:]+:(\d+)(?:/.*)?$")


def posted_router_ports(words: Sequence[str]) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """(the ports it sends prefills to, those it sends decodes to) of a posted vllm-router or toy proxy command;
    None for any other command.

    >>> posted_router_ports(["vllm-router", "--vllm-pd-disaggregation", "--prefill", "http://localhost:8000",
    ...                      "--decode", "http://localhost:8001"])
    ((8000,), (8001,))
    >>> posted_router_ports(["python", "toy_proxy_server.py", "--prefiller-ports", "8100", "--decoder-ports", "8200"])
    ((8100,), (8200,))
    """
    router = any("vllm-router" in w or "vllm_router" in w or w == "--vllm-pd-disaggregation" for w in words)
    found: dict[str, list[int]] = {"prefill": [], "decode": []}
    side = None
    urls = False
    for word in words:
        flag = word.partition("=")[0]
        if word.startswith("-"):
            side = _ROUTER_URLS.get(flag) if router else _PROXY_PORTS.get(flag)
            side = side or _PROXY_PORTS.get(flag)
            urls = flag in _ROUTER_URLS
            word = word.partition("=")[2]
            if not word:
                continue
        if side is None:
            continue
        matched = _URL_PORT.match(word) if urls else None
        if matched:
            found[side].append(int(matched.group(1)))
        elif not urls and word.isascii() and word.isdigit():
            found[side].append(int(word))
    if not found["prefill"] or not found["decode"]:
        return None
    return tuple(found["prefill"]), tuple(found["decode"])
