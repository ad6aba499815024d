"""Plots for people who would rather look than read (matplotlib, Agg backend: files and strings, no display).

TTFT (mean with its 95% interval, and P99) vs concurrency per input length, accept length, output throughput,
latency vs throughput when a run sweeps concurrency (per-cell telemetry charts: hgxkit/results/sparkline.py).
Every title of a plot that shows simulated data says SIMULATED.

Example:
    paths = plot_comparison(run_a, run_b, Path("plots"), "marlin", "flashinfer")   # PNG files
    svg = figure_svg(ttft_figure([("marlin", run_a)]))                              # inline SVG text
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files and strings only: no display is needed or wanted
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from hgxkit.results.summary import CellResult, RunSummary

# Labels are recipe and run names taken from posts: `$…$` in one is text, not TeX (`a$\b$` made mathtext
# raise, and `results report` crashed).
matplotlib.rcParams["text.parse_math"] = False

Labelled = list[tuple[str, RunSummary]]
STYLES = ("-o", "--s", ":^", "-.D")


def _sim(runs: Labelled) -> str:
    return " — SIMULATED" if any(run.simulated for _, run in runs) else ""


def _cells(run: RunSummary, input_len: int) -> list[CellResult]:
    return sorted((c for c in run.cells if c.input_len == input_len and c.group == 0), key=lambda c: c.concurrency)


def _inputs(runs: Labelled) -> list[int]:
    return sorted({c.input_len for _, run in runs for c in run.cells if c.group == 0})


def _error_bars(cells: list[CellResult], metric: str) -> tuple[list[float], list[float]]:
    """Distances from each value to its interval's ends (0 where there is no interval)."""
    low, high = [], []
    for c in cells:
        value, interval = c.value(metric), c.intervals.get(metric)
        if value is not None and interval is not None and interval.known:
            low.append(max(value - interval.low, 0.0))  # type: ignore[operator]
            high.append(max(interval.high - value, 0.0))  # type: ignore[operator]
        else:
            low.append(0.0)
            high.append(0.0)
    return low, high


def _concurrency_axis(axis: plt.Axes, runs: Labelled, input_len: int | None = None) -> None:
    """Ticks at the concurrencies that ran (not 4.8, 4.9, … around a single cell)."""
    values = sorted(
        {
            c.concurrency
            for _, run in runs
            for c in run.cells
            if c.group == 0 and (input_len is None or c.input_len == input_len)
        }
    )
    if values:
        axis.set_xticks(values)
    axis.set_xlabel("concurrency")


def _headroom(axis: plt.Axes, factor: float = 1.2) -> None:
    """Room above the highest point so the legend does not sit on the data."""
    low, high = axis.get_ylim()
    axis.set_ylim(low, low + (high - low) * factor)


def ttft_figure(runs: Labelled) -> Figure:
    """TTFT mean (with 95% interval bars) and P99 vs concurrency, one panel per input length."""
    inputs = _inputs(runs) or [0]
    fig, axes = plt.subplots(1, len(inputs), figsize=(max(4.6 * len(inputs), 7.0), 3.8), squeeze=False)
    for axis, input_len in zip(axes[0], inputs, strict=False):
        for i, ((label, run), style) in enumerate(zip(runs, STYLES, strict=False)):
            cells = _cells(run, input_len)
            conc = [c.concurrency for c in cells]
            axis.errorbar(
                conc,
                [c.ttft_mean_ms for c in cells],
                yerr=_error_bars(cells, "ttft_mean_ms"),
                fmt=style,
                capsize=3,
                color=f"C{i}",
                label=f"{label} mean (95% CI)",
            )
            axis.plot(conc, [c.ttft_p99_ms for c in cells], style, color=f"C{i}", alpha=0.4, label=f"{label} P99")
        axis.set_title(f"input {input_len} tokens")
        _concurrency_axis(axis, runs, input_len)
        _headroom(axis)
        axis.set_ylabel("TTFT (ms)")
        axis.grid(True, alpha=0.3)
        axis.legend(fontsize="small")
    fig.suptitle("TTFT vs concurrency" + _sim(runs))
    fig.tight_layout()
    return fig


