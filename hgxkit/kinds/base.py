"""What a server kind is: `ServerKind` and the strategy records an engine module fills in.

Its benchmark client as verify runs it (`BenchClient`), the clients posts use (`PostedClient`), its /metrics
names (`KindMetrics`).

Nothing here names an engine; hgxkit/kinds/sglang.py and hgxkit/kinds/vllm.py are the engines, and the
registry that holds them is hgxkit/kinds/__init__.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from hgxkit.kinds.lengths import Draw, Rule
from hgxkit.results.kind_metrics import KindMetrics

if TYPE_CHECKING:
    from hgxkit.results.bench import BenchRecord


class BenchCell(Protocol):
    """What a kind's benchmark client reads of one cell (hgxkit.verify.plan.Cell has these)."""

    port: int
    input_len: int
    concurrency: int | None
    num_prompts: int
    output_len: int | None
    served_name: str | None
    tokenizer: str | None
    request_rate: float | None
    dataset: str | None
    draw: Draw | None  # the lengths and ratio to give the client; None: the cell's lengths, fixed
    seed: int | None
    extra_args: tuple[str, ...]

    @property
    def file(self) -> str: ...


@dataclass(frozen=True)
class BenchClient:
    """How verify runs a kind's own benchmark client inside its serving container, and reads what it wrote."""

    # (module run as __main__, arguments before the client's own): the first that imports in the container runs.
    modules: tuple[tuple[str, tuple[str, ...]], ...]
    suffix: str  # of the output file the client writes (`g0_smoke.jsonl`)
    lengths: Rule  # how the client reads --random-input-len/-output-len/-range-ratio (hgxkit.kinds.lengths)
    # (cell, output directory, warm-up requests as text) -> the client's arguments after `modules`' prefix
    argv: Callable[[BenchCell, str, str], list[str]]
    # (output file text, cell) -> one record per run in it; ValueError for a damaged file
    parse: Callable[[str, BenchCell], list[BenchRecord]]
    # The flags a recipe's cell may add (`extra_args`): what shapes the load. Never where the client connects
    # or writes, nor code it loads: verify --endpoint runs the client on the operator's machine.
    extra_flags: frozenset[str] = frozenset()
    ignores_eos: bool = False  # generates every requested output token unless told otherwise (SGLang's)


# Flags of the clients' own that a recipe never sets: the results files hgxkit names. (`--trust-remote-code`
# may stay: on a node the client runs in the serving container; against an endpoint it reads hgxkit's code-free
# copy of the tokenizer, hgxkit/verify/tokenizer.py.)
NOT_EXTRA_FLAGS = frozenset({"--save-result", "--save-detailed", "--append-result", "--output-details"})


def extra_flags(client: PostedClient) -> frozenset[str]:
    """The posted client's workload flags a recipe may add to the kind's own (`BenchClient.extra_flags`)."""
    return frozenset({*client.switches, *client.others}) - NOT_EXTRA_FLAGS


@dataclass(frozen=True)
class PostedClient:
    """One benchmark client people post: how it is launched, its flags per cell setting, its defaults
    (read by hgxkit/recipe/clients.py into a matrix cell)."""

    name: str
    programs: tuple[tuple[str, ...], ...]
    settings: dict[str, tuple[str, ...]]  # cell setting -> flag spellings (first is canonical)
    defaults: dict[str, object]  # written into a cell when the post leaves the setting to the client
    switches: frozenset[str]  # flags that take no value
    connection: dict[str, tuple[str, ...]] = field(default_factory=dict)  # model/host/port/url -> flags
    output: tuple[str, ...] = ()  # flags about where results go: dropped
    abbreviations: bool = True  # argparse: a unique prefix of a flag is that flag
    version: str = ""  # the release whose defaults `defaults` are
    others: tuple[str, ...] = ()  # its other flags, so that an abbreviation is only read where it is unique
    script: str | None = None  # a `python3 SCRIPT` launch: the script's path (regex), for repository scripts
    printed: str | None = None  # how results a post prints name this client (regex), None: they never do


# The flags that say where the server is, shared by the clients that follow vLLM's and SGLang's spelling.
CONNECTION_FLAGS = {
    "model": ("--model",),
    "host": ("--host",),
    "port": ("--port",),
    "url": ("--base-url",),
    "tokenizer": ("--tokenizer",),
    "served": ("--served-model-name",),
}


