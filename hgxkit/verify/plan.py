"""The benchmark plan: which cells run against which group, the client's arguments per cell, the results
read back from the client's JSONL, and the gates that fail a run.

Example:
    >>> cell = Cell(0, "dsv4-0", 30000, 5000, 1, 3, 512)
    >>> client_argv(cell, "/tmp/out")[:4], cell.file
    (['--backend', 'sglang', '--host', '127.0.0.1'], 'g0_5000_1.jsonl')
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Literal

from hgxkit.errors import InputError
from hgxkit.kinds import DEFAULT_KIND, KINDS, ServerKind, posted_lengths
from hgxkit.kinds.base import CONNECTION_FLAGS
from hgxkit.kinds.lengths import Draw, Interval
from hgxkit.recipe.matrix import BenchmarkMatrix, MatrixCell
from hgxkit.recipe.schema import MAX_BENCH_TOKENS
from hgxkit.recipe.spec import Recipe
from hgxkit.results.summary import CellResult
from hgxkit.results.telemetry import CellTelemetry, TelemetrySource, summarise_cell_telemetry

BenchMode = Literal["smoke", "full", "none"]
# A recipe without a benchmark matrix (most imported posts) gets this one small cell of its kind.
DEFAULT_SMOKE = (512, 1, 4, 64)  # input tokens, concurrency, prompts, output tokens


@dataclass(frozen=True)
class Cell:
    """One benchmark cell for one group's container, measured by its kind's client from inside it, with every
    setting of the recipe's matrix cell (None: the client's own default)."""

    group: int
    container: str
    port: int  # the server's port inside the container
    input_len: int
    concurrency: int | None
    num_prompts: int
    output_len: int | None
    kind: str = DEFAULT_KIND
    served_name: str | None = None  # the name the server answers to (vLLM's client must send it)
    tokenizer: str | None = None  # the model's path in the container (vLLM's client tokenizes prompts)
    repeats: int = 1  # client runs of this cell (each appended to the same output file)
    metrics_url: str | None = None  # the server's /metrics as the node reaches it (telemetry while it runs)
    gpus: tuple[int, ...] = ()  # the group's GPUs (nvidia-smi samples while it runs)
    cell_id: str | None = None  # the recipe's cell id (file names); None: `<input>_<concurrency>`
    request_rate: float | None = None
    dataset: str | None = None
    draw: Draw | None = None  # the client's lengths and ratio for the post's random lengths; None: fixed
    lengths: str | None = None  # how the post's lengths were given to this client, where they were translated
    warmups: int | None = None
    seed: int | None = None
    extra_args: tuple[str, ...] = ()
    record: bool = True  # False for the post's warmup runs: run, not kept

    @property
    def file(self) -> str:
        stem = self.cell_id or f"{self.input_len}_{self.concurrency}"
        stem = re.sub(r"[^A-Za-z0-9_.-]", "_", stem).replace(".", "_")
        return f"g{self.group}_{stem}.{KINDS[self.kind].bench.suffix}"

    @property
    def client(self) -> str:
        return KINDS[self.kind].client

    @property
    def shape(self) -> str:
        """`5000x10`, or `5000@2.5rps` for a cell driven by request rate."""
        load = f"x{self.concurrency}" if self.concurrency is not None else f"@{self.request_rate or 'inf'}rps"
        return f"{self.input_len}{load}"

    @property
    def telemetry_files(self) -> tuple[str, str, str]:
        """The files the host script writes while this cell runs: /metrics scrapes, GPU samples, time window."""
        stem = self.file.rsplit(".", 1)[0]
        return f"{stem}.metrics.prom", f"{stem}.gpu.csv", f"{stem}.window"


# Client runs per cell with bench=full. The repeat is the unit of a run-vs-run comparison (throughput and accept
# length: Welch t over the repeats, hgxkit/results/stats.py), so the number of repeats sets which change a
# comparison can call real. Power of Welch's two-sided t test (alpha 0.05) to call a 10% throughput change
# real, by run-to-run coefficient of variation (CV) and repeats per run (bench/stats_power.py prints it):
#
#   CV      3 repeats  4     5     6
#   2.5%    0.93       0.99  1.00  1.00
#   4%      0.60       0.80  0.91  0.96
#   5%      0.43       0.62  0.75  0.84
#
# Published run-to-run noise of the engines' own benchmark clients: SGLang 0.11-2.54% CV of output throughput
# over concurrency 1-32, vLLM 0.36-0.64% at concurrency >= 8 but 7.5-19.7% at 1-4 with speculative decoding
# (identical fixed-seed runs, vllm-project/vllm#53436); AIPerf's multi-run guide calls CV < 5% "excellent" and
# recommends 5 runs as "standard" (ai-dynamo/aiperf docs/tutorials/multi-run-confidence.md). With 3 repeats a
# 10% change is decided only up to CV ~3.3%, right at the worst published SGLang figure; 5 repeats decide it
# (power >= 0.8) up to CV ~4.5% and with power >= 0.99 at the published stable noise, at 5/3 of the bench time.
# A CV near 10% (vLLM's spec-decode jitter at low concurrency) cannot decide 10% with any affordable count:
# the comparison then says "tie", not "real", and the repeats' spread in `results show` says why.
FULL_REPEATS = 5
MAX_REPEATS = 100  # client runs per cell: 100 decide a 1% change at CV 5%; more is a typo or a hostile inventory
# The verify knobs that size a run, and their maxima (the recipe's own sizes are bounded by its schema).
BENCH_KNOB_MAXIMA = {"bench_repeats": MAX_REPEATS, "bench_output_len": MAX_BENCH_TOKENS}


def bench_knob(name: str, value: object) -> int | None:
    """The integer value of the verify knob `name` (None: unset), or one line naming it when it is not an
    integer from 1 to its maximum.

    >>> bench_knob("bench_repeats", "5"), bench_knob("bench_output_len", None)
    (5, None)
    >>> bench_knob("bench_repeats", 10**15)
    Traceback (most recent call last):
    ...
    hgxkit.errors.InputError: bench_repeats: 1000000000000000 is out of range; give an integer from 1 to 100
    """
    if value is None or value == "":
        return None
    maximum = BENCH_KNOB_MAXIMA[name]
    text = str(value).strip()
    number = int(text) if text.isdigit() and len(text) <= 20 else 0
    if not 1 <= number <= maximum:
        raise InputError(f"{name}: {text[:40]} is out of range; give an integer from 1 to {maximum}")
    return number


def plan_cells(
    recipe: Recipe,
    mode: BenchMode,
    groups: list[tuple[int, str]],
    output_len: int | None = None,
    repeats: int | None = None,
    port: int | None = None,
) -> list[Cell]:
    """The cells to run: the recipe's smoke cell, or (full) its warmup runs then every matrix cell as written;
    a default smoke cell without a matrix; for each (group, container name), each `repeats` times (default: 1
    for smoke, FULL_REPEATS for full). `output_len` overrides every cell's; `port` the server's (the router's, for
    a prefill/decode split)."""
    if mode == "none":
        return []
    times = repeats or (FULL_REPEATS if mode == "full" else 1)
    kind = recipe.server.server_kind
    matrix = recipe.matrix
    served = recipe.server.flag("--served-model-name")
    model = recipe.server.flag(kind.model_flag)
    flag = recipe.server.flag("--port") or str(kind.default_port)
    base = dict(
        kind=kind.name,
        served_name=served.split()[0] if served else model,
        tokenizer=model,
    )
    shapes = _shapes(matrix, mode)
    if output_len:
        shapes = [{**shape, "output_len": output_len} for shape in shapes]
    shapes = [_with_draw(shape, kind) for shape in shapes]
    ports = {g: port or (int(flag) if flag.isdigit() else _group_port(recipe, g)) for g, _ in groups}
    return [
        Cell(group=g, container=name, repeats=times if shape.get("record", True) else 1, port=ports[g], **base, **shape)
        for g, name in groups
        for shape in shapes
    ]


def _shapes(matrix: BenchmarkMatrix | None, mode: BenchMode) -> list[dict]:
    """The cells' shapes before placement: the smoke cell (the matrix's, else the default), or warmups and cells."""
    shapes: list[dict] = []
    if matrix is None:
        i, c, n, o = DEFAULT_SMOKE
        shapes.append(dict(input_len=i, concurrency=c, num_prompts=n, output_len=o, cell_id="smoke"))
    elif mode == "smoke":
        first = matrix.cells()[0] if matrix.cells() else None
        smoke = matrix.smoke
        i = smoke.input_len if smoke else (first.input_len if first else DEFAULT_SMOKE[0])
        shapes.append(
            dict(
                input_len=i,
                concurrency=smoke.concurrency if smoke else 1,
                num_prompts=smoke.num_prompts if smoke else 3,
                output_len=first.output_len if first else None,
                cell_id="smoke",
                dataset=first.dataset if first else None,
                posted=first,
            )
        )
    else:
        for w, run in enumerate(matrix.warmup_runs):
            shapes.append(
                dict(
                    input_len=run.input_len,
                    concurrency=run.concurrency,
                    num_prompts=run.num_prompts,
                    output_len=run.output_len,
                    cell_id=f"warmup{w}",
                    record=False,
                )
            )
        for cell in matrix.cells():
            shapes.append(
                dict(
                    input_len=cell.input_len or DEFAULT_SMOKE[0],
                    concurrency=cell.concurrency,
                    num_prompts=cell.num_prompts or max(cell.concurrency or 1, 1) * 10,
                    output_len=cell.output_len,
                    cell_id=cell.id,
                    request_rate=cell.request_rate,
                    dataset=cell.dataset,
                    posted=cell,
                    warmups=cell.warmups,
                    seed=cell.seed,
                    extra_args=cell.extra_args,
                )
            )
    return shapes


def _group_port(recipe: Recipe, group: int) -> int:
    """Group `group`'s server port when it is `--port {{port}}` (groups on the host's network, each its own)."""
    base = recipe.groups.port_base if recipe.groups is not None else None
    if base is None:
        raise InputError(f"{recipe.name}: server --port is {{{{port}}}} but groups.port_base is not set")
    return base + group


def _with_draw(shape: dict, kind: ServerKind) -> dict:
    """A shape with the measuring client's lengths and ratio for the posted cell's random lengths: the
    intervals the post's client drew from (by its own convention), drawn alike by this kind's client, and a
    note where the settings differ from the post's."""
    posted: MatrixCell | None = shape.pop("posted", None)
    if posted is None or posted.range_ratio is None:
        return shape
    rule, ours = posted_lengths(posted.client), kind.bench.lengths
    if rule == ours:
        return {**shape, "draw": ours.draw(shape["input_len"], shape.get("output_len"), posted.range_ratio)}
    wanted = rule.intervals(shape["input_len"], shape.get("output_len"), posted.range_ratio)
    draw = ours.settings(wanted)
    note = (
        f"{posted.client or 'the post'}'s --random-range-ratio {posted.range_ratio:g} draws "
        f"{_spans(wanted)}; {kind.client} is given {draw.describe()}"
    )
    return {**shape, "draw": draw, "lengths": note}


