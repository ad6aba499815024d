"""Grafana dashboards as JSON: one for the GPUs (DCGM exporter) and one per server kind (its /metrics names).

Grafana reads them from files (its dashboard provisioning); the datasource is the Prometheus roles/monitoring
runs, by the uid `DATASOURCE_UID`. Every panel is a time series with PromQL targets. The serving dashboards draw
the figures the recipe was verified on beside the live ones: TTFT P99 and inter-token latency P99 per group, with
the recipe's reference figure as a line (recording rules `hgxkit:recipe_*`, hgxkit/monitoring/alerts.py), so
drift from the verified setup shows. Inter-token latency is each engine's histogram (its kind's
`metrics.itl_histograms`: the current name, then the name older releases used, whichever the server exports).
The GPU dashboard shows, beside `GPU_UTIL` (which only means "a kernel was running"), DCGM's profiling ratios
(tensor pipe, DRAM, SM active) and PCIe/NVLink bytes per second.

Example:
    >>> board = gpu_dashboard()
    >>> board["uid"], board["panels"][0]["targets"][0]["expr"]
    ('hgxkit-gpu', 'DCGM_FI_DEV_GPU_UTIL')
    >>> sorted(serving_dashboards())
    ['hgxkit-serving-sglang.json', 'hgxkit-serving-vllm.json']
"""

from __future__ import annotations

import hashlib
import json

from hgxkit.kinds import KINDS
from hgxkit.kinds.base import ServerKind
from hgxkit.monitoring.alerts import NVLINK_ERRORS, RECIPE_ITL, RECIPE_TTFT, XID_GAUGE, XID_WINDOWED
from hgxkit.monitoring.dcgm import EXPORTER_LABEL
from hgxkit.serving.containers import SPEC_LABEL
from hgxkit.serving.router import RouterSpec

DATASOURCE_UID = "hgxkit-prometheus"
GPU_LEGEND = "{{node}} GPU {{gpu}}"
GROUP_LEGEND = "{{node}} {{group}}"
GRAFANA_DASHBOARDS = "/var/lib/grafana/dashboards/hgxkit"  # where the container reads the JSON files
GRAFANA_PASSWORD_IN_CONTAINER = "/run/secrets/grafana-admin-password"


