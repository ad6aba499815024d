"""Markdown reports in the post's layout: TTFT mean / P90 / P99 (with the SLO column), accept length, throughput,
then every client metric, the 95% intervals and the telemetry of each cell.

Example:
    >>> print(format_value(257.42))
    257
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from hgxkit.results.compare import TABLES, Comparison, ReferenceCheck, Row, run_flags
from hgxkit.results.fingerprint import Fingerprint, fingerprint_differences
from hgxkit.results.metrics import HEADLINE_METRICS, METRICS
from hgxkit.results.stats import Interval
from hgxkit.results.summary import CellResult, RunSummary

TABLE_TITLES = {
    "ttft_mean": "TTFT Mean (ms — lower = better)",
    "ttft_p90": "TTFT P90 (ms — lower = better)",
    "ttft_p99": "TTFT P99 (ms — lower = better)",
    "tpot_mean": "TPOT Mean (ms — lower = better)",
    "accept_length": "Accept Length",
    "output_throughput": "Output throughput (tok/s — higher = better)",
}
GPU_TELEMETRY_COLUMNS = (
    "Cell",
    "GPU",
    "Power mean W",
    "max W",
    "SM MHz mean",
    "min",
    "Mem MiB max",
    "Temp max C",
    "Util %",
    "Throttle reasons (samples)",
)
SERVER_TELEMETRY_COLUMNS = (
    "Cell",
    "Kind",
    "Scrapes",
    "Running mean",
    "Queued max",
    "KV use max",
    "Server tok/s",
    "Client tok/s",
    "Server accept",
    "Client accept",
)


def format_value(value: float | None, digits: int = 0) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.{digits}f}"


def metric_digits(name: str) -> int:
    """Decimals worth printing: sub-10 ms latencies and accept length get 2, the rest 0."""
    if name in ("accept_length", "mean_concurrency", "duration_s", "request_throughput") or name.startswith(
        ("tpot", "itl")
    ):
        return 2
    return 0


def input_label(n: int) -> str:
    return f"{n // 1000}K" if n and n % 1000 == 0 else str(n)


def with_interval(value: float | None, interval: Interval | None, digits: int = 0) -> str:
    """`309 [283, 358]`, `1450 [1210, no upper bound at n=30]`, or the bare value when there is no interval."""
    text = format_value(value, digits)
    if interval is not None and (interval.known or interval.low is not None):
        text += f" {interval.text(digits)}"  # a quantile over too few requests: [low, no upper bound at n=30]
    return text


def cell_label(cell: CellResult) -> str:
    return f"g{cell.group} {input_label(cell.input_len)}×{cell.concurrency}"


def _table(title: str, header: Sequence[str], rows: list[list[str]]) -> list[str]:
    lines = [f"### {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return [*lines, ""]


def comparison_markdown(comparison: Comparison, differences: list[str]) -> str:
    """The comparison as Markdown: fingerprint differences first, then the post's tables with 95% intervals."""
    c = comparison
    lines = [f"## {c.label_a} vs {c.label_b}", ""]
    lines += [f"> {note}" for note in c.notes]
    if c.notes:
        lines.append("")
    lines += ["**What differs between the hosts and setups:**", ""]
    lines += [f"- {d}" for d in differences] or ["- nothing recorded differs"]
    lines.append("")
    if c.flags:
        lines += ["**Telemetry flags:**", ""] + [f"- {f}" for f in c.flags] + [""]

    def rows(data: list[Row], digits: int, slo: bool = False) -> list[list[str]]:
        out = []
        for r in data:
            p = f"{r.p:.3g}" if r.p is not None else "-"
            row = [
                input_label(r.input_len),
                str(r.concurrency),
                with_interval(r.a, r.interval_a, digits),
                with_interval(r.b, r.interval_b, digits),
                r.verdict,
                p,
            ]
            out.append([*row, r.slo or ""] if slo else row)
        return out

    head = ["Input", "Conc", f"{c.label_a} [95% CI]", f"{c.label_b} [95% CI]", "Verdict", "p"]
    for key, metric in TABLES:
        digits = metric_digits(metric)
        if key == "ttft_p99":
            lines += _table(
                TABLE_TITLES[key], [*head, f"Under {c.slo_p99_ms / 1000:g}s?"], rows(c.ttft_p99, digits, slo=True)
            )
        else:
            lines += _table(TABLE_TITLES[key], head, rows(getattr(c, key), digits))
    if c.goodput:
        lines += _goodput_table(c)
    return "\n".join(lines)


