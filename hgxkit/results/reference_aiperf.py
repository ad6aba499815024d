"""AIPerf's `profile_export_aiperf.json` and GenAI-Perf's `profile_export_genai_perf.json` as one point each.

Both write one object per run: each metric as `{unit, avg, min, max, p1 … p99, std}` and the run's settings
under `input_config` (AIPerf mimics GenAI-Perf's export on purpose: ai-dynamo/aiperf
aiperf/common/models/export_models.py). Statistics map avg -> mean, p50 -> median, p90/p95/p99 as named; units are
converted from the file's own `unit` (ns, us, ms, s; requests/sec, tokens/sec). Metrics:

- `time_to_first_token` -> TTFT;
- `inter_token_latency` -> TPOT: both tools compute it per request as (latency - TTFT) / (output tokens - 1)
  (aiperf/metrics/types/inter_token_latency_metric.py; genai-perf llm_profile_data_parser.py), which is what
  SGLang's and vLLM's clients call TPOT, not their ITL;
- `inter_chunk_latency` (AIPerf) -> ITL: the gaps between streamed chunks of every request, pooled
  (aiperf/post_processors/metric_results_processor.py extends one array with each request's list), as the
  clients' ITL; its max -> max ITL;
- `request_latency` -> E2E latency; `request_throughput`, `output_token_throughput`, `total_token_throughput`
  -> request, output and total throughput; `benchmark_duration` -> duration; `request_count`,
  `error_request_count` -> completed, failed.

Token counts are the tool's (its tokenizer on the returned text), not the server's. A run without streaming
(`streaming: false`) has no first-token time (GenAI-Perf then reports TTFT = latency), so TTFT, TPOT and ITL are
not taken from it. Settings: AIPerf's `input_config.loadgen` (≤0.3), `runtime`, or `phases`/`load` with
`datasets[].prompts.isl/osl` (later versions); GenAI-Perf's flat argument names (`concurrency`,
`synthetic_input_tokens_mean`, `output_tokens_mean`, `request_count`) or its config sections
(`perf_analyzer.stimulus`, `input.synthetic_tokens`, `input.output_tokens`).

Example:
    >>> data = {"aiperf_version": "0.8.0", "time_to_first_token": {"unit": "ns", "avg": 2.5e8},
    ...         "input_config": {"loadgen": {"concurrency": 4}}}
    >>> point = read_aiperf("p.json", "{}", data).points[0]
    >>> point.metrics, point.concurrency
    ({'ttft_mean_ms': 250.0}, 4)
"""

from __future__ import annotations

from typing import Any

from hgxkit.errors import InputError
from hgxkit.results.reference_points import (
    Point,
    ResultFile,
    count_or_none,
    dig,
    file_label,
    number_or_none,
    rate_or_none,
)

_STATISTICS = (("avg", "mean"), ("p50", "median"), ("p90", "p90"), ("p95", "p95"), ("p99", "p99"))
# Tool metric -> the recipe's latency name (`ttft` -> ttft_mean_ms …); see the module docstring for why.
_LATENCIES = {
    "time_to_first_token": "ttft",
    "inter_token_latency": "tpot",
    "inter_chunk_latency": "itl",
    "request_latency": "e2e",
}
_STREAMING_ONLY = ("ttft", "tpot", "itl")
# Tool metric -> (recipe key, kind of unit); the tool's avg is the value.
_TOTALS = {
    "request_throughput": ("request_throughput", "rate"),
    "output_token_throughput": ("output_throughput", "rate"),
    "total_token_throughput": ("total_throughput", "rate"),
    "benchmark_duration": ("duration_s", "seconds"),
    "request_count": ("completed", "count"),
    "error_request_count": ("failed", "count"),
}
_TIME_UNITS_MS = {"ns": 1e-6, "us": 1e-3, "µs": 1e-3, "ms": 1.0, "s": 1000.0, "sec": 1000.0, "seconds": 1000.0}
_RATE_UNITS = {"requests/sec", "requests/s", "tokens/sec", "tokens/s", "tokens per sec", "requests per sec", "per sec"}
_METRIC_SHAPE_KEYS = ("time_to_first_token", "request_latency", "request_throughput", "output_token_throughput")

