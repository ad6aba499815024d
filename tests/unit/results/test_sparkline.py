"""The report's per-cell telemetry charts: inline SVG, every name from the server escaped."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from hgxkit.results.sparkline import line_chart, telemetry_charts

SERIES = {
    "running requests": [[0.0, 0.0], [1.0, 4.0], [2.0, 4.0]],
    "GPU 0 power (W)": [[0.0, 120.0], [2.0, 400.0]],
}


def test_points_are_scaled_into_the_plot_and_ranges_are_labelled() -> None:
    svg = line_chart({"running requests": SERIES["running requests"]}, title="g0 5K×5", unit="requests")
    root = ET.fromstring(svg)  # well-formed XML
    (line,) = root.iter("{http://www.w3.org/2000/svg}polyline")
    points = [tuple(map(float, p.split(","))) for p in line.get("points").split()]
    assert points[0] == (52.0, 156.0) and points[-1] == (488.0, 26.0)  # bottom-left, top-right of the plot area
    labels = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert "4" in labels and "0" in labels and "2" in labels and "requests" in labels


def test_two_charts_split_gpu_series_and_empty_series_say_so() -> None:
    both = telemetry_charts(SERIES, "g0")
    assert both.count("<svg") == 2 and both.count("<polyline") == 2
    assert "g0: GPU power" in both and "GPU 0 power (W)" in both
    assert "no samples" in line_chart({"x": []}, title="t", unit="u")


def test_names_from_the_server_cannot_inject_markup() -> None:
    hostile = '<script>alert(1)</script>"onload="x'
    svg = line_chart({hostile: [[0, 1], [1, 2]]}, title=hostile, unit=hostile)
    assert "<script" not in svg and not re.search(r'"onload=', svg)
    ET.fromstring(svg)
