"""SGLang's server command line, as the stand-in parses it (simulated; written from documented flags).

The flags are those of the forum command, the lmsys blog recipe, the SGLang cookbook and the reference
notes (`shared/reference/sglang.md`, checked against sglang 0.5.23's ``--help``). No SGLang code is copied.
Behaviour that matters for the toolkit is kept:

- argparse abbreviations stay on: ``--tp 4`` means ``--tp-size 4`` (the only ``--tp*`` option);
- 0.5.23 has no ``--cuda-graph-max-bs``, so argparse reports it as ambiguous between
  ``--cuda-graph-max-bs-decode`` and ``--cuda-graph-max-bs-prefill`` and exits 2;
- an unknown flag exits 2 with argparse's ``unrecognized arguments`` message;
- aliases: ``--model`` = ``--model-path``, ``--tensor-parallel-size`` = ``--tp-size``,
  ``--data-parallel-size`` = ``--dp-size``, ``--enable-hicache`` = ``--enable-hierarchical-cache``.

`resolve` then applies the documented auto-overrides for DeepSeek-V4 and DSpark (page size 256, SWA ratio
0.1, fp8_e4m3 KV, DSpark's default of 48 running requests, draft tokens = block size + 1, …).

Example:
    >>> ns = build_parser("sglang").parse_args(["--model-path", "/model", "--tp", "4"])
    >>> ns.tp_size
    4
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MOE_RUNNER_BACKENDS = [
    "auto",
    "deep_gemm",
    "triton",
    "triton_kernel",
    "flashinfer_trtllm",
    "experimental_sgl_trtllm",
    "flashinfer_trtllm_routed",
    "flashinfer_cutlass",
    "flashinfer_mxfp4",
    "flashinfer_cutedsl",
    "flashinfer_megamoe",
    "cutlass",
    "aiter",
    "marlin",
    "humming",
    "experimental_sgl_marlin",
    "lora_cutedsl",
    "lora_triton",
    "lora_marlin",
    "hpc_ops",
    "megamoe",
    "intel_xpu",
]
KV_CACHE_DTYPES = ["auto", "fp8_e5m2", "fp8_e4m3", "mxfp8", "bf16", "bfloat16", "nvfp4", "fp4_mx_block16"]
REASONING_PARSERS = [
    "deepseek-r1",
    "deepseek-v3",
    "deepseek-v4",
    "deepseek-v41",
    "glm45",
    "gpt-oss",
    "kimi",
    "kimi_k2",
    "minimax",
    "qwen3",
    "qwen3-thinking",
    "step3",
]
TOOL_CALL_PARSERS = [
    "deepseekv3",
    "deepseekv31",
    "deepseekv32",
    "deepseekv4",
    "deepseekv41",
    "glm",
    "glm45",
    "glm47",
    "gpt-oss",
    "kimi_k2",
    "llama3",
    "minimax-m2",
    "mistral",
    "pythonic",
    "qwen",
    "qwen25",
    "qwen3_coder",
    "step3",
]
SPEC_ALGORITHMS_BUILTIN = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DSPARK", "UNO")


def _str2bool(value: str) -> bool:
    return value.lower() in ("1", "true", "yes", "on")


def build_parser(prog: str) -> argparse.ArgumentParser:
    """The server argument parser. `prog` is what error messages start with, as argparse prints it."""
    p = argparse.ArgumentParser(prog=prog, description="SGLang server (hgxkit stand-in, SIMULATED)")
    add = p.add_argument
    # Model and tokenizer
    add("--model-path", "--model", dest="model_path", type=str, required=True, help="local dir or HF repo id")
    add("--tokenizer-path", type=str, default=None)
    add("--tokenizer-mode", type=str, default="auto", choices=["auto", "slow"])
    add("--tokenizer-worker-num", type=int, default=1)
    add("--skip-tokenizer-init", action="store_true")
    add("--load-format", type=str, default="auto")
    add("--trust-remote-code", action="store_true")
    add("--context-length", type=int, default=None)
    add("--is-embedding", action="store_true")
    add("--revision", type=str, default=None)
    add("--model-impl", type=str, default="auto")
    add("--dtype", type=str, default="auto")
    add("--quantization", type=str, default=None)
    add("--download-dir", type=str, default=None)
    add("--served-model-name", type=str, default=None)
    add("--chat-template", type=str, default=None)
    add("--weight-version", type=str, default="default")
    # HTTP server
    add("--host", type=str, default="127.0.0.1")
    add("--port", type=int, default=30000)
    add("--skip-server-warmup", action="store_true")
    add("--warmups", type=str, default=None)
    add("--api-key", type=str, default=None)
    add("--admin-api-key", type=str, default=None)
    # Memory and scheduling
    add("--mem-fraction-static", type=float, default=None)
    add("--max-running-requests", type=int, default=None)
    add("--max-queued-requests", type=int, default=None)
    add("--max-total-tokens", type=int, default=None)
    add("--chunked-prefill-size", type=int, default=None)
    add("--max-prefill-tokens", type=int, default=16384)
    add("--schedule-policy", type=str, default="fcfs")
    add("--schedule-conservativeness", type=float, default=1.0)
    add("--page-size", type=int, default=None)
    add("--swa-full-tokens-ratio", type=float, default=0.8)
    add("--disable-radix-cache", action="store_true")
    add("--kv-cache-dtype", type=str, default="auto", choices=KV_CACHE_DTYPES)
    # Parallelism
    add("--tp-size", "--tensor-parallel-size", dest="tp_size", type=int, default=1)
    add("--dp-size", "--data-parallel-size", dest="dp_size", type=int, default=1)
    add("--pp-size", "--pipeline-parallel-size", dest="pp_size", type=int, default=1)
    add("--ep-size", "--expert-parallel-size", dest="ep_size", type=int, default=1)
    add("--enable-dp-attention", action="store_true")
    add("--enable-dp-lm-head", action="store_true")
    add("--base-gpu-id", type=int, default=0)
    add("--nnodes", type=int, default=1)
    add("--node-rank", type=int, default=0)
    add("--dist-init-addr", type=str, default=None)
    add("--dist-timeout", type=int, default=None)
    # Kernels and backends
    add("--attention-backend", type=str, default=None)
    add("--sampling-backend", type=str, default=None)
    add("--moe-runner-backend", type=str, default="auto", choices=MOE_RUNNER_BACKENDS)
    add(
        "--moe-a2a-backend",
        type=str,
        default="none",
        choices=["none", "deepep", "mooncake", "mori", "ascend_fuseep"],
    )
    add("--flashinfer-mxfp4-moe-precision", type=str, default="default", choices=["default", "bf16", "fp8"])
    add("--disable-flashinfer-autotune", action="store_true")
    add("--enable-torch-compile", action="store_true")
    add("--torch-compile-max-bs", type=int, default=32)
    # CUDA graphs (0.5.23 names; a bare --cuda-graph-max-bs is an ambiguous prefix of the two below)
    add("--cuda-graph-max-bs-decode", type=int, default=None)
    add("--cuda-graph-max-bs-prefill", type=int, default=None)
    add("--cuda-graph-bs-decode", type=int, nargs="+", default=None)
    add("--cuda-graph-bs-prefill", type=int, nargs="+", default=None)
    add("--cuda-graph-backend-decode", type=str, default="full", choices=["full", "breakable", "disabled"])
    add(
        "--cuda-graph-backend-prefill",
        type=str,
        default="disabled",
        choices=["full", "breakable", "disabled"],
    )
    add("--cuda-graph-config", type=str, default=None, help="JSON")
    add("--disable-cuda-graph", action="store_true", help="deprecated")
    # Speculative decoding
    add("--speculative-algorithm", type=str, default=None)
    add("--speculative-draft-model-path", "--speculative-draft-model", dest="speculative_draft_model_path")
    add("--speculative-draft-model-revision", type=str, default=None)
    add("--speculative-draft-model-quantization", type=str, default=None)
    add("--speculative-num-steps", type=int, default=None)
    add("--speculative-eagle-topk", type=int, default=None)
    add("--speculative-num-draft-tokens", type=int, default=None)
    add("--speculative-accept-threshold-single", type=float, default=1.0)
    add("--speculative-accept-threshold-acc", type=float, default=1.0)
    add("--speculative-moe-runner-backend", type=str, default=None, choices=MOE_RUNNER_BACKENDS)
    add("--speculative-attention-mode", type=str, default="prefill", choices=["prefill", "decode"])
    add("--speculative-dspark-block-size", type=int, default=None)
    add("--speculative-dspark-sps-table-path", type=str, default=None)
    add("--speculative-dspark-confidence-sts-path", type=str, default=None)
    add("--speculative-dspark-align-verify-tokens-to-graph-tier", action="store_true")
    # HiCache
    add(
        "--enable-hierarchical-cache",
        "--enable-hicache",
        dest="enable_hierarchical_cache",
        action="store_true",
    )
    add("--hicache-ratio", type=float, default=None)
    add("--hicache-size", type=int, default=0, help="host pool size in GB per rank; 0 = use --hicache-ratio")
    add(
        "--hicache-write-policy",
        type=str,
        default="write_through",
        choices=["write_back", "write_through", "write_through_selective"],
    )
    add("--hicache-io-backend", type=str, default="kernel", choices=["direct", "kernel", "kernel_ascend"])
    add("--hicache-mem-layout", type=str, default="page_first")
    add("--hicache-storage-backend", type=str, default=None)
    add("--hicache-storage-prefetch-policy", type=str, default="best_effort")
    # Parsers and API
    add("--reasoning-parser", type=str, default=None, choices=REASONING_PARSERS)
    add("--tool-call-parser", type=str, default=None, choices=TOOL_CALL_PARSERS)
    add("--enable-cache-report", action="store_true")
    # Observability and robustness
    add("--enable-metrics", action="store_true")
    add("--log-level", type=str, default="info")
    add("--log-level-http", type=str, default=None)
    add("--log-requests", action="store_true")
    add("--show-time-cost", action="store_true")
    add("--random-seed", type=int, default=None)
    add("--watchdog-timeout", type=float, default=300)
    add("--device", type=str, default=None)
    add("--enable-deterministic-inference", action="store_true")
    add("--enable-return-hidden-states", action="store_true", default=False)
    add("--allow-auto-truncate", action="store_true")
    add("--enable-custom-logit-processor", action="store_true")
    add("--keep-mm-feature-on-device", action="store_true")
    add("--json-model-override-args", type=str, default="{}")
    add("--preferred-sampling-params", type=str, default=None)
    add("--grammar-backend", type=str, default=None)
    add("--stream-interval", type=int, default=1)
    add("--stream-output", action="store_true")
    add("--incremental-streaming-output", action="store_true")
    add("--enable-mixed-chunk", action="store_true")
    add("--enable-two-batch-overlap", action="store_true")
    add("--disable-overlap-schedule", action="store_true")
    add("--enable-eplb", action="store_true")
    add("--ep-num-redundant-experts", type=int, default=0)
    add("--disaggregation-mode", type=str, default="null", choices=["null", "prefill", "decode"])
    return p


@dataclass
class ModelFacts:
    """What the stand-in reads from `config.json` (and `tokenizer.json`) of the model directory."""

    model_type: str = "unknown"
    architectures: list[str] = field(default_factory=list)
    context_length: int = 163840
    dspark_block_size: int | None = None
    kv_bytes_per_token: int = 25000
    vocab: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, model_dir: Path) -> ModelFacts:
        cfg = json.loads((model_dir / "config.json").read_text())
        layers = int(cfg.get("num_hidden_layers", 43))
        # MLA-style cache: (kv_lora_rank + rope dims) per layer at 1 byte (fp8); a rough, documented guess.
        per_layer = int(cfg.get("kv_lora_rank", 512)) + int(cfg.get("qk_rope_head_dim", 64))
        facts = cls(
            model_type=str(cfg.get("model_type", "unknown")),
            architectures=list(cfg.get("architectures", [])),
            context_length=int(cfg.get("max_position_embeddings", 163840)),
            dspark_block_size=cfg.get("dspark_block_size"),
            kv_bytes_per_token=max(layers * per_layer, 1),
        )
        tok = model_dir / "tokenizer.json"
        if tok.exists():
            try:
                vocab = json.loads(tok.read_text()).get("model", {}).get("vocab", {})
                # Output words: plain vocabulary entries only (no special tokens), in id order.
                facts.vocab = [w for w, _ in sorted(vocab.items(), key=lambda kv: kv[1]) if not w.startswith("<")]
            except (ValueError, AttributeError):
                facts.vocab = []
        return facts


def resolve(ns: argparse.Namespace, facts: ModelFacts) -> dict[str, Any]:
    """Resolved server args as `/server_info` reports them (flat), after the documented auto-overrides."""
    args = dict(vars(ns))
    args["served_model_name"] = args["served_model_name"] or args["model_path"]
    args["tokenizer_path"] = args["tokenizer_path"] or args["model_path"]
    args["context_length"] = args["context_length"] or facts.context_length
    is_dsv4 = facts.model_type.startswith("deepseek_v4")
    if is_dsv4:
        args["page_size"] = args["page_size"] or 256
        args["swa_full_tokens_ratio"] = 0.1
        if args["kv_cache_dtype"] == "auto":
            args["kv_cache_dtype"] = "fp8_e4m3"
        if args["moe_runner_backend"] == "auto":
            args["moe_runner_backend"] = "flashinfer_mxfp4"
    args["page_size"] = args["page_size"] or 1
    algo = args["speculative_algorithm"]
    if algo is not None:
        algo = algo.upper()
        args["speculative_algorithm"] = algo
    if algo == "DSPARK":
        block = args["speculative_dspark_block_size"] or facts.dspark_block_size or 5
        args["speculative_dspark_block_size"] = block
        args["speculative_num_steps"] = 1
        args["speculative_eagle_topk"] = 1
        args["speculative_num_draft_tokens"] = block + 1
        args["speculative_draft_model_path"] = args["speculative_draft_model_path"] or args["model_path"]
        if args["max_running_requests"] is None:
            args["max_running_requests"] = 48
    elif algo is not None:
        args["speculative_num_steps"] = args["speculative_num_steps"] or 3
        args["speculative_eagle_topk"] = args["speculative_eagle_topk"] or 1
        args["speculative_num_draft_tokens"] = args["speculative_num_draft_tokens"] or 4
    if args["enable_hierarchical_cache"] and args["hicache_ratio"] is None:
        args["hicache_ratio"] = 2.0
    if args["mem_fraction_static"] is None:
        args["mem_fraction_static"] = 0.85
    if args["chunked_prefill_size"] is None:
        args["chunked_prefill_size"] = 8192
    if args["cuda_graph_max_bs_decode"] is None:
        args["cuda_graph_max_bs_decode"] = args["max_running_requests"] or 256
    if args["random_seed"] is None:
        args["random_seed"] = 42
    return args


def merge_config(argv: list[str]) -> list[str]:
    """SGLang's `--config FILE.yaml`: the file's keys become flags placed before the command line's (which win),
    as `ConfigArgumentMerger` does in sglang 0.5.23. The stand-in is stdlib-only, so it reads the flat
    `key: value` mappings hgxkit and people write (scalars; `true` for a switch), not every YAML form.

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "c.yaml")
    >>> _ = open(path, "w").write("api-key: k1\\nenable_metrics: true\\n")
    >>> merge_config(["--model-path", "/m", "--config", path])
    ['--api-key', 'k1', '--enable-metrics', '--model-path', '/m']
    """
    if "--config" not in argv:
        return argv
    at = argv.index("--config")
    if argv.count("--config") > 1:
        raise SystemExit("ValueError: Multiple config files specified! Only one allowed.")
    if at == len(argv) - 1:
        raise SystemExit("ValueError: No config file specified after --config flag!")
    path = argv[at + 1]
    if not path.endswith((".yaml", ".yml")):
        raise SystemExit(f"ValueError: Config file must be YAML format: {path}")
    config_args: list[str] = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            line = line.split("#", 1)[0].rstrip()
            if not line.strip():
                continue
            key, sep, value = line.partition(":")
            if not sep:
                raise SystemExit(f"ValueError: Config file must contain a dictionary at root level: {path}")
            flag, value = "--" + key.strip().replace("_", "-"), value.strip().strip("'\"")
            if value.lower() == "true":
                config_args.append(flag)
            elif value.lower() not in ("false", ""):
                config_args += [flag, value]
    return config_args + argv[:at] + argv[at + 2 :]
