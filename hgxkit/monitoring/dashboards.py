"""Grafana dashboards as JSON: one for the GPUs (DCGM exporter) and one per server kind (its /metrics names).

Grafana reads them from files (its dashboard provisioning); the datasource is the Prometheus roles/monitoring
runs, by the uid `DATASOURCE_UID`. Every panel is a time series with PromQL targets.

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
from hgxkit.monitoring.alerts import NVLINK_ERRORS
from hgxkit.monitoring.dcgm import EXPORTER_LABEL
from hgxkit.serving.containers import SPEC_LABEL
from hgxkit.serving.router import RouterSpec

DATASOURCE_UID = "hgxkit-prometheus"
GPU_LEGEND = "{{node}} GPU {{gpu}}"
GROUP_LEGEND = "{{node}} {{group}}"
GRAFANA_DASHBOARDS = "/var/lib/grafana/dashboards/hgxkit"  # where the container reads the JSON files


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
            ("Last XID", "none", [("DCGM_FI_DEV_XID_ERRORS", GPU_LEGEND)]),
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
        ],
    )


def serving_dashboard(kind: ServerKind) -> dict:
    """Up, requests running and waiting, token throughput, KV cache use, TTFT and end-to-end latency P50/P99."""
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
    for title, histogram in (("TTFT", names.ttft_histogram), ("End-to-end latency", names.e2e_histogram)):
        if histogram:
            panels.append(
                (
                    title,
                    "s",
                    [
                        (
                            f"histogram_quantile({q}, sum by (le, node, group) (rate({histogram}_bucket[5m])))",
                            f"{GROUP_LEGEND} P{round(q * 100)}",
                        )
                        for q in (0.5, 0.99)
                    ],
                )
            )
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


def grafana_spec(image: str, *, bind_address: str, port: int, monitoring_dir: str) -> RouterSpec:
    """Grafana's container: host network (it reaches Prometheus on 127.0.0.1), provisioning and dashboards from
    `monitoring_dir` read-only, its database in the volume `hgxkit-grafana`, labelled with its spec hash."""
    body = [
        "--network",
        "host",
        "--restart",
        "unless-stopped",
        "-e",
        f"GF_SERVER_HTTP_ADDR={bind_address}",
        "-e",
        f"GF_SERVER_HTTP_PORT={port}",
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