@dataclass(frozen=True)
class DataParallelHosts:
    """The flags of a server's own data parallelism over hosts (one server, its DP ranks spread over hosts)."""

    local_flag: str  # the DP ranks this host runs
    start_flag: str  # the first DP rank this host runs (ranks >= 1 only)
    head_flag: str  # the head's address
    port_flag: str  # the head's RPC port
    default_port: int  # the RPC port when the command gives none


@dataclass(frozen=True)
class RayCluster:
    """A server whose workers a Ray cluster places over hosts: the head runs `ray start --head` and then the
    server, every other host `ray start --block --address=HEAD:PORT` (Ray's own CLI, in the engine's image)."""

    backend: tuple[str, str]  # the server flag and value that select Ray
    port: int = 6379  # `ray start --head --port` (Ray's default GCS port)
    shell: str = "/bin/bash"  # the containers' entrypoint: both commands run in it

    def head_command(self, head: str, port: int, server: Sequence[str]) -> tuple[str, ...]:
        """The head's container command: start the Ray head, then `exec` the server (argv kept word for word)."""
        script = f'ray start --head --node-ip-address={head} --port={port} && exec "$@"'
        return ("-c", script, "ray-head", *server)

    def worker_command(self, head: str, port: int) -> tuple[str, ...]:
        """A worker host's container command: join the head's cluster and stay in it."""
        return ("-c", f"exec ray start --block --address={head}:{port}")


@dataclass(frozen=True)
class PDRouter:
    """The router that joins a split of this kind in PD mode: its Python module, the flag that turns PD mode on,
    the policies it takes for both sides, whether `--prefill URL` is followed by the prefill's bootstrap port,
    flags it always gets, the container image that holds it (the router role's `router_image` when unset), the
    program that starts it there (`python3 -m MODULE` when empty), and why it cannot front groups that want an
    API key (None: it takes the key with `--api-key`, checks the clients' and sends it on).

    >>> PDRouter("r.launch", "--pd", ("random",), True).launch
    ('python3', '-m', 'r.launch')
    """

    module: str
    pd_flag: str
    policies: tuple[str, ...]
    bootstrap: bool
    extra: tuple[str, ...] = ()
    image: str | None = None
    program: tuple[str, ...] = ()
    keyless: str | None = None

    @property
    def launch(self) -> tuple[str, ...]:
        """The words that start the router in its image (the first is the container's entrypoint)."""
        return self.program or ("python3", "-m", self.module)


@dataclass(frozen=True)
class SideChannel:
    """A port that every server of a split (either side) binds on its host, set by an environment variable;
    with data parallelism each rank binds the next one (port + DP rank)."""

    env: str
    default: int


