"""The vLLM stand-in's command line: vLLM 0.33's options, aliases, spellings and refusals.

Most tests pin the behaviour with exact values and messages (observed with vLLM 0.33.0's real parser); one
test runs the REAL parser from the client store on the same command lines and compares (skipped without the
store, failing under CI=true).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from hgxkit.engines.vllm_serve import SERVE_OPTIONS, VLLM_VERSION
from hgxkit.sim.standin import client_store
from hgxkit.sim.standin.vllm import args as vargs

ROOT = Path(__file__).resolve().parents[3]


def _serve(*argv: str) -> Any:
    ns, _ = vargs.parse_serve(list(argv))
    return ns


def _cli(*argv: str, module: str = "serve") -> subprocess.CompletedProcess[str]:
    """The stand-in's command line in a subprocess (argparse exits the process)."""
    return subprocess.run(
        [sys.executable, "-m", "hgxkit.sim.standin.vllm", module, *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "80"},
    )


def test_the_table_is_vllm_0_33s_serve_parser() -> None:
    assert VLLM_VERSION == "0.33.0" and len(SERVE_OPTIONS) > 300
    dests = {row[2] for row in SERVE_OPTIONS}
    assert {"model_tag", "model", "tensor_parallel_size", "speculative_config", "api_key", "served_model_name"} <= dests


@pytest.mark.parametrize(
    ("argv", "dest", "value"),
    [
        (["-tp", "4"], "tensor_parallel_size", 4),
        (["-pp", "2"], "pipeline_parallel_size", 2),
        (["-dp", "2"], "data_parallel_size", 2),
        (["-dpl", "1"], "data_parallel_size_local", 1),
        (["-q", "fp8"], "quantization", "fp8"),
        (["-asc", "2"], "api_server_count", 2),
        (["-ep"], "enable_expert_parallel", True),
        (["-n", "2"], "nnodes", 2),
        (["-r", "1"], "node_rank", 1),
        (
            ["-sc", '{"method": "mtp", "num_speculative_tokens": 3}'],
            "speculative_config",
            {"method": "mtp", "num_speculative_tokens": 3},
        ),
        (["-O3"], "optimization_level", "3"),
        (["-O", "1"], "optimization_level", "1"),
        (["-O=0"], "optimization_level", "0"),
    ],
)
def test_short_aliases(argv: list[str], dest: str, value: Any) -> None:
    assert getattr(_serve("m", *argv), dest) == value


def test_spellings_underscores_equals_and_prefixes() -> None:
    ns = _serve(
        "m",
        "--tensor_parallel_size",
        "2",
        "--enable_expert_parallel",
        "--max_model_len=32k",
        "--gpu-memory-util",
        "0.8",
    )
    assert (ns.tensor_parallel_size, ns.enable_expert_parallel, ns.max_model_len) == (2, True, 32000)
    assert ns.gpu_memory_utilization == 0.8  # argparse prefix abbreviation stays on, as in vLLM
    assert _serve("m", "--max-model-len", "32K").max_model_len == 32768
    assert _serve("m", "--max-model-len", "auto").max_model_len == -1


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--enable-prefix-caching", True),
        ("--no-enable-prefix-caching", False),
        ("--disable-prefix-caching", False),
        ("--enable-log-requests", True),
        ("--disable-log-requests", False),  # 0.9.2's spelling still parses, as the inverse
    ],
)
def test_enable_disable_bools(flag: str, value: bool) -> None:
    dest = "enable_prefix_caching" if "prefix" in flag else "enable_log_requests"
    assert getattr(_serve("m", flag), dest) is value


def test_positional_model_and_the_deprecated_model_flag() -> None:
    ns, warnings = vargs.parse_serve(["org/model", "-tp", "2"])
    assert (ns.model, ns.model_tag, warnings) == ("org/model", "org/model", [])
    ns, warnings = vargs.parse_serve(["-tp", "2", "--model", "org/model", "--port", "8001"])
    assert (ns.model, ns.tensor_parallel_size, ns.port) == ("org/model", 2, 8001)
    assert warnings == [vargs.MODEL_FLAG_WARNING]
    assert vargs.parse_serve(["--model=org/m"])[0].model == "org/m"
    ns, _ = vargs.parse_serve([])
    assert ns.model == vargs.DEFAULT_MODEL == "Qwen/Qwen3-0.6B" and ns.port == 8000 and ns.host is None


def test_served_model_name_without_a_positional_model_is_refused() -> None:
    with pytest.raises(vargs.ServeArgsError, match=r"^`model` should be provided as the first positional argument"):
        vargs.parse_serve(["--served-model-name", "x"])
    assert _serve("m", "--served-model-name", "a", "b").served_model_name == ["a", "b"]


def test_api_server_module_ignores_a_positional_model() -> None:
    ns, _ = vargs.parse_api_server(["org/positional", "-tp", "2"])
    assert ns.model == "Qwen/Qwen3-0.6B" and ns.model_tag == "org/positional"  # vLLM 0.33's trap, kept
    assert vargs.parse_api_server(["--model", "org/m"])[0].model == "org/m"


