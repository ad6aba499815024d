"""Server and GPU telemetry of one benchmark cell: parse what was collected on the host, summarise it.

Inputs (collected on the host by the verify role, archived raw under `telemetry/` of the run):

* the server's Prometheus `/metrics`, scraped repeatedly; one file holds the series, each scrape preceded by a
  line `# hgxkit-scrape <unix time>` (a Prometheus comment, so each part stays valid exposition text):

      while sleep 1; do echo "# hgxkit-scrape $(date +%s.%N)"; curl -s http://127.0.0.1:PORT/metrics; done

* `nvidia-smi --query-gpu=timestamp,index,power.draw,clocks.sm,clocks.mem,memory.used,temperature.gpu,
  utilization.gpu,clocks_throttle_reasons.active --format=csv,noheader,nounits -lms 1000` (`GPU_QUERY`).

`summarise_cell_telemetry` turns them into a `CellTelemetry`: per GPU mean/max power, clocks, memory,
temperature, utilisation and the throttle reasons seen (decoded from NVML's bit mask); server side running and
queued requests, KV-cache use, output throughput, accept length and a split's KV transfer time from counter
increases. Telemetry from a simulated node is `simulated`, and every table and plot that shows it says so.

Example:
    >>> from hgxkit.kinds import KINDS
    >>> metrics_text = open("tests/fixtures/telemetry/vllm_metrics.prom").read()
    >>> t = summarise_cell_telemetry("vllm", KINDS["vllm"].metrics, metrics_text=metrics_text,
    ...                              gpu_csv=open("tests/fixtures/telemetry/gpu.csv").read(), simulated=True)
    >>> t.server.accept_length is not None, t.gpus[0].index
    (True, 0)
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from hgxkit.nvidia.smi import (
    GPU_QUERY,
    THERMAL_OR_POWER,
    THROTTLE_REASONS,
    GpuSample,
    decode_throttle_reasons,
    parse_gpu_csv,
)
from hgxkit.results.kind_metrics import KindMetrics
from hgxkit.results.prometheus import (
    SCRAPE_MARK,
    PromSample,
    Scrape,
    counter_increase,
    format_scrape_series,
    parse_exposition,
    parse_scrape_series,
)

# Re-exported: callers need only this module for the whole telemetry pipeline.
__all__ = [
    "GPU_QUERY",
    "SCRAPE_MARK",
    "THERMAL_OR_POWER",
    "THROTTLE_REASONS",
    "CellTelemetry",
    "GpuSample",
    "GpuTelemetry",
    "PromSample",
    "Scrape",
    "ServerTelemetry",
    "TelemetrySource",
    "counter_increase",
    "decode_throttle_reasons",
    "format_scrape_series",
    "parse_exposition",
    "parse_gpu_csv",
    "parse_scrape_series",
    "summarise_cell_telemetry",
    "summarise_gpus",
    "summarise_server",
    "telemetry_flags",
]

TelemetrySource = Literal["sampled", "prometheus"]

# Server-side and client-side numbers of one cell must agree within these, or compare flags the cell.
# Accept length: both come from the same server counters/gauges, so only averaging differs (10%).
ACCEPT_LENGTH_TOLERANCE = 0.10
# Throughput: the scrape window overhangs the client's run by up to one scrape interval on each side (and may
# catch warmup requests), so server-side tok/s runs low by up to 2/N for N scrapes in the window; compared only
# from MIN_SCRAPES_FOR_THROUGHPUT scrapes on (bias <= 10%), with 20% tolerance.
THROUGHPUT_TOLERANCE = 0.20
MIN_SCRAPES_FOR_THROUGHPUT = 20


@dataclass(frozen=True)
class GpuTelemetry:
    """One GPU over one cell: power (W), clocks (MHz), memory (MiB), temperature (C), utilisation (%)."""

    index: int
    samples: int
    power_mean_w: float | None = None
    power_max_w: float | None = None
    sm_clock_mean_mhz: float | None = None
    sm_clock_min_mhz: float | None = None
    mem_clock_mean_mhz: float | None = None
    memory_used_max_mib: float | None = None
    temperature_max_c: float | None = None
    utilization_mean_pct: float | None = None
    throttle_reasons: dict[str, int] = field(default_factory=dict)  # reason -> samples it was active in

    @property
    def throttled(self) -> dict[str, int]:
        """The thermal or power reasons seen (the ones that slow a benchmark down)."""
        return {k: v for k, v in self.throttle_reasons.items() if k in THERMAL_OR_POWER}


@dataclass(frozen=True)
class ServerTelemetry:
    """Server-side view of one cell from `/metrics`: gauges averaged over the scrapes, counters as increases."""

    kind: str
    scrapes: int
    window_s: float
    running_mean: float | None = None
    running_max: float | None = None
    waiting_mean: float | None = None
    waiting_max: float | None = None
    kv_usage_mean: float | None = None
    kv_usage_max: float | None = None
    generation_tokens: float | None = None
    prompt_tokens: float | None = None
    output_throughput: float | None = None
    accept_length: float | None = None
    accept_length_source: str | None = None
    cache_hit_rate: float | None = None
    kv_transfer_mean_s: float | None = None  # a split's side that pulls the KV: mean time of its transfers
    kv_transfers: float | None = None  # how many transfers it timed over the cell


@dataclass(frozen=True)
class CellTelemetry:
    """Telemetry of one cell: the server, each GPU, the raw files, whether it was simulated, and where it came
    from (`sampled`: verify's own samplers while the cell ran; `prometheus`: range queries over the cell's
    window, hgxkit/monitoring/readback.py)."""

    simulated: bool
    server: ServerTelemetry | None = None
    gpus: list[GpuTelemetry] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    # Small time series for the report's plots: name -> [[seconds from the window start, value], …].
    series: dict[str, list[list[float]]] = field(default_factory=dict)
    source: TelemetrySource = "sampled"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CellTelemetry:
        server = data.get("server")
        return cls(
            simulated=bool(data.get("simulated")),
            server=ServerTelemetry(**server) if server else None,
            gpus=[GpuTelemetry(**g) for g in data.get("gpus") or []],
            files=list(data.get("files") or []),
            series={k: [list(p) for p in v] for k, v in (data.get("series") or {}).items()},
            source="prometheus" if data.get("source") == "prometheus" else "sampled",  # older archives: sampled
        )

    @property
    def label(self) -> str:
        return "SIMULATED telemetry" if self.simulated else "telemetry"


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _gauge(scrape: Scrape, names: tuple[str, ...], how: Literal["sum", "mean"]) -> float | None:
    """A gauge's value in one scrape, over its label sets (request counts add up across engines/DP ranks,
    ratios are averaged); the first of `names` that is present wins."""
    for name in names:
        values = [s.value for s in scrape.samples if s.name == name and math.isfinite(s.value)]
        if values:
            return sum(values) if how == "sum" else sum(values) / len(values)
    return None


def _window(scrapes: list[Scrape], window: tuple[float, float] | None) -> list[Scrape]:
    """The scrapes inside the window plus one on each side, so counters cover the whole cell."""
    if window is None:
        return scrapes
    start, end = window
    inside = [i for i, s in enumerate(scrapes) if start <= s.time <= end]
    before = [i for i, s in enumerate(scrapes) if s.time < start]
    after = [i for i, s in enumerate(scrapes) if s.time > end]
    keep = ([before[-1]] if before else []) + inside + ([after[0]] if after else [])
    return [scrapes[i] for i in keep]


def summarise_server(kind: str, names: KindMetrics, scrapes: list[Scrape]) -> ServerTelemetry | None:
    """Server-side summary of one cell's scrapes (None without any), read by the server kind's metric `names`."""
    if not scrapes:
        return None
    running = [v for s in scrapes if (v := _gauge(s, (names.running,), "sum")) is not None]
    waiting = [v for s in scrapes if (v := _gauge(s, (names.waiting,), "sum")) is not None]
    kv = [v for s in scrapes if (v := _gauge(s, names.kv_usage, "mean")) is not None]
    window_s = scrapes[-1].time - scrapes[0].time
    generated = counter_increase(scrapes, names.generation_tokens)
    accept, source = None, None
    if names.accepted_tokens and names.drafts:
        accepted, drafts = counter_increase(scrapes, names.accepted_tokens), counter_increase(scrapes, names.drafts)
        if accepted is not None and drafts:
            accept, source = 1.0 + accepted / drafts, "1 + increase(accepted tokens) / increase(drafts)"
    elif names.accept_length_gauge:
        # SGLang exposes accept length only as a gauge of its last logging interval; scrapes taken while no
        # request ran repeat a stale value, so only busy scrapes count.
        busy = [s for s in scrapes if (_gauge(s, (names.running,), "sum") or 0) > 0]
        values = [v for s in busy if (v := _gauge(s, (names.accept_length_gauge,), "mean"))]
        if values:
            accept, source = _mean(values), f"mean of {names.accept_length_gauge} over {len(values)} busy scrapes"
    hit_rate = None
    if names.prefix_cache_hits and names.prefix_cache_queries:
        hits, queries = (
            counter_increase(scrapes, names.prefix_cache_hits),
            counter_increase(scrapes, names.prefix_cache_queries),
        )
        hit_rate = hits / queries if hits is not None and queries else None
    elif names.cache_hit_rate_gauge:
        hit_rate = _mean([v for s in scrapes if (v := _gauge(s, (names.cache_hit_rate_gauge,), "mean")) is not None])
    transfers, transfer_s = None, None
    if names.kv_transfer_histogram:
        transfers = counter_increase(scrapes, f"{names.kv_transfer_histogram}_count")
        spent = counter_increase(scrapes, f"{names.kv_transfer_histogram}_sum")
        transfer_s = spent / transfers if spent is not None and transfers else None
    return ServerTelemetry(
        kind=kind,
        scrapes=len(scrapes),
        window_s=window_s,
        running_mean=_mean(running),
        running_max=max(running) if running else None,
        waiting_mean=_mean(waiting),
        waiting_max=max(waiting) if waiting else None,
        kv_usage_mean=_mean(kv),
        kv_usage_max=max(kv) if kv else None,
        generation_tokens=generated,
        prompt_tokens=counter_increase(scrapes, names.prompt_tokens),
        output_throughput=generated / window_s if generated is not None and window_s > 0 else None,
        accept_length=accept,
        accept_length_source=source,
        cache_hit_rate=hit_rate,
        kv_transfer_mean_s=transfer_s,
        kv_transfers=transfers,
    )


def summarise_gpus(samples: list[GpuSample]) -> list[GpuTelemetry]:
    """Per-GPU summary of nvidia-smi samples, by index."""
    out = []
    for index in sorted({s.index for s in samples}):
        mine = [s for s in samples if s.index == index]

        def values(attr: str, mine: list[GpuSample] = mine) -> list[float]:
            return [v for s in mine if (v := getattr(s, attr)) is not None]

        reasons: dict[str, int] = {}
        for s in mine:
            for name in decode_throttle_reasons(s.throttle_mask):
                reasons[name] = reasons.get(name, 0) + 1
        power, sm = values("power_w"), values("sm_clock_mhz")
        out.append(
            GpuTelemetry(
                index=index,
                samples=len(mine),
                power_mean_w=_mean(power),
                power_max_w=max(power) if power else None,
                sm_clock_mean_mhz=_mean(sm),
                sm_clock_min_mhz=min(sm) if sm else None,
                mem_clock_mean_mhz=_mean(values("mem_clock_mhz")),
                memory_used_max_mib=max(values("memory_used_mib"), default=None),
                temperature_max_c=max(values("temperature_c"), default=None),
                utilization_mean_pct=_mean(values("utilization_pct")),
                throttle_reasons=reasons,
            )
        )
    return out


def _downsample(points: list[list[float]], limit: int = 240) -> list[list[float]]:
    step = max(1, math.ceil(len(points) / limit))
    return [[round(t, 3), round(v, 3)] for t, v in points[::step]]


def summarise_cell_telemetry(
    kind: str,
    names: KindMetrics,
    *,
    metrics_text: str | None = None,
    gpu_csv: str | None = None,
    simulated: bool,
    window: tuple[float, float] | None = None,
    files: list[str] | None = None,
    source: TelemetrySource = "sampled",
) -> CellTelemetry:
    """Everything about one cell: pure, from the raw texts (a scrape series and nvidia-smi CSV, either may be
    absent). `window` (unix start, end of the client's run) keeps only the samples of this cell."""
    scrapes = _window(parse_scrape_series(metrics_text), window) if metrics_text else []
    gpu_samples = parse_gpu_csv(gpu_csv) if gpu_csv else []
    if window is not None:
        gpu_samples = [s for s in gpu_samples if window[0] <= s.time <= window[1]]
    origin = min([s.time for s in scrapes] + [s.time for s in gpu_samples], default=0.0)
    series: dict[str, list[list[float]]] = {}
    if scrapes:
        series["running requests"] = _downsample(
            [[s.time - origin, v] for s in scrapes if (v := _gauge(s, (names.running,), "sum")) is not None]
        )
        series["queued requests"] = _downsample(
            [[s.time - origin, v] for s in scrapes if (v := _gauge(s, (names.waiting,), "sum")) is not None]
        )
    for index in sorted({s.index for s in gpu_samples}):
        series[f"GPU {index} power (W)"] = _downsample(
            [[s.time - origin, s.power_w] for s in gpu_samples if s.index == index and s.power_w is not None]
        )
    return CellTelemetry(
        simulated=simulated,
        server=summarise_server(kind, names, scrapes),
        gpus=summarise_gpus(gpu_samples),
        files=list(files or []),
        series={k: v for k, v in series.items() if v},
        source=source,
    )


def telemetry_flags(
    telemetry: CellTelemetry | None, *, client_accept_length: float | None, client_output_throughput: float | None
) -> list[str]:
    """Why this cell's numbers deserve a second look: server and client disagree, or a GPU throttled."""
    if telemetry is None:
        return []
    flags = []
    tag = " (SIMULATED telemetry)" if telemetry.simulated else ""
    server = telemetry.server
    if server and server.accept_length is not None and client_accept_length:
        gap = abs(server.accept_length - client_accept_length) / client_accept_length
        if gap > ACCEPT_LENGTH_TOLERANCE:
            flags.append(
                f"accept length: server {server.accept_length:.2f} vs client {client_accept_length:.2f} "
                f"({gap * 100:.0f}% apart; tolerance {ACCEPT_LENGTH_TOLERANCE * 100:.0f}%){tag}"
            )
    comparable = server is not None and server.scrapes >= MIN_SCRAPES_FOR_THROUGHPUT
    if comparable and server and server.output_throughput is not None and client_output_throughput:
        gap = abs(server.output_throughput - client_output_throughput) / client_output_throughput
        if gap > THROUGHPUT_TOLERANCE:
            flags.append(
                f"output throughput: server {server.output_throughput:.0f} vs client "
                f"{client_output_throughput:.0f} tok/s ({gap * 100:.0f}% apart; tolerance "
                f"{THROUGHPUT_TOLERANCE * 100:.0f}%){tag}"
            )
    for gpu in telemetry.gpus:
        if gpu.throttled:
            reasons = ", ".join(f"{name} in {count}/{gpu.samples} samples" for name, count in gpu.throttled.items())
            flags.append(f"GPU {gpu.index} throttled: {reasons}{tag}")
    return flags
