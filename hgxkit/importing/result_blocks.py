"""Numbers a post reports: the clients' printed result blocks, a script's per-cell log, and tables people write.

Three shapes are read, each with the line it came from:
- a client's block, `============ Serving Benchmark Result ============` then `Label: value` lines (SGLang's
  and vLLM's labels, any case; a block cut short, `not set` or `[result]` values are taken as far as they go);
- a script's log: `--- LABEL input=N conc=C prompts=P ---` headers, each followed by client labels (newlines
  may be lost), `INSTANCE: LABEL` sections and `warmup: input=N conc=C prompts=P` lines;
- tables: Markdown (`| a | b |`), or plain text under a title (`TTFT Mean (ms)` then `Input Conc A B …` and
  rows `5K 1 257 260 …`, even flattened onto one line); the metric comes from a column header or the title,
  a row's keys from its key columns (`5K`, `1`) or its `key=value` label, instance columns keep their label.

Example:
    >>> from hgxkit.importing.post import read_post
    >>> post = read_post("p", "--- a input=10 conc=2 prompts=4 --- Accept length: 5.5 Mean TTFT (ms): 1.25")
    >>> [(r.cell, r.label, r.metrics) for r in printed_results(post).runs]
    [((10, 2, 4), 'a', {'accept_length': 5.5, 'ttft_mean_ms': 1.25})]
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from hgxkit.importing.post import PostFile
from hgxkit.recipe.matrix import METRICS

# Labels clients print that are settings or totals, listed so that a metric label inside them
# ("concurrency" in "Max request concurrency") is not read on its own.
_OTHER_LABELS = (
    "Backend",
    "Traffic request rate",
    "Max request concurrency",
    "Max reqeuest concurrency",
    "Maximum request concurrency",
    "Request rate configured (RPS)",
    "Total input tokens",
    "Total input text tokens",
    "Total generated tokens (retokenized)",
    "Total generated tokens",
    "Peak output token throughput (tok/s)",
    "Request goodput (req/s)",
    "User throughput (tok/s)",
)
_LABEL_TO_KEY = {label.lower(): m.key for m in METRICS for label in m.labels}
_SETTING_LABELS = {
    "max request concurrency": "concurrency",
    "max reqeuest concurrency": "concurrency",
    "maximum request concurrency": "concurrency",
    "request rate configured (rps)": "request_rate",
    "traffic request rate": "request_rate",
    "backend": "backend",
}
_ALL_LABELS = sorted({*_LABEL_TO_KEY, *(label.lower() for label in _OTHER_LABELS)}, key=len, reverse=True)
_VALUE = r"[-+]?\d[\d,]*(?:\.\d+)?|inf|not set|\[result\]|n/?a"
LABELS_RE = re.compile(
    r"(?i)(?<![A-Za-z0-9_])(?P<label>" + "|".join(re.escape(label) for label in _ALL_LABELS) + r")\s*:\s*"
    r"(?P<value>" + _VALUE + r")"
)
_BLOCK_HEADER = re.compile(r"={3,}\s*Serving Benchmark Result\s*={3,}", re.I)
_BLOCK_END = re.compile(r"^\s*={10,}\s*$")
_BLOCK_LINE = re.compile(r"^\s*(?:-{3,}.*-{3,}|[A-Za-z][^:]{2,60}:\s*\S.*)\s*$")
_LOG_HEADER = re.compile(
    r"---\s*(?:(?P<label>[A-Za-z][\w.-]*)\s+)?input=(?P<input>\d+)\s+conc=(?P<conc>\d+)\s+prompts=(?P<prompts>\d+)\s*---"
)
_WARMUP = re.compile(r"warmup:\s*input=(?P<input>\d+)\s+conc=(?P<conc>\d+)\s+prompts=(?P<prompts>\d+)")
_INSTANCE = re.compile(r"INSTANCE:\s*(?P<label>[A-Za-z][\w.-]*)")
_PLAIN_HEADER = re.compile(r"(?i)\b(?:Input|ISL)\s+(?:Conc|Concurrency)\b")
_ROW_KEY = re.compile(r"^(\d+(?:\.\d+)?)([Kk]?)$")
_PLAIN_ROW = re.compile(r"(?<!\S)(\d+[Kk])\s+(\d+)(?=\s|$)")


@dataclass(frozen=True)
class Run:
    """The numbers of one benchmark run as the post printed them."""

    post: PostFile
    first: int
    last: int
    metrics: dict[str, float | int]
    missing: tuple[str, ...] = ()  # labels printed without a number (`[result]`, `not set`)
    settings: dict[str, str] = field(default_factory=dict)  # what the block says about the run
    cell: tuple[int, int, int] | None = None  # (input, concurrency, prompts) from a log header
    label: str | None = None  # the instance it belongs to (`marlin`)
    decimals: dict[str, int] = field(default_factory=dict)  # digits after the point, as printed

    def source(self) -> str:
        """`FILE:LINES` with the file's name (what a recipe's `sources` hold)."""
        return f"{self.post.label}:{self.lines()}"

    def where(self) -> str:
        """`PATH:LINES` with the path as given (for messages)."""
        return f"{self.post.name}:{self.lines()}"

    def lines(self) -> str:
        return f"{self.first}" + (f"-{self.last}" if self.last != self.first else "")


@dataclass(frozen=True)
class Warmup:
    """A warmup run a script logged (`warmup: input=5000 conc=1 prompts=2`)."""

    input_len: int
    concurrency: int
    num_prompts: int
    label: str | None
    line: int


@dataclass(frozen=True)
class TableValue:
    """One number of a table: its metric, the row's keys, the column's instance label, where it was read."""

    metric: str
    value: float
    keys: dict[str, str]
    label: str | None
    post: PostFile
    line: int
    decimals: int

    def source(self) -> str:
        return f"{self.post.label}:{self.line}"

    def where(self) -> str:
        return f"{self.post.name}:{self.line}"


@dataclass(frozen=True)
class Printed:
    """Everything a post reports."""

    runs: list[Run]
    warmups: list[Warmup]
    tables: list[TableValue]
    notes: list[str]


def printed_results(post: PostFile) -> Printed:
    """Every result block, logged run, warmup and table value of a post, in file order."""
    printed = Printed([], [], [], [])
    _blocks(post, printed)
    _logs(post, printed)
    _markdown_tables(post, printed)
    _plain_tables(post, printed)
    printed.runs.sort(key=lambda r: r.first)
    return printed


def metrics_in(text: str) -> tuple[dict[str, float | int], list[str], dict[str, str], dict[str, int]]:
    """Client labels in `text`: (metrics by key, labels without a number, run settings by name, digits after
    the point of each metric as printed)."""
    metrics: dict[str, float | int] = {}
    decimals: dict[str, int] = {}
    missing: list[str] = []
    settings: dict[str, str] = {}
    for match in LABELS_RE.finditer(text):
        label = " ".join(match.group("label").lower().split())
        value = match.group("value")
        if label in _SETTING_LABELS:
            settings[_SETTING_LABELS[label]] = value
            continue
        key = _LABEL_TO_KEY.get(label)
        if key is None:
            continue
        number = _number(value)
        if number is None:
            missing.append(match.group("label"))
            continue
        integer = next(m.integer for m in METRICS if m.key == key)
        if key not in metrics:
            metrics[key] = int(number) if integer else number
            decimals[key] = _decimals(value)
    return metrics, missing, settings, decimals


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def _blocks(post: PostFile, printed: Printed) -> None:
    lines = post.lines
    for index, line in enumerate(lines):
        header = _BLOCK_HEADER.search(line)
        if not header:
            continue
        last = index
        parts = [line[header.end() :]]
        for follow in range(index + 1, len(lines)):
            text = lines[follow]
            if _BLOCK_END.match(text):
                last = follow
                break
            if _BLOCK_HEADER.search(text) or not _BLOCK_LINE.match(text):
                break
            parts.append(text)
            last = follow
        metrics, missing, settings, decimals = metrics_in("\n".join(parts))
        printed.runs.append(Run(post, index + 1, last + 1, metrics, tuple(missing), settings, decimals=decimals))


def _logs(post: PostFile, printed: Printed) -> None:
    events: list[tuple[int, int, str, re.Match[str]]] = []
    for index, line in enumerate(post.lines):
        for kind, pattern in (("run", _LOG_HEADER), ("warmup", _WARMUP), ("instance", _INSTANCE)):
            events += [(index, m.start(), kind, m) for m in pattern.finditer(line)]
    events.sort(key=lambda e: (e[0], e[1]))
    instance = None
    for position, (index, _column, kind, match) in enumerate(events):
        if kind == "instance":
            instance = match.group("label")
        elif kind == "warmup":
            printed.warmups.append(
                Warmup(int(match["input"]), int(match["conc"]), int(match["prompts"]), instance, index + 1)
            )
        else:
            end = events[position + 1] if position + 1 < len(events) else None
            text = _between(post, index, match.end(), end[0] if end else len(post.lines) - 1, end[1] if end else None)
            metrics, missing, settings, decimals = metrics_in(text)
            cell = (int(match["input"]), int(match["conc"]), int(match["prompts"]))
            last = end[0] + 1 if end and end[0] > index else index + 1
            label = match.group("label") or instance
            printed.runs.append(Run(post, index + 1, last, metrics, tuple(missing), settings, cell, label, decimals))


def _between(post: PostFile, line: int, column: int, end_line: int, end_column: int | None) -> str:
    if line == end_line:
        return post.lines[line][column:end_column]
    parts = [post.lines[line][column:], *post.lines[line + 1 : end_line]]
    parts.append(post.lines[end_line][:end_column] if end_column is not None else post.lines[end_line])
    return "\n".join(parts)


def metric_of_header(text: str) -> tuple[str, float] | None:
    """The metric key a table header or title names, and the factor to milliseconds (`Mean E2E (s)`: 1000).

    Example:
        >>> metric_of_header("TTFT P99 (ms — lower = better)"), metric_of_header("Output token throughput (tok/s)")
        (('ttft_p99_ms', 1.0), ('output_throughput', 1.0))
    """
    t = text.lower()
    if "accept" in t:
        return "accept_length", 1.0
    if "/gpu" in t or "per gpu" in t:
        return None  # per-GPU numbers are not the run's
    for quantity, names in (("ttft", ("ttft",)), ("tpot", ("tpot",)), ("itl", ("itl",)), ("e2e", ("e2e", "latency"))):
        if any(re.search(rf"\b{n}", t) for n in names):
            stat = next(
                (
                    s
                    for s, words in (
                        ("median", ("median", "p50")),
                        ("p90", ("p90",)),
                        ("p95", ("p95",)),
                        ("p99", ("p99",)),
                        ("max", ("max",)),
                        ("mean", ("mean", "avg", "average")),
                    )
                    if any(re.search(rf"\b{w}\b", t) for w in words)
                ),
                None,
            )
            if stat is None or (stat == "max" and quantity != "itl"):
                return None
            scale = 1000.0 if re.search(r"\(s\)|\bseconds?\b", t) else 1.0
            return (f"{quantity}_{stat}_ms" if stat != "max" else "itl_max_ms"), scale
    if "throughput" in t or "tput" in t:
        for side in ("input", "output", "total", "request"):
            if side in t:
                return f"{side}_throughput", 1.0
    return None


def _row_keys(label: str) -> dict[str, str]:
    """`attn=fa3,random_input_len=1024` -> {'attn': 'fa3', 'random_input_len': '1024'}; `conc=8` too."""
    keys = {}
    for part in re.split(r"[,;\s]+", label.strip("* ")):
        name, has_equals, value = part.partition("=")
        if has_equals and name:
            keys[_key_name(name)] = value
    return keys


def _key_name(name: str) -> str:
    n = name.lower()
    if n in ("conc", "concurrency", "c", "bs", "batch"):
        return "concurrency"
    if n in ("input", "isl", "input_len", "random_input_len", "in"):
        return "input_len"
    if n in ("output", "osl", "output_len", "random_output_len", "out"):
        return "output_len"
    return n


def _size(text: str) -> str | None:
    match = _ROW_KEY.match(text.strip())
    if not match:
        return None
    value = float(match.group(1)) * (1000 if match.group(2) else 1)
    return str(int(value))


def _decimals(text: str) -> int:
    return len(text.split(".", 1)[1]) if "." in text else 0


def _markdown_tables(post: PostFile, printed: Printed) -> None:
    rows: list[tuple[int, list[str]]] = []
    for index, line in enumerate([*post.lines, ""]):
        text = line.strip().lstrip(">").strip()
        if text.startswith("|") and text.endswith("|"):
            rows.append((index, [cell.strip() for cell in text.strip("|").split("|")]))
            continue
        if len(rows) >= 3 and all(re.fullmatch(r":?-{3,}:?", c) for c in rows[1][1]):
            _markdown_table(post, rows[0][1], rows[2:], printed)
        rows = []


def _markdown_table(post: PostFile, header: list[str], rows: list[tuple[int, list[str]]], printed: Printed) -> None:
    columns = [metric_of_header(h) for h in header]
    transposed = [_row_keys(h) for h in header[1:]]
    if all(transposed) and metric_of_header(header[0]) is None:
        for index, cells in rows:  # metrics as rows, runs as columns (`conc=8 | conc=16`)
            metric = metric_of_header(cells[0])
            if metric is None:
                continue
            for keys, cell in zip(transposed, cells[1:], strict=False):
                _table_value(post, printed, metric, cell, keys, None, index)
        return
    key_columns = [
        i for i, h in enumerate(header) if _key_name(h.split("(")[0].strip()) in ("input_len", "concurrency")
    ]
    for index, cells in rows:
        keys = (
            _row_keys(cells[0])
            if not key_columns
            else {_key_name(header[i].split("(")[0].strip()): _size(cells[i]) or cells[i] for i in key_columns}
        )
        for column, (metric, cell) in enumerate(zip(columns, cells, strict=False)):
            if column in key_columns or (column == 0 and not key_columns):
                continue
            if metric is not None:
                _table_value(post, printed, metric, cell, keys, None, index)


def _plain_tables(post: PostFile, printed: Printed) -> None:
    """`Title` then `Input Conc A B …` and rows of `5K 1 v v …` (one line each, or all on one line)."""
    for index, line in enumerate(post.lines):
        header = _PLAIN_HEADER.search(line)
        if not header:
            continue
        title = next((post.lines[i] for i in range(index - 1, -1, -1) if post.lines[i].strip()), "")
        metric = metric_of_header(title)
        if metric is None:
            printed.notes.append(
                f"{post.name}:{index + 1}: a table titled {title.strip()[:40]!r} names no metric; skipped"
            )
            continue
        text = " ".join([line[header.end() :], *_following_rows(post, index)])
        starts = list(_PLAIN_ROW.finditer(text))
        labels = text[: starts[0].start()].split() if starts else []
        for number, start in enumerate(starts):
            end = starts[number + 1].start() if number + 1 < len(starts) else len(text)
            keys = {"input_len": _size(start.group(1)) or start.group(1), "concurrency": start.group(2)}
            for label, value in zip(labels, text[start.end() : end].split(), strict=False):
                _table_value(post, printed, metric, value, keys, label, index)


def _following_rows(post: PostFile, index: int) -> list[str]:
    rows = []
    for line in post.lines[index + 1 :]:
        if not line.strip() or _size(line.split()[0]) is None:
            break
        rows.append(line)
    return rows


def _table_value(
    post: PostFile,
    printed: Printed,
    metric: tuple[str, float],
    text: str,
    keys: dict[str, str],
    label: str | None,
    index: int,
) -> None:
    number = _number(text.strip("* "))
    if number is None:
        return
    key, scale = metric
    printed.tables.append(TableValue(key, number * scale, keys, label, post, index + 1, _decimals(text)))
