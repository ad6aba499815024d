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

from hgxkit.recipe.model import Recipe
from hgxkit.results.bench import parse_bench_jsonl
from hgxkit.results.summary import CellResult

BenchMode = Literal["smoke", "full", "none"]
CLIENT_MODULES = ("sglang.benchmark.serving", "sglang.bench_serving")
CONTAINER_PORT_DEFAULT = 30000


@dataclass(frozen=True)
class Cell:
    """One benchmark cell for one group's container."""

    group: int
    container: str
    port: int
    input_len: int
    concurrency: int
    num_prompts: int
    output_len: int

    @property
    def file(self) -> str:
        return f"g{self.group}_{self.input_len}_{self.concurrency}.jsonl"


def plan_cells(
    recipe: Recipe, mode: BenchMode, groups: list[tuple[int, str]], output_len: int | None = None
) -> list[Cell]:
    """The cells to run: the recipe's smoke cell or whole matrix, for each (group, container name)."""
    matrix = recipe.matrix
    if mode == "none" or matrix is None:
        return []
    out_len = output_len or matrix.output_len
    port = int(recipe.server.flag("--port") or CONTAINER_PORT_DEFAULT)
    if mode == "smoke":
        smoke = matrix.smoke or None
        shapes = [(smoke.input_len, smoke.concurrency, smoke.num_prompts)] if smoke else [(matrix.input_lens[0], 1, 3)]
    else:
        shapes = [(i, c, matrix.prompts_for(c)) for i in matrix.input_lens for c in matrix.concurrencies]
    return [Cell(g, name, port, i, c, n, out_len) for g, name in groups for i, c, n in shapes]


def client_argv(cell: Cell, output_dir: str) -> list[str]:
    """Arguments of SGLang's benchmark client for one cell (random-ids: no dataset download)."""
    return [
        "--backend", "sglang", "--host", "127.0.0.1", "--port", str(cell.port),
        "--dataset-name", "random-ids",
        "--random-input-len", str(cell.input_len), "--random-output-len", str(cell.output_len),
        "--random-range-ratio", "1.0",
        "--num-prompts", str(cell.num_prompts), "--max-concurrency", str(cell.concurrency),
        # Warmups at least the concurrency (a cold first batch is not the steady state); --flush-cache resets
        # the server's accept-length counter, which is otherwise lifetime-cumulative.
        "--warmup-requests", str(max(cell.concurrency, 1)), "--flush-cache", "--output-details",
        "--output-file", f"{output_dir}/{cell.file}",
    ]  # fmt: skip


def cells_from_jsonl(cells: list[Cell], texts: dict[str, str]) -> tuple[list[CellResult], list[str]]:
    """Results per cell from the client's JSONL files; problems for cells that produced none."""
    results, problems = [], []
    for cell in cells:
        text = texts.get(cell.file, "")
        records = parse_bench_jsonl(text, source=cell.file) if text.strip() else []
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


