"""SGLang as a server kind: flags, endpoints, benchmark client, /metrics names, multi-node flags, pitfalls.

Its client is `python -m sglang.benchmark.serving`, which posts use too.

Example:
    >>> SGLANG.canonical_flag("--tp"), SGLANG.bench.suffix
    ('--tp-size', 'jsonl')
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from hgxkit.imageref import at_least
from hgxkit.kinds.base import (
    CONNECTION_FLAGS,
    BenchCell,
    BenchClient,
    KindMetrics,
    PDRouter,
    PostedClient,
    PrefillDecode,
    ServerKind,
    extra_flags,
    length_args,
    load_args,
)
from hgxkit.kinds.lengths import SHARE
from hgxkit.kinds.options import SGLANG_OPTIONS

if TYPE_CHECKING:
    from hgxkit.results.bench import BenchRecord


def client_argv(cell: BenchCell, output_dir: str, warmups: str) -> list[str]:
    """`sglang.benchmark.serving` arguments for one cell (hgxkit.verify.plan.client_argv says what they mean)."""
    load, seed = load_args(cell)
    dataset = cell.dataset or "random-ids"
    if dataset == "random" and "--dataset-path" not in cell.extra_args:
        # SGLang's `random` takes its token ids from ShareGPT, downloaded from the Hub; verify runs the client
        # offline (HF_HUB_OFFLINE), so the same lengths, ratio and load are measured with random token ids.
        dataset = "random-ids"
    return [
        "--backend",
        "sglang",
        "--host",
        "127.0.0.1",
        "--port",
        str(cell.port),
        "--dataset-name",
        dataset,
        *length_args(cell, SHARE),
        "--num-prompts",
        str(cell.num_prompts),
        *load,
        *seed,
        # --flush-cache resets the server's accept-length counter, which is otherwise lifetime-cumulative.
        "--warmup-requests",
        warmups,
        "--flush-cache",
        "--output-details",
        "--output-file",
        f"{output_dir}/{cell.file}",
        *cell.extra_args,
    ]


def parse_output(text: str, cell: BenchCell) -> list[BenchRecord]:
    """The client's JSONL (one line per run; nothing when it wrote nothing)."""
    from hgxkit.results.bench import parse_bench_jsonl  # results' parsers load only where verify reads output

    return parse_bench_jsonl(text, source=cell.file) if text.strip() else []


def pitfalls(recipe: Any, warn: Callable[[str, str], None]) -> None:
    """Known SGLang pitfalls: flags of its CLI, DSpark and HiCache settings (`recipe`: a hgxkit Recipe)."""
    server = recipe.server
    docker = recipe.docker
    if any(use.words[0].partition("=")[0] == "--cuda-graph-max-bs" for use in server.uses()):
        warn(
            "cuda-graph-max-bs",
            "--cuda-graph-max-bs is ambiguous in SGLang >= 0.5.23 (it could match --cuda-graph-max-bs-decode "
            "and --cuda-graph-max-bs-prefill) and the server exits; use --cuda-graph-max-bs-decode",
        )
    algorithm = (server.flag("--speculative-algorithm") or "").upper()
    dspark_model = "dspark" in f"{recipe.model.repo_id or ''} {recipe.model.local_dir or ''}".lower()
    if algorithm in ("EAGLE", "EAGLE3", "NEXTN") and dspark_model:
        warn(
            "wrong-spec-algorithm",
            f"--speculative-algorithm {algorithm} on a DSpark checkpoint serves with accept length 1.0; "
            "use --speculative-algorithm DSPARK",
        )
    if algorithm == "DSPARK":
        shape_flags = [
            f
            for f in ("--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens")
            if server.has(f)
        ]
        if shape_flags:
            warn(
                "dspark-shape",
                f"{', '.join(shape_flags)} are ignored with DSPARK (the draft shape comes from the "
                "checkpoint); use --speculative-dspark-block-size",
            )
    env = {setting.name: setting.value for setting in docker.env()}
    if env.get("SGLANG_RAGGED_VERIFY_MODE") == "compact" and not server.has("--speculative-dspark-sps-table-path"):
        warn(
            "compact-without-sps",
            "SGLANG_RAGGED_VERIFY_MODE=compact without --speculative-dspark-sps-table-path verifies the "
            "whole block anyway; build a table with sglang.benchmark.dspark_sps_profiler or use static",
        )
    if server.has("--enable-hierarchical-cache") and server.flag("--hicache-size") in (None, "0"):
        ratio = server.flag("--hicache-ratio") or "2 (default)"
        warn(
            "hicache-host-ram",
            f"HiCache ratio {ratio} pins ratio x the device KV pool in host RAM per rank, for every "
            "group; two TP4 groups at ratio 4 can need terabytes; the serve role checks RAM, or set "
            "--hicache-size GB",
        )


