"""The benchmark plan: which cells run against which group, the client's arguments per cell, the results
read back from the client's JSONL, and the gates that fail a run.

Example:
    >>> cell = Cell(0, "dsv4-0", 30000, 5000, 1, 3, 512)
    >>> client_argv(cell, "/tmp/out")[:4], cell.file
    (['--backend', 'sglang', '--host', '127.0.0.1'], 'g0_5000_1.jsonl')
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from hgxkit.recipe.kinds import KINDS
from hgxkit.recipe.matrix import MatrixCell
from hgxkit.recipe.model import Recipe
from hgxkit.results.bench import parse_bench_jsonl
from hgxkit.results.summary import CellResult
from hgxkit.results.telemetry import CellTelemetry, summarise_cell_telemetry
from hgxkit.results.vllm_bench import parse_vllm_result

BenchMode = Literal["smoke", "full", "none"]
# Each kind's benchmark client as (module run as __main__, arguments before the client's own): the first
# that imports in the serving container runs. SGLang: the newer module name, then the shim older images ship.
CLIENTS: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "sglang": (("sglang.benchmark.serving", ()), ("sglang.bench_serving", ())),
    "vllm": (("vllm.entrypoints.cli.main", ("bench", "serve")),),
}
CLIENT_MODULES = tuple(module for module, _ in CLIENTS["sglang"])
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
    kind: str = "sglang"
    served_name: str | None = None  # the name the server answers to (vLLM's client must send it)
    tokenizer: str | None = None  # the model's path in the container (vLLM's client tokenizes prompts)
    repeats: int = 1  # client runs of this cell (each appended to the same output file)
    metrics_url: str | None = None  # the server's /metrics as the node reaches it (telemetry while it runs)
    gpus: tuple[int, ...] = ()  # the group's GPUs (nvidia-smi samples while it runs)
    cell_id: str | None = None  # the recipe's cell id (file names); None: `<input>_<concurrency>`
    request_rate: float | None = None
    dataset: str | None = None
    range_ratio: float | None = None  # in the client's own meaning; None: fixed lengths
    warmups: int | None = None
    seed: int | None = None
    extra_args: tuple[str, ...] = ()
    record: bool = True  # False for the post's warmup runs: run, not kept

    @property
    def file(self) -> str:
        stem = self.cell_id or f"{self.input_len}_{self.concurrency}"
        stem = re.sub(r"[^A-Za-z0-9_.-]", "_", stem).replace(".", "_")
        return f"g{self.group}_{stem}.{'json' if self.kind == 'vllm' else 'jsonl'}"

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


def plan_cells(
    recipe: Recipe,
    mode: BenchMode,
    groups: list[tuple[int, str]],
    output_len: int | None = None,
    repeats: int | None = None,
) -> list[Cell]:
    """The cells to run: the recipe's smoke cell, or (full) its warmup runs then every matrix cell as written;
    a default smoke cell without a matrix; for each (group, container name), each `repeats` times (default: 1
    for smoke, 3 for full). `output_len` overrides every cell's."""
    if mode == "none":
        return []
    times = repeats or (3 if mode == "full" else 1)
    kind = recipe.server.server_kind
    matrix = recipe.matrix
    served = recipe.server.flag("--served-model-name")
    model = recipe.server.flag(kind.model_flag)
    base = dict(port=int(recipe.server.flag("--port") or kind.default_port), kind=kind.name,
                served_name=served.split()[0] if served else model, tokenizer=model)  # fmt: skip
    shapes: list[dict] = []
    if matrix is None:
        i, c, n, o = DEFAULT_SMOKE
        shapes.append(dict(input_len=i, concurrency=c, num_prompts=n, output_len=o, cell_id="smoke"))
    elif mode == "smoke":
        first = matrix.cells()[0] if matrix.cells() else None
        smoke = matrix.smoke
        i = smoke.input_len if smoke else (first.input_len if first else DEFAULT_SMOKE[0])
        shapes.append(dict(input_len=i, concurrency=smoke.concurrency if smoke else 1,
                           num_prompts=smoke.num_prompts if smoke else 3,
                           output_len=first.output_len if first else None, cell_id="smoke",
                           dataset=first.dataset if first else None,
                           range_ratio=_ratio(first, kind.name) if first else None))  # fmt: skip
    else:
        for w, run in enumerate(matrix.warmup_runs):
            shapes.append(dict(input_len=run.input_len, concurrency=run.concurrency, num_prompts=run.num_prompts,
                               output_len=run.output_len, cell_id=f"warmup{w}", record=False))  # fmt: skip
        for cell in matrix.cells():
            shapes.append(dict(
                input_len=cell.input_len or DEFAULT_SMOKE[0], concurrency=cell.concurrency,
                num_prompts=cell.num_prompts or max(cell.concurrency or 1, 1) * 10, output_len=cell.output_len,
                cell_id=cell.id, request_rate=cell.request_rate, dataset=cell.dataset,
                range_ratio=_ratio(cell, kind.name), warmups=cell.warmups, seed=cell.seed,
                extra_args=cell.extra_args,
            ))  # fmt: skip
    if output_len:
        shapes = [{**shape, "output_len": output_len} for shape in shapes]
    return [
        Cell(group=g, container=name, repeats=times if shape.get("record", True) else 1, **base, **shape)
        for g, name in groups
        for shape in shapes
    ]


