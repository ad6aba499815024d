"""nvidia-smi GPU samples: `nvidia-smi --query-gpu=GPU_QUERY --format=csv,noheader,nounits -lms 1000`, run with
TZ=UTC (nvidia-smi prints its timestamp in local time without a zone), and NVML's throttle-reason bits.

Example:
    >>> decode_throttle_reasons(0x44)
    ['SwPowerCap', 'HwThermalSlowdown']
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from datetime import datetime, timezone

GPU_QUERY = ("timestamp,index,power.draw,clocks.sm,clocks.mem,memory.used,temperature.gpu,utilization.gpu,"
             "clocks_throttle_reasons.active")  # fmt: skip

# NVML's clocks-throttle (clocks-event) reason bits, as nvidia-smi prints `clocks_throttle_reasons.active`.
THROTTLE_REASONS = {
    0x1: "GpuIdle",
    0x2: "ApplicationsClocksSetting",
    0x4: "SwPowerCap",
    0x8: "HwSlowdown",
    0x10: "SyncBoost",
    0x20: "SwThermalSlowdown",
    0x40: "HwThermalSlowdown",
    0x80: "HwPowerBrakeSlowdown",
    0x100: "DisplayClockSetting",
}
# The reasons that mean the GPU ran slower than it could because of heat or power (compare flags them).
THERMAL_OR_POWER = frozenset({"SwPowerCap", "HwSlowdown", "SwThermalSlowdown", "HwThermalSlowdown",
                              "HwPowerBrakeSlowdown"})  # fmt: skip


@dataclass(frozen=True)
class GpuSample:
    """One nvidia-smi query line (None where nvidia-smi printed [N/A] or [Not Supported])."""

    time: float
    index: int
    power_w: float | None
    sm_clock_mhz: float | None
    mem_clock_mhz: float | None
    memory_used_mib: float | None
    temperature_c: float | None
    utilization_pct: float | None
    throttle_mask: int | None


def decode_throttle_reasons(mask: int | None) -> list[str]:
    """NVML reason names of a `clocks_throttle_reasons.active` mask (0x4 -> ['SwPowerCap'])."""
    if not mask:
        return []
    names = [name for bit, name in THROTTLE_REASONS.items() if mask & bit]
    unknown = mask & ~sum(THROTTLE_REASONS)
    return names + ([f"unknown(0x{unknown:x})"] if unknown else [])


def _field(value: str) -> float | None:
    value = value.strip()
    if not value or value.startswith("["):  # [N/A], [Not Supported]
        return None
    try:
        return float(value)
    except ValueError:
        return None


def _smi_time(value: str) -> float:
    # nvidia-smi prints local time without a zone ("2025/11/30 12:00:01.123"); the collector runs it with TZ=UTC.
    return datetime.strptime(value.strip(), "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=timezone.utc).timestamp()


def parse_gpu_csv(text: str, *, source: str = "<gpu csv>") -> list[GpuSample]:
    """Samples of `nvidia-smi --query-gpu=GPU_QUERY --format=csv,noheader,nounits`; a bad line raises
    ValueError naming the file, the line and the expected columns."""
    samples = []
    for number, row in enumerate(csv.reader(io.StringIO(text), skipinitialspace=True), start=1):
        if not row or row[0].startswith("timestamp"):
            continue
        if len(row) != 9:
            raise ValueError(f"{source}: line {number} has {len(row)} columns; expected the 9 of {GPU_QUERY}")
        try:
            time = _smi_time(row[0])
            index = int(row[1])
            mask_text = row[8].strip()
            mask = int(mask_text, 16) if mask_text.lower().startswith("0x") else None
        except ValueError:
            raise ValueError(f"{source}: line {number} is not an nvidia-smi {GPU_QUERY} line") from None
        samples.append(GpuSample(time, index, *(_field(v) for v in row[2:8]), mask))  # type: ignore[arg-type]
    return samples