@dataclass(frozen=True)
class PrefillDecode:
    """How a server of this kind is the prefill or the decode side of a split that hgxkit deploys: the values of
    `ServerKind.disaggregation`'s flag that name each side (or of `role_key` in that flag's JSON object), the
    prefill's bootstrap port (the decode side fetches the KV from it; the router tells the decode where), the
    transfer backend, the side channel every server binds, and the router that joins the sides."""

    prefill: str  # the flag's value on a prefill server
    decode: str
    bootstrap_flag: str | None  # the prefill's bootstrap server port; None: no bootstrap port
    default_bootstrap_port: int | None  # when the command gives none
    backend_flag: str  # the KV transfer backend
    default_backend: str
    backends: tuple[str, ...]  # the transfer backends a deployment is known to work with
    router: PDRouter
    role_key: str | None = None  # the flag's value is a JSON object whose `role_key` names the side
    backend_key: str | None = None  # the backend flag's value is a JSON object whose `backend_key` names it
    side_channel: SideChannel | None = None
    imported: bool = True  # posts of this split are imported (hgxkit/importing/pd_join.py joins their sides)
    # The role value a post may give both sides when its router or proxy decides which is which (vLLM's kv_both);
    # None: every side names its own.
    either: str | None = None
    # The ports a posted router or proxy command sends prefills and decodes to, (prefill ports, decode ports), from
    # its words; None for a command that is no such router.
    posted_router: Callable[[Sequence[str]], tuple[tuple[int, ...], tuple[int, ...]] | None] | None = None
    router_programs: tuple[str, ...] = ()  # the first words of a posted router command (a post's command, not prose)

    def role(self, value: str | None) -> str | None:
        """'prefill', 'decode', or None for a server that does both.

        >>> R = PDRouter("m", "--pd", ("random",), True)
        >>> PrefillDecode("prefill", "decode", "--b", 1, "--t", "m", ("m",), R).role("decode")
        'decode'
        >>> PrefillDecode("kv_producer", "kv_consumer", None, None, "--c", "", ("N",), R, "kv_role").role(
        ...     '{"kv_connector":"N","kv_role":"kv_consumer"}')
        'decode'
        """
        found = json_key(value, self.role_key) if self.role_key else value
        return {self.prefill: "prefill", self.decode: "decode"}.get(found or "")

    def with_role(self, value: str, role: str) -> str:
        """The side flag's `value` naming `role` ('prefill' or 'decode'): the JSON object's `role_key` rewritten in
        place (the rest as written), or the bare value.

        >>> R = PDRouter("m", "--pd", ("random",), True)
        >>> PrefillDecode("kv_producer", "kv_consumer", None, None, "--c", "", ("N",), R, "kv_role").with_role(
        ...     '{"kv_connector":"N", "kv_role": "kv_both"}', "prefill")
        '{"kv_connector":"N", "kv_role": "kv_producer"}'
        """
        word = self.prefill if role == "prefill" else self.decode
        if not self.role_key:
            return word
        key = re.escape(self.role_key)
        return re.sub(rf'("{key}"\s*:\s*")[^"]*(")', lambda m: f"{m.group(1)}{word}{m.group(2)}", value, count=1)

    def backend(self, value: str | None) -> str:
        """The transfer backend a server's backend flag value names (the default when it names none)."""
        found = json_key(value, self.backend_key) if self.backend_key else value
        return found or self.default_backend


def json_key(value: str | None, key: str | None) -> str | None:
    """The string at `key` of the JSON object `value` (the words of a flag such as vLLM's --kv-transfer-config),
    None when it is no JSON object or lacks the key.

    >>> json_key('{"kv_role": "kv_both"}', "kv_role"), json_key("{kv_role: x", "kv_role")
    ('kv_both', None)
    """
    try:
        doc = json.loads(value or "")
    except ValueError:
        return None
    found = doc.get(key) if isinstance(doc, dict) and key else None
    return found if isinstance(found, str) else None


