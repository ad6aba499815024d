"""SIMULATED nvidia-smi for hgxkit simulated HGX-H200 nodes: the program behind the simulated apt repository's
/usr/bin/nvidia-smi (hgxkit/sim/data/aptrepo/files/nvidia-smi), beside hwsim.py in /usr/lib/hgxkit-sim.

It lives here, not in the packaged file, so that Python can keep its bytecode (the launcher points
`sys.pycache_prefix` at the node's /var/cache): a script run as a program is compiled on every run, and the facts'
--query-gpu runs on every deploy. A real nvidia-smi is a native binary; the stand-in keeps its start-up cost small
for the same reason, taking imports beyond what Python loads at start where they are needed (random for busy GPUs'
jitter, ElementTree for -q -x; see hwsim.py's imports).
"""

import os
import sys
import time

import hwsim

NO_DRIVER = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running.\n"
)
UNITS = {"memory": "MiB", "power": "W", "clocks": "MHz", "utilization": "%"}


LOAD_DIR = os.path.join(str(hwsim.RUN), "gpu-load")  # a stand-in server writes "<running> <queued> <time>" here


def load(index):
    """(server on this GPU, running requests) from the stand-in's report; a report older than 5 s means idle,
    none at all means no server holds the GPU."""
    try:
        with open(os.path.join(LOAD_DIR, f"gpu{index}")) as f:
            running, _queued, stamp = f.read().split()[:3]
    except (OSError, ValueError):
        return False, 0
    fresh = time.time() - float(stamp) < 5
    return True, int(running) if fresh else 0


def dynamic(index):
    """SIMULATED telemetry that follows the load: power, clocks, utilisation, temperature, memory, throttling."""
    served, running = load(index)
    busy = min(running, 8)
    jitter = 0.0
    if busy:
        import random

        jitter = random.Random(f"{index}-{int(time.time())}").uniform(-1, 1)
    throttle = 0x4 if hwsim.fault("gpu-throttle") and busy else (0x1 if not busy else 0x0)
    return {
        "power": f"{71.83 + 70 * busy + 8 * jitter * bool(busy):.2f}",
        "sm": "1980" if busy and not throttle else ("1410" if busy else "345"),
        "mem": "2619" if served else "1593",
        "util": str(min(100, 25 + 10 * busy + int(3 * jitter)) if busy else 0),
        "temp": str(31 + 4 * busy),
        "used": 125000 if served else 0,
        "throttle": f"0x{throttle:016x}",
    }


def timestamp():
    """Now as nvidia-smi's `timestamp` field prints it: local time, to the millisecond."""
    now = time.time()
    return time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(now)) + f".{int(now % 1 * 1000):03d}"


def fields(g, version, fabric):
    d = dynamic(g.on_node)
    mem_used = d["used"]
    return {
        "index": (str(g.index), None),
        "name": (g.name, None),
        "gpu_name": (g.name, None),
        "uuid": (g.uuid, None),
        "gpu_uuid": (g.uuid, None),
        "serial": (g.serial, None),
        "gpu_serial": (g.serial, None),
        "pci.bus_id": (g.bus_id, None),
        "gpu_bus_id": (g.bus_id, None),
        "pci.device_id": (hwsim.GPU_PCI_DEVICE, None),
        "pci.sub_device_id": (hwsim.GPU_PCI_SUBSYS, None),
        "driver_version": (version, None),
        "vbios_version": ("96.00.AF.00.01", None),
        "count": (str(len(hwsim.gpus())), None),
        "memory.total": (str(hwsim.GPU_MEMORY_MIB), "MiB"),
        "memory.used": (str(mem_used), "MiB"),
        "memory.reserved": ("0", "MiB"),
        "memory.free": (str(hwsim.GPU_MEMORY_MIB - mem_used), "MiB"),
        "timestamp": (timestamp(), None),
        "temperature.gpu": (d["temp"], None),
        "temperature.memory": ("29", None),
        "utilization.gpu": (d["util"], "%"),
        "utilization.memory": ("0", "%"),
        "power.draw": (d["power"], "W"),
        "power.limit": ("700.00", "W"),
        "clocks.mem": (d["mem"], "MHz"),
        "clocks.current.memory": (d["mem"], "MHz"),
        "clocks_throttle_reasons.active": (d["throttle"], None),
        "clocks_event_reasons.active": (d["throttle"], None),
        "enforced.power.limit": ("700.00", "W"),
        "power.max_limit": ("700.00", "W"),
        "persistence_mode": ("Enabled" if hwsim.persistence() else "Disabled", None),
        "compute_mode": ("Default", None),
        "pstate": ("P0", None),
        "ecc.mode.current": ("Enabled", None),
        "mig.mode.current": ("Disabled", None),
        "clocks.max.sm": ("1980", "MHz"),
        "clocks.sm": (d["sm"], "MHz"),
        "clocks.max.memory": ("3201", "MHz"),
        "fabric.state": ("Completed" if fabric else "In Progress", None),
        "fabric.status": ("Success" if fabric else "N/A", None),
        "module_id": (str(g.module_id), None),
    }


