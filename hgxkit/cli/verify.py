"""`hgxkit verify --endpoint URL --recipe R`: benchmark and archive a server hgxkit did not deploy."""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import tempfile
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from hgxkit.errors import InputError
from hgxkit.kinds import KINDS
from hgxkit.recipe.read import load_recipe
from hgxkit.verify.tokenizer import OFFLINE_ENV

DEFAULT_STORE = "/var/lib/hgxkit/sglang-client"  # the real clients' store (`hgxkit sim client install`)


def register(groups: argparse._SubParsersAction) -> None:
    """Add the `verify` command."""
    parser = groups.add_parser(
        "verify",
        help="benchmark a running server (e.g. an exported deployment) with the recipe's cells and archive the run",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run the recipe's benchmark with its kind's own client on this machine against a server that "
        "answers at --endpoint, and archive the run like any other, marked with where it ran.",
        epilog="examples:\n"
        "  hgxkit verify --endpoint http://127.0.0.1:5000 --recipe recipes/deepseek-v4-flash-dspark-marlin.yaml \\\n"
        "      --tokenizer ~/tokenizers/DeepSeek-V4-Flash\n"
        "  hgxkit verify --endpoint http://10.0.0.5:8000 --recipe r.yaml --tokenizer tok/ --bench full \\\n"
        "      --client 'vllm bench serve'",
    )
    parser.add_argument("--endpoint", required=True, help="the server's base URL")
    parser.add_argument("--recipe", required=True, help="the recipe the server runs")
    parser.add_argument(
        "--bench",
        choices=("smoke", "full"),
        default="smoke",
        help="smoke: one cell per group, once; full: the recipe's matrix with repeats",
    )
    parser.add_argument(
        "--results-dir", type=Path, default=Path("results"), help="where the run is archived (default: ./results)"
    )
    parser.add_argument("--client", help="the kind's benchmark client command (default: from the client store)")
    parser.add_argument(
        "--tokenizer",
        metavar="DIR",
        help="a local copy of the model's tokenizer files; the client gets a copy of their data, without code",
    )
    parser.add_argument(
        "--trust-tokenizer-code",
        action="store_true",
        help="hand the client --tokenizer as it is: Python code the tokenizer names then RUNS ON THIS MACHINE",
    )
    parser.set_defaults(handler=_cmd_verify)


def default_client(kind: str, store: Path) -> tuple[list[str], dict[str, str]]:
    """The kind's client from the store, and its environment: the module run by the store's python, with the
    store's extra layer (`<store>/*-site`) that holds the module's package on PYTHONPATH, if one does."""
    module, prefix = KINDS[kind].bench.modules[0]
    package = module.split(".")[0]
    layers = [str(layer) for layer in sorted(store.glob("*-site")) if (layer / package).is_dir()]
    env = {"PYTHONPATH": os.pathsep.join(layers)} if layers else {}
    return [str(store / "bin" / "python"), "-m", module, *prefix], env


def _cmd_verify(args: argparse.Namespace) -> int:
    from hgxkit.verify.endpoint import parse_endpoint, verify_endpoint  # the results stack: only when it runs

    recipe = load_recipe(args.recipe)
    endpoint = parse_endpoint(args.endpoint)
    store = Path(os.environ.get("HGXKIT_SGLANG_CLIENT_VENV", DEFAULT_STORE))
    client, env = (
        (shlex.split(args.client), {}) if args.client else default_client(recipe.server.server_kind.name, store)
    )
    if not args.client and not (store / "bin" / "python").is_file():
        raise InputError(f"no client store at {store}: pass --client 'COMMAND' (the kind's benchmark client)")
    err = Console(stderr=True, soft_wrap=True)

    def run_client(argv: list[str]) -> int:
        err.print(f"running {escape(shlex.join(argv[:6]))} …")
        return subprocess.run(argv, check=False, env={**os.environ, **env, **OFFLINE_ENV}).returncode

    with tempfile.TemporaryDirectory(prefix="hgxkit-verify-") as workdir:
        path, summary = verify_endpoint(
            recipe,
            endpoint,
            mode=args.bench,
            results_dir=args.results_dir,
            client=client,
            workdir=Path(workdir),
            run_client=run_client,
            tokenizer=args.tokenizer,
            trust_tokenizer_code=args.trust_tokenizer_code,
        )
    err.print(f"run archived in {escape(str(path))} (hgxkit results show {escape(summary.run_id)})")
    for gate in summary.gates:
        err.print(f"gate failed: {escape(gate)}")
    return 1 if summary.gates else 0
