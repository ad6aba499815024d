"""What to benchmark and what the poster measured: matrix cells and reference numbers (recipe schema v2).

A `MatrixCell` is one run of a benchmark client with every setting the post used: dataset, input and
output length, range ratio, concurrency or request rate, prompts, warmups, seed, the client's backend.
A setting the post did not give is None ("the client's default", or "not stated" for cells read from a
log), never a guess. A `ReferenceCell` holds the numbers the post printed for one matrix cell, with the
lines they were read from.

Example:
    >>> cell = MatrixCell(id="5000x1", input_len=5000, concurrency=1, num_prompts=10)
    >>> matrix = BenchmarkMatrix(entries=(cell,))
    >>> [c.id for c in matrix.cells()], matrix.input_lens, matrix.prompts_for(1)
    (['5000x1'], (5000,), 10)
    >>> ReferenceCell(cell=cell, ttft_mean_ms=260.38).input_len
    5000
"""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True)
class MatrixCell:
    """One benchmark run: the client's settings, as the post ran it (None: not given, the client's default).

    `concurrency` caps requests in flight (`--max-concurrency`); `request_rate` is requests per second
    (Poisson arrivals); None for both sends every request at once. `range_ratio` is the client's own
    `--random-range-ratio` (SGLang: 1.0 = fixed lengths; vLLM: 0.0 = fixed lengths). `extra_args` are the
    other client flags that shape the workload (`--ignore-eos`, `--endpoint …`), in original spelling.
    """

    id: str
    input_len: int | None = None
    output_len: int | None = None
    concurrency: int | None = None
    request_rate: float | None = None
    num_prompts: int | None = None
    dataset: str | None = None
    range_ratio: float | None = None
    warmups: int | None = None
    seed: int | None = None
    client: str | None = None
    backend: str | None = None
    extra_args: tuple[str, ...] = ()
    source: str | None = None

    @property
    def by_rate(self) -> bool:
        """True for a cell driven by request rate rather than by a concurrency cap."""
        return self.request_rate is not None and self.concurrency is None


# Settings a cell may take from `matrix.defaults` (everything but its identity, its source and its flags).
CELL_SETTINGS: tuple[str, ...] = tuple(
    f.name for f in fields(MatrixCell) if f.name not in ("id", "extra_args", "source")
)


@dataclass(frozen=True)
class WarmupRun:
    """A run done once before the cells, whose numbers are not kept (the seed post's "prefill warmup")."""

    input_len: int
    concurrency: int
    num_prompts: int
    output_len: int | None = None


@dataclass(frozen=True)
class SmokeCell:
    """The single small cell verify runs by default."""

    input_len: int
    concurrency: int
    num_prompts: int


@dataclass(frozen=True)
class BenchmarkMatrix:
    """The cells to run, in order, with the warmup runs before them and the smoke cell.

    `cells()` is the API: typed cells with every setting. The v1 properties (`input_lens`, `concurrencies`,
    `prompts_for`, `output_len`, `dataset`, `random_range_ratio`) read the same cells for callers that still
    think in a grid; they describe the cells, but a grid rebuilt from them may hold cells the recipe lacks.
    """

    entries: tuple[MatrixCell, ...]
    warmup_runs: tuple[WarmupRun, ...] = ()
    smoke: SmokeCell | None = None
    notes: str | None = None

    def cells(self) -> tuple[MatrixCell, ...]:
        """Every cell with every setting, in the order the post ran them."""
        return self.entries

    def cell(self, cell_id: str) -> MatrixCell:
        """The cell with this id; KeyError when there is none."""
        for cell in self.entries:
            if cell.id == cell_id:
                return cell
        raise KeyError(cell_id)

    @property
    def input_lens(self) -> tuple[int, ...]:
        return tuple(dict.fromkeys(c.input_len for c in self.entries if c.input_len is not None))

    @property
    def concurrencies(self) -> tuple[int, ...]:
        return tuple(dict.fromkeys(c.concurrency for c in self.entries if c.concurrency is not None))

    @property
    def num_prompts(self) -> tuple[int | None, ...]:
        return tuple(self.prompts_for(c) for c in self.concurrencies)

    def prompts_for(self, concurrency: int) -> int | None:
        """Prompts of the first cell at this concurrency (v1 kept one count per concurrency)."""
        return next((c.num_prompts for c in self.entries if c.concurrency == concurrency), None)

    @property
    def output_len(self) -> int | None:
        return next((c.output_len for c in self.entries if c.output_len is not None), None)

    @property
    def dataset(self) -> str | None:
        return next((c.dataset for c in self.entries if c.dataset is not None), None)

    @property
    def random_range_ratio(self) -> float | None:
        return next((c.range_ratio for c in self.entries if c.range_ratio is not None), None)


