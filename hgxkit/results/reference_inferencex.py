"""InferenceX's published rows (SemiAnalysis) as points: one per row, with the run that measured it.

Two shapes are read, both a JSON list of rows:
- the dashboard API's (`GET /api/v1/benchmarks?model=NAME`: SemiAnalysisAI/InferenceX-app
  packages/db/src/queries/benchmarks.ts): `hardware, framework, model, precision, spec_method, disagg,
  is_multinode, prefill_*/decode_* tp, ep, dp_attention, num_workers, num_prefill_gpu, num_decode_gpu, isl, osl,
  conc, image, date, run_url` and the numbers under `metrics`;
- the suite's own aggregate (`agg_bmk.json`, SemiAnalysisAI/InferenceX utils/process_result.py): the same flat,
  with `hw`, `infmax_model_prefix`, `spec_decoding`, `tp`, `ep`, `dp_attention`, `pp`, `pcp_size`.

Units (process_result.py; InferenceX-app packages/constants/src/metric-keys.ts): every latency is in **seconds**
(`mean_ttft`, `median_tpot`, `p99_e2el`: the benchmark client's `*_ms` divided by 1000), converted back to ms;
`intvty` (1000 / TPOT) is not taken, it is TPOT again. Throughput is **per GPU**: `tput_per_gpu` (total tokens)
over the server's GPUs (tp x pp x pcp on one node, prefill + decode GPUs across nodes), `output_tput_per_gpu`
over the decode GPUs, `input_tput_per_gpu` over the prefill GPUs; it is multiplied back by the same counts (an
API row has no pp: one stage is assumed there) to compare with a run's whole-server throughput.

A row's identity (`hardware`, `framework`, `precision`, `spec_method`, `model`, `date`, `image`, `run_url`, …) lets
`--entry`/`--where` pick the rows of one setup, and its split (`tp`, `ep`, `dp_attention`; the decode side of a
disaggregated row) is matched with the recipe's server flags.

Example:
    >>> row = {"hardware": "h200", "framework": "sglang", "precision": "fp8", "isl": 1024, "osl": 1024,
    ...        "conc": 4, "decode_tp": 8, "metrics": {"median_ttft": 0.25, "tput_per_gpu": 100.0}}
    >>> point = read_inferencex("rows.json", "[]", [row]).points[0]
    >>> point.metrics, point.parallel["tp"]
    ({'ttft_median_ms': 250.0, 'total_throughput': 800.0}, 8)
"""

from __future__ import annotations

import re
from typing import Any

from hgxkit.errors import InputError
from hgxkit.results.reference_points import (
    Point,
    ResultFile,
    array_offsets,
    count_or_none,
    file_label,
    json_start,
    line_of,
    number_or_none,
)

_LATENCIES = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2el": "e2e"}
_STATISTICS = {"mean": "mean", "median": "median", "p90": "p90", "p95": "p95", "p99": "p99"}
_KEY = re.compile(r"^(mean|median|p90|p95|p99)_(ttft|tpot|itl|e2el)$")
# The identity fields `--where` filters on, in the order messages name them.
IDENTITY_FIELDS = (
    "model",
    "hardware",
    "framework",
    "precision",
    "spec_method",
    "disagg",
    "is_multinode",
    "date",
    "image",
    "run_url",
)

DEFINITIONS = (
    "InferenceX rows: latencies published in s (converted to ms); throughput published per GPU "
    "(multiplied by the row's GPU counts); TTFT/TPOT/ITL as the suite's benchmark client defines them"
)


def is_inferencex_rows(data: Any) -> bool:
    """True for a list of rows that each name isl, osl and conc."""
    return (
        isinstance(data, list)
        and bool(data)
        and all(isinstance(row, dict) and {"isl", "osl", "conc"} <= row.keys() for row in data)
    )