def refuses_flag(word: str, image: str) -> str | None:
    """What SGLang's plain argparse refuses, on every image: an underscore spelling (not turned into dashes, as
    vLLM's parser does). And `--cuda-graph-max-bs`, ambiguous between its -decode and -prefill forms, on images
    newer than 0.5.23 or of no known version: SGLang 0.5.23's option table judges that version and `latest`, no
    table judges the later ones, and they are taken to keep the split."""
    name = word.partition("=")[0]
    if not name.startswith("--"):
        return None
    if "_" in name:
        return (
            f"{name}: SGLang's argument parser does not turn underscores into dashes (vLLM's does) and has no "
            f"{name}, so it exits with `unrecognized arguments`; write the SGLang flag "
            f"({name.replace('_', '-')} if it has one) or drop it"
        )
    if name == "--cuda-graph-max-bs" and at_least(image, (0, 5, 23)) and not SGLANG_OPTIONS.applies(image):
        return (
            f"--cuda-graph-max-bs is ambiguous in SGLang >= 0.5.23 ({image}): it could match "
            "--cuda-graph-max-bs-decode and --cuda-graph-max-bs-prefill and argparse exits; use "
            "--cuda-graph-max-bs-decode, or pin an image of the version the post used"
        )
    return None


_SETTINGS = {
    "backend": ("--backend",),
    "dataset": ("--dataset-name",),
    "input_len": ("--random-input-len",),
    "output_len": ("--random-output-len",),
    "range_ratio": ("--random-range-ratio",),
    "num_prompts": ("--num-prompts",),
    "concurrency": ("--max-concurrency",),
    "request_rate": ("--request-rate",),
    "warmups": ("--warmup-requests",),
    "seed": ("--seed",),
}

POSTED_CLIENT = PostedClient(
    "sglang.benchmark.serving",
    (("python3", "-m", "sglang.benchmark.serving"), ("python3", "-m", "sglang.bench_serving")),
    _SETTINGS,
    # sglang 0.5.23 `python -m sglang.benchmark.serving --help` (reference notes §4).
    {"dataset": "sharegpt", "input_len": 1024, "output_len": 1024, "range_ratio": 0.0, "num_prompts": 1000},
    frozenset(
        {
            "--flush-cache",
            "--disable-stream",
            "--disable-ignore-eos",
            "--output-details",
            "--apply-chat-template",
            "--tokenize-prompt",
            "--cache-report",
            "--disable-tqdm",
            "--profile",
        }
    ),
    CONNECTION_FLAGS,
    ("--output-file", "--output-details", "--tag"),
    version="sglang 0.5.23",
    others=(
        "--dataset-path",
        "--sharegpt-output-len",
        "--sharegpt-context-len",
        "--random-image-count",
        "--temperature",
        "--top-p",
        "--extra-request-body",
        "--flush-cache-timeout",
        "--ready-check-timeout-sec",
        "--header",
        "--goodput",
        "--lora-name",
        "--profile-activities",
    ),
    printed=r"sglang[./]bench(?:mark[./])?_?serving",
)

