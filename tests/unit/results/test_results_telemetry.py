"""Telemetry: Prometheus scrapes of SGLang/vLLM and nvidia-smi samples summarised per cell, and compare's flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from hgxkit.kinds import KINDS
from hgxkit.results.telemetry import (
    SCRAPE_MARK,
    THROUGHPUT_TOLERANCE,
    CellTelemetry,
    counter_increase,
    decode_throttle_reasons,
    format_scrape_series,
    parse_exposition,
    parse_gpu_csv,
    parse_scrape_series,
    summarise_cell_telemetry,
    telemetry_flags,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "telemetry"
VLLM = (FIXTURES / "vllm_metrics.prom").read_text()
SGLANG = (FIXTURES / "sglang_metrics.prom").read_text()
GPU = (FIXTURES / "gpu.csv").read_text()


def test_exposition_lines_labels_and_comments() -> None:
    samples = parse_exposition(
        "# HELP x y\n# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{engine="0",model_name="a \\"b\\", c"} 3.0\n'
        'vllm:e2e_request_latency_seconds_bucket{le="+Inf",engine="0"} 12 1700000000000\n'
        "sglang:gen_throughput 1.5e+03\nbroken line without value\nvllm:x{} NaN\n"
    )
    assert [(s.name, s.value) for s in samples[:3]] == [
        ("vllm:num_requests_running", 3.0),
        ("vllm:e2e_request_latency_seconds_bucket", 12.0),
        ("sglang:gen_throughput", 1500.0),
    ]
    assert dict(samples[0].labels) == {"engine": "0", "model_name": 'a \\"b\\", c'}
    assert dict(samples[1].labels)["le"] == "+Inf"


def test_scrape_series_round_trip_and_bad_marker() -> None:
    text = format_scrape_series([(2.0, "a 2"), (1.0, "a 1")])
    assert text.startswith(f"{SCRAPE_MARK}2.000\n")
    assert [(s.time, s.samples[0].value) for s in parse_scrape_series(text)] == [(1.0, 1.0), (2.0, 2.0)]
    with pytest.raises(ValueError, match=r"m.prom: no '# hgxkit-scrape <unix time>' line"):
        parse_scrape_series("a 1\n", source="m.prom")
    with pytest.raises(ValueError, match=r"m.prom: bad scrape marker"):
        parse_scrape_series(f"{SCRAPE_MARK}soon\na 1\n", source="m.prom")


def test_counter_increase_survives_a_server_restart() -> None:
    scrapes = parse_scrape_series(
        format_scrape_series(
            [
                (0.0, 'g_total{e="0"} 100\ng_total{e="1"} 10'),
                (1.0, 'g_total{e="0"} 160\ng_total{e="1"} 20'),
                (2.0, 'g_total{e="0"} 30\ng_total{e="1"} 30'),  # engine 0 restarted: counts from 0 again
            ]
        )
    )
    assert counter_increase(scrapes, "g_total") == (60 + 30) + (10 + 10)
    assert counter_increase(scrapes, "missing_total") is None


def test_vllm_accept_length_and_throughput_from_counter_increases() -> None:
    t = summarise_cell_telemetry("vllm", KINDS["vllm"].metrics, metrics_text=VLLM, simulated=True)
    assert t.server is not None and t.server.scrapes == 24 and t.server.window_s == pytest.approx(23.0)
    assert t.server.output_throughput == pytest.approx(600.0)  # 600 tokens per 1 s scrape
    assert t.server.accept_length == pytest.approx(5.3)  # 1 + 4.3 accepted per draft
    assert t.server.running_max == 5 and t.server.waiting_max == 1 and t.server.kv_usage_max == pytest.approx(0.12)
    assert t.gpus == [] and t.simulated is True


def test_a_split_decodes_kv_transfer_time_is_the_mean_of_its_transfers_over_the_cell() -> None:
    xfer = 'vllm:nixl_xfer_time_seconds_{}{{engine="0",model_name="m"}} {}'
    scrapes = [
        (0.0, f"{xfer.format('count', 2.0)}\n{xfer.format('sum', 0.5)}"),
        (1.0, f"{xfer.format('count', 6.0)}\n{xfer.format('sum', 0.9)}"),  # 4 pulls, 0.4 s in all
    ]
    series = format_scrape_series(scrapes)
    t = summarise_cell_telemetry("vllm", KINDS["vllm"].metrics, metrics_text=series, simulated=True)
    assert t.server is not None and t.server.kv_transfers == 4 and t.server.kv_transfer_mean_s == pytest.approx(0.1)
    plain = summarise_cell_telemetry("vllm", KINDS["vllm"].metrics, metrics_text=VLLM, simulated=True)
    assert plain.server is not None and (plain.server.kv_transfers, plain.server.kv_transfer_mean_s) == (None, None)


def test_sglang_accept_length_ignores_stale_idle_scrapes() -> None:
    t = summarise_cell_telemetry("sglang", KINDS["sglang"].metrics, metrics_text=SGLANG, simulated=False)
    assert t.server is not None and t.server.accept_length == pytest.approx(5.3)  # 5.2/5.4 busy, 1.0 idle ignored
    assert "22 busy scrapes" in (t.server.accept_length_source or "")
    assert t.server.output_throughput == pytest.approx(600.0) and t.server.waiting_max == 2


def test_gpu_samples_power_clocks_and_throttle_reasons() -> None:
    assert decode_throttle_reasons(0x4) == ["SwPowerCap"]
    assert decode_throttle_reasons(0x41) == ["GpuIdle", "HwThermalSlowdown"]
    assert decode_throttle_reasons(0x1000) == ["unknown(0x1000)"]
    t = summarise_cell_telemetry("sglang", KINDS["sglang"].metrics, gpu_csv=GPU, simulated=True)
    gpu0, gpu1 = t.gpus
    assert (gpu0.samples, gpu0.power_max_w, gpu0.sm_clock_min_mhz) == (24, 520.0, 345.0)
    assert gpu1.power_max_w == 698.0 and gpu1.power_mean_w == pytest.approx((2 * 95 + 6 * 698 + 16 * 530) / 24)
    assert gpu1.throttle_reasons == {"GpuIdle": 2, "SwPowerCap": 6} and gpu1.throttled == {"SwPowerCap": 6}
    assert gpu0.throttled == {}  # idle is not a slowdown
    line = "2026/11/30 12:00:00.000, 3, [N/A], 1980, [Not Supported], 100, 40, 0, 0x0000000000000000\n"
    (sample,) = parse_gpu_csv(line)
    assert (sample.index, sample.power_w, sample.mem_clock_mhz, sample.throttle_mask) == (3, None, None, 0)
    with pytest.raises(ValueError, match=r"gpu.csv: line 1 has 3 columns; expected the 9 of timestamp,index"):
        parse_gpu_csv("1, 2, 3\n", source="gpu.csv")


def test_window_keeps_only_the_cells_samples() -> None:
    start = 1796042836.0
    t = summarise_cell_telemetry(
        "vllm", KINDS["vllm"].metrics, metrics_text=VLLM, gpu_csv=GPU, simulated=True, window=(start + 10, start + 15.5)
    )
    assert t.server is not None and t.server.scrapes == 8  # 6 inside + one on each side for the counters
    assert all(g.samples == 6 for g in t.gpus)
    assert t.gpus[1].throttle_reasons == {"SwPowerCap": 6}


def test_flags_name_disagreement_and_throttling_with_the_tolerance() -> None:
    t = summarise_cell_telemetry("vllm", KINDS["vllm"].metrics, metrics_text=VLLM, gpu_csv=GPU, simulated=True)
    # Server 5.3 vs client 5.3 agree; 600 vs 600 tok/s agree; GPU 1 was power-capped.
    assert telemetry_flags(t, client_accept_length=5.3, client_output_throughput=600.0) == [
        "GPU 1 throttled: SwPowerCap in 6/24 samples (SIMULATED telemetry)"
    ]
    flags = telemetry_flags(
        t, client_accept_length=4.5, client_output_throughput=600 / (1 + THROUGHPUT_TOLERANCE + 0.05)
    )
    assert flags[0] == "accept length: server 5.30 vs client 4.50 (18% apart; tolerance 10%) (SIMULATED telemetry)"
    assert flags[1].startswith("output throughput: server 600 vs client 480 tok/s (25% apart; tolerance 20%)")
    short = summarise_cell_telemetry(
        "vllm", KINDS["vllm"].metrics, metrics_text=VLLM, simulated=False, window=(1796042840.0, 1796042845.0)
    )
    assert telemetry_flags(short, client_accept_length=5.3, client_output_throughput=100.0) == []  # too few scrapes


def test_telemetry_round_trips_through_json() -> None:
    t = summarise_cell_telemetry(
        "sglang", KINDS["sglang"].metrics, metrics_text=SGLANG, gpu_csv=GPU, simulated=True, files=["a", "b"]
    )
    assert CellTelemetry.from_json(t.to_json()) == t
    assert t.label == "SIMULATED telemetry" and set(t.series) >= {"running requests", "GPU 1 power (W)"}
