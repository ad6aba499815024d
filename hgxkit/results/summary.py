"""The normalized summary of a run (`summary.json`): tool, metric definitions and per-cell metrics.

Example:
    >>> cell = CellResult(5000, 1, 10, 10, 0, 257.4, 263.3, 270.2, 5.22, 110.0)
    >>> cell.meets_slo(5000.0)
    True
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from hgxkit.results.bench import BenchRecord

SUMMARY_SCHEMA_VERSION = 1
# What each metric means, as SGLang's benchmark client computes it (stored with every summary so a reader
# of the archive knows what was measured).
METRIC_DEFINITIONS = {
    "ttft_ms": "time to first token: request sent -> first streamed token, per request (client side)",
    "ttft_p90_ms/ttft_p99_ms": "90th/99th percentile of per-request TTFT in the cell (numpy percentile)",
    "accept_length": "average accepted draft tokens + 1 per forward, from the server (/server_info "
    "internal_states avg_spec_accept_length) after --flush-cache reset it for the cell",
    "output_throughput": "generated tokens / cell duration, tokens per second",
    "failed": "requests without a response (num_prompts - completed)",
}


@dataclass(frozen=True)
class CellResult:
    """One benchmark cell (input length x concurrency) of one serving group."""

    input_len: int
    concurrency: int
    num_prompts: int
    completed: int
    failed: int
    ttft_mean_ms: float
    ttft_p90_ms: float
    ttft_p99_ms: float
    accept_length: float | None
    output_throughput: float
    group: int = 0
    duration_s: float | None = None
    ttfts_ms: list[float] = field(default_factory=list)
    raw_file: str | None = None

    def meets_slo(self, p99_limit_ms: float) -> bool:
        return self.ttft_p99_ms < p99_limit_ms

    @classmethod
    def from_record(cls, record: BenchRecord, *, num_prompts: int, group: int, raw_file: str | None) -> CellResult:
        return cls(
            input_len=record.input_len,
            concurrency=record.max_concurrency or 1,
            num_prompts=num_prompts,
            completed=record.completed,
            failed=max(num_prompts - record.completed, record.failed),
            ttft_mean_ms=record.ttft_mean_ms,
            ttft_p90_ms=record.ttft_p90_ms,
            ttft_p99_ms=record.ttft_p99_ms,
            accept_length=record.accept_length,
            output_throughput=record.output_throughput,
            group=group,
            duration_s=record.duration_s,
            ttfts_ms=record.ttfts_ms,
            raw_file=raw_file,
        )


@dataclass(frozen=True)
class RunSummary:
    """Everything `results show/compare` needs, normalized from the client's JSONL."""

    run_id: str
    host: str
    recipe: str
    time: str
    simulated: bool
    tool: str
    tool_version: str | None
    cells: list[CellResult]
    schema_version: int = SUMMARY_SCHEMA_VERSION
    metric_definitions: dict[str, str] = field(default_factory=lambda: dict(METRIC_DEFINITIONS))
    gates: list[str] = field(default_factory=list)
    bench: str = "smoke"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunSummary:
        values = dict(data)
        values["cells"] = [CellResult(**cell) for cell in data.get("cells", [])]
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in values.items() if k in known})

    def cell(self, input_len: int, concurrency: int, group: int | None = None) -> CellResult | None:
        """The cell for this shape (the first group's, unless `group` is given)."""
        for cell in self.cells:
            if (cell.input_len, cell.concurrency) == (input_len, concurrency) and group in (None, cell.group):
                return cell
        return None
