"""Parse what `nvidia-smi` and friends print, including the ways they fail: the one nvidia-smi parser.

Pure functions over text, so they are tested on recorded outputs and used by the pyinfra facts (GPUs, XML,
topology, NVLink) and by the results (GPU samples taken during a benchmark, NVML throttle reasons).

Example:
    >>> rows = parse_query_csv("index, name\\n0, NVIDIA H200\\n", ["index", "name"])
    >>> rows[0]["name"]
    'NVIDIA H200'
    >>> classify_smi_failure("Failed to initialize NVML: Driver/library version mismatch")
    'version-mismatch'
    >>> decode_throttle_reasons(0x44)
    ['SwPowerCap', 'HwThermalSlowdown']
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Literal

SmiFailure = Literal["no-driver", "version-mismatch", "not-installed", "no-devices", "unknown"]

# Fields the roles and the fingerprint read with `nvidia-smi --query-gpu=… --format=csv,noheader,nounits`.
GPU_QUERY_FIELDS = (
    "index",
    "name",
    "uuid",
    "pci.bus_id",
    "driver_version",
    "vbios_version",
    "memory.total",
    "persistence_mode",
    "ecc.mode.current",
    "power.limit",
    "fabric.state",
    "fabric.status",
)


@dataclass(frozen=True)
class GpuInfo:
    """One GPU as nvidia-smi reports it (strings as printed; numbers parsed where the roles compare them)."""

    index: int
    name: str
    uuid: str
    bus_id: str
    driver_version: str
    vbios_version: str | None = None
    memory_total_mib: int | None = None
    persistence_mode: bool | None = None
    ecc_enabled: bool | None = None
    power_limit_w: float | None = None
    fabric_state: str | None = None
    fabric_status: str | None = None
    cuda_version: str | None = None
    clocks_max_sm_mhz: int | None = None
    clocks_max_mem_mhz: int | None = None
    ecc_errors_uncorrected: int | None = None


@dataclass(frozen=True)
class NvlinkGpu:
    """NVLink state of one GPU: speed per link in GB/s (None when the link is inactive)."""

    index: int
    links: dict[int, float | None] = field(default_factory=dict)

    @property
    def inactive(self) -> list[int]:
        return [link for link, speed in self.links.items() if speed is None]


def classify_smi_failure(output: str) -> SmiFailure | None:
    """What a failed nvidia-smi run means, from its output; None when the output is not a known failure."""
    text = output.strip()
    if "Driver/library version mismatch" in text:
        return "version-mismatch"
    if "couldn't communicate with the NVIDIA driver" in text or "NVIDIA driver is not loaded" in text:
        return "no-driver"
    if "nvidia-smi: not found" in text or "command not found" in text or "No such file" in text:
        return "not-installed"
    if text.startswith("No devices were found"):
        return "no-devices"
    return None


def parse_query_csv(text: str, fields: list[str] | tuple[str, ...]) -> list[dict[str, str]]:
    """Rows of `--query-gpu=… --format=csv[,noheader][,nounits]` as dicts keyed by the queried field names.

    A header line (present without `noheader`) is recognised by its first cell and skipped; unit suffixes
    (`MiB`, `W`, `MHz`) are removed, so both `nounits` and unit-bearing output parse the same.
    """
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        cells = [cell.strip() for cell in line.split(",")]
        if cells[0] == fields[0] or cells[0].startswith(fields[0] + " "):
            continue  # header
        if len(cells) != len(fields):
            raise ValueError(f"nvidia-smi CSV row has {len(cells)} cells for {len(fields)} fields: {line!r}")
        rows.append({name: _strip_unit(cell) for name, cell in zip(fields, cells, strict=True)})
    return rows


def _strip_unit(value: str) -> str:
    return re.sub(r"\s+(MiB|W|MHz|%)$", "", value)


def _optional_int(value: str | None) -> int | None:
    if value is None or not re.fullmatch(r"-?\d+", value.strip()):
        return None
    return int(value)


def _optional_float(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return float(value.strip().split()[0])
    except (ValueError, IndexError):
        return None


def _flag(value: str | None) -> bool | None:
    if value is None:
        return None
    return {"enabled": True, "disabled": False}.get(value.strip().lower())


def _na(value: str | None) -> str | None:
    return None if value is None or value.strip() in ("", "N/A", "[N/A]", "[Not Supported]") else value.strip()


def gpus_from_query(text: str, fields: tuple[str, ...] = GPU_QUERY_FIELDS) -> list[GpuInfo]:
    """`GpuInfo` per row of a `--query-gpu` CSV made with `fields` (default: `GPU_QUERY_FIELDS`)."""
    out = []
    for row in parse_query_csv(text, fields):
        out.append(
            GpuInfo(
                index=int(row["index"]),
                name=row.get("name", ""),
                uuid=row.get("uuid", ""),
                bus_id=row.get("pci.bus_id", ""),
                driver_version=row.get("driver_version", ""),
                vbios_version=_na(row.get("vbios_version")),
                memory_total_mib=_optional_int(row.get("memory.total")),
                persistence_mode=_flag(row.get("persistence_mode")),
                ecc_enabled=_flag(row.get("ecc.mode.current")),
                power_limit_w=_optional_float(row.get("power.limit")),
                fabric_state=_na(row.get("fabric.state")),
                fabric_status=_na(row.get("fabric.status")),
            )
        )
    return out


def gpus_from_xml(text: str) -> tuple[list[GpuInfo], dict[str, str]]:
    """Parse `nvidia-smi -q -x`: the GPUs, and top-level facts (driver_version, cuda_version, simulated)."""
    import xml.etree.ElementTree as ET  # here: a no-op reads the CSV query alone, and ElementTree loads pyexpat

    root = ET.fromstring(text)
    top = {
        "driver_version": (root.findtext("driver_version") or "").strip(),
        "cuda_version": (root.findtext("cuda_version") or "").strip(),
        "attached_gpus": (root.findtext("attached_gpus") or "").strip(),
    }
    simulated = root.findtext("simulated")
    if simulated is not None:
        top["simulated"] = simulated.strip()
    gpus = []
    for index, gpu in enumerate(root.findall("gpu")):
        fabric = gpu.find("fabric")
        uncorrected = gpu.findtext("ecc_errors/volatile/dram_uncorrectable") or gpu.findtext(
            "ecc_errors/volatile/double_bit/total"
        )
        gpus.append(
            GpuInfo(
                index=_optional_int(gpu.findtext("minor_number")) if gpu.findtext("minor_number") else index,
                name=(gpu.findtext("product_name") or "").strip(),
                uuid=(gpu.findtext("uuid") or "").strip(),
                bus_id=gpu.get("id", ""),
                driver_version=top["driver_version"],
                vbios_version=_na(gpu.findtext("vbios_version")),
                memory_total_mib=_optional_int((gpu.findtext("fb_memory_usage/total") or "").split(" ")[0]),
                persistence_mode=_flag(gpu.findtext("persistence_mode")),
                ecc_enabled=_flag(gpu.findtext("ecc_mode/current_ecc")),
                power_limit_w=_optional_float(
                    gpu.findtext("gpu_power_readings/current_power_limit") or gpu.findtext("power_readings/power_limit")
                ),
                fabric_state=_na(fabric.findtext("state")) if fabric is not None else None,
                fabric_status=_na(fabric.findtext("status")) if fabric is not None else None,
                cuda_version=top["cuda_version"] or None,
                clocks_max_sm_mhz=_optional_int((gpu.findtext("max_clocks/sm_clock") or "").split(" ")[0]),
                clocks_max_mem_mhz=_optional_int((gpu.findtext("max_clocks/mem_clock") or "").split(" ")[0]),
                ecc_errors_uncorrected=_optional_int(uncorrected),
            )
        )
    return gpus, top


def parse_topo_matrix(text: str) -> dict[tuple[str, str], str]:
    """`nvidia-smi topo -m` as {(row, column): connection} over the GPU/NIC rows (`NV18`, `SYS`, `X`…)."""
    lines = [line for line in text.splitlines() if line.strip()]
    header_index = next((i for i, line in enumerate(lines) if re.match(r"^\s*GPU0\b", line)), None)
    if header_index is None:
        raise ValueError("no topology header (a line starting with GPU0) in nvidia-smi topo -m output")
    columns = [c for c in re.split(r"\t+|\s{2,}", lines[header_index].strip()) if re.fullmatch(r"(GPU|NIC)\d+", c)]
    matrix: dict[tuple[str, str], str] = {}
    for line in lines[header_index + 1 :]:
        cells = re.split(r"\t+|\s{2,}", line.strip())
        if not cells or not re.fullmatch(r"(GPU|NIC)\d+", cells[0]):
            break
        for column, value in zip(columns, cells[1 : 1 + len(columns)], strict=False):
            matrix[(cells[0], column)] = value.strip()
    return matrix


def parse_nvlink_status(text: str) -> list[NvlinkGpu]:
    """`nvidia-smi nvlink -s`: per GPU, each link's speed in GB/s, None for `<inactive>`."""
    gpus: list[NvlinkGpu] = []
    for line in text.splitlines():
        header = re.match(r"^GPU (\d+):", line)
        if header:
            gpus.append(NvlinkGpu(int(header.group(1))))
            continue
        link = re.match(r"^\s*Link (\d+):\s*(.+?)\s*$", line)
        if link and gpus:
            value = link.group(2)
            speed = re.match(r"^([\d.]+) GB/s", value)
            gpus[-1].links[int(link.group(1))] = float(speed.group(1)) if speed else None
    return gpus


