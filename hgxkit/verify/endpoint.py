"""Verify a server hgxkit did not deploy (`hgxkit verify --endpoint URL --recipe R`): an exported deployment.

The recipe's benchmark cells run with the kind's own client on this machine against the endpoint, the
results are read and gated as verify does, and the run is archived under `results/endpoint-<host>/…` with a
fingerprint of what the endpoint shows (the kind's info endpoint: version, flags) and where it ran
(`serving.endpoint`); the host itself (GPUs, driver, packages) cannot be reached from here and stays unknown.

The endpoint is a stranger: what it answers (its version, the client's output of its replies) is cleaned
(hgxkit/textinput.py) before anything is read from it, printed or archived; the URL is shown with its userinfo
masked; an API key goes only where the operator names it (`--api-key-file`, never a key inherited from this
machine's environment), and never over plain http to another host unless the operator says so.

Example:
    >>> parse_endpoint("http://10.0.0.5:5000/")
    Endpoint(url='http://10.0.0.5:5000', host='10.0.0.5', port=5000)
"""

from __future__ import annotations

import base64
import json
import re
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

from hgxkit.errors import InputError
from hgxkit.netaddr import is_loopback
from hgxkit.recipe.dump import dump_recipe, recipe_hash
from hgxkit.recipe.judge import Judged
from hgxkit.recipe.spec import Recipe
from hgxkit.results.archive import run_id_for, write_run
from hgxkit.results.fingerprint import Fingerprint
from hgxkit.results.report import run_markdown
from hgxkit.results.summary import RunSummary
from hgxkit.secrets import redact_url
from hgxkit.textinput import clean_json, clean_json_text
from hgxkit.verify.plan import BenchMode, Cell, cells_from_output, client_argv, gates, plan_cells
from hgxkit.verify.tokenizer import copy_tokenizer

Fetch = Callable[[str], tuple[int, str]]  # url -> (status, body)
RunClient = Callable[[list[str]], int]  # argv -> exit status
# Where the kinds' clients read an API key from; one inherited from this machine never goes to an endpoint.
CLIENT_KEY_VARIABLES = ("OPENAI_API_KEY", "API_KEY")
ALLOW_KEY_OVER_HTTP = "--allow-key-over-http"


@dataclass(frozen=True)
class Endpoint:
    """Where the server answers: its base URL, host and port."""

    url: str
    host: str
    port: int

    @property
    def shown(self) -> str:
        """The URL as errors, progress and archives show it: its userinfo masked."""
        return redact_url(self.url)

    @property
    def userinfo(self) -> tuple[str, ...]:
        """The user and password the URL carries (credentials to mask wherever they might be printed)."""
        parts = urlsplit(self.url)
        return tuple(unquote(v) for v in (parts.username, parts.password) if v)


def parse_endpoint(url: str) -> Endpoint:
    """`http[s]://HOST[:PORT][/]`; InputError naming the URL (its userinfo masked) otherwise."""
    shown = redact_url(url)
    try:
        parts = urlsplit(url)
    except ValueError:  # an unclosed `[` of an IPv6 address
        parts = urlsplit("")
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/") or parts.query:
        raise InputError(f"--endpoint {shown}: give the server's base URL, e.g. http://10.0.0.5:5000")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise InputError(f"--endpoint {shown}: the port is not a number from 1 to 65535") from None
    return Endpoint(f"{parts.scheme}://{parts.netloc}", parts.hostname, port)


def refuse_key_in_clear(endpoint: Endpoint, api_key: str | None, allow: bool = False) -> None:
    """InputError when a credential (the API key, the URL's user and password) would go over plain http to a
    host other than this one, where anyone on the path reads it, unless the operator allowed it (`allow`)."""
    what = "the API key" if api_key else "the URL's user and password" if endpoint.userinfo else None
    if what is None or allow or endpoint.url.startswith("https://") or is_loopback(endpoint.host):
        return
    raise InputError(
        f"--endpoint {endpoint.shown}: {what} would cross the network in clear (plain http to {endpoint.host}, "
        f"not this machine); use an https:// endpoint, or pass {ALLOW_KEY_OVER_HTTP} to send it anyway"
    )


def client_environment(environ: Mapping[str, str], api_key: str | None) -> dict[str, str]:
    """The client's environment: this machine's, without any API key it holds (an operator's OpenAI key is
    not the endpoint's business), with `api_key` where the kinds' clients read it."""
    env = {name: value for name, value in environ.items() if name not in CLIENT_KEY_VARIABLES}
    return {**env, "OPENAI_API_KEY": api_key} if api_key else env