def _ratio(cell: MatrixCell, kind: str) -> float | None:
    """The cell's range ratio for the client that measures it: as written when the post used that kind's
    client; the post's "fixed lengths" translated between clients (SGLang 1.0 = vLLM 0.0); None otherwise."""
    if cell.range_ratio is None:
        return None
    posted_kind = "vllm" if (cell.client or "").startswith("vllm") else "sglang"
    if posted_kind == kind:
        return cell.range_ratio
    fixed = {"sglang": 1.0, "vllm": 0.0}
    return fixed[kind] if cell.range_ratio == fixed[posted_kind] else None


def client_argv(cell: Cell, output_dir: str, *, warm: bool = False) -> list[str]:
    """Arguments of the kind's own benchmark client for one cell: the cell's settings as written, random
    prompts of fixed lengths where the cell says nothing else (no dataset download), warmups at least the
    concurrency (a cold first batch is not the steady state), per-request details kept for the statistics.

    `warm=True`: a repeat right after a run of the same cell, so the server is warm at this shape and the
    warm-up requests would change nothing but the wall time: none are sent (SGLang's --flush-cache stays, so a
    repeat's identical prompts find no cached prefix and the accept-length counter starts again)."""
    warmups = "0" if warm else str(cell.warmups if cell.warmups is not None else max(cell.concurrency or 1, 1))
    load = ["--max-concurrency", str(cell.concurrency)] if cell.concurrency is not None else []
    load += ["--request-rate", str(cell.request_rate)] if cell.request_rate is not None else []
    seed = ["--seed", str(cell.seed)] if cell.seed is not None else []
    out_len = ["--random-output-len", str(cell.output_len)] if cell.output_len is not None else []
    if cell.kind == "vllm":
        dataset = cell.dataset if cell.dataset not in (None, "random-ids") else "random"
        return [
            "--backend", "vllm", "--base-url", f"http://127.0.0.1:{cell.port}", "--endpoint", "/v1/completions",
            *(["--model", cell.served_name] if cell.served_name else []),
            *(["--tokenizer", cell.tokenizer] if cell.tokenizer else []),
            "--dataset-name", dataset, "--random-input-len", str(cell.input_len), *out_len,
            # vLLM's ratio is a spread around the length: 0 = fixed lengths
            "--random-range-ratio", str(cell.range_ratio if cell.range_ratio is not None else 0.0),
            "--num-prompts", str(cell.num_prompts), *load, *seed,
            "--num-warmups", warmups, "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99",
            "--save-result", "--save-detailed", "--append-result", "--result-dir", output_dir,
            "--result-filename", cell.file, *cell.extra_args,
        ]  # fmt: skip
    dataset = cell.dataset or "random-ids"
    if dataset == "random" and "--dataset-path" not in cell.extra_args:
        # SGLang's `random` takes its token ids from ShareGPT, downloaded from the Hub; verify runs the client
        # offline (HF_HUB_OFFLINE), so the same lengths, ratio and load are measured with random token ids.
        dataset = "random-ids"
    return [
        "--backend", "sglang", "--host", "127.0.0.1", "--port", str(cell.port),
        "--dataset-name", dataset,
        "--random-input-len", str(cell.input_len), *out_len,
        # SGLang's ratio is the shortest share of the length: 1 = fixed lengths
        "--random-range-ratio", str(cell.range_ratio if cell.range_ratio is not None else 1.0),
        "--num-prompts", str(cell.num_prompts), *load, *seed,
        # --flush-cache resets the server's accept-length counter, which is otherwise lifetime-cumulative.
        "--warmup-requests", warmups, "--flush-cache", "--output-details",
        "--output-file", f"{output_dir}/{cell.file}", *cell.extra_args,
    ]  # fmt: skip


def cells_from_output(
    cells: list[Cell], texts: dict[str, str], *, simulated: bool = False
) -> tuple[list[CellResult], list[str]]:
    """Results per cell (every repeat, with intervals) from each client's output file and the telemetry
    recorded while it ran; problems for cells that produced none."""
    results, problems = [], []
    for cell in (c for c in cells if c.record):
        text = texts.get(cell.file, "")
        try:
            if cell.kind == "vllm":
                records = parse_vllm_result(text, source=cell.file, input_len=cell.input_len,
                                            output_len=cell.output_len)  # fmt: skip
            else:
                records = parse_bench_jsonl(text, source=cell.file) if text.strip() else []
        except ValueError as err:
            problems.append(f"group {cell.group} cell {cell.shape}: {err}")
            continue
        if not records:
            problems.append(f"group {cell.group} cell {cell.shape}: the client wrote no result")
            continue
        results.append(CellResult.from_repeats(records, num_prompts=cell.num_prompts, group=cell.group,
                                               raw_files=[cell.file] * len(records),
                                               telemetry=cell_telemetry(cell, texts, simulated)))  # fmt: skip
    return results, problems


def cell_telemetry(cell: Cell, texts: dict[str, str], simulated: bool) -> CellTelemetry | None:
    """The server's /metrics and the GPUs' samples while the cell ran (None when nothing was recorded)."""
    metrics, gpu, window = (texts.get(name, "") for name in cell.telemetry_files)
    if not (metrics.strip() or gpu.strip()):
        return None
    stamps = [float(t) for t in window.split() if t.replace(".", "", 1).isdigit()]
    recorded = [name for name in cell.telemetry_files[:2] if texts.get(name, "").strip()]
    try:
        return summarise_cell_telemetry(
            cell.kind,
            metrics_text=metrics or None,
            gpu_csv=gpu or None,
            simulated=simulated,
            window=(stamps[0], stamps[-1]) if len(stamps) > 1 else None,
            files=recorded,
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