def parse_nvlink_errors(text: str) -> dict[int, dict[str, int]]:
    """`nvidia-smi nvlink -e`: per GPU, the sum of each error counter over its links."""
    totals: dict[int, dict[str, int]] = {}
    current: int | None = None
    for line in text.splitlines():
        header = re.match(r"^GPU (\d+):", line)
        if header:
            current = int(header.group(1))
            totals[current] = {}
            continue
        counter = re.match(r"^\s*Link \d+:\s*([A-Za-z ]+?) Errors:\s*(\d+)", line)
        if counter and current is not None:
            name = counter.group(1).strip().lower().replace(" ", "_")
            totals[current][name] = totals[current].get(name, 0) + int(counter.group(2))
    return totals


def parse_module_version(text: str) -> str | None:
    """The loaded kernel module version from `/proc/driver/nvidia/version` or `/sys/module/nvidia/version`."""
    match = re.search(r"Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)", text)
    if match:
        return match.group(1)
    bare = text.strip()
    return bare if re.fullmatch(r"\d+\.\d+(\.\d+)?", bare) else None


def upstream_version(debian_version: str) -> str:
    """`580.95.05-1ubuntu1` or `1:580.95.05-0ubuntu1` -> `580.95.05` (what nvidia-smi prints)."""
    version = debian_version.split(":", 1)[-1]
    return version.split("-", 1)[0]


# The telemetry sampler's query (verify runs it with `-lms 1000` and TZ=UTC beside the benchmark; nvidia-smi prints
# its timestamp in local time without a zone); GPU_QUERY_FIELDS above is the facts' one-shot query.
GPU_QUERY = (
    "timestamp,index,power.draw,clocks.sm,clocks.mem,memory.used,temperature.gpu,utilization.gpu,"
    "clocks_throttle_reasons.active"
)

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
THERMAL_OR_POWER = frozenset(
    {"SwPowerCap", "HwSlowdown", "SwThermalSlowdown", "HwThermalSlowdown", "HwPowerBrakeSlowdown"}
)


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
        samples.append(GpuSample(time, index, *(_optional_float(v) for v in row[2:8]), mask))  # type: ignore[arg-type]
    return samples