def shown_words(words: list[str], endpoint: Endpoint) -> list[str]:
    """`words` (a client's command line) as hgxkit prints them: the endpoint's URL with its userinfo masked."""
    return [word.replace(endpoint.url, endpoint.shown) for word in words]


def endpoint_cells(recipe: Recipe, endpoint: Endpoint, mode: BenchMode, tokenizer: str | None = None) -> list[Cell]:
    """The recipe's cells (smoke or full) aimed at the endpoint's port; `tokenizer`: a local copy of the model's
    tokenizer for a client that tokenizes prompts itself (vLLM's), else the model's path in the container."""
    cells = plan_cells(recipe, mode, [(0, "endpoint")])
    return [
        replace(cell, port=endpoint.port, tokenizer=tokenizer if tokenizer and cell.tokenizer else cell.tokenizer)
        for cell in cells
    ]


def client_command(
    cell: Cell,
    endpoint: Endpoint,
    output_dir: str,
    client: list[str],
    *,
    warm: bool = False,
    tokenizer: str | None = None,
) -> list[str]:
    """`client` (the kind's client as this machine runs it) with the cell's arguments, aimed at the endpoint
    (`warm`: a repeat right after the same cell, sent without warm-up requests). The tokenizer is `tokenizer`
    (a directory here, or a Hub id): the model path the server reports, or the one in the recipe, is a path in
    the server's container, which this machine does not have."""
    argv = client_argv(cell, output_dir, warm=warm)
    # the kinds' clients ask 127.0.0.1 inside a container: SGLang's by --host (and --port), vLLM's by --base-url.
    # SGLang's makes http://HOST:PORT of --host: without --base-url an https endpoint would get its key in clear.
    if "--host" in argv:
        argv[argv.index("--host") + 1] = endpoint.host
        argv += ["--base-url", endpoint.url]
    else:
        argv[argv.index("--base-url") + 1] = endpoint.url
    if "--tokenizer" in argv:
        at = argv.index("--tokenizer")
        del argv[at : at + 2]
    if tokenizer and "--model" not in argv:
        # SGLang's client, given no --model, takes the endpoint's model id from /v1/models and loads it as a
        # tokenizer with trust_remote_code: the model it loads is the local copy, the requests name the served one.
        argv += ["--model", tokenizer, *(["--served-model-name", cell.served_name] if cell.served_name else [])]
    return [*client, *argv, *(["--tokenizer", tokenizer] if tokenizer else [])]


def _local_dataset(words: tuple[str, ...]) -> bool:
    return any(word.partition("=")[0] == "--dataset-path" for word in words)


def http_fetch(url: str, api_key: str | None = None) -> tuple[int, str]:
    """GET `url`: (status, body); status 0 when nothing answers. The credential (`api_key` as a bearer token,
    else the URL's user and password) goes in a header that a redirect does not carry to another address."""
    parts = urlsplit(url)
    request = urllib.request.Request(urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2])))
    if api_key:
        request.add_unredirected_header("Authorization", f"Bearer {api_key}")
    elif parts.username is not None:
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
        request.add_unredirected_header("Authorization", "Basic " + base64.b64encode(pair).decode())
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # http(s) only: parse_endpoint
            return response.status, response.read(1 << 20).decode("utf-8", "replace")
    except urllib.error.HTTPError as err:
        return err.code, ""
    except (OSError, ValueError):
        return 0, ""