SGLANG = ServerKind(
    name="sglang",
    title="SGLang",
    images=("lmsysorg/sglang", "docker.io/lmsysorg/sglang"),
    programs=(("sglang", "serve"), ("python3", "-m", "sglang.launch_server")),
    flag_aliases={
        "--tp": "--tp-size",
        "--tensor-parallel-size": "--tp-size",
        "--dp": "--dp-size",
        "--data-parallel-size": "--dp-size",
        "--pp": "--pp-size",
        "--pipeline-parallel-size": "--pp-size",
        "--model": "--model-path",
        "--enable-hicache": "--enable-hierarchical-cache",
        "--nccl-init-addr": "--dist-init-addr",
    },
    underscores_are_dashes=False,
    positional_model=True,  # `sglang serve MODEL` (0.5.23)
    model_flag="--model-path",
    tp_flag="--tp-size",
    pp_flag="--pp-size",
    dp_flag="--dp-size",
    first_gpu_flag="--base-gpu-id",
    import_path_flags=("--custom-weight-loader",),
    default_host="127.0.0.1",
    default_port=30000,
    health_path="/health_generate",
    ready_path="/health",
    info_path="/server_info",
    metrics_path="/metrics",
    metrics_flag="--enable-metrics",
    api_key_env=None,
    client="sglang.benchmark.serving",
    client_backend="sglang",
    flush_cache=True,
    default_image="lmsysorg/sglang:latest",
    bench=BenchClient(
        # the newer module name, then the shim older images ship
        modules=(("sglang.benchmark.serving", ()), ("sglang.bench_serving", ())),
        suffix="jsonl",
        lengths=SHARE,
        ignores_eos=True,
        argv=client_argv,
        parse=parse_output,
        extra_flags=extra_flags(POSTED_CLIENT),
    ),
    # python/sglang/srt/metrics/collector.py (SchedulerMetricsCollector, TokenizerMetricsCollector).
    metrics=KindMetrics(
        running="sglang:num_running_reqs",
        waiting="sglang:num_queue_reqs",
        generation_tokens="sglang:generation_tokens_total",
        prompt_tokens="sglang:prompt_tokens_total",
        kv_usage=("sglang:token_usage",),
        accept_length_gauge="sglang:spec_accept_length",
        gen_throughput_gauge="sglang:gen_throughput",
        cache_hit_rate_gauge="sglang:cache_hit_rate",
        ttft_histogram="sglang:time_to_first_token_seconds",
        e2e_histogram="sglang:e2e_request_latency_seconds",
        # srt/metrics/collector.py (0.5.x): sglang:time_per_output_token_seconds before the rename
        itl_histograms=("sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds"),
    ),
    posted_clients=(POSTED_CLIENT,),
    speculative_flags=("--speculative-algorithm",),
    json_path_keys=("lora_path",),  # --lora-paths' JSON form ({"lora_name": …, "lora_path": …, "pinned": …})
    disaggregation=("--disaggregation-mode", r"prefill|decode"),
    # srt/server_args.py: bootstrap port 8998, transfer backend mooncake by default; mooncake and nixl are the
    # backends SGLang's PD docs deploy on NVIDIA GPUs (ascend, mori: other accelerators; fake: tests only)
    prefill_decode=PrefillDecode(
        "prefill",
        "decode",
        "--disaggregation-bootstrap-port",
        8998,
        "--disaggregation-transfer-backend",
        "mooncake",
        ("mooncake", "nixl"),
        # sglang-router 0.3.2's launch_router: --prefill URL BOOTSTRAP_PORT per prefill; bucket is a prefill policy
        PDRouter(
            "sglang_router.launch_router",
            "--pd-disaggregation",
            ("random", "round_robin", "power_of_two", "cache_aware"),
            bootstrap=True,
            image="lmsysorg/sgl-model-gateway:latest",
        ),
    ),
    multinode_flags=("--nnodes", "--node-rank", "--dist-init-addr"),
    head_flag="--dist-init-addr",
    dp_in_tp_flag="--enable-dp-attention",
    ep_size_flag="--ep-size",
    env_report=("python3", "-m", "sglang.check_env"),
    version_keys=("sglang_version",),
    pitfalls=pitfalls,
    refuses_flag=refuses_flag,
    unknown_flags=SGLANG_OPTIONS.unknown_flags,
    unchecked_flag=SGLANG_OPTIONS.unchecked_flag,
    is_option=SGLANG_OPTIONS.is_option,
    option_started=SGLANG_OPTIONS.started,
    switch_value=SGLANG_OPTIONS.switch_value,
    value_count=SGLANG_OPTIONS.value_count,
    value_choice=SGLANG_OPTIONS.value_choice,
)
