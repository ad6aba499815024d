"""Benchmark clients people post, and how one posted client command becomes a matrix cell.

Each client's flags are mapped to a cell's settings; where the post leaves a setting that shapes the workload
to the client's default (input/output length, prompts, dataset, range ratio), the default is written out with
a note, so the cell says what actually ran. Flags that say where the server is (`--host`, `--port`,
`--base-url`, `--model`) or where results go (`--output-file`) are not workload: the model and port are kept
to match the command to the server, the rest is dropped with a note. argparse accepts unique prefixes
(`--num-prompt`, `--random-input`): those are read as the full flag, with a note.

Example:
    >>> bench = parse_bench(["vllm", "bench", "serve", "--model", "org/m", "--random-input", "2048",
    ...                      "--request-rate", "10", "--num-prompt", "100"], where="post.txt:3")
    >>> c = bench.cell
    >>> (c.input_len, c.output_len, c.request_rate, c.num_prompts, c.dataset, bench.model)
    (2048, 128, 10.0, 100, 'random', 'org/m')
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from urllib.parse import urlparse

from hgxkit.recipe.matrix import MatrixCell


@dataclass(frozen=True)
class Client:
    """One benchmark client: how it is launched, its flags per cell setting, its defaults."""

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


_SGLANG_SETTINGS = {
    "backend": ("--backend",), "dataset": ("--dataset-name",), "input_len": ("--random-input-len",),
    "output_len": ("--random-output-len",), "range_ratio": ("--random-range-ratio",),
    "num_prompts": ("--num-prompts",), "concurrency": ("--max-concurrency",), "request_rate": ("--request-rate",),
    "warmups": ("--warmup-requests",), "seed": ("--seed",),
}  # fmt: skip
_VLLM_SETTINGS = {
    "backend": ("--backend", "--endpoint-type"), "dataset": ("--dataset-name",),
    "input_len": ("--random-input-len", "--input-len"), "output_len": ("--random-output-len", "--output-len"),
    "range_ratio": ("--random-range-ratio",), "num_prompts": ("--num-prompts",),
    "concurrency": ("--max-concurrency",), "request_rate": ("--request-rate",), "warmups": ("--num-warmups",),
    "seed": ("--seed",),
}  # fmt: skip
_CONNECTION = {
    "model": ("--model",), "host": ("--host",), "port": ("--port",), "url": ("--base-url",),
    "tokenizer": ("--tokenizer",), "served": ("--served-model-name",),
}  # fmt: skip
_PERF_SETTINGS = {
    "backend": ("--endpoint-type",), "input_len": ("--synthetic-input-tokens-mean",),
    "output_len": ("--output-tokens-mean",), "num_prompts": ("--request-count", "--num-prompts"),
    "concurrency": ("--concurrency",), "request_rate": ("--request-rate",), "warmups": ("--warmup-request-count",),
    "seed": ("--random-seed",),
}  # fmt: skip

POSTED_CLIENTS: tuple[Client, ...] = (
    Client(
        "sglang.benchmark.serving",
        (("python3", "-m", "sglang.benchmark.serving"), ("python3", "-m", "sglang.bench_serving")),
        _SGLANG_SETTINGS,
        # sglang 0.5.23 `python -m sglang.benchmark.serving --help` (reference notes §4).
        {"dataset": "sharegpt", "input_len": 1024, "output_len": 1024, "range_ratio": 0.0, "num_prompts": 1000},
        frozenset({"--flush-cache", "--disable-stream", "--disable-ignore-eos", "--output-details",
                   "--apply-chat-template", "--tokenize-prompt", "--cache-report", "--disable-tqdm", "--profile"}),
        _CONNECTION,
        ("--output-file", "--output-details", "--tag"),
        version="sglang 0.5.23",
        others=("--dataset-path", "--sharegpt-output-len", "--sharegpt-context-len", "--random-image-count",
                "--temperature", "--top-p", "--extra-request-body", "--flush-cache-timeout",
                "--ready-check-timeout-sec", "--header", "--goodput", "--lora-name", "--profile-activities"),
    ),
    Client(
        "vllm bench serve",
        (("vllm", "bench", "serve"),),
        _VLLM_SETTINGS,
        # vllm 0.33 `vllm bench serve` (reference notes §4).
        {"dataset": "random", "input_len": 1024, "output_len": 128, "range_ratio": 0.0, "num_prompts": 1000},
        frozenset({"--ignore-eos", "--save-result", "--save-detailed", "--append-result", "--trust-remote-code",
                   "--disable-tqdm", "--profile"}),
        _CONNECTION,
        ("--save-result", "--save-detailed", "--append-result", "--result-dir", "--result-filename", "--label",
         "--metadata"),
        version="vllm 0.33",
        others=("--endpoint", "--dataset-path", "--burstiness", "--percentile-metrics", "--metric-percentiles",
                "--goodput", "--temperature", "--top-p", "--top-k", "--random-prefix-len", "--header",
                "--ready-check-timeout-sec", "--tokenizer-mode", "--request-id-prefix"),
    ),
    Client(
        "benchmark_serving.py",
        (),  # `python3 [path/]benchmark_serving.py`: matched by file name below
        _VLLM_SETTINGS,
        # vllm 0.9.2's benchmarks/benchmark_serving.py (the repository script before `vllm bench serve`).
        {"dataset": "sharegpt", "input_len": 1024, "output_len": 128, "range_ratio": 0.0, "num_prompts": 1000},
        frozenset({"--ignore-eos", "--save-result", "--save-detailed", "--append-result", "--trust-remote-code",
                   "--disable-tqdm", "--profile"}),
        _CONNECTION,
        ("--save-result", "--save-detailed", "--append-result", "--result-dir", "--result-filename", "--metadata"),
        version="vllm 0.9.2",
        others=("--endpoint", "--dataset-path", "--burstiness", "--percentile-metrics", "--metric-percentiles",
                "--goodput", "--temperature", "--top-p", "--top-k", "--random-prefix-len", "--tokenizer-mode"),
    ),
    Client(
        "genai-perf", (("genai-perf", "profile"),), _PERF_SETTINGS, {},
        frozenset({"--streaming", "--verbose", "-v"}),
        {"model": ("-m", "--model"), "url": ("--url", "-u"), "tokenizer": ("--tokenizer",)},
        ("--profile-export-file", "--artifact-dir"), abbreviations=False,
    ),
    Client(
        "aiperf", (("aiperf", "profile"),), _PERF_SETTINGS, {},
        frozenset({"--streaming", "--verbose", "-v"}),
        {"model": ("-m", "--model"), "url": ("--url", "-u"), "tokenizer": ("--tokenizer",)},
        ("--profile-export-file", "--artifact-dir"), abbreviations=False,
    ),
)  # fmt: skip
_BY_NAME = {client.name: client for client in POSTED_CLIENTS}
_SCRIPT = re.compile(r"^(?:\S*/)?benchmark_serving\.py$")
_INTEGER_SETTINGS = frozenset({"input_len", "output_len", "num_prompts", "concurrency", "warmups", "seed"})


def client_of(words: Sequence[str]) -> str | None:
    """The name of the benchmark client `words` (interpreter already written `python3`) launch, or None."""
    for client in POSTED_CLIENTS:
        if any(tuple(words[: len(p)]) == p for p in client.programs):
            return client.name
    if len(words) > 1 and words[0] == "python3" and _SCRIPT.match(words[1]):
        return "benchmark_serving.py"
    return None


@dataclass(frozen=True)
class BenchCommand:
    """A posted client command read as a matrix cell, with what it says about the server it targets."""

    cell: MatrixCell
    model: str | None = None
    port: int | None = None
    notes: tuple[str, ...] = ()
    unresolved: str | None = None  # a `$VAR` left in a setting: the cell's value is not known


def parse_bench(words: Sequence[str], *, where: str, client: str | None = None) -> BenchCommand:
    """One client command (`words` from the program on) as a cell; `where` (`file:line`) names it in notes."""
    name = client or client_of(words) or ""
    spec = _BY_NAME[name]
    program = next((p for p in spec.programs if tuple(words[: len(p)]) == p), tuple(words[:2]))
    args = list(words[len(program) :])
    settings: dict[str, str] = {}
    connection: dict[str, str] = {}
    extra: list[str] = []
    notes: list[str] = []
    flags = {flag: key for key, spellings in spec.settings.items() for flag in spellings}
    known = {flag: key for key, spellings in spec.connection.items() for flag in spellings}
    index = 0
    while index < len(args):
        word = args[index]
        flag, has_equals, inline = word.partition("=")
        if not flag.startswith("-"):
            extra.append(word)
            index += 1
            continue
        full = _full_flag(flag, spec, [*flags, *known, *spec.output, *spec.switches, *spec.others], notes, where)
        takes_value = full not in spec.switches and not has_equals
        value = inline if has_equals else None
        if takes_value and index + 1 < len(args) and not args[index + 1].startswith("--"):
            value = args[index + 1]
            index += 1
        index += 1
        if full in flags:
            settings[flags[full]] = value or ""
        elif full in known:
            connection[known[full]] = value or ""
        elif full in spec.output:
            notes.append(f"{where}: {full} dropped (where the client writes results; verify keeps its own)")
        else:
            extra.extend([full] if value is None else [full, value])
    return _bench(spec, settings, connection, tuple(extra), notes, where)


def _full_flag(flag: str, spec: Client, known: list[str], notes: list[str], where: str) -> str:
    if flag in known or not spec.abbreviations or not flag.startswith("--") or len(flag) < 6:
        return flag
    matches = sorted({k for k in known if k.startswith(flag)})
    if len(matches) == 1:
        notes.append(f"{where}: {flag} read as {matches[0]} (argparse takes a unique prefix)")
        return matches[0]
    return flag


def _bench(
    spec: Client, settings: dict[str, str], connection: dict[str, str], extra: tuple[str, ...], notes: list[str],
    where: str,
) -> BenchCommand:  # fmt: skip
    values: dict[str, object] = {}
    unresolved = None
    for key, text in settings.items():
        if "$" in text:
            unresolved = unresolved or f"{spec.settings[key][0]} {text}"
            continue
        try:
            values[key] = _setting(key, text)
        except ValueError:
            notes.append(f"{where}: {spec.settings[key][0]} {text!r} is not a number; left to the client")
    filled = [key for key in spec.defaults if key not in settings]
    for key in filled:
        values[key] = spec.defaults[key]
    if filled:
        shown = ", ".join(f"{spec.settings[k][0]} {spec.defaults[k]}" for k in filled)
        notes.append(f"{where}: not given, so the client's defaults ({spec.version}) are written out: {shown}")
    if values.get("dataset") not in (None, "random", "random-ids"):
        # input/output lengths are settings of the random datasets only
        for key in ("input_len", "output_len", "range_ratio"):
            if key in filled:
                values.pop(key)
    cell = MatrixCell(id="", client=spec.name, extra_args=extra, source=where, **values)  # type: ignore[arg-type]
    if cell.request_rate is not None and cell.request_rate == float("inf"):
        cell = replace(cell, request_rate=None)
    return BenchCommand(cell, connection.get("model") or connection.get("served"), _port(connection), tuple(notes),
                        unresolved)  # fmt: skip


def _setting(key: str, text: str) -> object:
    if key in _INTEGER_SETTINGS:
        return int(text)
    if key in ("request_rate", "range_ratio"):
        return float(text)
    return text


def _port(connection: dict[str, str]) -> int | None:
    port = connection.get("port")
    if port is None and connection.get("url"):
        url = connection["url"]
        parsed = urlparse(url if "://" in url else f"http://{url}")
        try:
            port = str(parsed.port) if parsed.port else None
        except ValueError:
            port = None
    return int(port) if port and port.isdigit() else None
