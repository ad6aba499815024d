"""Small inline SVG line charts for the report's per-cell telemetry (running requests, GPU power over a cell).

Hand-rolled on purpose: a full bench=full report has one telemetry chart per cell (24 for the post's matrix on
two groups), and matplotlib took 0.25-0.36 s per chart on two cores (6-9 s of every verify run, most of the
report's time) for two plain line plots each. These charts are polylines with their axis ranges written as
text; the report's summary plots (TTFT with intervals, accept length, latency vs throughput) stay matplotlib's.

Example:
    >>> svg = line_chart({"running requests": [[0, 0], [1, 5], [2, 5]]}, title="group 0, 5000 x 5", unit="requests")
    >>> svg.startswith("<svg") and "running requests" in svg and "<polyline" in svg
    True
"""

from __future__ import annotations

from html import escape

# matplotlib's default colour cycle (tab10), so these charts look like the report's others
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
WIDTH, HEIGHT = 500, 190
LEFT, RIGHT, TOP, BOTTOM = 52, 12, 26, 34


def _number(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 10 or value == int(value) else f"{value:.2g}"


def line_chart(series: dict[str, list[list[float]]], *, title: str, unit: str) -> str:
    """One chart: every series as a polyline over a shared x (seconds) and y range, the ranges as labels, a legend
    under the title. Empty series are left out; a chart without points says so."""
    named = {name: [(float(x), float(y)) for x, y in points] for name, points in series.items() if points}
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
        f'role="img" aria-label="{escape(title)}" font-family="sans-serif" font-size="11">'
        f'<text x="{LEFT}" y="14" font-weight="bold">{escape(title)}</text>'
    )
    if not named:
        return head + f'<text x="{LEFT}" y="{HEIGHT // 2}" fill="#666">no samples</text></svg>'
    xs = [x for points in named.values() for x, _ in points]
    ys = [y for points in named.values() for _, y in points]
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(0.0, min(ys)), max(ys)
    x1, y1 = (x1 if x1 > x0 else x0 + 1), (y1 if y1 > y0 else y0 + 1)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(x: float, y: float) -> str:
        return f"{LEFT + (x - x0) / (x1 - x0) * plot_w:.1f},{TOP + (1 - (y - y0) / (y1 - y0)) * plot_h:.1f}"

    parts = [
        head,
        f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#bbb"/>',
        f'<text x="{LEFT - 4}" y="{TOP + 4}" text-anchor="end">{_number(y1)}</text>',
        f'<text x="{LEFT - 4}" y="{TOP + plot_h}" text-anchor="end">{_number(y0)}</text>',
        f'<text x="{LEFT}" y="{HEIGHT - 18}">{_number(x0)}</text>',
        f'<text x="{LEFT + plot_w}" y="{HEIGHT - 18}" text-anchor="end">{_number(x1)}</text>',
        f'<text x="{LEFT + plot_w / 2:.0f}" y="{HEIGHT - 18}" text-anchor="middle">seconds</text>',
        f'<text x="12" y="{TOP + plot_h / 2:.0f}" text-anchor="middle" '
        f'transform="rotate(-90 12 {TOP + plot_h / 2:.0f})">{escape(unit)}</text>',
    ]
    legend_x = LEFT
    for i, (name, points) in enumerate(named.items()):
        colour = COLOURS[i % len(COLOURS)]
        line = " ".join(px(x, y) for x, y in points)
        parts.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{line}">'
            f"<title>{escape(name)}</title></polyline>"
        )
        parts.append(f'<text x="{legend_x}" y="{HEIGHT - 4}" fill="{colour}">■ {escape(name)}</text>')
        legend_x += 12 + 6 * len(name)
    return "".join(parts) + "</svg>"


def telemetry_charts(series: dict[str, list[list[float]]], title: str) -> str:
    """A cell's two charts side by side: the server's requests, and its GPUs' power."""
    requests = {k: v for k, v in series.items() if not k.startswith("GPU")}
    power = {k: v for k, v in series.items() if k.startswith("GPU")}
    return line_chart(requests, title=f"{title}: requests", unit="requests") + line_chart(
        power, title=f"{title}: GPU power", unit="W"
    )
