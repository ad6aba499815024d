"""Markdown reports in the post's layout: TTFT mean / P90 / P99 (with the SLO column), accept length, throughput.

Example:
    >>> print(format_value(257.42))
    257
"""

from __future__ import annotations

import math

from hgxkit.results.compare import Comparison, ReferenceCheck, Row
from hgxkit.results.fingerprint import Fingerprint
from hgxkit.results.summary import RunSummary


def format_value(value: float | None, digits: int = 0) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.{digits}f}"


def _input(n: int) -> str:
    return f"{n // 1000}K" if n % 1000 == 0 else str(n)


def _table(title: str, header: list[str], rows: list[list[str]]) -> list[str]:
    lines = [f"### {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return [*lines, ""]


def comparison_markdown(comparison: Comparison, differences: list[str]) -> str:
    """The comparison as Markdown: fingerprint differences first, then the post's tables."""
    c = comparison
    lines = [f"## {c.label_a} vs {c.label_b}", ""]
    lines += [f"> {note}" for note in c.notes]
    if c.notes:
        lines.append("")
    lines += ["**What differs between the hosts and setups:**", ""]
    lines += [f"- {d}" for d in differences] or ["- nothing recorded differs"]
    lines.append("")

    def rows(data: list[Row], digits: int = 0) -> list[list[str]]:
        return [
            [_input(r.input_len), str(r.concurrency), format_value(r.a, digits), format_value(r.b, digits), r.verdict]
            for r in data
        ]

    head = ["Input", "Conc", c.label_a, c.label_b]
    lines += _table("TTFT Mean (ms — lower = better)", [*head, "Delta"], rows(c.ttft_mean))
    lines += _table("TTFT P90 (ms — lower = better)", [*head, "Delta"], rows(c.ttft_p90))
    slo = f"Under {c.slo_p99_ms / 1000:g}s?"
    lines += _table("TTFT P99 (ms — lower = better)", [*head, slo], rows(c.ttft_p99))
    lines += _table("Accept Length", [*head, "Delta"], rows(c.accept_length, 2))
    lines += _table("Output throughput (tok/s — higher = better)", [*head, "Delta"], rows(c.output_throughput))
    return "\n".join(lines)


def run_markdown(summary: RunSummary, fingerprint: Fingerprint, slo_p99_ms: float = 5000.0) -> str:
    """One run: what ran where, the gates, and every cell."""
    banner = "> SIMULATED: this run used a simulated node; no real GPU was involved.\n\n" if summary.simulated else ""
    lines = [
        f"# {summary.recipe} on {summary.host} ({summary.time})",
        "",
        banner.strip(),
        f"- tool: {summary.tool} {summary.tool_version or ''}".rstrip(),
        f"- benchmark: {summary.bench}",
        f"- image: {fingerprint.serving.get('image', '?')} ({fingerprint.serving.get('image_digest', '?')})",
        f"- model: {fingerprint.model.get('repo_id', '?')} @ {fingerprint.model.get('commit', '?')}",
        f"- driver: {fingerprint.packages.get('driver', '?')}; GPUs: {fingerprint.accelerators_per_node} x "
        f"{fingerprint.accelerator_model_name}",
        "",
    ]
    if summary.gates:
        lines += ["**Gates failed:**", ""] + [f"- {g}" for g in summary.gates] + [""]
    header = ["Group", "Input", "Conc", "Prompts", "Failed", "TTFT mean", "P90", "P99",
              f"P99 < {slo_p99_ms / 1000:g}s", "Accept", "Out tok/s"]  # fmt: skip
    rows = [
        [
            str(c.group),
            _input(c.input_len),
            str(c.concurrency),
            str(c.num_prompts),
            str(c.failed),
            format_value(c.ttft_mean_ms),
            format_value(c.ttft_p90_ms),
            format_value(c.ttft_p99_ms),
            "✅" if c.meets_slo(slo_p99_ms) else "❌",
            format_value(c.accept_length, 2),
            format_value(c.output_throughput),
        ]
        for c in sorted(summary.cells, key=lambda c: (c.group, c.input_len, c.concurrency))
    ]
    lines += _table("Cells", header, rows)
    return "\n".join(line for line in lines if line is not None)


def reference_markdown(summary: RunSummary, check: ReferenceCheck, source: str) -> str:
    tol = check.tolerances
    lines = [
        f"## {summary.recipe} on {summary.host} vs the reference ({source})",
        "",
        f"Tolerances: TTFT within ±{tol['ttft_relative'] * 100:.0f}% of the reference, accept length within "
        f"±{tol['accept_length_absolute']:.2f}. {check.within} within, {check.outside} outside, "
        f"{check.missing} not measured.",
        "",
    ]
    if summary.simulated:
        lines += ["> SIMULATED: the run used a simulated node; agreement says only that the stand-in is tuned.", ""]
    rows = [[m, _input(i), str(c), format_value(r, 2), format_value(g, 2), s] for m, i, c, r, g, s in check.rows]
    lines += _table("Run vs reference", ["Metric", "Input", "Conc", "Reference", "Run", "Difference"], rows)
    return "\n".join(lines)
