"""The SGLang stand-in's command line: flags, aliases, abbreviations, errors, resolved values."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from hgxkit.recipe.read import load_recipe
from hgxkit.sim.standin.sglang.args import ModelFacts, build_parser, resolve
from hgxkit.sim.standin.sglang.launcher import _normalize_serve_argv

# The forum post's `sglang serve` arguments, verbatim: the shipped recipe holds them token for token.
FORUM = load_recipe(
    Path(__file__).resolve().parents[3] / "recipes" / "deepseek-v4-flash-dspark-marlin.yaml"
).server.words()[2:]
# The lmsys blog's recipe (`python3 -m sglang.launch_server`), with 0.5.23's decode flag.
BLOG = [
    "--model-path",
    "/model",
    "--speculative-algorithm",
    "DSPARK",
    "--tp",
    "4",
    "--dp-size",
    "4",
    "--enable-dp-attention",
    "--enable-dp-lm-head",
    "--moe-a2a-backend",
    "none",
    "--moe-runner-backend",
    "flashinfer_mxfp4",
    "--disable-flashinfer-autotune",
    "--swa-full-tokens-ratio",
    "0.1",
    "--chunked-prefill-size",
    "1024",
    "--mem-fraction-static",
    "0.8",
    "--cuda-graph-max-bs-decode",
    "192",
    "--max-running-requests",
    "1024",
    "--disable-radix-cache",
    "--trust-remote-code",
    "--host",
    "0.0.0.0",
    "--port",
    "30000",
]
DSV4 = ModelFacts(model_type="deepseek_v4", dspark_block_size=5)


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hgxkit.sim.standin.sglang", *argv], capture_output=True, text=True, timeout=60
    )


def test_forum_command_parses_and_resolves() -> None:
    args = resolve(build_parser("sglang").parse_args(FORUM), DSV4)
    assert args["tp_size"] == 4  # `--tp` is an abbreviation of --tp-size
    assert args["moe_runner_backend"] == "marlin"
    assert args["kv_cache_dtype"] == "fp8_e4m3"
    assert args["speculative_algorithm"] == "DSPARK"
    assert args["speculative_num_draft_tokens"] == 6  # block size 5 from config.json, + 1
    assert (args["speculative_num_steps"], args["speculative_eagle_topk"]) == (1, 1)
    assert args["speculative_draft_model_path"] == "/model"
    assert args["max_running_requests"] == 24
    assert args["enable_hierarchical_cache"] is True
    assert args["hicache_ratio"] == 4.0 and args["hicache_size"] == 0
    assert args["page_size"] == 256 and args["swa_full_tokens_ratio"] == 0.1
    assert args["served_model_name"] == "deepseek-v4-flash"


def test_blog_recipe_parses() -> None:
    args = resolve(build_parser("launch_server.py").parse_args(BLOG), DSV4)
    assert (args["tp_size"], args["dp_size"], args["enable_dp_attention"]) == (4, 4, True)
    assert args["max_running_requests"] == 1024
    assert args["chunked_prefill_size"] == 1024


def test_aliases() -> None:
    parser = build_parser("sglang")
    ns = parser.parse_args(["--model", "/m", "--tensor-parallel-size", "2", "--enable-hicache"])
    assert (ns.model_path, ns.tp_size, ns.enable_hierarchical_cache) == ("/m", 2, True)
    ns = parser.parse_args(["--model-path", "/m", "--data-parallel-size", "2"])
    assert ns.dp_size == 2


def test_defaults_without_spec_and_without_dsv4() -> None:
    args = resolve(build_parser("sglang").parse_args(["--model-path", "/m"]), ModelFacts(model_type="llama"))
    assert args["speculative_algorithm"] is None
    assert args["max_running_requests"] is None
    assert args["kv_cache_dtype"] == "auto" and args["moe_runner_backend"] == "auto"
    assert args["served_model_name"] == "/m" and args["tokenizer_path"] == "/m"


def test_dspark_defaults_max_running_requests_to_48() -> None:
    ns = build_parser("sglang").parse_args(["--model-path", "/m", "--speculative-algorithm", "DSPARK"])
    assert resolve(ns, DSV4)["max_running_requests"] == 48


def test_unknown_flag_exits_2_with_argparse_message() -> None:
    proc = _run("launch-server", "--model-path", "/m", "--no-such-flag", "1")
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1] == "launch_server.py: error: unrecognized arguments: --no-such-flag 1"
    assert proc.stderr.startswith("usage: launch_server.py")


def test_legacy_cuda_graph_max_bs_is_ambiguous() -> None:
    proc = _run("serve", "/m", "--cuda-graph-max-bs", "24")
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1] == (
        "sglang: error: ambiguous option: --cuda-graph-max-bs could match "
        "--cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill"
    )


def test_bad_choice_exits_2() -> None:
    proc = _run("serve", "/m", "--moe-runner-backend", "nope")
    assert proc.returncode == 2
    assert "argument --moe-runner-backend: invalid choice: 'nope'" in proc.stderr


def test_serve_positional_model_and_model_type() -> None:
    assert _normalize_serve_argv(["/model", "--tp", "4", "--model-type", "llm"]) == [
        "--model-path",
        "/model",
        "--tp",
        "4",
    ]
    assert _normalize_serve_argv(["--model-type=llm", "--model-path", "/m"]) == ["--model-path", "/m"]


def test_model_facts_from_synthetic_repo(tmp_path: Path) -> None:
    from hgxkit.sim.hub.makerepo import RepoSpec, make_repo

    repo = make_repo(tmp_path, RepoSpec(repo_id="a/b", total_bytes=64 << 10, shards=1, vocab_size=100))
    facts = ModelFacts.load(repo / "refs" / "main")
    assert facts.model_type == "deepseek_v4" and facts.dspark_block_size == 5
    assert len(facts.vocab) == 100 - 6 and facts.vocab[0] == "ba"
    assert json.loads((repo / "refs/main/config.json").read_text())["architectures"] == ["DeepseekV4ForCausalLM"]