@dataclass(frozen=True)
class ServerKind:
    """One serving engine: its command line, network defaults, endpoints, API key, benchmark client, metrics."""

    name: str
    title: str
    images: tuple[str, ...]  # image repositories (without tag) that hold this engine
    programs: tuple[tuple[str, ...], ...]  # how its server is launched (first words of the container command)
    flag_aliases: dict[str, str]  # alias -> canonical spelling
    underscores_are_dashes: bool  # `--max_model_len` == `--max-model-len` (vLLM's FlexibleArgumentParser)
    positional_model: bool  # `vllm serve MODEL`, `sglang serve MODEL`
    model_flag: str  # canonical flag naming the model
    tp_flag: str
    pp_flag: str
    dp_flag: str
    default_host: str  # where the server listens unless --host says otherwise
    default_port: int
    health_path: str  # 200 only when the server can generate (the serving role waits on it)
    ready_path: str  # 200 when it answers at all (verify asks this before judging)
    info_path: str | None  # version / server info (fingerprint)
    metrics_path: str
    metrics_flag: str | None  # flag that turns /metrics on; None: always on
    api_key_env: str | None  # environment variable the server reads its API key from; None: only --api-key
    client: str  # the engine's own benchmark client, as results name it
    client_backend: str  # its --backend for this engine
    flush_cache: bool  # the server has /flush_cache (the client's --flush-cache)
    default_image: str  # for a bare launch imported without --image
    bench: BenchClient  # how verify runs `client`
    metrics: KindMetrics  # its /metrics names
    posted_clients: tuple[PostedClient, ...] = ()  # benchmark clients of this engine that posts use
    image_entrypoint: tuple[str, ...] = ()  # the official image's ENTRYPOINT, when it is the server itself
    speculative_flags: tuple[str, ...] = ()  # flags that turn speculative decoding on
    # Flags whose values are Python import paths the server imports at start-up (vLLM's --middleware): one into a
    # package other than the engine's own (`name`) is the post's own code, which the engine's image lacks.
    import_path_flags: tuple[str, ...] = ()
    # Keys of a flag's JSON value (`--lora-modules '{"name": …, "path": "/a"}'`) whose string is a file or folder
    # the server reads: a bare launch mounts it into the container as it mounts a flag's plain path.
    json_path_keys: tuple[str, ...] = ()
    # (flag, pattern of its value) that make the server one side of a prefill/decode split: the prefill or the
    # decode server, which serves nothing without the other and the router between them
    disaggregation: tuple[str, str] | None = None
    # A split this kind's groups can be deployed as, one node (prefill and decode groups, the router between them);
    # None: its disaggregation is refused (`disaggregation` only names it).
    prefill_decode: PrefillDecode | None = None
    multinode_flags: tuple[str, ...] = ()  # flags of a group spanning nodes
    deprecated_programs: tuple[tuple[str, ...], ...] = field(default_factory=tuple)
    # A server spanning nodes: the same command on every host but for these (canonical spellings).
    nnodes_flag: str = "--nnodes"
    rank_flag: str = "--node-rank"
    head_flag: str = ""  # the head node's address (SGLang: HOST:PORT in one value)
    head_port_flag: str | None = None  # the rendezvous port, when it is a flag of its own
    default_dist_port: int | None = None  # the rendezvous port when the command gives none
    worker_flags: tuple[str, ...] = ()  # added on hosts of rank >= 1
    # Data parallelism over hosts: each host runs `dp_local_flag` of the `dp_flag` ranks, starting at
    # `dp_start_flag` (rank x local on ranks >= 1), and reaches the head at `dp_head_flag`:`dp_port_flag`.
    dp_hosts: DataParallelHosts | None = None
    # A Ray cluster spanning hosts that places the server's workers (`ray start` on each host).
    ray: RayCluster | None = None
    dp_in_tp_flag: str | None = None  # with it, data parallelism runs inside the TP group (no extra GPUs)
    # The first of the GPUs it sees that the server takes (SGLang's --base-gpu-id); None: it takes them from 0.
    first_gpu_flag: str | None = None
    # Expert parallelism: a size of its own (SGLang's --ep-size), or a switch that spreads the experts over
    # every GPU of the server (vLLM's --enable-expert-parallel).
    ep_size_flag: str | None = None
    ep_switch: str | None = None
    env_report: tuple[str, ...] = ()  # its own environment report (what people attach to bug reports), in a container
    # Fingerprint fields named after this kind that hold its version (`sglang_version`): stored runs compare by them.
    version_keys: tuple[str, ...] = ()
    # Known pitfalls of this engine: (recipe, warn(code, message)) -> None, called by `hgxkit recipe check`.
    pitfalls: Callable[[Any, Callable[[str, str], None]], None] | None = None
    # What this engine's argument parser refuses at start-up: (flag word as written, image) -> the reason with its
    # remedy, or None; the import and `recipe check` refuse such a recipe (hgxkit.recipe.engine_start).
    refuses_flag: Callable[[str, str], str | None] | None = None
    # The flags the engine's option table for this image lacks: (flag words as written, image) -> (the first, the
    # reason naming them all with its remedy), or None; checked after `refuses_flag`, as argparse reports
    # `unrecognized arguments` only once it has read every other argument.
    unknown_flags: Callable[[Sequence[str], str], tuple[str, str] | None] | None = None
    # A flag the engine's option table could not judge for this image (another version than the table's):
    # (flag word as written, image) -> what was not checked, for a note; None when it was checked.
    unchecked_flag: Callable[[str, str], str | None] | None = None
    # True when the word is one of the engine's options as spelled in full (not a prefix of one), by the table
    # read from the engine whatever the image's version: how a line wrapped inside a flag word is told.
    is_option: Callable[[str], bool] | None = None
    # The options the long flag is only the start of (`--disable-hybr`, `--kv-c`), by the same table whatever the
    # image's version; none where the word is an option in full or starts none: how a word cut at the post's end
    # is told.
    option_started: Callable[[str], tuple[str, ...]] | None = None
    # A value written after a switch of the engine's option table for this image (`--enforce_eager true`): (each
    # flag's words as written, image) -> (the value, the reason with its remedy), or None.
    switch_value: Callable[[Sequence[Sequence[str]], str], tuple[str, str] | None] | None = None
    # A flag given a count of values its nargs in the engine's option table refuses (`--port` with none, an
    # unquoted JSON value split by the shell into words): (each flag's words as written, image, whether a bare word
    # may still be the positional model) -> (the flag, the reason with its remedy), or None.
    value_count: Callable[[Sequence[Sequence[str]], str, bool], tuple[str, str] | None] | None = None
    # A value outside its option's list in the engine's option table for this image (argparse's choices, or what
    # its config checks after parsing): (each flag's words as written, image) -> (the flag, the reason), or None.
    value_choice: Callable[[Sequence[Sequence[str]], str], tuple[str, str] | None] | None = None
    # A value the engine refuses for the model it serves, as its config check does once it has read the model's
    # config (vLLM: float16 for Gemma 2 and 3): (the model as the recipe names it, each flag's words as written)
    # -> (the flag, the reason with its remedy), or None.
    model_value: Callable[[str, Sequence[Sequence[str]]], tuple[str, str] | None] | None = None

    def canonical_flag(self, flag: str) -> str:
        """The canonical spelling of `flag` for this engine (aliases, `_` for `-` where the parser allows)."""
        name = flag
        if self.underscores_are_dashes and name.startswith("--"):
            head, dot, rest = name[2:].partition(".")
            name = "--" + head.replace("_", "-") + dot + rest
        return self.flag_aliases.get(name, name)

    def launches(self, words: Sequence[str]) -> bool:
        """True when the container command starts with one of this engine's launch programs."""
        return program_of(words, self.programs + self.deprecated_programs) is not None


