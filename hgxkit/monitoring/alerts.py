"""Prometheus alert rules for GPU faults and serving: XIDs, ECC, row remap, throttling, NVLink, GPU count, groups
down, TTFT P99 drifting above the recipe's figure.

XIDs: DCGM_FI_DEV_XID_ERRORS holds the last XID a GPU raised. The critical set follows NVIDIA's XID catalog
(/work/shared/reference/nvidia.md): 48 double-bit ECC, 63/64 row remap recorded/failed, 74 NVLink, 79 fell off
the bus, 92 high single-bit ECC rate, 94/95 contained/uncontained ECC. Throttling reads the NVML clocks-event
bitmask (SW power cap 0x4, HW slowdown 0x8, SW thermal 0x20, HW thermal 0x40, HW power brake 0x80).

Example:
    >>> rules = alert_rules(AlertSettings(), [("node1", 8)], [])
    >>> [r["alert"] for r in rules["groups"][0]["rules"]][:3]
    ['GpuFellOffBus', 'GpuCriticalXid', 'GpuEccDoubleBit']
"""

from __future__ import annotations

from dataclasses import dataclass

from hgxkit.kinds import KINDS
from hgxkit.monitoring.scrape import ServingTarget

CRITICAL_XIDS = (48, 63, 64, 74, 79, 92, 94, 95)
NVLINK_ERRORS = (
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
)
REASONS = "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"
GPU = "{{ $labels.node }} GPU {{ $labels.gpu }}"


@dataclass(frozen=True)
class AlertSettings:
    """The alert knobs (roles/monitoring/defaults.py)."""

    throttle_for: str = "10m"  # how long throttling must last before it alerts
    nvlink_window: str = "10m"  # NVLink error counters rising within this window alert
    serving_down_for: str = "1m"
    ttft_margin: float = 0.5  # TTFT P99 alerts above (1 + margin) x the recipe's figure
    ttft_window: str = "5m"
    ttft_for: str = "10m"


def _bit(mask: int) -> str:
    """PromQL for 'the clocks-event bitmask has bit `mask`' (PromQL has no bitwise and on values)."""
    return f"floor({REASONS} / {mask}) % 2 == 1"


def _rule(
    name: str, expr: str, severity: str, summary: str, for_: str | None = None, labels: dict | None = None
) -> dict:
    rule: dict = {"alert": name, "expr": expr}
    if for_:
        rule["for"] = for_
    rule["labels"] = {"severity": severity, **(labels or {})}
    rule["annotations"] = {"summary": summary}
    return rule


def gpu_rules(settings: AlertSettings, expected: list[tuple[str, int]]) -> list[dict]:
    """The GPU rules; `expected` is (node, GPU count) for nodes whose count is known."""
    return [*_fault_rules(), *_slowdown_rules(settings), *_presence_rules(expected)]


def _fault_rules() -> list[dict]:
    """A GPU that failed or is failing: XIDs, double-bit ECC errors, row remapping."""
    critical = " or ".join(f"DCGM_FI_DEV_XID_ERRORS == {xid}" for xid in CRITICAL_XIDS)
    return [
        _rule(
            "GpuFellOffBus",
            "DCGM_FI_DEV_XID_ERRORS == 79",
            "critical",
            f"{GPU} fell off the bus (XID 79): drain the node, reset or replace the GPU",
        ),
        _rule(
            "GpuCriticalXid",
            critical,
            "critical",
            f"{GPU} raised XID {{{{ $value }}}} (critical set {', '.join(map(str, CRITICAL_XIDS))})",
        ),
        _rule(
            "GpuEccDoubleBit",
            "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL > 0",
            "critical",
            f"{GPU} has {{{{ $value }}}} double-bit ECC errors since the driver loaded",
        ),
        _rule(
            "GpuRowRemapPending",
            "DCGM_FI_DEV_ROW_REMAP_PENDING > 0",
            "warning",
            f"{GPU} has a row remap pending: reset the GPU when it is drained",
        ),
        _rule(
            "GpuRowRemapFailed",
            "DCGM_FI_DEV_ROW_REMAP_FAILURE > 0",
            "critical",
            f"{GPU} failed to remap a row: replace the GPU",
        ),
    ]