def _spans(intervals: tuple[Interval, Interval | None]) -> str:
    named = zip(("input", "output"), intervals, strict=True)
    return ", ".join(f"{name} {span[0]}-{span[1]}" for name, span in named if span) + " tokens"


def through_router(cells: list[Cell]) -> list[Cell]:
    """`cells` sent to a prefill/decode split's router: the client asks the server it measures for the tokenizer's
    path (/model_info), which the router in PD mode does not give (offline, the client then found no tokenizer for
    the served name), so each cell names the path."""
    out = []
    for cell in cells:
        named = (CONNECTION_FLAGS["tokenizer"][0], str(cell.tokenizer)) if cell.tokenizer else ()
        out.append(replace(cell, extra_args=(*named, *cell.extra_args)))
    return out


def client_argv(cell: Cell, output_dir: str, *, warm: bool = False) -> list[str]:
    """Arguments of the kind's own benchmark client for one cell: the cell's settings as written, random
    prompts of fixed lengths where the cell says nothing else (no dataset download), warmups at least the
    concurrency (a cold first batch is not the steady state), per-request details kept for the statistics.

    `warm=True`: a repeat right after a run of the same cell, so the server is warm at this shape and the
    warm-up requests would change nothing but the wall time: none are sent (SGLang's --flush-cache stays, so a
    repeat's identical prompts find no cached prefix and the accept-length counter starts again)."""
    warmups = "0" if warm else str(cell.warmups if cell.warmups is not None else max(cell.concurrency or 1, 1))
    return KINDS[cell.kind].bench.argv(cell, output_dir, warmups)