def python_program(words: Sequence[str]) -> list[str]:
    """`words` with a Python interpreter (`python`, `python3.12`, `/opt/conda/bin/python`) written `python3`.

    Example:
        >>> python_program(["/data/conda/envs/x/bin/python", "-m", "sglang.launch_server"])
        ['python3', '-m', 'sglang.launch_server']
        >>> python_program(["python", "-O", "-u", "-m", "vllm.entrypoints.openai.api_server"])
        ['python3', '-m', 'vllm.entrypoints.openai.api_server']
    """
    if not words or not _PYTHON.match(words[0]):
        return list(words)
    rest = list(words[1:])
    while rest and _PYTHON_FLAG.match(rest[0]):  # `python -O -u -m …`: options of the interpreter, not the server
        rest = rest[2:] if rest[0] in ("-X", "-W") else rest[1:]
    return ["python3", *rest]


_PYTHON = re.compile(r"^(?:\S*/)?python[0-9.]*$")
_PYTHON_FLAG = re.compile(r"^-(?:[bBdEiIOqsSuvR]+|X|W)$")


def program_of(words: Sequence[str], programs: Sequence[tuple[str, ...]]) -> tuple[str, ...] | None:
    """The first of `programs` that `words` (interpreter written `python3`, a program run by its path by its
    name) start with, or None.

    Example:
        >>> program_of(["$VENV/bin/vllm", "serve", "m"], [("vllm", "serve")])
        ('vllm', 'serve')
    """
    normal = tuple(python_program(words))
    if normal and "/" in normal[0]:  # `$VENV/bin/vllm serve`, `/opt/venv/bin/sglang serve`: a virtualenv's launcher
        normal = (normal[0].rsplit("/", 1)[1], *normal[1:])
    for program in programs:
        if normal[: len(program)] == program:
            return program
    return None


def load_args(cell: BenchCell) -> tuple[list[str], list[str]]:
    """The load and seed arguments of a cell, spelt alike by SGLang's and vLLM's clients."""
    load = ["--max-concurrency", str(cell.concurrency)] if cell.concurrency is not None else []
    load += ["--request-rate", str(cell.request_rate)] if cell.request_rate is not None else []
    seed = ["--seed", str(cell.seed)] if cell.seed is not None else []
    return load, seed


def length_args(cell: BenchCell, rule: Rule) -> list[str]:
    """The random dataset's length arguments, spelt alike by SGLang's and vLLM's clients: the cell's draw, or
    its lengths fixed (the output length left to the client where the cell has none)."""
    if cell.draw is not None:
        lengths = (cell.draw.input_len, cell.draw.output_len, cell.draw.ratio)
    else:
        lengths = (cell.input_len, cell.output_len, f"{rule.fixed:.1f}")
    input_len, output_len, ratio = lengths
    out = ["--random-output-len", str(output_len)] if output_len is not None else []
    return ["--random-input-len", str(input_len), *out, "--random-range-ratio", ratio]
