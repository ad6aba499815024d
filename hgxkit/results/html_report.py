"""One self-contained HTML page per run (or per comparison), and an index page of the whole archive.

Nothing is fetched when the page is viewed: CSS is inline, plots are inline SVG from matplotlib, and a
Content-Security-Policy forbids every network load. The page holds the hosts and setup, the post's tables (TTFT
mean/P90/P99 per input length x concurrency with the SLO column, accept length, throughput), the plots, every
client metric, the 95% intervals, telemetry per cell, the comparison with the recipe's reference or with the other
runs, and what differs between the hosts. Simulated data says SIMULATED wherever it appears.

Example:
    >>> from hgxkit.results.archive import scan_runs                  # doctest: +SKIP
    >>> runs, skipped = scan_runs("results")                          # doctest: +SKIP
    >>> open("report.html", "w").write(run_html(runs[-1:]))           # doctest: +SKIP
"""

from __future__ import annotations

import html
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from hgxkit.results.compare import TABLES, compare_reference, compare_runs, run_flags
from hgxkit.results.fingerprint import COMPARED_FIELDS, fingerprint_differences
from hgxkit.results.fingerprint import field_value as fingerprint_field
from hgxkit.results.metrics import HEADLINE_METRICS, METRICS
from hgxkit.results.plots import (
    accept_figure,
    figure_svg,
    latency_throughput_figure,
    sweeps,
    throughput_figure,
    ttft_figure,
)
from hgxkit.results.report import TABLE_TITLES, cell_label, format_value, input_label, metric_digits, with_interval
from hgxkit.results.run import Run
from hgxkit.results.sparkline import telemetry_charts