def test_dotted_json_keys_merge_and_duplicates_warn() -> None:
    ns, warnings = vargs.parse_serve(
        [
            "m",
            "--speculative-config.method",
            "mtp",
            "--speculative-config.num_speculative_tokens",
            "3",
            "-tp",
            "2",
            "-tp",
            "4",
        ]
    )
    assert ns.speculative_config == {"method": "mtp", "num_speculative_tokens": 3} and ns.tensor_parallel_size == 4
    assert warnings == []  # -tp is not a --long flag: vLLM's duplicate check does not see it
    ns, warnings = vargs.parse_serve(["m", "--port", "1", "--port", "2", "--compilation-config.mode+", "a,b"])
    assert ns.port == 2 and warnings == ["Found duplicate keys --port"]


def test_config_file_keys_become_flags_and_the_command_line_wins(tmp_path: Path) -> None:
    cfg = tmp_path / "serve.yaml"
    cfg.write_text(
        "port: 8123\ntensor-parallel-size: 4\nenable-prefix-caching: false\nspeculative-config:\n  method: mtp\n  num_speculative_tokens: 2\n"
    )
    ns = _serve("m", "--config", str(cfg), "-tp", "8")
    assert (ns.port, ns.tensor_parallel_size, ns.enable_prefix_caching) == (8123, 8, False)
    assert ns.speculative_config == {"method": "mtp", "num_speculative_tokens": 2}
    (tmp_path / "c.json").write_text("{}")
    with pytest.raises(vargs.ServeArgsError, match=r"Config file must be of a yaml/yml type\. json supplied"):
        _serve("m", "--config", str(tmp_path / "c.json"))


def test_unknown_flag_is_refused_by_the_top_level_parser_with_exit_2() -> None:
    res = _cli("m", "--foo", "1")
    assert res.returncode == 2
    assert res.stderr.splitlines()[-1] == "vllm: error: unrecognized arguments: --foo 1"
    assert res.stderr.startswith("usage: vllm [-h] [-v]")


def test_task_flag_gets_vllms_hint() -> None:
    res = _cli("m", "--task", "embed")
    assert res.returncode == 2 and "vllm: error: unrecognized arguments: --task embed" in res.stderr
    assert res.stderr.rstrip().endswith("also use --convert embed, --convert classify, or --convert reward.")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-tp", "x"], "vllm serve: error: argument --tensor-parallel-size/-tp: invalid int value: 'x'"),
        (["--port", "abc"], "vllm serve: error: argument --port: invalid int value: 'abc'"),
        (
            ["--max-model-len", "abc"],
            "vllm serve: error: argument --max-model-len: invalid human_readable_int_or_auto value: 'abc'",
        ),
        (
            ["--max-log-len", "x"],
            "vllm serve: error: argument --max-log-len: Value x cannot be converted to <class 'int'>.",
        ),
        (
            ["--dtype", "fp7"],
            "vllm serve: error: argument --dtype: invalid choice: 'fp7' (choose from 'auto', 'bfloat16', 'float', 'float16', 'float32', 'half')",
        ),
    ],
)
def test_bad_values_fail_in_the_serve_subparser(argv: list[str], message: str) -> None:
    res = _cli("m", *argv)
    assert res.returncode == 2
    assert res.stderr.splitlines()[0] == "usage: vllm serve [model_tag] [options]"
    assert res.stderr.splitlines()[-1] == message


def test_api_server_module_errors_name_its_prog() -> None:
    res = _cli("--model", "m", "--foo", module="api-server")
    assert res.returncode == 2 and res.stderr.splitlines()[-1] == "api_server.py: error: unrecognized arguments: --foo"


def test_non_default_args_are_logged_with_secrets_redacted() -> None:
    ns = _serve("m", "-tp", "2", "--api-key", "k1", "k2")
    assert vargs.non_default(ns) == {"model_tag": "m", "model": "m", "tensor_parallel_size": 2, "api_key": "***"}


# -- against the REAL parser ---------------------------------------------------------------------------------

