"""Prometheus alert rules for GPU faults and serving: XIDs, ECC, row remap, throttling, NVLink, GPU count, exporters
and nodes down, groups down, TTFT P99 drifting above the recipe's figure; and recording rules that carry the recipe's
reference figures into Prometheus, so a dashboard can draw them as lines.

XIDs: NVIDIA's XID catalog (https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html) sorts them by
what to do. The critical set here: 48 double-bit ECC, 63/64 row remap recorded/failed, 74 NVLink, 79 fell off the
bus, 92 high single-bit ECC rate, 94/95 contained/uncontained ECC, 119/120 GSP errors. XID 79 raises only
GpuFellOffBus (the generic rule leaves it out): one alert per cause. An XID alert must resolve, so it reads
dcgm-exporter's windowed `DCGM_EXP_XID_ERRORS_COUNT` (XIDs per GPU within `--xid-count-window-size`, one series per
XID seen, labelled `xid`; a zero series per GPU otherwise; NVIDIA/dcgm-exporter internal/pkg/collector/
xid_collector.go), not `DCGM_FI_DEV_XID_ERRORS`, which keeps the last XID until the driver reloads. An exporter
without the windowed field (older ones, the simulator's stand-in) gets the same window from the gauge: an XID that
changed within it. A GPU that fell off the bus may stop reporting at all: GpuFewerThanExpected is the backstop.
Throttling reads the NVML clocks-event bitmask (SW power cap 0x4, HW slowdown 0x8, SW thermal 0x20, HW thermal
0x40, HW power brake 0x80); an H200 serving flat out sits at its power cap by design, so only the hardware bits
(HW slowdown, HW power brake) are a power fault.

Example:
    >>> rules = alert_rules(AlertSettings(), [("node1", 8)], [])
    >>> [r["alert"] for r in rules["groups"][0]["rules"]][:3]
    ['GpuFellOffBus', 'GpuCriticalXid', 'GpuEccDoubleBit']
"""

from __future__ import annotations

from dataclasses import dataclass

from hgxkit.kinds import KINDS
from hgxkit.monitoring.scrape import ServingTarget

FELL_OFF_BUS = 79
CRITICAL_XIDS = (48, 63, 64, 74, 79, 92, 94, 95, 119, 120)
XID_GAUGE = "DCGM_FI_DEV_XID_ERRORS"
XID_WINDOWED = "DCGM_EXP_XID_ERRORS_COUNT"
NVLINK_ERRORS = (
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
)
REASONS = "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"
HW_SLOWDOWN, SW_THERMAL, HW_THERMAL, HW_POWER_BRAKE = 0x8, 0x20, 0x40, 0x80
GPU = "{{ $labels.node }} GPU {{ $labels.gpu }}"
# The XID an alert names: the windowed series carry it as a label (their value is a count), the gauge as its value.
XID_TEXT = "{{ if $labels.xid }}XID {{ $labels.xid }} ({{ $value }} in the window){{ else }}XID {{ $value }}{{ end }}"
RECIPE_TTFT = "hgxkit:recipe_ttft_p99_seconds"
RECIPE_ITL = "hgxkit:recipe_itl_p99_seconds"


@dataclass(frozen=True)
class AlertSettings:
    """The alert knobs (roles/monitoring/defaults.py)."""

    throttle_for: str = "10m"  # how long throttling must last before it alerts
    nvlink_window: str = "10m"  # NVLink error counters rising within this window alert
    xid_window: str = "5m"  # an XID alerts for this long after it was raised (dcgm-exporter's default window)
    exporter_down_for: str = "2m"
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


def xid_expr(xids: tuple[int, ...], window: str) -> str:
    """GPUs that raised one of `xids` within `window`: the exporter's windowed count, or where an exporter has no
    windowed series for the GPU, its last-XID gauge when that changed within `window`.

    >>> print(xid_expr((79,), "5m").replace(" or (", "\\nor ("))
    (DCGM_EXP_XID_ERRORS_COUNT{xid=~"79"} > 0)
    or (((DCGM_FI_DEV_XID_ERRORS == 79) and changes(DCGM_FI_DEV_XID_ERRORS[5m]) > 0) unless on (node, gpu) ...)
    """
    windowed = f'{XID_WINDOWED}{{xid=~"{"|".join(map(str, xids))}"}} > 0'
    gauge = " or ".join(f"{XID_GAUGE} == {xid}" for xid in xids)
    changed = f"(({gauge}) and changes({XID_GAUGE}[{window}]) > 0)"
    return f"({windowed}) or ({changed} unless on (node, gpu) {XID_WINDOWED})"


def gpu_rules(settings: AlertSettings, expected: list[tuple[str, int]]) -> list[dict]:
    """The GPU rules; `expected` is (node, GPU count) for nodes whose count is known."""
    return [*_fault_rules(settings), *_slowdown_rules(settings), *_presence_rules(settings, expected)]