DEFAULT_SLO_P99_MS = 5000.0
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"  # no script at all: none is needed
CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d232a;background:#f6f7f9}
main{max-width:1180px;margin:0 auto;padding:18px 28px 60px;background:#fff;min-height:100vh}
h1{font-size:22px;margin:8px 0 4px}
h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #dde1e6;padding-bottom:4px}
h3{font-size:15px;margin:18px 0 6px}
table{border-collapse:collapse;margin:6px 0 14px;font-variant-numeric:tabular-nums}
th,td{border:1px solid #d5dae0;padding:3px 8px;text-align:right;vertical-align:top;white-space:nowrap}
td.l{white-space:normal;overflow-wrap:anywhere}
table.wrap-last td:last-child{white-space:normal;text-align:left;min-width:220px}
th{background:#eef1f4;text-align:center;white-space:normal}td.l,th.l{text-align:left}
tr:nth-child(even) td{background:#fafbfc}
.sim{background:#fff3cd;border:1px solid #e0b000;color:#5c4500;padding:8px 12px;margin:10px 0;font-weight:600}
.bad{color:#a4000f;font-weight:600}.ok{color:#0a6b2c}.muted{color:#68717d}
.flag{background:#fdecea;border-left:4px solid #c62828;padding:4px 10px;margin:4px 0}
.plot svg{max-width:100%;height:auto}
details{margin:8px 0}summary{cursor:pointer;color:#1d4f91}
pre{background:#f3f4f6;padding:8px;overflow:auto;max-height:320px;font-size:12px}
code{font-size:12px}
"""


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _table(
    header: Iterable[str], rows: Iterable[Iterable[str]], *, left: int = 1, raw: bool = False, css: str = ""
) -> str:
    """An HTML table; the first `left` columns align left (and wrap). Cells are escaped unless `raw`."""
    head = "".join(f'<th class="{"l" if i < left else ""}">{esc(h)}</th>' for i, h in enumerate(header))
    body = []
    for row in rows:
        cells = "".join(
            f'<td class="{"l" if i < left else ""}">{cell if raw else esc(cell)}</td>' for i, cell in enumerate(row)
        )
        body.append(f"<tr>{cells}</tr>")
    return f'<table class="{css}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _page(title: str, body: str) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{CSS}</style></head>"
        f'<body><main id="report">{body}</main></body></html>\n'
    )


def _plot(fig: Any, salt: str) -> str:
    return f'<div class="plot">{figure_svg(fig, salt)}</div>' if fig is not None else ""


def _setup(runs: list[Run]) -> str:
    """Hosts and setup side by side: the fingerprint fields people compare, and MLPerf's system_desc."""
    header = ["", *(r.run_id for r in runs)]
    rows = [["simulated", *("SIMULATED" if r.fingerprint.simulated else "no" for r in runs)]]
    rows += [["tool", *(f"{r.summary.tool} {r.summary.tool_version or ''}" for r in runs)]]
    rows += [["benchmark", *(r.summary.bench for r in runs)]]
    for label, path in COMPARED_FIELDS[1:]:
        values = [fingerprint_field(r.fingerprint.to_json(), path) for r in runs]
        if any(v is not None for v in values):
            rows.append([label, *(esc(v) if v is not None else "?" for v in values)])
    out = _table(header, rows, left=len(header))
    for run in runs:
        desc = run.fingerprint.mlperf_system_desc()
        out += f"<details><summary>MLPerf system description of {esc(run.run_id)}</summary>"
        out += _table(["field", "value"], desc.items(), left=2) + "</details>"
        if run.fingerprint.server_env_report:
            out += (
                f"<details><summary>Server environment report of {esc(run.run_id)}</summary>"
                f"<pre>{esc(run.fingerprint.server_env_report)}</pre></details>"
            )
    return out


def _post_tables(run: Run, slo_p99_ms: float) -> str:
    """The post's table per serving group: TTFT mean [95% CI] / P90 / P99 + SLO, accept length, throughput."""
    out = []
    for group in sorted({c.group for c in run.summary.cells}):
        cells = sorted((c for c in run.summary.cells if c.group == group), key=lambda c: (c.input_len, c.concurrency))
        rows = []
        for c in cells:
            slo = '<span class="ok">yes</span>' if c.meets_slo(slo_p99_ms) else '<span class="bad">NO</span>'
            failed = f'<span class="bad">{c.failed}</span>' if c.failed else "0"
            rows.append(
                [
                    esc(input_label(c.input_len)),
                    esc(c.concurrency),
                    esc(f"{c.num_prompts} × {len(c.repeats) or 1}"),
                    failed,
                    esc(with_interval(c.ttft_mean_ms, c.intervals.get("ttft_mean_ms"))),
                    esc(format_value(c.ttft_p90_ms)),
                    esc(with_interval(c.ttft_p99_ms, c.intervals.get("ttft_p99_ms"))),
                    slo,
                    esc(format_value(c.accept_length, 2)),
                    esc(format_value(c.output_throughput)),
                ]
            )
        header = [
            "Input",
            "Conc",
            "Prompts × repeats",
            "Failed",
            "TTFT mean [95% CI] ms",
            "TTFT P90 ms",
            "TTFT P99 [95% CI] ms",
            f"P99 under {slo_p99_ms / 1000:g} s?",
            "Accept length",
            "Output tok/s",
        ]
        out.append(f"<h3>Serving group {group}</h3>" + _table(header, rows, left=2, raw=True))
    return "".join(out)


def _every_metric(run: Run) -> str:
    cells = sorted(run.summary.cells, key=lambda c: (c.group, c.input_len, c.concurrency))
    rows = [
        [f"{m.name} ({m.unit})", *(format_value(c.value(m.name), metric_digits(m.name)) for c in cells)]
        for m in METRICS
    ]
    intervals = [
        [
            cell_label(c),
            name,
            format_value(c.value(name), metric_digits(name)),
            i.text(metric_digits(name)),
            i.over_text,
            i.method if i.known else "",
        ]
        for c in cells
        for name in HEADLINE_METRICS
        if (i := c.intervals.get(name))
    ]
    definitions = [[m.name, m.unit, m.description] for m in METRICS]
    return (
        _table(["Metric", *(cell_label(c) for c in cells)], rows)
        + "<h3>95% intervals (bootstrap; quantiles: order statistics; per-run metrics: t over repeats)</h3>"
        + _table(["Cell", "Metric", "Value", "Interval", "Over", "Method"], intervals, left=2)
        + "<details><summary>Metric definitions (names and units)</summary>"
        + _table(["Name", "Unit", "Meaning"], definitions, left=3)
        + "</details>"
    )


def _telemetry(run: Run) -> str:
    cells = [c for c in run.summary.cells if c.telemetry is not None]
    if not cells:
        return '<p class="muted">No telemetry was collected for this run.</p>'
    out = []
    for c in sorted(cells, key=lambda c: (c.group, c.input_len, c.concurrency)):
        t = c.telemetry
        assert t is not None
        title = f"{cell_label(c)}" + (" — SIMULATED telemetry" if t.simulated else "")
        gpu_rows = [
            [
                g.index,
                format_value(g.power_mean_w),
                format_value(g.power_max_w),
                format_value(g.sm_clock_mean_mhz),
                format_value(g.sm_clock_min_mhz),
                format_value(g.mem_clock_mean_mhz),
                format_value(g.memory_used_max_mib),
                format_value(g.temperature_max_c),
                format_value(g.utilization_mean_pct),
                ", ".join(f"{k} ×{v}" for k, v in g.throttle_reasons.items()) or "none",
            ]
            for g in t.gpus
        ]
        block = f"<h3>{esc(title)}</h3>"
        if gpu_rows:
            block += _table(
                [
                    "GPU",
                    "Power mean W",
                    "Power max W",
                    "SM MHz mean",
                    "SM MHz min",
                    "Mem MHz mean",
                    "Memory max MiB",
                    "Temp max °C",
                    "Util mean %",
                    "Throttle reasons (samples)",
                ],
                [[esc(v) for v in r] for r in gpu_rows],
                left=1,
            )
        if t.server:
            s = t.server
            block += _table(
                [
                    "Server",
                    "Scrapes",
                    "Window s",
                    "Running mean/max",
                    "Queued max",
                    "KV use max",
                    "Server tok/s",
                    "Client tok/s",
                    "Server accept",
                    "Client accept",
                    "Accept source",
                    "KV transfer mean s",
                ],
                [
                    [
                        s.kind,
                        s.scrapes,
                        format_value(s.window_s, 1),
                        f"{format_value(s.running_mean, 1)} / {format_value(s.running_max)}",
                        format_value(s.waiting_max),
                        format_value(s.kv_usage_max, 2),
                        format_value(s.output_throughput),
                        format_value(c.output_throughput),
                        format_value(s.accept_length, 2),
                        format_value(c.accept_length, 2),
                        s.accept_length_source or "-",
                        format_value(s.kv_transfer_mean_s, 4),
                    ]
                ],
            )
        if t.series:
            block += f'<div class="plot">{telemetry_charts(t.series, title)}</div>'
        out.append(block)
    return "".join(out)


def _flags(lines: list[str]) -> str:
    return "".join(f'<div class="flag">{esc(line)}</div>' for line in lines)


def _comparison(a: Run, b: Run) -> str:
    cmp = compare_runs(a.summary, b.summary, label_a="A", label_b="B")
    out = "".join(f"<p>{esc(note)}</p>" for note in cmp.notes)
    differences = fingerprint_differences(a.fingerprint, b.fingerprint)
    out += "<h3>What differs between the hosts and setups</h3><ul>"
    out += "".join(f"<li>{esc(d)}</li>" for d in differences) or "<li>nothing recorded differs</li>"
    out += "</ul>" + _flags(cmp.flags)
    for key, metric in TABLES:
        digits = metric_digits(metric)
        rows = []
        for r in getattr(cmp, key):
            css = {"real": "bad", "tie": "ok"}.get(r.kind, "muted")
            slo = (r.slo or "").replace("✅", "yes").replace("❌", "NO")  # no emoji font on headless hosts
            rows.append(
                [
                    esc(input_label(r.input_len)),
                    esc(r.concurrency),
                    esc(with_interval(r.a, r.interval_a, digits)),
                    esc(with_interval(r.b, r.interval_b, digits)),
                    esc(f"{r.p:.3g}" if r.p is not None else "-"),
                    esc(slo),
                    f'<span class="{css}">{esc(r.verdict)}</span>',
                ]
            )
        header = ["Input", "Conc", "A [95% CI]", "B [95% CI]", "p (Mann-Whitney)", "SLO A B", "Verdict"]
        out += f"<h3>{esc(TABLE_TITLES[key])}</h3>" + _table(header, rows, left=2, raw=True, css="wrap-last")
    return out


def _reference(run: Run, reference: Any) -> str:
    if reference is None:
        return '<p class="muted">No reference numbers were given for this recipe.</p>'
    check = compare_reference(run.summary, reference)
    tol = check.tolerances
    out = (
        f"<p>Reference: {esc(getattr(reference, 'tool', '?'))}. Tolerances: TTFT within ±"
        f"{tol['ttft_relative'] * 100:.0f}%, TPOT within ±{tol['tpot_relative'] * 100:.0f}%, output throughput "
        f"within ±{tol['output_throughput_relative'] * 100:.0f}%, accept length within "
        f"±{tol['accept_length_absolute']:.2f} "
        f"(the reference has no per-request values: a tolerance check, not a statistical test). "
        f"{check.within} within, {check.outside} outside, {check.missing} not measured.</p>"
    )
    rows = [
        [
            r.metric,
            input_label(r.input_len),
            r.concurrency,
            format_value(r.reference, 2),
            format_value(r.run, 2),
            r.status,
        ]
        for r in check.rows
    ]
    return out + _table(["Metric", "Input", "Conc", "Reference", "Run", "Difference"], rows)


def run_html(runs: list[Run], *, reference: Any = None, slo_p99_ms: float = DEFAULT_SLO_P99_MS) -> str:
    """The report of one run (compared with `reference`, a recipe's Reference, when given), or of several runs
    (then each later run is compared with the first)."""
    if not runs:
        raise ValueError("a report needs at least one run")
    first = runs[0]
    # Plot legends stay short: the recipe for one run, letters for several (the key is printed above the plots).
    letters = [chr(ord("A") + i) for i in range(len(runs))]
    labelled = (
        [(first.summary.recipe, first.summary)]
        if len(runs) == 1
        else [(letter, r.summary) for letter, r in zip(letters, runs, strict=True)]
    )
    simulated = any(r.summary.simulated for r in runs)
    title = (
        f"{first.summary.recipe} on {first.summary.host} ({first.summary.time})"
        if len(runs) == 1
        else f"{len(runs)} runs: " + " vs ".join(r.run_id for r in runs)
    )
    body = [f"<h1>{esc(title)}</h1>"]
    if simulated:
        body.append(
            '<div class="sim">SIMULATED: at least one run here used a simulated node; its numbers say '
            "nothing about real H200s.</div>"
        )
    for run in runs:
        if run.summary.gates:
            body.append(
                f"<h3>Gates failed in {esc(run.run_id)}</h3><ul>"
                + "".join(f'<li class="bad">{esc(g)}</li>' for g in run.summary.gates)
                + "</ul>"
            )
        body.append(_flags(run_flags(run.summary, run.run_id)))
    body.append("<h2>Hosts and setup</h2>" + _setup(runs))
    for run in runs:
        body.append(f"<h2>Results of {esc(run.run_id)}</h2>" + _post_tables(run, slo_p99_ms))
    body.append("<h2>Plots</h2>")
    if len(runs) > 1:
        body.append(
            "<p>" + "; ".join(f"<b>{x}</b> = {esc(r.run_id)}" for x, r in zip(letters, runs, strict=True)) + "</p>"
        )
    body.append(_plot(ttft_figure(labelled), "ttft") + _plot(accept_figure(labelled), "accept"))
    body.append(_plot(throughput_figure(labelled), "tput"))
    if sweeps(labelled):
        body.append(_plot(latency_throughput_figure(labelled), "lat-tput"))
    if len(runs) > 1:
        for other in runs[1:]:
            body.append(f"<h2>{esc(first.run_id)} vs {esc(other.run_id)}</h2>" + _comparison(first, other))
    else:
        body.append("<h2>Against the recipe's reference</h2>" + _reference(first, reference))
    for run in runs:
        body.append(f"<h2>Every client metric of {esc(run.run_id)}</h2>" + _every_metric(run))
        body.append(f"<h2>Telemetry of {esc(run.run_id)}</h2>" + _telemetry(run))
    body.append(
        f'<p class="muted">hgxkit results report; statistics: '
        f"{esc(first.summary.statistics.get('real_difference', ''))}.</p>"
    )
    return _page(title, "".join(body))


def index_html(runs: list[Run], skipped: list[tuple[str, str]], *, out_dir: Path) -> str:
    """The archive's index: every run (newest first) with a link to its report.html, and the damaged ones."""
    rows = []
    for run in reversed(runs):
        report = run.path / "report.html"
        link = os.path.relpath(report, out_dir) if report.exists() else None
        name = f'<a href="{esc(link)}">{esc(run.run_id)}</a>' if link else f"{esc(run.run_id)} (no report.html)"
        s = run.summary
        worst_p99 = max((c.ttft_p99_ms for c in s.cells if c.ttft_p99_ms is not None), default=None)
        rows.append(
            [
                name,
                esc(s.host),
                esc(s.recipe),
                esc(s.time),
                esc(s.bench),
                esc(len(s.cells)),
                '<span class="bad">SIMULATED</span>' if s.simulated else "no",
                esc(format_value(worst_p99)),
                esc(f"{s.tool} {s.tool_version or ''}"),
                f'<span class="bad">{len(s.gates)}</span>' if s.gates else "0",
            ]
        )
    body = [f"<h1>hgxkit results: {len(runs)} runs</h1>"]
    body.append(
        _table(
            [
                "Run",
                "Host",
                "Recipe",
                "Time (UTC)",
                "Bench",
                "Cells",
                "Simulated",
                "Worst TTFT P99 ms",
                "Tool",
                "Gates failed",
            ],
            rows,
            left=3,
            raw=True,
        )
    )
    if skipped:
        body.append(
            "<h2>Skipped (damaged)</h2><ul>" + "".join(f"<li>{esc(reason)}</li>" for _, reason in skipped) + "</ul>"
        )
    body.append(
        '<p class="muted">Write a run\'s report.html with <code>hgxkit results report RUN -o '
        "RUN_DIR/report.html</code>.</p>"
    )
    return _page("hgxkit results", "".join(body))