def _goodput_table(c: Comparison) -> list[str]:
    """Goodput per cell under `--slo`, as the engines' clients define it (good requests/s, share of requests)."""

    def side(g: dict) -> str:
        if g["good"] is None:
            return f"n/a ({g['reason']})"
        checks = " ".join(f"{t['term']} {'✅' if t['met'] else '❌'}" for t in g["terms"] if t["met"] is not None)
        rate = f"{g['request_goodput']:.2f} req/s, " if g["request_goodput"] is not None else ""
        return f"{rate}{g['good']}/{g['requests']} good ({g['slo_attainment'] * 100:.0f}%) {checks}".strip()

    slos = ",".join(s.text for s in c.slos)
    return _table(
        f"Goodput under {slos}",
        ["Input", "Conc", c.label_a, c.label_b],
        [[input_label(g["input_len"]), str(g["concurrency"]), side(g["a"]), side(g["b"])] for g in c.goodput],
    )


def _group_lines(head: Fingerprint, members: dict[str, Fingerprint]) -> list[str]:
    """A multi-node run's topology and, per other rank, what differs from rank 0's host."""
    ranks = head.node_group.get("ranks") or []
    if not ranks:
        return []
    where = ", ".join(f"rank {r.get('rank')} {r.get('host')} ({r.get('address')})" for r in ranks)
    lines = [f"- multi-node group: {len(ranks)} nodes, rendezvous port {head.node_group.get('dist_port')}: {where}"]
    for name, member in sorted(members.items()):
        differ = [d for d in fingerprint_differences(head, member) if not d.startswith("simulated: both")]
        lines.append(f"- {name}: " + ("; ".join(differ) if differ else f"same setup as {head.system_name}"))
    return lines


def _cells_table(cells: list[CellResult], slo_p99_ms: float) -> list[str]:
    """The post's table: one row per cell, TTFT and its SLO, accept length, output throughput."""
    header = [
        "Group",
        "Input",
        "Conc",
        "Prompts",
        "Failed",
        "Repeats",
        "TTFT mean",
        "P90",
        "P99",
        f"P99 < {slo_p99_ms / 1000:g}s",
        "Accept",
        "Out tok/s",
    ]
    rows = [
        [
            str(c.group),
            input_label(c.input_len),
            str(c.concurrency),
            str(c.num_prompts),
            str(c.failed),
            str(len(c.repeats) or 1),
            format_value(c.ttft_mean_ms),
            format_value(c.ttft_p90_ms),
            format_value(c.ttft_p99_ms),
            "✅" if c.meets_slo(slo_p99_ms) else "❌",
            format_value(c.accept_length, 2),
            format_value(c.output_throughput),
        ]
        for c in cells
    ]
    return _table("Cells", header, rows)


def run_markdown(
    summary: RunSummary,
    fingerprint: Fingerprint,
    slo_p99_ms: float = 5000.0,
    members: dict[str, Fingerprint] | None = None,
) -> str:
    """One run: what ran where (every host of a multi-node group, and what differs from rank 0's), the gates,
    the post's table, every metric, intervals and telemetry."""
    banner = "> SIMULATED: this run used a simulated node; no real GPU was involved." if summary.simulated else ""
    lines = [
        f"# {summary.recipe} on {summary.host} ({summary.time})",
        "",
        banner,
        f"- tool: {summary.tool} {summary.tool_version or ''}".rstrip(),
        f"- benchmark: {summary.bench}",
        f"- image: {fingerprint.serving.get('image', '?')} ({fingerprint.serving.get('image_digest', '?')})",
        f"- model: {fingerprint.model.get('repo_id', '?')} @ {fingerprint.model.get('commit', '?')}",
        f"- driver: {fingerprint.packages.get('driver', '?')}; GPUs: {fingerprint.accelerators_per_node} x "
        f"{fingerprint.accelerator_model_name}",
        *_group_lines(fingerprint, members or {}),
        "",
    ]
    if summary.gates:
        lines += ["**Gates failed:**", ""] + [f"- {g}" for g in summary.gates] + [""]
    cells = sorted(summary.cells, key=lambda c: (c.group, c.input_len, c.concurrency))
    lines += _cells_table(cells, slo_p99_ms)
    if cells:
        metric_rows = [
            [f"{m.name} ({m.unit})", *(format_value(c.value(m.name), metric_digits(m.name)) for c in cells)]
            for m in METRICS
        ]
        lines += _table("Every client metric", ["Metric", *(cell_label(c) for c in cells)], metric_rows)
        interval_rows = [
            [
                cell_label(c),
                name,
                format_value(c.value(name), metric_digits(name)),
                i.text(metric_digits(name)),
                i.over_text,
            ]
            for c in cells
            for name in HEADLINE_METRICS
            if (i := c.intervals.get(name))
        ]
        lines += _table("95% intervals", ["Cell", "Metric", "Value", "Interval", "Over"], interval_rows)
    translated = [f"- {cell_label(c)}: {c.lengths}" for c in cells if c.lengths]
    if translated:
        lines += ["**Lengths translated for this client:**", "", *translated, ""]
    lines += telemetry_markdown(cells)
    flags = run_flags(summary, summary.recipe)
    if flags:
        lines += ["**Telemetry flags:**", ""] + [f"- {f}" for f in flags] + [""]
    lines += ["Metric names and units: `metric_definitions` in summary.json.", ""]
    return "\n".join(lines)