def select(gpus, argv):
    for flag in ("-i", "--id"):
        for i, a in enumerate(argv):
            if a == flag and i + 1 < len(argv):
                want = argv[i + 1].split(",")
            elif a.startswith(flag + "="):
                want = a.split("=", 1)[1].split(",")
            else:
                continue
            chosen = [g for g in gpus if str(g.index) in want or g.uuid in want or g.bus_id in want]
            if not chosen:
                sys.stdout.write("No devices were found\n")
                sys.exit(6)
            return chosen
    return gpus


def query(argv, gpus, version, fabric):
    spec = next(a.split("=", 1)[1] for a in argv if a.startswith("--query-gpu="))
    fmt = next((a.split("=", 1)[1] for a in argv if a.startswith("--format=")), "")
    opts = fmt.split(",")
    if "csv" not in opts:
        sys.stdout.write('"--format=" switch is missing or invalid. Please specify the format.\n')
        return 2
    names = [n.strip() for n in spec.split(",") if n.strip()]
    rows = []
    for g in gpus:
        table = fields(g, version, fabric)
        row = []
        for n in names:
            if n not in table:
                sys.stdout.write(f'Field "{n}" is not a valid field to query.\n\n')
                return 2
            value, unit = table[n]
            row.append(value if unit is None or "nounits" in opts else f"{value} {unit}")
        rows.append(", ".join(row))
    if "noheader" not in opts:
        head = []
        for n in names:
            unit = fields(gpus[0], version, fabric)[n][1] if gpus else None
            head.append(n if unit is None or "nounits" in opts else f"{n} [{unit}]")
        rows.insert(0, ", ".join(head))
    sys.stdout.write("".join(r + "\n" for r in rows))
    return 0


def loop_period(argv):
    """Seconds between samples for `-l SEC`/`--loop=SEC` or `-lms MS`/`--loop-ms=MS`; 0 without them."""
    for i, a in enumerate(argv):
        value = argv[i + 1] if i + 1 < len(argv) else "0"
        if a in ("-l", "--loop"):
            return float(value)
        if a in ("-lms", "--loop-ms"):
            return float(value) / 1000
        if a.startswith("--loop="):
            return float(a.split("=", 1)[1])
        if a.startswith("--loop-ms="):
            return float(a.split("=", 1)[1]) / 1000
    return 0


def q_text(gpus, version, fabric):
    now = time.strftime("%a %b %d %H:%M:%S %Y")
    out = [
        "",
        "==============NVSMI LOG==============",
        "",
        f"Timestamp                                 : {now}",
        f"Driver Version                            : {version}",
        f"CUDA Version                              : {hwsim.CUDA_VERSION}",
        "Simulated                                 : true (hgxkit-sim)",
        "",
        f"Attached GPUs                             : {len(gpus)}",
    ]
    for g in gpus:
        t = fields(g, version, fabric)
        out += [
            f"GPU {g.bus_id}",
            f"    Product Name                          : {g.name}",
            "    Product Brand                         : NVIDIA",
            "    Product Architecture                  : Hopper",
            f"    Persistence Mode                      : {t['persistence_mode'][0]}",
            f"    Serial Number                         : {g.serial}",
            f"    GPU UUID                              : {g.uuid}",
            f"    Minor Number                          : {g.on_node}",
            "    VBIOS Version                         : 96.00.AF.00.01",
            f"    Module ID                             : {g.module_id}",
            "    PCI",
            f"        Bus                               : 0x{g.bus_id[9:11]}",
            f"        Device Id                         : {hwsim.GPU_PCI_DEVICE}",
            f"        Bus Id                            : {g.bus_id}",
            f"        Sub System Id                     : {hwsim.GPU_PCI_SUBSYS}",
            "    FB Memory Usage",
            f"        Total                             : {hwsim.GPU_MEMORY_MIB} MiB",
            "        Used                              : 0 MiB",
            f"        Free                              : {hwsim.GPU_MEMORY_MIB} MiB",
            "    Fabric",
            f"        State                             : {t['fabric.state'][0]}",
            f"        Status                            : {t['fabric.status'][0]}",
            "    Power Readings",
            "        Power Draw                        : 71.83 W",
            "        Current Power Limit               : 700.00 W",
            "    Temperature",
            "        GPU Current Temp                  : 31 C",
            "",
        ]
    sys.stdout.write("\n".join(out) + "\n")
    return 0


