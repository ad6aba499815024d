"""Benchmark clients people post, and how one posted client command becomes a matrix cell.

Each client's flags are mapped to a cell's settings; where the post leaves a setting that shapes the workload
to the client's default (input/output length, prompts, dataset, range ratio), the default is written out with
a note, so the cell says what actually ran. Flags that say where the server is (`--host`, `--port`,
`--base-url`, `--model`) or where results go (`--output-file`) are not workload: the model and port are kept
to match the command to the server, the rest is dropped with a note. argparse accepts unique prefixes
(`--num-prompt`, `--random-input`): those are read as the full flag, with a note. Each server kind brings its
own clients (`ServerKind.posted_clients`, hgxkit/kinds); genai-perf and aiperf belong to no engine.

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
from dataclasses import dataclass, replace
from urllib.parse import urlparse

from hgxkit.kinds import posted_clients
from hgxkit.kinds.base import PostedClient
from hgxkit.recipe.matrix import MatrixCell

# Benchmark clients of no engine; each kind's own (SGLang's, vLLM's) come from hgxkit/kinds.
_PERF_SETTINGS = {
    "backend": ("--endpoint-type",),
    "input_len": ("--synthetic-input-tokens-mean",),
    "output_len": ("--output-tokens-mean",),
    "num_prompts": ("--request-count", "--num-prompts"),
    "concurrency": ("--concurrency",),
    "request_rate": ("--request-rate",),
    "warmups": ("--warmup-request-count",),
    "seed": ("--random-seed",),
}
GENERIC_CLIENTS: tuple[PostedClient, ...] = (
    PostedClient(
        "genai-perf",
        (("genai-perf", "profile"),),
        _PERF_SETTINGS,
        {},
        frozenset({"--streaming", "--verbose", "-v"}),
        {"model": ("-m", "--model"), "url": ("--url", "-u"), "tokenizer": ("--tokenizer",)},
        ("--profile-export-file", "--artifact-dir"),
        abbreviations=False,
    ),
    PostedClient(
        "aiperf",
        (("aiperf", "profile"),),
        _PERF_SETTINGS,
        {},
        frozenset({"--streaming", "--verbose", "-v"}),
        {"model": ("-m", "--model"), "url": ("--url", "-u"), "tokenizer": ("--tokenizer",)},
        ("--profile-export-file", "--artifact-dir"),
        abbreviations=False,
    ),
)


def clients() -> tuple[PostedClient, ...]:
    """Every benchmark client a post may use: each registered kind's, then the engine-neutral ones."""
    return (*posted_clients(), *GENERIC_CLIENTS)


_INTEGER_SETTINGS = frozenset({"input_len", "output_len", "num_prompts", "concurrency", "warmups", "seed"})


def client_of(words: Sequence[str]) -> str | None:
    """The name of the benchmark client `words` (interpreter already written `python3`) launch, or None."""
    for client in clients():
        if any(tuple(words[: len(p)]) == p for p in client.programs):
            return client.name
    for client in clients():
        if client.script and len(words) > 1 and words[0] == "python3" and re.match(client.script, words[1]):
            return client.name
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
    spec = next(client for client in clients() if client.name == name)
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


def _full_flag(flag: str, spec: PostedClient, known: list[str], notes: list[str], where: str) -> str:
    if flag in known or not spec.abbreviations or not flag.startswith("--") or len(flag) < 6:
        return flag
    matches = sorted({k for k in known if k.startswith(flag)})
    if len(matches) == 1:
        notes.append(f"{where}: {flag} read as {matches[0]} (argparse takes a unique prefix)")
        return matches[0]
    return flag


def _bench(
    spec: PostedClient,
    settings: dict[str, str],
    connection: dict[str, str],
    extra: tuple[str, ...],
    notes: list[str],
    where: str,
) -> BenchCommand:
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
    return BenchCommand(
        cell, connection.get("model") or connection.get("served"), _port(connection), tuple(notes), unresolved
    )


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
