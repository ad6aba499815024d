"""GuideLLM's `benchmarks.json` as points: one per benchmark of the report (one per concurrency or rate swept).

Each benchmark holds `metrics.<metric>.successful` = `{mean, median, percentiles: {p90, p95, p99 …}, …}` over
the successful requests (vllm-project/guidellm src/guidellm/benchmark/schemas/metrics.py,
src/guidellm/schemas/statistics.py). Metrics and units (src/guidellm/schemas/request_stats.py):

- `time_to_first_token_ms` (ms) -> TTFT;
- `inter_token_latency_ms` (ms) -> TPOT: per request (last token - first token) / (output tokens - 1), SGLang's
  and vLLM's TPOT; GuideLLM weights its distribution by each request's tokens, so its mean is the
  token-weighted mean, not the clients' mean over requests (the two agree when output lengths are equal);
- `time_per_output_token_ms` is not taken: it counts the first token, (last token - start) / output tokens;
- `request_latency` (**seconds**) -> E2E latency in ms;
- `requests_per_second`, `output_tokens_per_second`, `tokens_per_second` -> request, output and total
  throughput; `request_concurrency` -> mean concurrency; `request_totals` successful/errored -> completed/failed.

Settings: a benchmark's `config.strategy` (`concurrent` with `streams`, `synchronous` = concurrency 1,
`constant`/`poisson` with `rate`; `throughput` sends everything at once and states neither) and the synthetic
data spec of the report's `args.data` or `config.data` (`prompt_tokens=512,output_tokens=256`, or the same as
JSON; the newest reports' `config.spec.data` where it names them) for input and output length.

Example:
    >>> bench = {"config": {"strategy": {"type_": "concurrent", "streams": 8}},
    ...          "metrics": {"request_latency": {"successful": {"mean": 1.5}}}}
    >>> point = read_guidellm("b.json", "{}", {"benchmarks": [bench]}).points[0]
    >>> point.concurrency, point.metrics
    (8, {'e2e_mean_ms': 1500.0})
"""

from __future__ import annotations

import json
import re
from typing import Any

from hgxkit.errors import InputError
from hgxkit.results.reference_points import (
    Point,
    ResultFile,
    array_offsets,
    count_or_none,
    dig,
    file_label,
    json_start,
    line_of,
    member_offsets,
    number_or_none,
    rate_or_none,
)

# GuideLLM metric -> (recipe latency name, ms per unit).
_LATENCIES = {
    "time_to_first_token_ms": ("ttft", 1.0),
    "inter_token_latency_ms": ("tpot", 1.0),
    "request_latency": ("e2e", 1000.0),
}
_STATISTICS = (("mean", "mean"), ("median", "median"))
_PERCENTILES = ("p90", "p95", "p99")
# GuideLLM metric -> recipe key; the successful requests' mean.
_MEANS = {
    "requests_per_second": "request_throughput",
    "output_tokens_per_second": "output_throughput",
    "tokens_per_second": "total_throughput",
    "request_concurrency": "mean_concurrency",
}
_DATA_LENGTH = re.compile(r"\b(prompt_tokens|output_tokens)\s*[=:]\s*\"?(\d+)")

DEFINITIONS = (
    "GuideLLM: inter_token_latency_ms (per request (last - first token) / (output tokens - 1), distribution "
    "weighted by tokens) read as TPOT; request_latency converted from s to ms"
)


def is_guidellm(data: Any) -> bool:
    """True for a GuideLLM report: an object with a `benchmarks` list whose entries hold `metrics`."""
    benchmarks = data.get("benchmarks") if isinstance(data, dict) else None
    return isinstance(benchmarks, list) and any(isinstance(b, dict) and "metrics" in b for b in benchmarks)