@dataclass(frozen=True)
class Metric:
    """One number a benchmark client prints: its recipe key, its printed label(s), its type."""

    key: str
    labels: tuple[str, ...]
    integer: bool = False


def _latency(name: str, printed: tuple[str, ...]) -> list[Metric]:
    stats = (("mean", "Mean"), ("median", "Median"), ("p90", "P90"), ("p95", "P95"), ("p99", "P99"))
    return [Metric(f"{name}_{stat}_ms", tuple(f"{label} {p} (ms)" for p in printed)) for stat, label in stats]


# The metrics clients print (SGLang's `sglang.benchmark.serving` and vLLM's `vllm bench serve` report blocks),
# with every spelling seen in posts; labels are matched without regard to case (vLLM 0.9 prints "Total Token
# throughput"). Order is the order of a recipe's reference cell.
METRICS: tuple[Metric, ...] = (
    Metric("completed", ("Successful requests",), integer=True),
    Metric("failed", ("Failed requests",), integer=True),
    Metric("duration_s", ("Benchmark duration (s)",)),
    Metric("request_throughput", ("Request throughput (req/s)",)),
    Metric("input_throughput", ("Input token throughput (tok/s)",)),
    Metric("output_throughput", ("Output token throughput (tok/s)",)),
    Metric("total_throughput", ("Total token throughput (tok/s)",)),
    Metric("peak_concurrency", ("Peak concurrent requests",), integer=True),
    Metric("mean_concurrency", ("Concurrency",)),
    Metric("accept_length", ("Accept length", "Acceptance length")),
    *_latency("ttft", ("TTFT",)),
    *_latency("tpot", ("TPOT",)),
    *_latency("itl", ("ITL",)),
    Metric("itl_max_ms", ("Max ITL (ms)",)),
    *_latency("e2e", ("E2E Latency", "E2EL")),
)
METRIC_KEYS: tuple[str, ...] = tuple(m.key for m in METRICS)


@dataclass(frozen=True)
class ReferenceCell:
    """The post's numbers for one matrix cell, and where in the post they were read (`file:line`)."""

    cell: MatrixCell
    sources: tuple[str, ...] = ()
    completed: int | None = None
    failed: int | None = None
    duration_s: float | None = None
    request_throughput: float | None = None
    input_throughput: float | None = None
    output_throughput: float | None = None
    total_throughput: float | None = None
    peak_concurrency: int | None = None
    mean_concurrency: float | None = None
    accept_length: float | None = None
    ttft_mean_ms: float | None = None
    ttft_median_ms: float | None = None
    ttft_p90_ms: float | None = None
    ttft_p95_ms: float | None = None
    ttft_p99_ms: float | None = None
    tpot_mean_ms: float | None = None
    tpot_median_ms: float | None = None
    tpot_p90_ms: float | None = None
    tpot_p95_ms: float | None = None
    tpot_p99_ms: float | None = None
    itl_mean_ms: float | None = None
    itl_median_ms: float | None = None
    itl_p90_ms: float | None = None
    itl_p95_ms: float | None = None
    itl_p99_ms: float | None = None
    itl_max_ms: float | None = None
    e2e_mean_ms: float | None = None
    e2e_median_ms: float | None = None
    e2e_p90_ms: float | None = None
    e2e_p95_ms: float | None = None
    e2e_p99_ms: float | None = None

    # What `hgxkit.results.compare` reads of a reference cell (v1 kept these on the cell itself).
    @property
    def input_len(self) -> int | None:
        return self.cell.input_len

    @property
    def concurrency(self) -> int | None:
        return self.cell.concurrency

    @property
    def num_prompts(self) -> int | None:
        return self.cell.num_prompts

    def metrics(self) -> dict[str, float | int]:
        """The numbers this cell has, by metric key, in `METRICS` order."""
        values = {key: getattr(self, key) for key in METRIC_KEYS}
        return {key: value for key, value in values.items() if value is not None}


@dataclass(frozen=True)
class Reference:
    """Results the poster reported for this setup, the tool that produced them, the SLO they were judged by."""

    tool: str
    label: str | None = None
    notes: str | None = None
    slo_ttft_p99_ms: float | None = None
    cells: tuple[ReferenceCell, ...] = ()
