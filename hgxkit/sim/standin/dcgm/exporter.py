"""SIMULATED DCGM exporter: serves /metrics with dcgm-exporter's names and labels from the simulated GPUs.

Runs in a `--gpus all` container on a simulated node, where the simulated NVIDIA hook mounts nvidia-smi and
hwsim.py (/usr/lib/hgxkit-sim): the GPU readings come from `nvidia-smi --query-gpu` (utilisation, memory,
power, temperatures, clocks, clock-event reasons: the simulated telemetry that follows the stand-in servers'
load), XIDs from the simulator's fault switches (`touch /etc/hgxkit-sim/faults/xid-79-gpu3`), NVLink errors
from hwsim's links. Fields the simulation has no reading for (ECC, row remap, PCIe replays) are 0, as on a
healthy GPU. It takes the real exporter's flags: `-f` the counters file (which fields to publish, in its CSV
format), `-a` the listen address (`:9400`), `-r` (a remote host engine: accepted, nothing to connect to).
Every series carries `simulated="true"` besides the real exporter's labels.

Example:
    >>> rows = parse_smi(["0, GPU-aa, 00000000:18:00.0, NVIDIA H200, 35, 125000, 143771, 141.83, 35, 29, "
    ...                   "1980, 2619, 0x0000000000000000, 580.105.08"])
    >>> text = render([("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).")], rows, {}, {}, "node1")
    >>> text.splitlines()[2].split("{")[0], text.splitlines()[2].split("} ")[1], 'gpu="0",UUID="GPU-aa"' in text
    ('DCGM_FI_DEV_GPU_UTIL', '35', True)
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HWSIM = "/usr/lib/hgxkit-sim"
QUERY = (
    "index",
    "uuid",
    "pci.bus_id",
    "name",
    "utilization.gpu",
    "memory.used",
    "memory.total",
    "power.draw",
    "temperature.gpu",
    "temperature.memory",
    "clocks.sm",
    "clocks.mem",
    "clocks_event_reasons.active",
    "driver_version",
)
# DCGM field -> how it is read from a GPU's nvidia-smi row (a dict of QUERY names).
READINGS = {
    "DCGM_FI_DEV_GPU_UTIL": lambda r: float(r["utilization.gpu"]),
    "DCGM_FI_DEV_FB_USED": lambda r: float(r["memory.used"]),
    "DCGM_FI_DEV_FB_FREE": lambda r: float(r["memory.total"]) - float(r["memory.used"]),
    "DCGM_FI_DEV_POWER_USAGE": lambda r: float(r["power.draw"]),
    "DCGM_FI_DEV_GPU_TEMP": lambda r: float(r["temperature.gpu"]),
    "DCGM_FI_DEV_MEMORY_TEMP": lambda r: float(r["temperature.memory"]),
    "DCGM_FI_DEV_SM_CLOCK": lambda r: float(r["clocks.sm"]),
    "DCGM_FI_DEV_MEM_CLOCK": lambda r: float(r["clocks.mem"]),
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": lambda r: float(int(r["clocks_event_reasons.active"], 16)),
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": lambda r: float(int(r["clocks_event_reasons.active"], 16)),
}
NVLINK_ERROR_FIELDS = ("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL")


def read_counters(text: str) -> list[tuple[str, str, str]]:
    """The counters file (dcgm-exporter's CSV: `FIELD, type, help`; `#` comments) -> (field, type, help)."""
    out = []
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = [p.strip() for p in line.split(",", 2)]
        if len(parts) == 3 and parts[0].startswith("DCGM_FI_"):
            out.append((parts[0], parts[1], parts[2]))
    return out


def parse_smi(lines: list[str]) -> list[dict[str, str]]:
    """`nvidia-smi --query-gpu=<QUERY> --format=csv,noheader,nounits` lines -> one dict per GPU."""
    rows = []
    for line in lines:
        values = [v.strip() for v in line.split(",")]
        if len(values) == len(QUERY):
            rows.append(dict(zip(QUERY, values, strict=True)))
    return rows


def render(
    counters: list[tuple[str, str, str]],
    rows: list[dict[str, str]],
    xids: dict[str, int],
    nvlink_errors: dict[str, int],
    hostname: str,
) -> str:
    """The exposition text: per field HELP and TYPE, then one series per GPU. `xids` and `nvlink_errors` are
    keyed by GPU UUID. Label fields (type `label`) are labels, as the real exporter's DCGM_FI_DRIVER_VERSION."""
    label_fields = {name for name, kind, _ in counters if kind == "label"}
    out = []
    for name, kind, text in counters:
        if kind not in ("gauge", "counter"):
            continue
        out.append(f"# HELP {name} {text}\n# TYPE {name} {kind}\n")
        for row in rows:
            labels = {
                "gpu": row["index"],
                "UUID": row["uuid"],
                "pci_bus_id": row["pci.bus_id"],
                "device": f"nvidia{row['index']}",
                "modelName": row["name"],
                "Hostname": hostname,
            }
            if "DCGM_FI_DRIVER_VERSION" in label_fields:
                labels["DCGM_FI_DRIVER_VERSION"] = row["driver_version"]
            labels["simulated"] = "true"
            text_labels = ",".join(f'{k}="{v}"' for k, v in labels.items())
            out.append(f"{name}{{{text_labels}}} {_value(name, row, xids, nvlink_errors):g}\n")
    return "".join(out)


def _value(name: str, row: dict[str, str], xids: dict[str, int], nvlink_errors: dict[str, int]) -> float:
    if name in READINGS:
        return READINGS[name](row)
    if name == "DCGM_FI_DEV_XID_ERRORS":
        return float(xids.get(row["uuid"], 0))
    if name in NVLINK_ERROR_FIELDS:
        return float(nvlink_errors.get(row["uuid"], 0))
    return 0.0  # ECC, row remap, PCIe replays, violations, energy, bandwidth: a healthy idle GPU's value


def simulated_faults() -> tuple[dict[str, int], dict[str, int]]:
    """(XID by GPU UUID, NVLink CRC errors by GPU UUID) from hwsim.py's state; empty without it."""
    if HWSIM not in sys.path:
        sys.path.insert(0, HWSIM)
    try:
        import hwsim  # type: ignore[import-not-found]
    except ImportError:
        return {}, {}
    gpus = hwsim.gpus()
    by_index = {g.index: g.uuid for g in gpus}
    xids = {by_index[i]: x for i, x in hwsim.xids().items() if i in by_index}
    links = {g.uuid: sum(hwsim.link_errors(g.index, link) for link in range(hwsim.NVLINKS)) for g in gpus}
    return xids, links


def scrape(counters: list[tuple[str, str, str]]) -> str:
    """One scrape: nvidia-smi's readings and the simulator's faults, rendered."""
    query = ["nvidia-smi", f"--query-gpu={','.join(QUERY)}", "--format=csv,noheader,nounits"]
    done = subprocess.run(
        query,
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
        env={"HGXKIT_SIM_QUIET": "1", "PATH": "/usr/bin:/bin"},
    )
    xids, links = simulated_faults()
    return render(counters, parse_smi(done.stdout.splitlines()), xids, links, socket.gethostname())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dcgm-exporter", description="SIMULATED DCGM exporter (hgxkit)")
    parser.add_argument("-f", "--collectors", default="/etc/dcgm-exporter/default-counters.csv")
    parser.add_argument("-a", "--address", default=":9400")
    parser.add_argument("-r", "--remote-hostengine-info", default=None)
    args = parser.parse_args(argv)
    try:
        with open(args.collectors) as f:
            counters = read_counters(f.read())
    except OSError as err:
        print(f"dcgm-exporter (SIMULATED): cannot read {args.collectors}: {err.strerror}", file=sys.stderr)
        return 1
    host, _, port = args.address.rpartition(":")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404)
                return
            body = scrape(counters).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer((host.strip("[]") or "0.0.0.0", int(port)), Handler)
    print(f"dcgm-exporter (SIMULATED): {len(counters)} fields on {args.address}", file=sys.stderr, flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