def _slowdown_rules(settings: AlertSettings) -> list[dict]:
    """A GPU that works but slower: throttling, NVLink and PCIe errors rising."""
    nvlink = " or ".join(f"increase({name}[{settings.nvlink_window}]) > 0" for name in NVLINK_ERRORS)
    return [
        _rule(
            "GpuThermalThrottling",
            f"{_bit(0x20)} or {_bit(0x40)}",
            "warning",
            f"{GPU} is slowed by temperature for {settings.throttle_for}",
            settings.throttle_for,
        ),
        _rule(
            "GpuPowerThrottling",
            f"{_bit(0x4)} or {_bit(0x8)} or {_bit(0x80)}",
            "warning",
            f"{GPU} is slowed by power capping or a hardware slowdown for {settings.throttle_for}",
            settings.throttle_for,
        ),
        _rule(
            "GpuNvlinkErrorsRising",
            nvlink,
            "warning",
            f"{GPU}: NVLink CRC, replay or recovery errors rose within {settings.nvlink_window}",
        ),
        _rule(
            "GpuPcieReplaysRising",
            f"increase(DCGM_FI_DEV_PCIE_REPLAY_COUNTER[{settings.nvlink_window}]) > 0",
            "warning",
            f"{GPU}: PCIe replays rose within {settings.nvlink_window}",
        ),
    ]


def _presence_rules(expected: list[tuple[str, int]]) -> list[dict]:
    """GPUs missing from a node, and exporters that do not answer."""
    rules = []
    if expected:
        count = " or ".join(
            f'count by (node) (DCGM_FI_DEV_GPU_UTIL{{node="{node}"}}) < {gpus}' for node, gpus in expected
        )
        rules.append(
            _rule(
                "GpuFewerThanExpected",
                count,
                "critical",
                "{{ $labels.node }} reports {{ $value }} GPUs, fewer than expected",
                "2m",
            )
        )
    rules.append(
        _rule(
            "MonitoringExporterDown",
            'up{job=~"dcgm|node"} == 0',
            "warning",
            "{{ $labels.job }} exporter on {{ $labels.node }} does not answer",
            "2m",
        )
    )
    return rules


def serving_rules(settings: AlertSettings, groups: list[ServingTarget]) -> list[dict]:
    """Serving group down, router down, and one TTFT P99 rule per group whose recipe has a TTFT P99 figure."""
    rules = [
        _rule(
            "ServingGroupDown",
            'up{job=~"serving-.*"} == 0',
            "critical",
            "serving group {{ $labels.group }} on {{ $labels.node }} does not answer /metrics",
            settings.serving_down_for,
        ),
        _rule(
            "RouterDown",
            'up{job="sglang-router"} == 0',
            "critical",
            "the SGLang router on {{ $labels.node }} does not answer /metrics",
            settings.serving_down_for,
        ),
    ]
    for group in groups:
        histogram = KINDS[group.kind].metrics.ttft_histogram if group.kind in KINDS else None
        if not group.ttft_p99_ms or not histogram:
            continue
        limit_s = round(group.ttft_p99_ms * (1 + settings.ttft_margin) / 1000, 6)
        selector = f'{{node="{group.node}", group="{group.group}"}}'
        expr = (
            f"histogram_quantile(0.99, sum by (le, node, group) "
            f"(rate({histogram}_bucket{selector}[{settings.ttft_window}]))) > {limit_s:g}"
        )
        rules.append(
            _rule(
                "ServingTtftP99High",
                expr,
                "warning",
                f"{group.group} on {group.node}: TTFT P99 {{{{ $value | humanizeDuration }}}} is above {limit_s:g} s "
                f"(the recipe's {group.ttft_p99_ms:g} ms + {settings.ttft_margin:.0%})",
                settings.ttft_for,
                {"node": group.node, "group": group.group},  # one rule per group: promtool refuses identical twins
            )
        )
    return rules


def alert_rules(settings: AlertSettings, expected: list[tuple[str, int]], groups: list[ServingTarget]) -> dict:
    """The rule file (`promtool check rules` format): a `gpu` group and a `serving` group."""
    return {
        "groups": [
            {"name": "hgxkit-gpu", "rules": gpu_rules(settings, expected)},
            {"name": "hgxkit-serving", "rules": serving_rules(settings, groups)},
        ]
    }
