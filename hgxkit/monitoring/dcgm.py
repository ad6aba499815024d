"""The DCGM exporter: the fields its counters file selects (what the alerts and dashboards read) and its container.

Field names are DCGM's (NVIDIA/dcgm-exporter etc/default-counters.csv and dcp-metrics-included.csv; the
exporter publishes each under the field's own name). The default counters file leaves out the ECC, NVLink
error, row-remap-pending and clock-event fields the alerts need, and the profiling (DCP) fields that say what
the GPU does while "utilized" (tensor pipe, DRAM, SM activity; PCIe and NVLink bytes per second), so hgxkit writes
its own. Besides DCGM's fields it asks for the exporter's own `DCGM_EXP_XID_ERRORS_COUNT` (`EXPORTER_FIELDS`):
XIDs counted within a window (`DCGM_EXPORTER_XID_COUNT_WINDOW_SIZE`, ms), which the XID alerts read so they
resolve (hgxkit/monitoring/alerts.py).

Example:
    >>> counters_csv().splitlines()[3]
    'DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization (in %).'
    >>> spec = exporter_spec("nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3-4.1.3-ubuntu22.04", bind_address="127.0.0.1",
    ...                      port=9400, counters_file="/etc/hgxkit/monitoring/dcgm-counters.csv", hostengine=None)
    >>> spec.argv[-4:]
    ['-f', '/etc/dcgm-exporter/hgxkit.csv', '-a', '127.0.0.1:9400']
"""

from __future__ import annotations

import hashlib
import json

from hgxkit.serving.containers import SPEC_LABEL
from hgxkit.serving.router import RouterSpec

EXPORTER_LABEL = "hgxkit.monitoring"
CONTAINER = "hgxkit-dcgm-exporter"
COUNTERS_IN_CONTAINER = "/etc/dcgm-exporter/hgxkit.csv"

# (field, Prometheus type, help). Kept in the exporter's CSV format: one field a line.
FIELDS: tuple[tuple[str, str, str], ...] = (
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."),
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
    # The NVML clocks-event bitmask (DCGM >= 3.3 name; DCGM_FI_DEV_CLOCK_THROTTLE_REASONS before).
    ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "gauge", "Current clock event reasons (bitmask)."),
    ("DCGM_FI_DEV_POWER_VIOLATION", "counter", "Throttling duration due to power constraints."),
    ("DCGM_FI_DEV_THERMAL_VIOLATION", "counter", "Throttling duration due to thermal constraints."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Total number of single-bit volatile ECC errors."),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors."),
    ("DCGM_FI_DEV_ROW_REMAP_PENDING", "gauge", "Whether a row remap is pending (needs a GPU reset)."),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed."),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for uncorrectable errors."),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for correctable errors."),
    ("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "counter", "Total number of NVLink flow-control CRC errors."),
    ("DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", "counter", "Total number of NVLink data CRC errors."),
    ("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "counter", "Total number of NVLink retries."),
    ("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", "counter", "Total number of NVLink recovery errors."),
    ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter", "Total number of NVLink bandwidth counters for all lanes."),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries."),
    # Profiling (DCP) fields, as the exporter's dcp-metrics-included.csv names them: ratios 0..1, bytes/s.
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."),
    ("DCGM_FI_PROF_SM_ACTIVE", "gauge", "The ratio of cycles an SM has at least 1 warp assigned."),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active."),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge", "Ratio of cycles the device memory interface is active."),
    ("DCGM_FI_PROF_PCIE_TX_BYTES", "gauge", "The rate of data transmitted over the PCIe bus (bytes per second)."),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", "gauge", "The rate of data received over the PCIe bus (bytes per second)."),
    ("DCGM_FI_PROF_NVLINK_TX_BYTES", "gauge", "The rate of data transmitted over NVLink (bytes per second)."),
    ("DCGM_FI_PROF_NVLINK_RX_BYTES", "gauge", "The rate of data received over NVLink (bytes per second)."),
    ("DCGM_FI_DRIVER_VERSION", "label", "Driver Version"),
)
FIELD_NAMES = tuple(name for name, kind, _ in FIELDS if kind != "label")
# The exporter's own metrics (not DCGM fields), in the same file.
EXPORTER_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("DCGM_EXP_XID_ERRORS_COUNT", "gauge", "Count of XID Errors within user-specified time window."),
)


def counters_csv() -> str:
    """The exporter's counters file (`-f`): a comment header, then one `FIELD, type, help` line per field."""
    header = "# hgxkit's DCGM exporter counters (hgxkit/monitoring/dcgm.py); format: DCGM FIELD, type, help\n"
    return (
        header
        + "# written by roles/monitoring; edits are overwritten\n\n"
        + "".join(f"{name}, {kind}, {text}\n" for name, kind, text in (*FIELDS, *EXPORTER_FIELDS))
    )


def exporter_spec(
    image: str, *, bind_address: str, port: int, counters_file: str, hostengine: str | None, xid_window_ms: int = 300000
) -> RouterSpec:
    """The exporter container: host network (it listens on `bind_address:port`), every GPU, the counters
    file read-only, restart unless stopped, labelled with a hash of its spec so an unchanged one is left alone.

    `hostengine` ("localhost:5555") makes the exporter read the node's own nv-hostengine (bring-up runs
    nvidia-dcgm) instead of starting a second host engine inside the container; None: embedded.
    `xid_window_ms`: how long an XID counts in DCGM_EXP_XID_ERRORS_COUNT (through the exporter's environment
    variable, so an exporter without the setting starts all the same).
    """
    address = f"[{bind_address}]" if ":" in bind_address else bind_address
    body = [
        "--network",
        "host",
        "--restart",
        "unless-stopped",
        "--gpus",
        "all",
        "--cap-add",
        "SYS_ADMIN",
        "-e",
        f"DCGM_EXPORTER_XID_COUNT_WINDOW_SIZE={xid_window_ms}",
        "-v",
        f"{counters_file}:{COUNTERS_IN_CONTAINER}:ro",
        image,
        *(["-r", hostengine] if hostengine else []),
        "-f",
        COUNTERS_IN_CONTAINER,
        "-a",
        f"{address}:{port}",
    ]
    spec_hash = hashlib.sha256(json.dumps([body, counters_csv()]).encode()).hexdigest()[:16]
    labels = ["--label", f"{EXPORTER_LABEL}=dcgm-exporter", "--label", f"{SPEC_LABEL}={spec_hash}"]
    return RouterSpec(CONTAINER, image, ["docker", "run", "-d", "--name", CONTAINER, *labels, *body], spec_hash)
