"""Result files of other benchmark tools read as a poster's numbers: which tool wrote a file, and its points.

`read_result_file` tells the format from the content and hands the text to its reader:

- AIPerf `profile_export_aiperf.json` and GenAI-Perf `profile_export_genai_perf.json` (`reference_aiperf`);
- GuideLLM `benchmarks.json`, one point per benchmark (`reference_guidellm`);
- InferenceX published rows, the dashboard API's or the suite's `agg_bmk.json`, one point per row
  (`reference_inferencex`);
- any other text: a post's SGLang/vLLM result blocks and logged runs (`hgxkit.importing.result_blocks`).

Example:
    >>> read_result_file("tests/fixtures/results/aiperf-0.8.0-mock/profile_export_aiperf.json").points[0].settings()
    'input 550, concurrency 4, requests 64'
"""

from __future__ import annotations

import json
from typing import Any

from hgxkit.errors import InputError
from hgxkit.results.reference_aiperf import is_aiperf_like, read_aiperf
from hgxkit.results.reference_guidellm import is_guidellm, read_guidellm
from hgxkit.results.reference_inferencex import is_inferencex_rows, read_inferencex
from hgxkit.results.reference_points import Point, ResultFile, count_or_none, rate_or_none
from hgxkit.textinput import read_text_file

# Result files with per-request samples run to tens of MiB (GuideLLM keeps its request samples in the report).
MAX_RESULT_BYTES = 64 * 1024 * 1024


def read_result_file(name: str) -> ResultFile:
    """The file `name` read in whichever format it is in; InputError naming the file when none fits."""
    text = read_text_file(name, MAX_RESULT_BYTES)
    data = _json_or_none(text)
    if data is not None:
        if is_guidellm(data):
            return read_guidellm(name, text, data)
        if is_inferencex_rows(data):
            return read_inferencex(name, text, data)
        if is_aiperf_like(data):
            return read_aiperf(name, text, data)
        raise InputError(
            f"{name}: JSON that is none of the result files hgxkit reads (AIPerf/GenAI-Perf profile export, "
            "GuideLLM benchmarks.json, InferenceX rows); give one of those, or a post with result blocks"
        )
    return _read_blocks(name, text)


def _json_or_none(text: str) -> Any:
    stripped = text.lstrip()
    if not stripped.startswith(("{", "[")):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _read_blocks(name: str, text: str) -> ResultFile:
    """A post's printed result blocks (SGLang's and vLLM's clients) and logged runs, as points."""
    from hgxkit.importing.post import read_post
    from hgxkit.importing.result_blocks import printed_results

    points = []
    for run in printed_results(read_post(name, text)).runs:
        if not run.metrics:
            continue
        concurrency = count_or_none(run.settings.get("concurrency"))
        rate = rate_or_none(run.settings.get("request_rate"))
        input_len = run.cell[0] if run.cell else None
        if run.cell:
            concurrency = run.cell[1]
        points.append(
            Point(
                f"{run.where()}",
                run.source(),
                dict(run.metrics),
                input_len=input_len,
                concurrency=concurrency,
                request_rate=rate,
                num_prompts=run.cell[2] if run.cell else None,
            )
        )
    if not points:
        raise InputError(
            f"{name}: no results hgxkit reads (an AIPerf/GenAI-Perf or GuideLLM JSON export, InferenceX rows, "
            "or a post with SGLang/vLLM result blocks); check the file"
        )
    definitions = "SGLang/vLLM result blocks: the clients' own metrics, as printed"
    return ResultFile(name, "result blocks", "SGLang/vLLM benchmark client", definitions, points)