def cells_from_output(
    cells: list[Cell],
    texts: dict[str, str],
    *,
    simulated: bool = False,
    telemetry_source: TelemetrySource = "sampled",
    client_logs: dict[str, str] | None = None,
) -> tuple[list[CellResult], list[str]]:
    """Results per cell (every repeat, with intervals) from each client's output file and the telemetry
    recorded while it ran (sampled, or read from Prometheus afterwards); problems for cells that produced none,
    each with the last line of the cell's client log where `client_logs` (cell file -> log tail) has it."""
    results, problems = [], []
    for cell in (c for c in cells if c.record):
        text = texts.get(cell.file, "")
        try:
            records = KINDS[cell.kind].bench.parse(text, cell)
        except ValueError as err:
            problems.append(f"group {cell.group} cell {cell.shape}: {err}")
            continue
        if not records:
            log = None if client_logs is None or cell.file not in client_logs else client_logs[cell.file]
            problems.append(f"group {cell.group} cell {cell.shape}: the client wrote no result{last_words(log)}")
            continue
        result = CellResult.from_repeats(
            records,
            num_prompts=cell.num_prompts,
            group=cell.group,
            raw_files=[cell.file] * len(records),
            telemetry=cell_telemetry(cell, texts, simulated, telemetry_source),
        )
        results.append(replace(result, lengths=cell.lengths))
    return results, problems