def _fault_rules(settings: AlertSettings) -> list[dict]:
    """A GPU that failed or is failing: XIDs, double-bit ECC errors, row remapping."""
    others = tuple(xid for xid in CRITICAL_XIDS if xid != FELL_OFF_BUS)
    return [
        _rule(
            "GpuFellOffBus",
            xid_expr((FELL_OFF_BUS,), settings.xid_window),
            "critical",
            f"{GPU} fell off the bus (XID 79) within {settings.xid_window}: drain the node, reset or replace the GPU",
        ),
        _rule(
            "GpuCriticalXid",
            xid_expr(others, settings.xid_window),
            "critical",
            f"{GPU} raised {XID_TEXT} within {settings.xid_window} (critical set {', '.join(map(str, others))})",
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
            f"{_bit(SW_THERMAL)} or {_bit(HW_THERMAL)}",
            "warning",
            f"{GPU} is slowed by temperature for {settings.throttle_for}",
            settings.throttle_for,
        ),
        _rule(
            "GpuPowerThrottling",
            f"{_bit(HW_SLOWDOWN)} or {_bit(HW_POWER_BRAKE)}",
            "warning",
            f"{GPU} is slowed by a hardware slowdown or the power brake for {settings.throttle_for} (the power "
            "supply or the board signalled it, not the software power cap)",
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


def gpu_count_expr(expected: list[tuple[str, int]]) -> str:
    """Nodes reporting fewer GPUs than expected; a node whose exporter returns no series at all reports 0
    (`count` of nothing is nothing, so `absent` stands in for it).

    >>> print(gpu_count_expr([("node1", 8)]).replace(" or (", "\\nor ("))
    (count by (node) (DCGM_FI_DEV_GPU_UTIL{node="node1"})
    or (absent(DCGM_FI_DEV_GPU_UTIL{node="node1"}) - 1)) < 8
    """
    parts = []
    for node, gpus in expected:
        series = f'DCGM_FI_DEV_GPU_UTIL{{node="{node}"}}'
        parts.append(f"(count by (node) ({series}) or (absent({series}) - 1)) < {gpus}")
    return " or ".join(parts)


def _presence_rules(settings: AlertSettings, expected: list[tuple[str, int]]) -> list[dict]:
    """GPUs missing from a node, exporters that do not answer, and a node where neither answers."""
    rules = []
    if expected:
        rules.append(
            _rule(
                "GpuFewerThanExpected",
                gpu_count_expr(expected),
                "critical",
                "{{ $labels.node }} reports {{ $value }} GPUs, fewer than expected",
                "2m",
            )
        )
    down = settings.exporter_down_for
    rules += [
        _rule(
            "DcgmExporterDown",
            'up{job="dcgm"} == 0',
            "critical",
            f"the DCGM exporter on {{{{ $labels.node }}}} has not answered for {down}: its GPUs are not watched",
            down,
        ),
        _rule(
            "NodeExporterDown",
            'up{job="node"} == 0',
            "warning",
            f"the node exporter on {{{{ $labels.node }}}} has not answered for {down}",
            down,
        ),
        _rule(
            "NodeDown",
            'up{job="node"} == 0 and on (node) up{job="dcgm"} == 0',
            "critical",
            f"neither exporter on {{{{ $labels.node }}}} has answered for {down}: the node is down or unreachable",
            down,
        ),
    ]
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
            'up{job="router"} == 0',
            "critical",
            "the router on {{ $labels.node }} does not answer /metrics",
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


def reference_rules(groups: list[ServingTarget]) -> list[dict]:
    """The recipe's TTFT P99 and ITL P99 per group as constant series (seconds), for the dashboards' lines.

    >>> reference_rules([ServingTarget("node1", "g-0", 5000, "sglang", "/metrics", ttft_p99_ms=250.0)])[0]["expr"]
    'vector(0.25)'
    """
    rules = []
    for group in groups:
        for name, value in ((RECIPE_TTFT, group.ttft_p99_ms), (RECIPE_ITL, group.itl_p99_ms)):
            if value:
                labels = {"node": group.node, "group": group.group}
                rules.append({"record": name, "expr": f"vector({round(value / 1000, 6):g})", "labels": labels})
    return rules


def alert_rules(settings: AlertSettings, expected: list[tuple[str, int]], groups: list[ServingTarget]) -> dict:
    """The rule file (`promtool check rules` format): a `gpu` and a `serving` group of alerts, and the recipe's
    reference figures (a group of recording rules, only when a recipe has any)."""
    file = {
        "groups": [
            {"name": "hgxkit-gpu", "rules": gpu_rules(settings, expected)},
            {"name": "hgxkit-serving", "rules": serving_rules(settings, groups)},
        ]
    }
    reference = reference_rules(groups)
    if reference:
        file["groups"].append({"name": "hgxkit-reference", "rules": reference})
    return file