def telemetry_markdown(cells: list[CellResult]) -> list[str]:
    """Per-cell GPU and server telemetry tables (each row says SIMULATED when it was)."""
    with_telemetry = [c for c in cells if c.telemetry is not None]
    if not with_telemetry:
        return []
    gpu_rows = [row for c in with_telemetry for row in _gpu_telemetry_rows(c)]
    server_rows = [row for c in with_telemetry if (row := _server_telemetry_row(c))]
    lines = _table("GPU telemetry", GPU_TELEMETRY_COLUMNS, gpu_rows)
    if server_rows:
        lines += _table("Server telemetry (from /metrics)", SERVER_TELEMETRY_COLUMNS, server_rows)
    return lines


def _telemetry_label(cell: CellResult) -> str:
    assert cell.telemetry is not None
    return cell_label(cell) + (" (SIMULATED)" if cell.telemetry.simulated else "")


def _gpu_telemetry_rows(cell: CellResult) -> list[list[str]]:
    """One row per GPU the cell sampled: power, SM clock, memory, temperature, utilisation, throttle reasons."""
    assert cell.telemetry is not None
    rows = []
    for g in cell.telemetry.gpus:
        reasons = ", ".join(f"{k}×{v}" for k, v in g.throttle_reasons.items()) or "none"
        values = (
            g.power_mean_w,
            g.power_max_w,
            g.sm_clock_mean_mhz,
            g.sm_clock_min_mhz,
            g.memory_used_max_mib,
            g.temperature_max_c,
            g.utilization_mean_pct,
        )
        rows.append([_telemetry_label(cell), str(g.index), *(format_value(v) for v in values), reasons])
    return rows


def _server_telemetry_row(cell: CellResult) -> list[str] | None:
    """The server's own /metrics beside the client's numbers (None: the server was not scraped)."""
    assert cell.telemetry is not None
    s = cell.telemetry.server
    if not s:
        return None
    return [
        _telemetry_label(cell),
        s.kind,
        str(s.scrapes),
        format_value(s.running_mean, 1),
        format_value(s.waiting_max),
        format_value(s.kv_usage_max, 2),
        format_value(s.output_throughput),
        format_value(cell.output_throughput),
        format_value(s.accept_length, 2),
        format_value(cell.accept_length, 2),
    ]


def reference_markdown(summary: RunSummary, check: ReferenceCheck, source: str, notes: str | None = None) -> str:
    """A run against the reference: tolerances, then one row per metric and cell; `notes` are the reference's
    own (which tool, how its metrics were mapped, which runs the numbers came from)."""
    tol = check.tolerances
    lines = [
        f"## {summary.recipe} on {summary.host} vs the reference ({source})",
        "",
        f"Tolerances: TTFT within ±{tol['ttft_relative'] * 100:.0f}% of the reference, TPOT within "
        f"±{tol['tpot_relative'] * 100:.0f}%, output throughput within "
        f"±{tol['output_throughput_relative'] * 100:.0f}%, accept length within "
        f"±{tol['accept_length_absolute']:.2f}. {check.within} within, {check.outside} outside, "
        f"{check.missing} not measured.",
        "",
        "The reference has no per-request values, so this is a tolerance check, not a statistical test.",
        "",
    ]
    if notes:
        lines += [f"Reference notes: {notes}", ""]
    if summary.simulated:
        lines += ["> SIMULATED: the run used a simulated node; agreement says only that the stand-in is tuned.", ""]
    rows = [
        [
            r.metric,
            input_label(r.input_len),
            str(r.concurrency),
            format_value(r.reference, 2),
            format_value(r.run, 2),
            r.status,
        ]
        for r in check.rows
    ]
    lines += _table("Run vs reference", ["Metric", "Input", "Conc", "Reference", "Run", "Difference"], rows)
    return "\n".join(lines)