def read_inferencex(name: str, text: str, data: list[dict[str, Any]]) -> ResultFile:
    """One point per row, each with the line its row starts on and the row's identity and split."""
    try:
        lines = [line_of(text, offset) for offset in array_offsets(text, json_start(text))]
    except (IndexError, ValueError):
        lines = []
    if len(lines) != len(data):
        lines = [1] * len(data)
    points = []
    for index, row in enumerate(data):
        points.append(
            Point(
                f"{name} row {index + 1}",
                f"{file_label(name)}:{lines[index]}",
                _metrics(name, index, row),
                input_len=count_or_none(row.get("isl")),
                output_len=count_or_none(row.get("osl")),
                concurrency=count_or_none(row.get("conc")),
                identity=_identity(row),
                parallel=_parallel(row),
            )
        )
    return ResultFile(name, "InferenceX rows", "InferenceX", DEFINITIONS, points)


def _identity(row: dict[str, Any]) -> dict[str, str]:
    hardware = row.get("hardware")
    if hardware is None and isinstance(row.get("hw"), str):
        # The suite's runner names (`h200-nv_0`, `mi355x-amds`) start with the GPU's key.
        found = re.match(r"[a-z0-9]+", row["hw"].lower())
        hardware = found.group(0) if found else row["hw"]
    values = {
        "model": row.get("model") if "metrics" in row else row.get("infmax_model_prefix", row.get("model")),
        "hardware": hardware,
        "framework": row.get("framework"),
        "precision": row.get("precision"),
        "spec_method": row.get("spec_method", row.get("spec_decoding")),
        "disagg": row.get("disagg"),
        "is_multinode": row.get("is_multinode"),
        "date": row.get("date"),
        "image": row.get("image"),
        "run_url": row.get("run_url"),
    }
    return {key: _text(value) for key, value in values.items() if value is not None}


def _text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _parallel(row: dict[str, Any]) -> dict[str, int | bool]:
    """The server's split as the row gives it: the decode side of a disaggregated row."""
    out: dict[str, int | bool] = {}
    for key in ("tp", "ep"):
        value = count_or_none(row.get(f"decode_{key}", row.get(key)))
        if value is not None:
            out[key] = value
    dp = row.get("decode_dp_attention", row.get("dp_attention"))
    if dp is not None:
        out["dp_attention"] = dp is True or str(dp).lower() == "true"
    return out


def _gpus(row: dict[str, Any]) -> tuple[float | None, float | None, float | None]:
    """GPUs behind (total, output, input) throughput, as process_result.py divided them."""
    if str(row.get("is_multinode", "false")).lower() == "true":
        prefill, decode = count_or_none(row.get("num_prefill_gpu")), number_or_none(row.get("num_decode_gpu"))
        if prefill is None or decode is None:
            return None, None, None
        return prefill + decode, decode if decode > 0 else prefill + decode, prefill
    tp = count_or_none(row.get("tp", row.get("decode_tp")))
    if tp is None:
        return None, None, None
    gpus = tp * (count_or_none(row.get("pp")) or 1) * (count_or_none(row.get("pcp_size")) or 1)
    return gpus, gpus, gpus


def _metrics(name: str, index: int, row: dict[str, Any]) -> dict[str, float | int]:
    values = row.get("metrics") if isinstance(row.get("metrics"), dict) else row
    out: dict[str, float | int] = {}
    for key, value in values.items():
        found = _KEY.match(key)
        number = number_or_none(value)
        if found and number is not None:
            stat, metric = found.groups()
            out[f"{_LATENCIES[metric]}_{_STATISTICS[stat]}_ms"] = number * 1000.0
    per_gpu = {
        "total_throughput": number_or_none(values.get("tput_per_gpu")),
        "output_throughput": number_or_none(values.get("output_tput_per_gpu")),
        "input_throughput": number_or_none(values.get("input_tput_per_gpu")),
    }
    if any(value is not None for value in per_gpu.values()):
        gpus = _gpus(row)
        if gpus[0] is None:
            raise InputError(
                f"{name}: row {index + 1} gives throughput per GPU without its GPU count (tp, or num_prefill_gpu "
                "and num_decode_gpu); the file is not an InferenceX export hgxkit reads"
            )
        for (key, value), count in zip(per_gpu.items(), gpus, strict=True):
            if value is not None and count is not None:
                out[key] = value * count
    return out