LAST_WORDS_CHARS = 300


def last_words(log: str | None) -> str:
    """What a client's log says of a cell with no result, to end its gate line: its last two non-blank lines
    joined by " | " (the exception and where it came from, Docker's own error and the exit status, what the
    server answered), cut to their last LAST_WORDS_CHARS characters; that it printed nothing; or nothing when
    the log was not read."""
    if log is None:
        return ""
    lines = [line.strip() for line in log.splitlines() if line.strip()][-2:]
    if not lines:
        return "; its log is empty"
    said = " | ".join(lines)
    said = said if len(said) <= LAST_WORDS_CHARS else "…" + said[-LAST_WORDS_CHARS:]
    return f"; its last line{'s' if len(lines) > 1 else ''}: {said}"


def cell_telemetry(
    cell: Cell, texts: dict[str, str], simulated: bool, source: TelemetrySource = "sampled"
) -> CellTelemetry | None:
    """The server's /metrics and the GPUs' samples while the cell ran (None when nothing was recorded)."""
    metrics, gpu, window = (texts.get(name, "") for name in cell.telemetry_files)
    if not (metrics.strip() or gpu.strip()):
        return None
    stamps = [float(t) for t in window.split() if t.replace(".", "", 1).isdigit()]
    recorded = [name for name in cell.telemetry_files[:2] if texts.get(name, "").strip()]
    try:
        return summarise_cell_telemetry(
            cell.kind,
            KINDS[cell.kind].metrics,
            metrics_text=metrics or None,
            gpu_csv=gpu or None,
            simulated=simulated,
            window=(stamps[0], stamps[-1]) if len(stamps) > 1 else None,
            files=recorded,
            source=source,
        )
    except ValueError:
        return None  # damaged samples: the cell's own results still count


def gates(recipe: Recipe, results: list[CellResult], mode: BenchMode) -> list[str]:
    """Failures that fail the run: accept length ~1.0 under speculation, failed requests in the smoke run."""
    problems = []
    algorithm = recipe.server.flag("--speculative-algorithm")
    for cell in results:
        if algorithm and cell.accept_length is not None and cell.accept_length <= 1.05:
            problems.append(
                f"group {cell.group}: accept length {cell.accept_length:.2f} with --speculative-algorithm "
                f"{algorithm}: the drafts are never accepted (wrong algorithm for this checkpoint?)"
            )
        if mode == "smoke" and cell.failed:
            problems.append(f"group {cell.group}: {cell.failed} of {cell.num_prompts} smoke requests failed")
    return problems