def q_xml(gpus, version, fabric):
    import xml.etree.ElementTree as ET

    root = ET.Element("nvidia_smi_log")

    def sub(parent, tag, text=None, **attrs):
        e = ET.SubElement(parent, tag, attrs)
        if text is not None:
            e.text = text
        return e

    sub(root, "timestamp", time.strftime("%a %b %d %H:%M:%S %Y"))
    sub(root, "driver_version", version)
    sub(root, "cuda_version", hwsim.CUDA_VERSION)
    sub(root, "attached_gpus", str(len(gpus)))
    sub(root, "simulated", "true")
    for g in gpus:
        t = fields(g, version, fabric)
        e = sub(root, "gpu", id=g.bus_id)
        sub(e, "product_name", g.name)
        sub(e, "product_brand", "NVIDIA")
        sub(e, "product_architecture", "Hopper")
        sub(e, "display_mode", "Disabled")
        sub(e, "persistence_mode", t["persistence_mode"][0])
        mig = sub(e, "mig_mode")
        sub(mig, "current_mig", "Disabled")
        sub(mig, "pending_mig", "Disabled")
        sub(e, "serial", g.serial)
        sub(e, "uuid", g.uuid)
        sub(e, "minor_number", str(g.on_node))
        sub(e, "vbios_version", "96.00.AF.00.01")
        sub(e, "gpu_module_id", str(g.module_id))
        inf = sub(e, "inforom_version")
        sub(inf, "img_version", "G525.0225.00.05")
        sub(inf, "oem_object", "2.1")
        sub(inf, "ecc_object", "7.16")
        sub(inf, "pwr_object", "N/A")
        sub(e, "gsp_firmware_version", version)
        pci = sub(e, "pci")
        sub(pci, "pci_bus", g.bus_id[9:11])
        sub(pci, "pci_device", "00")
        sub(pci, "pci_domain", "0000")
        sub(pci, "pci_device_id", hwsim.GPU_PCI_DEVICE[2:])
        sub(pci, "pci_bus_id", g.bus_id)
        sub(pci, "pci_sub_system_id", hwsim.GPU_PCI_SUBSYS[2:])
        link = sub(pci, "pci_gpu_link_info")
        gen = sub(link, "pcie_gen")
        sub(gen, "max_link_gen", "5")
        sub(gen, "current_link_gen", "5")
        width = sub(link, "link_widths")
        sub(width, "max_link_width", "16x")
        sub(width, "current_link_width", "16x")
        sub(pci, "replay_counter", "0")
        sub(e, "performance_state", "P0")
        fb = sub(e, "fb_memory_usage")
        sub(fb, "total", f"{hwsim.GPU_MEMORY_MIB} MiB")
        sub(fb, "reserved", "0 MiB")
        sub(fb, "used", "0 MiB")
        sub(fb, "free", f"{hwsim.GPU_MEMORY_MIB} MiB")
        sub(e, "compute_mode", "Default")
        ecc = sub(e, "ecc_mode")
        sub(ecc, "current_ecc", "Enabled")
        sub(ecc, "pending_ecc", "Enabled")
        temp = sub(e, "temperature")
        sub(temp, "gpu_temp", "31 C")
        pw = sub(e, "gpu_power_readings")
        sub(pw, "power_state", "P0")
        sub(pw, "power_draw", "71.83 W")
        sub(pw, "current_power_limit", "700.00 W")
        sub(pw, "default_power_limit", "700.00 W")
        sub(pw, "min_power_limit", "200.00 W")
        sub(pw, "max_power_limit", "700.00 W")
        mc = sub(e, "max_clocks")
        sub(mc, "sm_clock", "1980 MHz")
        sub(mc, "mem_clock", "3201 MHz")
        fab = sub(e, "fabric")
        sub(fab, "state", t["fabric.state"][0])
        sub(fab, "status", t["fabric.status"][0])
        sub(fab, "cliqueId", "32766" if fabric else "N/A")
        sub(fab, "clusterUuid", "00000000-0000-0000-0000-000000000000" if fabric else "N/A")
        sub(e, "processes")
    ET.indent(root, "\t")
    sys.stdout.write('<?xml version="1.0" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">\n')
    sys.stdout.write(ET.tostring(root, encoding="unicode") + "\n")
    return 0


def topo(gpus):
    n = len(gpus)
    head = "\t" + "\t".join(f"GPU{i}" for i in range(n)) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"
    lines = [head]
    for i in range(n):
        cells = ["X" if i == j else f"NV{hwsim.NVLINKS}" for j in range(n)]
        # The node's first half of GPUs hang off socket 0 (a container's GPU i may be any of the node's).
        on_socket_0 = gpus[i].on_node < int(hwsim.node().get("gpus", 8)) / 2
        cpu, numa = ("0-55,112-167", "0") if on_socket_0 else ("56-111,168-223", "1")
        lines.append(f"GPU{i}\t" + "\t".join(cells) + f"\t{cpu}\t{numa}\t\tN/A")
    lines += [
        "",
        "Legend:",
        "",
        "  X    = Self",
        "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes",
        "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges",
        "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)",
        "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)",
        "  PIX  = Connection traversing at most a single PCIe bridge",
        "  NV#  = Connection traversing a bonded set of # NVLinks",
        "",
    ]
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