DEFINITIONS = {
    "AIPerf": "AIPerf: inter_token_latency (per request (latency - TTFT) / (output tokens - 1)) read as TPOT, "
    "inter_chunk_latency (pooled chunk gaps) as ITL; tokens counted by AIPerf's tokenizer",
    "GenAI-Perf": "GenAI-Perf: inter_token_latency (per request (latency - TTFT) / (output tokens - 1)) read "
    "as TPOT; tokens counted by GenAI-Perf's tokenizer",
}


def is_aiperf_like(data: Any) -> bool:
    """True for an object with AIPerf/GenAI-Perf metric entries (`{"unit": …, "avg": …}`) or their input_config."""
    if not isinstance(data, dict):
        return False
    if isinstance(data.get("input_config"), dict) or "aiperf_version" in data:
        return True
    return any(isinstance(data.get(key), dict) and "unit" in data[key] for key in _METRIC_SHAPE_KEYS)


def read_aiperf(name: str, text: str, data: dict[str, Any]) -> ResultFile:
    """The one point of an AIPerf or GenAI-Perf JSON export."""
    config = data.get("input_config") if isinstance(data.get("input_config"), dict) else {}
    genai = _is_genai_perf(name, data, config)
    tool = "GenAI-Perf" if genai else "AIPerf"
    version = data.get("aiperf_version") if not genai else None
    settings = _genai_perf_settings(config) if genai else _aiperf_settings(config)
    streaming = settings.pop("streaming")
    metrics = _metrics(name, data, streaming=streaming is not False)
    notes = []
    if streaming is False:
        notes.append(f"{name}: the run did not stream, so it has no TTFT, TPOT or ITL")
    if not metrics:
        raise InputError(f"{name}: a {tool} export without any metric hgxkit reads (TTFT, latency, throughput)")
    point = Point(name, f"{file_label(name)}:1", metrics, **settings)
    label = f"{tool} {version}" if isinstance(version, str) and version else tool
    return ResultFile(name, tool, label, DEFINITIONS[tool], [point], notes)


def _is_genai_perf(name: str, data: dict[str, Any], config: dict[str, Any]) -> bool:
    if "aiperf_version" in data or name.endswith("_aiperf.json"):
        return False
    return name.endswith("_genai_perf.json") or any(
        key in config for key in ("subcommand", "perf_analyzer", "synthetic_input_tokens_mean", "service_kind")
    )


def _metrics(name: str, data: dict[str, Any], *, streaming: bool) -> dict[str, float | int]:
    out: dict[str, float | int] = {}
    for tool_key, recipe_name in _LATENCIES.items():
        entry = data.get(tool_key)
        if not isinstance(entry, dict) or (recipe_name in _STREAMING_ONLY and not streaming):
            continue
        scale = _time_scale(name, tool_key, entry)
        for stat, suffix in _STATISTICS:
            value = number_or_none(entry.get(stat))
            if value is not None:
                out[f"{recipe_name}_{suffix}_ms"] = value * scale
        if recipe_name == "itl" and number_or_none(entry.get("max")) is not None:
            out["itl_max_ms"] = number_or_none(entry["max"]) * scale  # type: ignore[operator]
    for tool_key, (recipe_key, kind) in _TOTALS.items():
        entry = data.get(tool_key)
        value = number_or_none(entry.get("avg")) if isinstance(entry, dict) else None
        if value is None:
            continue
        if kind == "seconds":
            value = value * _time_scale(name, tool_key, entry) / 1000.0  # type: ignore[arg-type]
        elif kind == "rate":
            _check_rate_unit(name, tool_key, entry)  # type: ignore[arg-type]
        out[recipe_key] = int(value) if kind == "count" else value
    return out


def _time_scale(name: str, key: str, entry: dict[str, Any]) -> float:
    """Milliseconds per unit of `entry`'s unit (a latency with no unit is in ms, as both tools write them)."""
    unit = str(entry.get("unit", "ms")).strip().lower()
    if unit not in _TIME_UNITS_MS:
        raise InputError(
            f"{name}: {key}.unit is {unit!r}, not a time unit hgxkit converts (ns, us, ms, s); fix the file"
        )
    return _TIME_UNITS_MS[unit]


