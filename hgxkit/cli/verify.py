"""`hgxkit verify --endpoint URL --recipe R`: benchmark and archive a server hgxkit did not deploy.

The client's output is the endpoint's text as much as the client's (it prints the server's answers): it is
relayed line by line through the one sanitiser (hgxkit/textinput.py) and the scrubber, never straight to the
terminal.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import IO

from rich.console import Console
from rich.markup import escape

from hgxkit.cli.allowances import allowance_options, allowances
from hgxkit.errors import InputError
from hgxkit.kinds import KINDS
from hgxkit.recipe.judge import judge
from hgxkit.recipe.read import load_recipe
from hgxkit.secrets import redact
from hgxkit.textinput import clean_text, read_text_file
from hgxkit.verify.tokenizer import OFFLINE_ENV

DEFAULT_STORE = "/var/lib/hgxkit/sglang-client"  # the real clients' store (`hgxkit sim client install`)
MAX_KEY_BYTES = 64 << 10
CLIENT_MARK = "  client| "  # the start of every line the client printed


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
        "      --client 'vllm bench serve'\n"
        "  hgxkit verify --endpoint https://serve.example:8443 --recipe r.yaml --tokenizer tok/ \\\n"
        "      --api-key-file ~/.config/serve.key\n"
        "  hgxkit verify --endpoint http://10.0.0.5:8000 --recipe r.yaml --tokenizer tok/ \\\n"
        "      --api-key-file key.txt --allow-key-over-http     # a lab network you trust",
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
    parser.add_argument(
        "--api-key-file",
        metavar="FILE",
        help="the server's API key, sent as a bearer token (an OPENAI_API_KEY or API_KEY of this shell is never "
        "sent); refused over plain http to another host without --allow-key-over-http",
    )
    parser.add_argument(
        "--allow-key-over-http",
        action="store_true",
        help="send the API key (or the URL's user:password) over plain http to a host other than this one, where "
        "ANYONE ON THE NETWORK PATH CAN READ IT",
    )
    allowance_options(parser, bind=False)
    parser.set_defaults(handler=_cmd_verify)


def default_client(kind: str, store: Path) -> tuple[list[str], dict[str, str]]:
    """The kind's client from the store, and its environment: the module run by the store's python, with the
    store's extra layer (`<store>/*-site`) that holds the module's package on PYTHONPATH, if one does."""
    module, prefix = KINDS[kind].bench.modules[0]
    package = module.split(".")[0]
    layers = [str(layer) for layer in sorted(store.glob("*-site")) if (layer / package).is_dir()]
    env = {"PYTHONPATH": os.pathsep.join(layers)} if layers else {}
    return [str(store / "bin" / "python"), "-m", module, *prefix], env


def read_api_key(name: str | None) -> str | None:
    """The key in file `name` (one line; surrounding white space dropped), None without a file."""
    if name is None:
        return None
    key = read_text_file(name, MAX_KEY_BYTES).strip()
    if not key or "\n" in key:
        raise InputError(f"--api-key-file {name}: put the server's API key in it, alone on one line")
    return key


def relay(stream: IO[bytes], out: IO[str], known: Iterable[str]) -> None:
    """Copy a client's output to `out` line by line, cleaned and scrubbed, each line marked as the client's (a
    line break in a server's text it prints cannot forge a line of hgxkit's own); of a line a progress bar
    redraws with carriage returns, the last state."""
    for raw in stream:
        line = raw.decode("utf-8", "replace").rstrip("\r\n").split("\r")[-1]
        out.write(CLIENT_MARK + redact(clean_text(line), known) + "\n")
        out.flush()


def run_relayed(argv: list[str], env: dict[str, str], known: list[str]) -> int:
    """Run the client with its standard output and error relayed (`relay`); its exit status."""
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert process.stdout is not None and process.stderr is not None
    errors = threading.Thread(target=relay, args=(process.stderr, sys.stderr, known), daemon=True)
    errors.start()
    relay(process.stdout, sys.stdout, known)
    errors.join()
    return process.wait()


def _cmd_verify(args: argparse.Namespace) -> int:
    from hgxkit.verify.endpoint import (  # the results stack: only when it runs
        client_environment,
        parse_endpoint,
        refuse_key_in_clear,
        shown_words,
        verify_endpoint,
    )

    # judged as a node would judge it: a recipe no node would serve is not verified either
    judged = judge(load_recipe(args.recipe), allowances(args))
    recipe = judged.recipe
    endpoint = parse_endpoint(args.endpoint)
    api_key = read_api_key(args.api_key_file)
    refuse_key_in_clear(endpoint, api_key, args.allow_key_over_http)
    store = Path(os.environ.get("HGXKIT_SGLANG_CLIENT_VENV", DEFAULT_STORE))
    client, env = (
        (shlex.split(args.client), {}) if args.client else default_client(recipe.server.server_kind.name, store)
    )
    if not args.client and not (store / "bin" / "python").is_file():
        raise InputError(f"no client store at {store}: pass --client 'COMMAND' (the kind's benchmark client)")
    err = Console(stderr=True, soft_wrap=True)
    known = [value for value in (api_key, *endpoint.userinfo) if value]
    client_env = {**client_environment(os.environ, api_key), **env, **OFFLINE_ENV}

    def run_client(argv: list[str]) -> int:
        shown = redact(clean_text(shlex.join(shown_words(argv[:6], endpoint))), known)
        err.print(f"running {escape(shown)} …")
        return run_relayed(argv, client_env, known)

    with tempfile.TemporaryDirectory(prefix="hgxkit-verify-") as workdir:
        path, summary = verify_endpoint(
            judged,
            endpoint,
            mode=args.bench,
            results_dir=args.results_dir,
            client=client,
            workdir=Path(workdir),
            run_client=run_client,
            tokenizer=args.tokenizer,
            trust_tokenizer_code=args.trust_tokenizer_code,
            api_key=api_key,
            allow_key_over_http=args.allow_key_over_http,
        )
    err.print(f"run archived in {escape(str(path))} (hgxkit results show {escape(summary.run_id)})")
    for gate in summary.gates:
        err.print(f"gate failed: {escape(redact(clean_text(gate), known))}")
    return 1 if summary.gates else 0
