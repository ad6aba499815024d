"""Prometheus' raw-sample answers (recorded from Debian's prometheus scraping, every 1 s, the DCGM stand-in's text
for 4 GPUs and an SGLang-like /metrics whose token counter grows 100/s) -> verify's archive texts, read by the same
summariser as the samplers' files."""

from __future__ import annotations

from pathlib import Path

import pytest

from hgxkit.kinds import KINDS
from hgxkit.monitoring.readback import (
    DCGM_COLUMNS,
    duration_s,
    gpu_csv,
    gpu_query,
    metrics_text,
    parse_matrix,
    query_window,
    samples_command,
    server_query,
)
from hgxkit.nvidia.smi import GPU_QUERY, parse_gpu_csv
from hgxkit.results.prometheus import parse_scrape_series
from hgxkit.results.telemetry import CellTelemetry, summarise_cell_telemetry

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "monitoring"


def recorded(name: str) -> str:
    return (FIXTURES / f"samples_{name}.json").read_text()


def test_dcgm_columns_are_gpu_query_after_timestamp_and_index() -> None:
    assert [column for column, _ in DCGM_COLUMNS] == GPU_QUERY.split(",")[2:]


def test_gpu_rows_from_recorded_dcgm_series() -> None:
    text = gpu_csv(parse_matrix(recorded("gpu")))
    lines = text.splitlines()
    assert len(lines) == 10  # 5 scrapes x GPUs 0 and 1 (the query asked for those two of the four)
    assert lines[4] == "2026/12/01 22:27:43.917, 0, 171, 1980, 2619, 120006, 36, 72, 0x0000000000000004"
    samples = parse_gpu_csv(text)
    assert [(s.index, s.power_w, s.utilization_pct, s.throttle_mask) for s in samples[:2]] == [
        (0, 164.0, 58.0, 0),
        (1, 165.0, 59.0, 0),
    ]
    assert samples[0].time == 1796164061.917


def test_metrics_text_has_one_scrape_block_per_scrape_at_its_own_time() -> None:
    text = metrics_text(parse_matrix(recorded("server")))
    scrapes = parse_scrape_series(text)
    assert [s.time for s in scrapes] == [1796164061.888, 1796164062.888, 1796164063.888, 1796164064.888, 1796164065.888]
    tokens = [[x.value for x in s.samples if x.name == "sglang:generation_tokens_total"] for s in scrapes]
    assert tokens == [[473.0], [574.0], [673.0], [773.0], [873.0]]
    labels = next(s.labels for s in scrapes[0].samples if s.name == "sglang:num_running_reqs")
    assert dict(labels)["group"] == "dsv4-0" and dict(labels)["engine_type"] == "unified"


def test_summary_of_prometheus_texts() -> None:
    telemetry = summarise_cell_telemetry(
        "sglang",
        KINDS["sglang"].metrics,
        metrics_text=metrics_text(parse_matrix(recorded("server"))),
        gpu_csv=gpu_csv(parse_matrix(recorded("gpu"))),
        simulated=True,
        window=(1796164062.0, 1796164065.0),
        source="prometheus",
    )
    server = telemetry.server
    assert server is not None
    # 3 scrapes inside the window and one on each side; the fake counter grows 100 tokens/s.
    assert (server.scrapes, server.window_s, server.generation_tokens, server.output_throughput) == (
        5,
        4.0,
        400.0,
        100.0,
    )
    gpu0 = telemetry.gpus[0]
    assert (gpu0.samples, gpu0.power_mean_w, gpu0.utilization_mean_pct, gpu0.throttle_reasons) == (
        3,
        171.0,
        72.0,
        {"SwPowerCap": 1},
    )
    again = CellTelemetry.from_json(telemetry.to_json())
    assert (again.source, telemetry.to_json()["source"]) == ("prometheus", "prometheus")
    assert CellTelemetry.from_json({"simulated": True, "gpus": []}).source == "sampled"  # older archives


def test_a_missing_field_is_not_available_as_nvidia_smi_prints_it() -> None:
    answer = (
        '{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"__name__":'
        '"DCGM_FI_DEV_GPU_UTIL","gpu":"3"},"values":[[1700000000.5,"35"]]}]}}'
    )
    row = gpu_csv(parse_matrix(answer))
    assert row == "2023/11/14 22:13:20.500, 3, [N/A], [N/A], [N/A], [N/A], [N/A], 35, [N/A]\n"
    (sample,) = parse_gpu_csv(row)
    assert (sample.index, sample.utilization_pct, sample.power_w, sample.throttle_mask) == (3, 35.0, None, None)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            recorded("bad_query"),
            'Prometheus: Prometheus answered invalid parameter "query": 1:2: parse error: '
            "unexpected character inside braces: '['",
        ),
        ("curl: (7) Failed to connect", "Prometheus: Prometheus answered no JSON ('curl: (7) Failed to connect')"),
        ("", "Prometheus: Prometheus answered nothing (is it running on the monitoring host?)"),
        (
            '{"status":"success","data":{"resultType":"vector","result":[]}}',
            "Prometheus: expected a matrix result (a range selector)",
        ),
    ],
)
def test_bad_answers_are_one_line(text: str, message: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_matrix(text)
    assert str(err.value) == message


def test_queries_select_the_group_and_its_gpus() -> None:
    assert server_query("node1", 'a"b') == '{job=~"serving-.+",node="node1",group="a\\"b"}'
    assert gpu_query("node2", (4, 5, 6, 7)) == (
        '{__name__=~"DCGM_FI_DEV_(CLOCKS_EVENT_REASONS|CLOCK_THROTTLE_REASONS|FB_USED|GPU_TEMP|GPU_UTIL|MEM_CLOCK|'
        'POWER_USAGE|SM_CLOCK)",job="dcgm",node="node2",gpu=~"4|5|6|7"}'
    )


def test_samples_command_reads_the_window_at_its_end() -> None:
    words = str(samples_command("http://127.0.0.1:9090", server_query("node1", "g"), 995.0, 1016.0)).split(" ")
    assert words[:6] == ["curl", "-sS", "-m", "60", "-G", "--data-urlencode"]
    assert words[6:] == [
        '\'query={job=~"serving-.+",node="node1",group="g"}[21s]\'',
        "--data-urlencode",
        "time=1016.000",
        "--",
        "http://127.0.0.1:9090/api/v1/query",
    ]


def test_durations_and_query_window() -> None:
    assert [duration_s(t) for t in ("1s", "15s", "1m", "2h")] == [1.0, 15.0, 60.0, 7200.0]
    with pytest.raises(ValueError, match="prometheus_scrape_interval='15' is not a Prometheus duration"):
        duration_s("15")
    assert query_window(1000.2, 1010.7, 5.0) == (995.0, 1016.0)


def test_module_examples() -> None:
    import doctest

    import hgxkit.monitoring.readback as module

    assert doctest.testmod(module).failed == 0
