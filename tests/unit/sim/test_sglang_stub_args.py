"""The SGLang stand-in's command line: flags, aliases, abbreviations, errors, resolved values; and the same results
as sglang 0.5.23's real parser on the same command lines (the client store's; skipped without it, failing under CI=true)."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hgxkit.engines.sglang_serve import SERVE_OPTIONS
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
    assert proc.stderr.splitlines()[-1] == "sglang serve: error: unrecognized arguments: --no-such-flag 1"
    assert proc.stderr.startswith("usage: sglang serve")


def test_legacy_cuda_graph_max_bs_is_ambiguous() -> None:
    proc = _run("serve", "/m", "--cuda-graph-max-bs", "24")
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1] == (
        "sglang serve: error: ambiguous option: --cuda-graph-max-bs could match "
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


# --- the stand-in's parser against sglang 0.5.23's real one (the client store's) ---

REAL_PARSE = textwrap.dedent(
    """
    import argparse, contextlib, io, json, sys
    from sglang.srt.server_args import ServerArgs

    out = []
    for argv in json.load(sys.stdin):
        parser = argparse.ArgumentParser(prog="sglang serve")  # as prepare_server_args builds it
        ServerArgs.add_cli_args(parser)
        err, res = io.StringIO(), {}
        try:
            with contextlib.redirect_stderr(err):
                res["ns"] = vars(parser.parse_args(argv))
        except SystemExit as exc:
            res["exit"] = exc.code
        res["last"] = (err.getvalue().strip().splitlines() or [""])[-1]
        out.append(res)
    print(json.dumps(out, default=repr))
    """
)
COMPARED = [
    ["--model-path", "/m", "--tp", "4", "--dp", "2", "--enable-dp-attention", "--context-length", "32k"],
    ["--model", "/m", "--tensor-parallel-size=2", "--enable-hicache", "--hicache-ratio", "4"],
    ["--model-path", "/m", "--max-total-tokens", "1Ki", "--max-prefill-tokens", "1.5k", "--ep", "8"],
    ["--model-path", "/m", "--context-length", "1.5Ki"],
    ["--model-path", "/m", "--context-length", "lots"],
    ["--model-path", "/m", "--preferred-sampling-params", '{"temperature": 0}', "--sidecar-args", "[1, 2]"],
    ["--model-path", "/m", "--sidecar-args", "nope"],
    ["--model-path", "/m", "--quantization-param-path", "None", "--cuda-graph-bs-decode", "1", "2", "4"],
    ["--model-path", "/m", "--cuda-graph-backend-decode", "tc_piecewise"],
    ["--model-path", "/m", "--cuda-graph-backend-prefill", "breakable", "--cuda-graph-config", '{"decode": {}}'],
    ["--model-path", "/m", "--no-lora-strict-loading", "--lora-paths", "a=/x", '{"lora_name": "b", "lora_path": "/y"}'],
    ["--model-path", "/m", "--monokernel-backend", "amd", "--disable-cuda-graph", "--model-checksum"],
    ["--model-path", "/m", "--moe-runner-backend", "nope"],
    ["--model-path", "/m", "--kv-cache-dtype", "fp7"],
    ["--model-path", "/m", "--speculative-algo", "EAGLE", "--mem-fraction", "0.8"],
    ["--model-path", "/m", "--cuda-graph-max-bs", "8"],
    ["--model-path", "/m", "--pp", "2"],
    ["--model-path", "/m", "--max_running_requests", "8"],
    ["--model-path", "/m", "--stream-output"],
    ["--tp", "2"],
]


def test_same_results_as_sglang_0_5_23s_real_parser(client_python: Callable[[str], Path]) -> None:
    real = subprocess.run(
        [str(client_python("sglang")), "-c", REAL_PARSE],
        input=json.dumps(COMPARED),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert real.returncode == 0, real.stderr[-2000:]
    for argv, want in zip(COMPARED, json.loads(real.stdout), strict=True):
        err = io.StringIO()
        got: dict[str, Any] = {}
        try:
            with contextlib.redirect_stderr(err):
                got["ns"] = vars(build_parser("sglang serve").parse_args(argv))
        except SystemExit as exc:
            got["exit"] = exc.code
        if "exit" in want:
            assert (got.get("exit"), err.getvalue().strip().splitlines()[-1]) == (want["exit"], want["last"]), argv
            continue
        assert got.get("ns") == want["ns"], argv


SAMPLES = {"int": "1", "hrint": "1k", "float": "0.5", "json": "{}", "json_list": "[]", "cuda_graph_config": "{}"}


def _value(row: tuple) -> list[str]:
    """A value the option takes, as the command line gives it (none for a switch or an optional value)."""
    _, _, _, kind, code, nargs, choices, _, _, _ = row
    if kind in ("bool", "store_true", "deprecated_true") or nargs == "?":
        return []
    return [str(choices[0]) if choices else SAMPLES.get(code, "x")]


def test_the_standin_takes_every_option_string_of_the_table() -> None:
    parser = build_parser("sglang")
    taken, refused = 0, []
    for row in SERVE_OPTIONS:
        for option in (*row[0], *row[1]) if row[3] != "help" else ():
            err = io.StringIO()
            try:
                with contextlib.redirect_stderr(err):
                    parser.parse_args(["--model-path", "/m", option, *_value(row)])
                taken += 1
            except SystemExit:
                refused.append(err.getvalue().strip().splitlines()[-1])
    assert (refused, taken) == ([], sum(len(r[0]) + len(r[1]) for r in SERVE_OPTIONS) - 2)