# Run by the client store's python: vLLM 0.33's real `vllm serve` parser on each argv (stdin: a JSON list).
REAL_PARSE = textwrap.dedent(
    """
    import contextlib, io, json, sys
    from vllm import platforms
    from vllm.platforms.cpu import CpuPlatform
    platforms.current_platform = CpuPlatform()  # like `vllm bench` on a GPU-less host
    from vllm.utils.argparse_utils import FlexibleArgumentParser
    from vllm.entrypoints.common.cli_args import make_arg_parser
    import vllm.entrypoints.cli.serve as serve

    def plain(v):
        try:
            json.dumps(v)
            return v
        except TypeError:
            return {"__object__": type(v).__name__}

    out = []
    for argv in json.load(sys.stdin):
        err, res = io.StringIO(), {}
        try:
            with contextlib.redirect_stderr(err):
                if argv[:1] == ["@api_server"]:
                    ns = make_arg_parser(FlexibleArgumentParser(prog="api_server.py")).parse_args(argv[1:])
                else:
                    top = FlexibleArgumentParser(prog="vllm")
                    serve.ServeSubcommand().subparser_init(top.add_subparsers(dest="subparser"))
                    ns = top.parse_args(["serve", *argv])
                    if ns.model_tag:
                        ns.model = ns.model_tag  # what `vllm serve` does before anything uses it
            res["ns"] = {k: plain(v) for k, v in vars(ns).items() if k not in ("dispatch_function", "subparser")}
        except SystemExit as e:
            res["exit"] = e.code
        except Exception as e:
            res["error"] = f"{type(e).__name__}: {e}"
        res["last"] = (err.getvalue().strip().splitlines() or [""])[-1]
        out.append(res)
    json.dump(out, sys.stdout)
    """
)
COMPARED = [
    ["m", "-tp", "2", "-pp", "2", "--enable_expert_parallel", "--max_model_len=32k"],
    ["--model", "org/m", "-tp=4", "--port", "8001", "--host", "0.0.0.0"],
    ["m", "--no-enable-prefix-caching", "--disable-log-requests", "--enable-chunked-prefill"],
    ["m", "--speculative-config.method", "mtp", "--speculative-config.num_speculative_tokens", "3"],
    ["m", "-sc", '{"method": "eagle3", "model": "d", "num_speculative_tokens": 2}', "-O3"],
    ["m", "--served-model-name", "a", "b", "--api-key", "k", "--max-num-seqs", "64", "--kv-cache-dtype", "fp8"],
    ["m", "-dp", "2", "-dpl", "1", "--data-parallel-address", "10.0.0.1", "--headless", "-n", "2", "-r", "1"],
    ["m", "--gpu-memory-util", "0.8", "--max-model", "8192", "--trust-remote-code", "--seed", "7"],
    ["m", "--foo", "1"],
    ["m", "--task", "embed"],
    ["m", "-tp", "x"],
    ["m", "--max-model-len", "abc"],
    ["m", "--max-log-len", "x"],
    ["m", "--dtype", "fp7"],
    ["m", "extra-positional"],
    ["--served-model-name", "x"],
    ["@api_server", "pos", "-tp", "2"],
    ["@api_server", "--model", "m", "--foo"],
]


@pytest.fixture()
def real_vllm_python() -> list[str]:
    """The client store's python with vLLM's layer (HGXKIT_VLLM_CLIENT_VENV, else HGXKIT_SGLANG_CLIENT_VENV)."""
    venv = os.environ.get("HGXKIT_VLLM_CLIENT_VENV") or os.environ.get("HGXKIT_SGLANG_CLIENT_VENV")
    cmd = client_store.vllm_python(Path(venv)) if venv else None
    if cmd is None:
        if os.environ.get("CI") == "true":
            pytest.fail(
                f"CI=true but no vLLM client in the client store ({venv or 'unset'}): `hgxkit sim client install`"
            )
        pytest.skip("needs the client store with vLLM's client (HGXKIT_VLLM_CLIENT_VENV or HGXKIT_SGLANG_CLIENT_VENV)")
    return cmd


def _standin(argv: list[str]) -> dict[str, Any]:
    api = argv[:1] == ["@api_server"]
    code = (
        "import json, sys\nfrom hgxkit.sim.standin.vllm import args as a\n"
        "argv = json.loads(sys.argv[1])\n"
        "try:\n"
        "    ns, _ = (a.parse_api_server(argv[1:]) if argv[:1] == ['@api_server'] else a.parse_serve(argv))\n"
        "    print(json.dumps({'ns': {k: v for k, v in vars(ns).items()}}, default=lambda o: {'__object__': 1}))\n"
        "except a.ServeArgsError as e:\n"
        "    print(json.dumps({'error': f'ValueError: {e}'}))\n"
    )
    res = subprocess.run([sys.executable, "-c", code, json.dumps(argv)], cwd=ROOT, capture_output=True, text=True)
    out: dict[str, Any] = json.loads(res.stdout) if res.stdout.strip() else {"exit": res.returncode}
    out["last"] = (res.stderr.strip().splitlines() or [""])[-1]
    if api:
        out.setdefault("ns", None)
    return out


def test_same_results_as_vllm_0_33s_real_parser(tmp_path: Path, real_vllm_python: list[str]) -> None:
    script = tmp_path / "real_parse.py"
    script.write_text(REAL_PARSE)
    real = subprocess.run(
        [*real_vllm_python, str(script)], input=json.dumps(COMPARED), capture_output=True, text=True, timeout=300
    )
    assert real.returncode == 0, real.stderr[-2000:]
    for argv, want in zip(COMPARED, json.loads(real.stdout), strict=True):
        got = _standin(argv)
        if "exit" in want or "error" in want:
            assert got.get("exit") == want.get("exit") and got.get("error") == want.get("error"), argv
            if "exit" in want:
                assert got["last"] == want["last"], argv
            continue
        assert "ns" in got and got["ns"] is not None, (argv, got)
        compared = 0
        for key, value in want["ns"].items():
            if isinstance(value, dict) and "__object__" in value:
                continue  # a config object (pydantic) in vLLM; the stand-in keeps the JSON
            assert got["ns"].get(key) == value, (argv, key, got["ns"].get(key), value)
            compared += 1
        assert compared > 280, argv