def nvlink(argv, gpus, fabric):
    out = []
    if "-s" in argv or "--status" in argv:
        for g in gpus:
            out.append(f"GPU {g.index}: {g.name} (UUID: {g.uuid})")
            for link in range(hwsim.NVLINKS):
                speed = hwsim.link_speed(g.on_node, link) if fabric else None
                out.append(f"\t Link {link}: {speed} GB/s" if speed else f"\t Link {link}: <inactive>")
    elif "-e" in argv or "--errorcounters" in argv:
        for g in gpus:
            out.append(f"GPU {g.index}: {g.name} (UUID: {g.uuid})")
            for link in range(hwsim.NVLINKS):
                errs = hwsim.link_errors(g.on_node, link)
                out.append(f"\t Link {link}: Replay Errors: 0")
                out.append(f"\t Link {link}: Recovery Errors: 0")
                out.append(f"\t Link {link}: CRC Errors: {errs}")
    else:
        sys.stdout.write("nvlink -- Display NvLink information.\n\n    Usage: nvidia-smi nvlink [options]\n")
        return 0
    sys.stdout.write("\n".join(out) + "\n")
    return 0


def summary(gpus, version, fabric):
    now = time.strftime("%a %b %d %H:%M:%S %Y")
    bar = "+-----------------------------------------------------------------------------------------+"
    out = [
        now,
        bar,
        f"| NVIDIA-SMI {version:<14}  Driver Version: {version:<14}  CUDA Version: {hwsim.CUDA_VERSION:<8}   |",
        "|--------------------------------------+------------------------+------------------------+",
        "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
        "|======================================+========================+========================|",
    ]
    for g in gpus:
        pm = "On" if hwsim.persistence() else "Off"
        out.append(f"|   {g.index}  {g.name:<22} {pm:>4} |   {g.bus_id} Off |      0 |")
        out.append(f"| N/A   31C    P0      72W /  700W |       0MiB / {hwsim.GPU_MEMORY_MIB}MiB |   0%  Default |")
    out += [bar, "| SIMULATED by hgxkit-sim: no real GPU                                                      |", bar]
    sys.stdout.write("\n".join(out) + "\n")
    return 0


def main(argv):
    hwsim.banner("nvidia-smi")
    loaded = hwsim.loaded_module()
    user = hwsim.userspace()
    if not loaded:
        sys.stdout.write(NO_DRIVER)
        return 9
    if user != loaded:
        sys.stdout.write("Failed to initialize NVML: Driver/library version mismatch\n")
        sys.stdout.write("NVML library version: " + ".".join((user or "0.0").split(".")[:2]) + "\n")
        return 18
    if "-pm" in argv or "--persistence-mode" in argv:
        hwsim.write_run("nvidia/persistence", "1\n")
        for g in hwsim.gpus():
            sys.stdout.write(f"Enabled persistence mode for GPU {g.bus_id}.\n")
        sys.stdout.write("All done.\n")
        return 0
    gpus = select(hwsim.gpus(), argv)
    fabric = hwsim.fabric_done()
    if argv[:1] == ["topo"]:
        return topo(gpus)
    if argv[:1] == ["nvlink"]:
        return nvlink(argv[1:], gpus, fabric)
    if "-L" in argv or "--list-gpus" in argv:
        for g in gpus:
            sys.stdout.write(f"GPU {g.index}: {g.name} (UUID: {g.uuid})\n")
        return 0
    if any(a.startswith("--query-gpu=") for a in argv):
        period = loop_period(argv)
        while period:  # -l SEC / -lms MS: one sample set per period until stopped, as the real tool
            query(argv, gpus, loaded, fabric)
            sys.stdout.flush()
            time.sleep(period)
        return query(argv, gpus, loaded, fabric)
    if "-q" in argv or "--query" in argv:
        if "-x" in argv or "--xml-format" in argv:
            return q_xml(gpus, loaded, fabric)
        return q_text(gpus, loaded, fabric)
    if "--version" in argv:
        sys.stdout.write(
            f"NVIDIA-SMI version  : {loaded}\nNVML version        : {loaded.split('.')[0]}.xx\n"
            f"DRIVER version      : {loaded}\nCUDA Version        : {hwsim.CUDA_VERSION}\n"
        )
        return 0
    if not argv:
        return summary(gpus, loaded, fabric)
    sys.stdout.write(
        f"Invalid combination of input arguments: {' '.join(argv)}. Please run 'nvidia-smi -h' for help.\n"
    )
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