def _per_concurrency(runs: Labelled, metric: str, ylabel: str, title: str, floor: float) -> Figure:
    """One metric vs concurrency; the y axis starts at `floor` so small differences are not blown up."""
    fig, axis = plt.subplots(figsize=(6.4, 3.6))
    for (label, run), style in zip(runs, STYLES, strict=False):
        for input_len in _inputs(runs):
            cells = _cells(run, input_len)
            values = [c.value(metric) for c in cells]
            if any(v is not None for v in values):
                axis.errorbar(
                    [c.concurrency for c in cells],
                    [v if v is not None else float("nan") for v in values],
                    yerr=_error_bars(cells, metric),
                    fmt=style,
                    capsize=3,
                    label=f"{label} {input_len}",
                )
    _concurrency_axis(axis, runs)
    axis.set_ylabel(ylabel)
    axis.set_ylim(bottom=floor)
    _headroom(axis)
    axis.set_title(title + _sim(runs))
    axis.grid(True, alpha=0.3)
    if axis.get_legend_handles_labels()[0]:
        axis.legend(fontsize="small")
    else:
        axis.text(0.5, 0.5, "not reported (no speculative decoding?)", ha="center", transform=axis.transAxes)
    fig.tight_layout()
    return fig


def accept_figure(runs: Labelled) -> Figure:
    return _per_concurrency(runs, "accept_length", "accept length (tokens / step)", "Accept length", 1.0)


def throughput_figure(runs: Labelled) -> Figure:
    return _per_concurrency(runs, "output_throughput", "output tokens / s", "Output throughput", 0.0)


def sweeps(runs: Labelled) -> bool:
    """True when some input length ran at two or more concurrencies (then latency vs throughput says something)."""
    return any(len(_cells(run, n)) >= 2 for _, run in runs for n in _inputs(runs))


def latency_throughput_figure(runs: Labelled) -> Figure:
    """TTFT mean and TPOT mean against output throughput, one point per concurrency (labelled)."""
    fig, axes = plt.subplots(1, 2, figsize=(10.5, 3.8), squeeze=False)
    for axis, metric, ylabel in (
        (axes[0][0], "ttft_mean_ms", "TTFT mean (ms)"),
        (axes[0][1], "tpot_mean_ms", "TPOT mean (ms)"),
    ):
        for (label, run), style in zip(runs, STYLES, strict=False):
            for input_len in _inputs(runs):
                cells = [c for c in _cells(run, input_len) if c.output_throughput and c.value(metric) is not None]
                if len(cells) < 2:
                    continue
                xs, ys = [c.output_throughput for c in cells], [c.value(metric) for c in cells]
                axis.plot(xs, ys, style, label=f"{label} {input_len}")
                for c, x, y in zip(cells, xs, ys, strict=True):
                    axis.annotate(
                        f"c{c.concurrency}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize="x-small"
                    )
        axis.set_xlabel("output throughput (tok/s)")
        axis.set_ylabel(ylabel)
        axis.grid(True, alpha=0.3)
        if axis.get_legend_handles_labels()[0]:
            axis.legend(fontsize="small")
    fig.suptitle("Latency vs throughput (one point per concurrency)" + _sim(runs))
    fig.tight_layout()
    return fig


def figure_svg(fig: Figure, salt: str = "") -> str:
    """The figure as an inline `<svg>` element (text kept as text; ids salted so several SVGs share a page)."""
    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt or str(id(fig))}):
        fig.savefig(buffer, format="svg")
    plt.close(fig)
    text = buffer.getvalue()
    text = text[text.index("<svg") :]  # drop the XML declaration and DOCTYPE: not allowed inside HTML
    return re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.S)  # creation date etc.: keep pages stable


def save_png(fig: Figure, path: Path) -> Path:
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_comparison(a: RunSummary, b: RunSummary, out_dir: Path, label_a: str, label_b: str) -> list[Path]:
    """Write `ttft.png` (mean with 95% bars and P99 vs concurrency per input length) and `accept_length.png`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    runs: Labelled = [(label_a, a), (label_b, b)]
    return [
        save_png(ttft_figure(runs), out_dir / "ttft.png"),
        save_png(accept_figure(runs), out_dir / "accept_length.png"),
    ]