def read_guidellm(name: str, text: str, data: dict[str, Any]) -> ResultFile:
    """One point per benchmark of a GuideLLM report, each with the line its benchmark starts on."""
    input_len, output_len = _data_lengths(data)
    lines = _benchmark_lines(text, len(data["benchmarks"]))
    points = []
    for index, bench in enumerate(data["benchmarks"]):
        if not isinstance(bench, dict) or not isinstance(bench.get("metrics"), dict):
            continue
        strategy = dig(bench, "config", "strategy") or dig(bench, "args", "strategy") or {}
        kind = strategy.get("type_") or strategy.get("kind") if isinstance(strategy, dict) else None
        concurrency = 1 if kind == "synchronous" else count_or_none(dig(strategy, "streams"))
        point = Point(
            f"{name} benchmarks[{index}]",
            f"{file_label(name)}:{lines[index]}",
            _metrics(bench),
            input_len=input_len,
            output_len=output_len,
            concurrency=concurrency,
            request_rate=rate_or_none(dig(strategy, "rate")) if kind in ("constant", "poisson") else None,
        )
        if point.metrics:
            points.append(point)
    if not points:
        raise InputError(f"{name}: a GuideLLM report without any benchmark metrics hgxkit reads; check the file")
    version = dig(data, "metadata", "guidellm_version")
    tool = f"GuideLLM {version}" if isinstance(version, str) and version else "GuideLLM"
    return ResultFile(name, "GuideLLM", tool, DEFINITIONS, points)


def _benchmark_lines(text: str, count: int) -> list[int]:
    """The line each benchmark of the report starts on (1 for all when the text is not the parsed JSON)."""
    try:
        offsets = array_offsets(text, member_offsets(text, json_start(text))["benchmarks"])
    except (KeyError, IndexError, ValueError):
        return [1] * count
    return [line_of(text, offset) for offset in offsets] if len(offsets) == count else [1] * count


def _metrics(bench: dict[str, Any]) -> dict[str, float | int]:
    metrics = bench["metrics"]
    out: dict[str, float | int] = {}
    for tool_key, (recipe_name, scale) in _LATENCIES.items():
        summary = dig(metrics, tool_key, "successful")
        if not isinstance(summary, dict):
            continue
        for stat, suffix in _STATISTICS:
            value = number_or_none(summary.get(stat))
            if value is not None:
                out[f"{recipe_name}_{suffix}_ms"] = value * scale
        for percentile in _PERCENTILES:
            value = number_or_none(dig(summary, "percentiles", percentile))
            if value is not None:
                out[f"{recipe_name}_{percentile}_ms"] = value * scale
    for tool_key, recipe_key in _MEANS.items():
        value = number_or_none(dig(metrics, tool_key, "successful", "mean"))
        if value is not None:
            out[recipe_key] = value
    totals = metrics.get("request_totals") or bench.get("request_totals")
    for tool_key, recipe_key in (("successful", "completed"), ("errored", "failed")):
        count = number_or_none(dig(totals, tool_key))
        if count is not None and count >= 0:
            out[recipe_key] = int(count)
    return out


def _data_lengths(data: dict[str, Any]) -> tuple[int | None, int | None]:
    """Input and output length of the report's synthetic data spec, None when it names a dataset instead."""
    spec = dig(data, "args", "data") or dig(data, "config", "data") or dig(data, "config", "spec", "data")
    items = spec if isinstance(spec, list) else [spec]
    if len(items) != 1:
        return None, None
    item = items[0]
    if isinstance(item, str):
        try:
            item = json.loads(item)
        except ValueError:
            found = dict(_DATA_LENGTH.findall(item))
            return count_or_none(found.get("prompt_tokens")), count_or_none(found.get("output_tokens"))
    if isinstance(item, dict):
        # Later reports keep the data arguments as an object, the lengths possibly under `load_kwargs`.
        lengths = item if "prompt_tokens" in item else item.get("load_kwargs") or {}
        return count_or_none(dig(lengths, "prompt_tokens")), count_or_none(dig(lengths, "output_tokens"))
    return None, None
