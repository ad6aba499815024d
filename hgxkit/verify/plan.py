"""The benchmark plan: which cells run against which group, the client's arguments per cell, the results
read back from the client's JSONL, and the gates that fail a run.

Example:
    >>> cell = Cell(0, "dsv4-0", 30000, 5000, 1, 3, 512)
    >>> client_argv(cell, "/tmp/out")[:4], cell.file
    (['--backend', 'sglang', '--host', '127.0.0.1'], 'g0_5000_1.jsonl')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from hgxkit.recipe.kinds import KINDS
from hgxkit.recipe.model import Recipe
from hgxkit.results.bench import parse_bench_jsonl
from hgxkit.results.summary import CellResult
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
    """One benchmark cell for one group's container, measured by its kind's client from inside it."""

    group: int
    container: str
    port: int  # the server's port inside the container
    input_len: int
    concurrency: int
    num_prompts: int
    output_len: int
    kind: str = "sglang"
    served_name: str | None = None  # the name the server answers to (vLLM's client must send it)
    tokenizer: str | None = None  # the model's path in the container (vLLM's client tokenizes prompts)

    @property
    def file(self) -> str:
        return f"g{self.group}_{self.input_len}_{self.concurrency}.{'json' if self.kind == 'vllm' else 'jsonl'}"

    @property
    def client(self) -> str:
        return KINDS[self.kind].client


def plan_cells(
    recipe: Recipe, mode: BenchMode, groups: list[tuple[int, str]], output_len: int | None = None
) -> list[Cell]:
    """The cells to run: the recipe's smoke cell or whole matrix (a default smoke cell without one), for each
    (group, container name)."""
    if mode == "none":
        return []
    kind = recipe.server.server_kind
    matrix = recipe.matrix
    port = int(recipe.server.flag("--port") or kind.default_port)
    if matrix is None:
        i, c, n, o = DEFAULT_SMOKE
        shapes, out_len = [(i, c, n)], output_len or o
    elif mode == "smoke":
        smoke = matrix.smoke or None
        shapes = [(smoke.input_len, smoke.concurrency, smoke.num_prompts)] if smoke else [(matrix.input_lens[0], 1, 3)]
        out_len = output_len or matrix.output_len
    else:
        shapes = [(i, c, matrix.prompts_for(c)) for i in matrix.input_lens for c in matrix.concurrencies]
        out_len = output_len or matrix.output_len
    served = recipe.server.flag("--served-model-name")
    model = recipe.server.flag(kind.model_flag)
    return [Cell(g, name, port, i, c, n, out_len, kind.name, served.split()[0] if served else model, model)
            for g, name in groups for i, c, n in shapes]  # fmt: skip


def client_argv(cell: Cell, output_dir: str) -> list[str]:
    """Arguments of the kind's own benchmark client for one cell: random prompts of exactly the cell's
    lengths (no dataset download), warmups at least the concurrency (a cold first batch is not the steady
    state), per-request details kept for the statistics."""
    warmups = str(max(cell.concurrency, 1))
    if cell.kind == "vllm":
        return [
            "--backend", "vllm", "--base-url", f"http://127.0.0.1:{cell.port}", "--endpoint", "/v1/completions",
            *(["--model", cell.served_name] if cell.served_name else []),
            *(["--tokenizer", cell.tokenizer] if cell.tokenizer else []),
            "--dataset-name", "random", "--random-input-len", str(cell.input_len),
            "--random-output-len", str(cell.output_len),
            "--random-range-ratio", "0.0",  # vLLM's ratio is a spread around the length: 0 = exact
            "--num-prompts", str(cell.num_prompts), "--max-concurrency", str(cell.concurrency),
            "--num-warmups", warmups, "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99",
            "--save-result", "--save-detailed", "--result-dir", output_dir, "--result-filename", cell.file,
        ]  # fmt: skip
    return [
        "--backend", "sglang", "--host", "127.0.0.1", "--port", str(cell.port),
        "--dataset-name", "random-ids",
        "--random-input-len", str(cell.input_len), "--random-output-len", str(cell.output_len),
        "--random-range-ratio", "1.0",  # SGLang's ratio is the shortest share of the length: 1 = exact
        "--num-prompts", str(cell.num_prompts), "--max-concurrency", str(cell.concurrency),
        # --flush-cache resets the server's accept-length counter, which is otherwise lifetime-cumulative.
        "--warmup-requests", warmups, "--flush-cache", "--output-details",
        "--output-file", f"{output_dir}/{cell.file}",
    ]  # fmt: skip


def cells_from_output(cells: list[Cell], texts: dict[str, str]) -> tuple[list[CellResult], list[str]]:
    """Results per cell from each client's output file; problems for cells that produced none."""
    results, problems = [], []
    for cell in cells:
        text = texts.get(cell.file, "")
        try:
            if cell.kind == "vllm":
                records = parse_vllm_result(text, source=cell.file, input_len=cell.input_len,
                                            output_len=cell.output_len)  # fmt: skip
            else:
                records = parse_bench_jsonl(text, source=cell.file) if text.strip() else []
        except ValueError as err:
            problems.append(f"group {cell.group} cell {cell.input_len}x{cell.concurrency}: {err}")
            continue
        if not records:
            problems.append(f"group {cell.group} cell {cell.input_len}x{cell.concurrency}: the client wrote no result")
            continue
        results.append(CellResult.from_record(records[-1], num_prompts=cell.num_prompts, group=cell.group,
                                              raw_file=cell.file))  # fmt: skip
    return results, problems


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