def _check_rate_unit(name: str, key: str, entry: dict[str, Any]) -> None:
    unit = " ".join(str(entry.get("unit", "per sec")).strip().lower().split())
    if unit not in _RATE_UNITS:
        raise InputError(f"{name}: {key}.unit is {unit!r}, not a per-second rate hgxkit reads; fix the file")


def _aiperf_settings(config: dict[str, Any]) -> dict[str, Any]:
    """What an AIPerf input_config says about the run, in every layout AIPerf has written."""
    loadgen = config.get("loadgen") if isinstance(config.get("loadgen"), dict) else {}
    phase = _profiling_phase(config)
    dataset = _dataset(config, phase.get("dataset"))
    prompts = dataset.get("prompts") if isinstance(dataset.get("prompts"), dict) else {}
    synthetic = not (dig(config, "input", "file") or dig(config, "input", "public_dataset"))
    return {
        "concurrency": _first_count(
            loadgen.get("concurrency"), phase.get("concurrency"), dig(config, "runtime", "concurrency")
        ),
        "request_rate": rate_or_none(loadgen.get("request_rate")) or rate_or_none(phase.get("rate")),
        "num_prompts": _first_count(loadgen.get("request_count"), phase.get("requests")),
        "input_len": _first_count(dig(config, "input", "prompt", "input_tokens", "mean"), _mean(prompts.get("isl")))
        if synthetic
        else None,
        "output_len": _first_count(dig(config, "input", "prompt", "output_tokens", "mean"), _mean(prompts.get("osl"))),
        "streaming": dig(config, "endpoint", "streaming"),
    }


def _profiling_phase(config: dict[str, Any]) -> dict[str, Any]:
    """The profiling phase of a later AIPerf config (`phases` as a list or a mapping, or `load`)."""
    for key in ("phases", "load"):
        phases = config.get(key)
        if isinstance(phases, dict):
            phases = [{"name": name, **value} for name, value in phases.items() if isinstance(value, dict)]
        if not isinstance(phases, list):
            continue
        candidates = [p for p in phases if isinstance(p, dict) and p.get("name") != "warmup"]
        named = [p for p in candidates if p.get("name") == "profiling"]
        if named or candidates:
            return (named or candidates)[0]
    return {}


def _dataset(config: dict[str, Any], name: object) -> dict[str, Any]:
    datasets = config.get("datasets")
    if isinstance(datasets, dict):
        datasets = [{"name": key, **value} for key, value in datasets.items() if isinstance(value, dict)]
    if not isinstance(datasets, list):
        return {}
    found = [d for d in datasets if isinstance(d, dict) and (name is None or d.get("name") == name)]
    return found[0] if found else {}


def _genai_perf_settings(config: dict[str, Any]) -> dict[str, Any]:
    """What a GenAI-Perf input_config says: its flat argument names (≤0.0.x) or its config sections."""
    stimulus = dig(config, "perf_analyzer", "stimulus")
    stimulus = stimulus if isinstance(stimulus, dict) else {}
    measurement = dig(config, "perf_analyzer", "measurement")
    by_count = isinstance(measurement, dict) and measurement.get("mode") == "request_count"
    synthetic = config.get("prompt_source", "synthetic") == "synthetic" and not config.get("input_file")
    streaming = config.get("streaming", dig(config, "endpoint", "streaming"))
    return {
        "concurrency": _first_count(config.get("concurrency"), stimulus.get("concurrency")),
        "request_rate": rate_or_none(config.get("request_rate")) or rate_or_none(stimulus.get("request_rate")),
        # 0 is GenAI-Perf's "not set" (it measured over an interval instead).
        "num_prompts": _first_count(config.get("request_count"), measurement.get("num") if by_count else None),
        "input_len": _first_count(
            config.get("synthetic_input_tokens_mean"), dig(config, "input", "synthetic_tokens", "mean")
        )
        if synthetic
        else None,
        # -1 is GenAI-Perf's "not set" (the server's own length).
        "output_len": _first_count(config.get("output_tokens_mean"), dig(config, "input", "output_tokens", "mean")),
        "streaming": streaming,
    }


def _mean(value: object) -> object:
    return value.get("mean") if isinstance(value, dict) else value


def _first_count(*values: object) -> int | None:
    for value in values:
        number = count_or_none(value)
        if number is not None:
            return number
    return None