def _panel(number: int, title: str, unit: str, targets: list[tuple[str, str]]) -> dict:
    """A time-series panel, two per row, 12 x 8 grid units."""
    return {
        "id": number,
        "type": "timeseries",
        "title": title,
        "datasource": {"type": "prometheus", "uid": DATASOURCE_UID},
        "gridPos": {"h": 8, "w": 12, "x": 12 * ((number - 1) % 2), "y": 8 * ((number - 1) // 2)},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [
            {"refId": chr(ord("A") + i), "expr": expr, "legendFormat": legend}
            for i, (expr, legend) in enumerate(targets)
        ],
    }


def _dashboard(uid: str, title: str, panels: list[tuple[str, str, list[tuple[str, str]]]]) -> dict:
    return {
        "uid": uid,
        "title": title,
        "tags": ["hgxkit"],
        "schemaVersion": 39,
        "editable": True,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "panels": [_panel(i, *panel) for i, panel in enumerate(panels, start=1)],
    }


def gpu_dashboard() -> dict:
    """Utilization, memory, power, temperature, clocks, throttling, XIDs, ECC, row remap, NVLink, PCIe."""
    nvlink_errors = " + ".join(f"increase({name}[5m])" for name in NVLINK_ERRORS)
    return _dashboard(
        "hgxkit-gpu",
        "hgxkit GPUs (DCGM)",
        [
            ("GPU utilization", "percent", [("DCGM_FI_DEV_GPU_UTIL", GPU_LEGEND)]),
            ("Framebuffer used", "decmbytes", [("DCGM_FI_DEV_FB_USED", GPU_LEGEND)]),
            ("Power draw", "watt", [("DCGM_FI_DEV_POWER_USAGE", GPU_LEGEND)]),
            (
                "Temperature",
                "celsius",
                [("DCGM_FI_DEV_GPU_TEMP", GPU_LEGEND), ("DCGM_FI_DEV_MEMORY_TEMP", GPU_LEGEND + " memory")],
            ),
            (
                "Clocks",
                "rotmhz",
                [("DCGM_FI_DEV_SM_CLOCK", GPU_LEGEND + " SM"), ("DCGM_FI_DEV_MEM_CLOCK", GPU_LEGEND + " memory")],
            ),
            ("Clock event reasons (bitmask)", "none", [("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", GPU_LEGEND)]),
            (
                "XIDs in the exporter's window",
                "none",
                [(f"{XID_WINDOWED} > 0", GPU_LEGEND + " XID {{xid}}"), (XID_GAUGE, GPU_LEGEND + " last XID")],
            ),
            (
                "ECC errors (volatile)",
                "none",
                [
                    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", GPU_LEGEND + " single-bit"),
                    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", GPU_LEGEND + " double-bit"),
                ],
            ),
            (
                "Row remap",
                "none",
                [
                    ("DCGM_FI_DEV_ROW_REMAP_PENDING", GPU_LEGEND + " pending"),
                    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", GPU_LEGEND + " failed"),
                ],
            ),
            ("NVLink bandwidth", "none", [("rate(DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL[5m])", GPU_LEGEND)]),
            ("NVLink errors (5 min)", "none", [(nvlink_errors, GPU_LEGEND)]),
            ("PCIe replays (5 min)", "none", [("increase(DCGM_FI_DEV_PCIE_REPLAY_COUNTER[5m])", GPU_LEGEND)]),
            ("GPUs reporting", "none", [("count by (node) (DCGM_FI_DEV_GPU_UTIL)", "{{node}}")]),
            *_profiling_panels(),
        ],
    )


def _profiling_panels() -> list[tuple[str, str, list[tuple[str, str]]]]:
    """What the GPU does while 'utilized': DCGM's profiling ratios and interconnect bytes per second."""
    return [
        ("Tensor pipe active", "percentunit", [("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", GPU_LEGEND)]),
        ("DRAM (HBM) active", "percentunit", [("DCGM_FI_PROF_DRAM_ACTIVE", GPU_LEGEND)]),
        ("SM active", "percentunit", [("DCGM_FI_PROF_SM_ACTIVE", GPU_LEGEND)]),
        (
            "PCIe throughput",
            "Bps",
            [("DCGM_FI_PROF_PCIE_TX_BYTES", GPU_LEGEND + " tx"), ("DCGM_FI_PROF_PCIE_RX_BYTES", GPU_LEGEND + " rx")],
        ),
        (
            "NVLink throughput",
            "Bps",
            [
                ("DCGM_FI_PROF_NVLINK_TX_BYTES", GPU_LEGEND + " tx"),
                ("DCGM_FI_PROF_NVLINK_RX_BYTES", GPU_LEGEND + " rx"),
            ],
        ),
    ]


def _quantiles(histograms: tuple[str, ...], quantiles: tuple[float, ...] = (0.5, 0.99)) -> list[tuple[str, str]]:
    """P50/P99 per group of the first of `histograms` the server exports (`or` falls back on the next name)."""
    rates = " or ".join(f"rate({name}_bucket[5m])" for name in histograms)
    return [
        (f"histogram_quantile({q}, sum by (le, node, group) ({rates}))", f"{GROUP_LEGEND} P{round(q * 100)}")
        for q in quantiles
    ]


def _latency_panels(kind: ServerKind) -> list[tuple[str, str, list[tuple[str, str]]]]:
    """TTFT and inter-token latency with the recipe's reference lines, TPOT per request, end-to-end latency."""
    names = kind.metrics
    panels: list[tuple[str, str, list[tuple[str, str]]]] = []
    if names.ttft_histogram:
        reference = (RECIPE_TTFT, GROUP_LEGEND + " recipe P99")
        panels.append(("TTFT", "s", [*_quantiles((names.ttft_histogram,)), reference]))
    if kind.metrics.itl_histograms:
        targets = [*_quantiles(kind.metrics.itl_histograms), (RECIPE_ITL, GROUP_LEGEND + " recipe P99")]
        if kind.metrics.tpot_histogram:
            tpot = _quantiles((kind.metrics.tpot_histogram,))
            targets += [(e, legend.replace(" P", " TPOT P")) for e, legend in tpot]
        panels.append(("Inter-token latency / TPOT", "s", targets))
    if names.e2e_histogram:
        panels.append(("End-to-end latency", "s", _quantiles((names.e2e_histogram,))))
    return panels


def serving_dashboard(kind: ServerKind) -> dict:
    """Up, requests running and waiting (the queue), token throughput, KV cache use, TTFT, inter-token latency /
    TPOT and end-to-end latency P50/P99 (with the recipe's figures as lines)."""
    names = kind.metrics
    job = f'{{job="serving-{kind.name}"}}'
    panels: list[tuple[str, str, list[tuple[str, str]]]] = [
        ("Groups up", "none", [(f"up{job}", GROUP_LEGEND)]),
        (
            "Requests running / waiting",
            "none",
            [(names.running, GROUP_LEGEND + " running"), (names.waiting, GROUP_LEGEND + " waiting")],
        ),
        (
            "Tokens per second",
            "none",
            [
                (f"rate({names.generation_tokens}[1m])", GROUP_LEGEND + " generated"),
                (f"rate({names.prompt_tokens}[1m])", GROUP_LEGEND + " prompt"),
            ],
        ),
        ("KV cache usage", "percentunit", [(names.kv_usage[0], GROUP_LEGEND)]),
    ]
    panels += _latency_panels(kind)
    if names.accept_length_gauge:
        panels.append(("Speculative accept length", "none", [(names.accept_length_gauge, GROUP_LEGEND)]))
    return _dashboard(f"hgxkit-serving-{kind.name}", f"hgxkit serving ({kind.title})", panels)


def serving_dashboards() -> dict[str, dict]:
    """One serving dashboard per registered kind, by file name."""
    return {f"hgxkit-serving-{name}.json": serving_dashboard(kind) for name, kind in KINDS.items()}


def all_dashboards() -> dict[str, dict]:
    """Every dashboard file: the GPU one and one per kind."""
    return {"hgxkit-gpu.json": gpu_dashboard(), **serving_dashboards()}


def panel_expressions(board: dict) -> list[str]:
    """Every PromQL expression of a dashboard's panels (a test checks them with promtool)."""
    return [target["expr"] for panel in board["panels"] for target in panel["targets"]]


def grafana_datasource(prometheus_url: str) -> dict:
    """Grafana's datasource provisioning file, pointing at `prometheus_url`."""
    source = {
        "name": "Prometheus",
        "uid": DATASOURCE_UID,
        "type": "prometheus",
        "access": "proxy",
        "isDefault": True,
        "url": prometheus_url,
    }
    return {"apiVersion": 1, "datasources": [source]}


def grafana_dashboard_provider(path: str) -> dict:
    """Grafana's dashboard provisioning file: load the JSON files in `path` (inside the container)."""
    return {
        "apiVersion": 1,
        "providers": [
            {"name": "hgxkit", "folder": "hgxkit", "type": "file", "disableDeletion": True, "options": {"path": path}}
        ],
    }


GRAFANA_CONTAINER = "hgxkit-grafana"


def grafana_spec(image: str, *, bind_address: str, port: int, monitoring_dir: str, password_file: str) -> RouterSpec:
    """Grafana's container: host network (it reaches Prometheus on 127.0.0.1), provisioning and dashboards from
    `monitoring_dir` read-only, its database in the volume `hgxkit-grafana`, labelled with its spec hash.

    The admin password is never Grafana's default: it is read from `password_file` (generated on the node,
    root:root 0640; the image runs as uid 472 in group root, so it can read it and no other user on the host can),
    anonymous access and sign-up are off. Grafana applies the file only when it creates its database; the role
    resets the password of an older database once (`grafana_reset_password`)."""
    body = [
        "--network",
        "host",
        "--restart",
        "unless-stopped",
        "-e",
        f"GF_SERVER_HTTP_ADDR={bind_address}",
        "-e",
        f"GF_SERVER_HTTP_PORT={port}",
        "-e",
        f"GF_SECURITY_ADMIN_PASSWORD__FILE={GRAFANA_PASSWORD_IN_CONTAINER}",
        "-e",
        "GF_AUTH_ANONYMOUS_ENABLED=false",
        "-e",
        "GF_USERS_ALLOW_SIGN_UP=false",
        "-v",
        f"{password_file}:{GRAFANA_PASSWORD_IN_CONTAINER}:ro",
        "-v",
        f"{monitoring_dir}/grafana/provisioning:/etc/grafana/provisioning:ro",
        "-v",
        f"{monitoring_dir}/dashboards:{GRAFANA_DASHBOARDS}:ro",
        "-v",
        "hgxkit-grafana:/var/lib/grafana",
        image,
    ]
    spec_hash = hashlib.sha256(json.dumps(body).encode()).hexdigest()[:16]
    labels = ["--label", f"{EXPORTER_LABEL}=grafana", "--label", f"{SPEC_LABEL}={spec_hash}"]
    argv = ["docker", "run", "-d", "--name", GRAFANA_CONTAINER, *labels, *body]
    return RouterSpec(GRAFANA_CONTAINER, image, argv, spec_hash)