def verify_endpoint(
    judged: Judged,
    endpoint: Endpoint,
    *,
    mode: BenchMode,
    results_dir: Path,
    client: list[str],
    workdir: Path,
    run_client: RunClient,
    fetch: Fetch | None = None,
    now: datetime | None = None,
    tokenizer: str | None = None,
    trust_tokenizer_code: bool = False,
    api_key: str | None = None,
    allow_key_over_http: bool = False,
) -> tuple[Path, RunSummary]:
    """Run the judged recipe's cells against the endpoint and archive the run (module doc); InputError when it
    does not answer.

    The client's tokenizer is a code-free copy of the local directory `tokenizer` (hgxkit/verify/tokenizer.py),
    or that directory as it is with `trust_tokenizer_code`; never one the recipe, the Hub or the endpoint names.
    `api_key` (the operator's, for the endpoint) is refused over plain http to another host unless
    `allow_key_over_http`; `fetch` (default: `http_fetch` with that key) asks the endpoint about itself.
    """
    recipe = judged.recipe
    refuse_key_in_clear(endpoint, api_key, allow_key_over_http)
    _refuse_what_runs_here(recipe, endpoint, mode, tokenizer)
    info = _server_info(recipe, endpoint, fetch or (lambda url: http_fetch(url, api_key)))
    if not trust_tokenizer_code:
        tokenizer = str(copy_tokenizer(str(tokenizer), workdir / "tokenizer").path)
    cells = endpoint_cells(recipe, endpoint, mode, tokenizer)
    workdir.mkdir(parents=True, exist_ok=True)
    for cell in cells:
        for repeat in range(cell.repeats):
            run_client(client_command(cell, endpoint, str(workdir), client, warm=repeat > 0, tokenizer=tokenizer))
    # the client's output holds the endpoint's answers (its version, error bodies): cleaned before it is read
    texts = {
        cell.file: clean_json_text((workdir / cell.file).read_text(errors="replace"))
        for cell in cells
        if (workdir / cell.file).is_file()
    }
    simulated = bool(info.get("simulated"))
    results, missing = cells_from_output(cells, texts, simulated=simulated)
    tag = (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%SZ")
    where = "endpoint-" + re.sub(r"[^A-Za-z0-9_.-]", "-", endpoint.host)
    fingerprint = _fingerprint(recipe, endpoint, info, where)
    summary = RunSummary(
        run_id=run_id_for(where, tag, recipe.name),
        host=where,
        recipe=recipe.name,
        time=tag,
        simulated=simulated,
        tool=recipe.server.server_kind.client,
        tool_version=_text(info.get("version")),
        cells=results,
        gates=missing + gates(recipe, results, mode),
        bench=mode,
    )
    markdown = run_markdown(summary, fingerprint)
    known = [value for value in (api_key, *endpoint.userinfo) if value]
    path = write_run(results_dir, summary, fingerprint, texts, markdown, known, recipe_yaml=dump_recipe(recipe))
    return path, summary


def _refuse_what_runs_here(recipe: Recipe, endpoint: Endpoint, mode: BenchMode, tokenizer: str | None) -> None:
    """Refuse, before anything is asked, what would make the client read or run a stranger's files here."""
    if not tokenizer:
        raise InputError(
            "verify --endpoint needs --tokenizer DIR: a local copy of the model's tokenizer files (the client "
            "would otherwise load the tokenizer the endpoint or the recipe names, and run its code)"
        )
    reading = [c.shape for c in endpoint_cells(recipe, endpoint, mode) if _local_dataset(c.extra_args)]
    if reading:
        raise InputError(
            f"--recipe {recipe.path or recipe.name}: cell {reading[0]} reads its prompts from --dataset-path, a "
            "path on the serving node; against an endpoint the client runs here, so drop it or use a random dataset"
        )


def _server_info(recipe: Recipe, endpoint: Endpoint, fetch: Fetch) -> dict:
    """What the endpoint says of itself (the kind's info endpoint); InputError when it is not ready."""
    kind = recipe.server.server_kind
    status, _ = fetch(endpoint.url + kind.ready_path)
    if status != 200:
        raise InputError(
            f"--endpoint {endpoint.shown}: {kind.ready_path} answered {status or 'nothing'}; start the server (or "
            f"check the address) first"
        )
    info_status, body = fetch(endpoint.url + (kind.info_path or "/version"))
    return clean_json(_json_object(body)) if info_status == 200 else {}


def _fingerprint(recipe: Recipe, endpoint: Endpoint, info: dict, where: str) -> Fingerprint:
    """What can be known of a server from outside: where it answers, what it reports, the recipe it runs."""
    return Fingerprint(
        system_name=where,
        simulated=bool(info.get("simulated")),
        serving={
            "endpoint": endpoint.shown,
            "image": recipe.image.reference,
            "image_digest": recipe.image.digest,
            "kind": recipe.server.server_kind.name,
            "server_version": _text(info.get("version")),
        },
        model={"repo_id": recipe.model.repo_id, "revision": recipe.model.revision},
        recipe={"name": recipe.name, "path": recipe.path, "hash": recipe_hash(recipe), "rendered": []},
    )


def _json_object(body: str) -> dict:
    try:
        data = json.loads(body)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _text(value: object) -> str | None:
    """A value the endpoint reports as text (its version): a string or number as text, None for an object."""
    return str(value) if isinstance(value, (str, int, float)) and not isinstance(value, bool) else None
