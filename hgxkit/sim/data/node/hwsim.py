"""Simulated HGX-H200 hardware as seen from inside a simulated node (`simulated: true`).

This module is the "hardware" of a hgxkit simulated node. It is bind-mounted read-only at
/usr/lib/hgxkit-sim inside every node and imported by the simulated NVIDIA programs that the
simulated apt repository installs (nvidia-smi, nv-fabricmanager, dcgmi, ...).

State it reads (all paths inside the node):
    /etc/hgxkit-sim/node.json               node identity: name, gpu count, nvswitch count
    /etc/hgxkit-sim/faults/<name>           fault switches (touch to inject, rm to clear):
        dcgm-diag-fail    `dcgmi diag` reports a failing test on GPU 3
        nvlink-degraded   GPU 3 link 10 trained down to 1.562 GB/s, with CRC errors
        fabric-stuck      fabric state stays "In Progress" even after fabric manager ran
        gpu-throttle      busy GPUs report SwPowerCap throttling in nvidia-smi's telemetry
        xid-<X>-gpu<N>    GPU N raised XID X (its last XID, as DCGM's DCGM_FI_DEV_XID_ERRORS reports it), e.g.
                          xid-79-gpu3: GPU 3 fell off the bus
    /usr/share/hgxkit-sim/versions/<pkg>    upstream version of each installed simulated package
    /run/hgxkit-sim/nvidia/module.version   the "loaded" kernel module version (written at boot)
    /run/hgxkit-sim/nvidia/fabric.state     written by nv-fabricmanager when it registered the GPUs
    /run/hgxkit-sim-visible-gpus            only inside a GPU container: its NVIDIA_VISIBLE_DEVICES, which the
                                            simulated container hook mounts there (the container sees those
                                            GPUs only, numbered from 0, as with the real toolkit)

Example (inside a node):
    python3 -c 'import sys; sys.path.insert(0, "/usr/lib/hgxkit-sim"); import hwsim; print(hwsim.gpus())'
"""

from __future__ import annotations

# Only modules Python has loaded at start: the simulated nvidia-smi runs on every deploy, and a real one is a
# native binary, so the stand-in should not charge the node for imports a real node never pays (uuid, dataclasses,
# pathlib, json and hashlib took ~40 ms; bench/per_host_cost.py counts the node's CPU). json and hashlib are taken
# where needed: at boot, which enumerates the GPUs into RUN/gpus, as a kernel does once per boot.
import os
import sys

ETC = os.environ.get("HGXKIT_SIM_ETC", "/etc/hgxkit-sim")
RUN = os.environ.get("HGXKIT_SIM_RUN", "/run/hgxkit-sim")
VERSIONS = os.environ.get("HGXKIT_SIM_VERSIONS", "/usr/share/hgxkit-sim/versions")
VISIBLE = os.environ.get("HGXKIT_SIM_VISIBLE", "/run/hgxkit-sim-visible-gpus")
GPU_TABLE = "gpus"  # under RUN: the GPUs as this boot enumerated them ("index uuid serial bus_id module_id" lines)
NAMESPACE_URL = bytes.fromhex("6ba7b8119dad11d180b400c04fd430c8")  # uuid.NAMESPACE_URL (RFC 4122)

GPU_NAME = "NVIDIA H200"
GPU_PCI_DEVICE = "0x233510DE"
GPU_PCI_SUBSYS = "0x18BE10DE"
GPU_MEMORY_MIB = 143771
GPU_BUS = ["18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"]
NVSWITCH_BUS = ["05", "06", "07", "08"]
NVLINKS = 18
LINK_GBPS = "26.562"
CUDA_VERSION = "13.0"
MODULE_PACKAGES = ("nvidia-kernel-open-dkms", "nvidia-kernel-dkms")
BANNER = "hgxkit-sim: SIMULATED {prog} on a simulated HGX-H200 node (no real GPU)"


def banner(prog: str) -> None:
    """Say on stderr that this program is simulated, so no output can pass for real hardware."""
    if not os.environ.get("HGXKIT_SIM_QUIET"):
        print(BANNER.format(prog=prog), file=sys.stderr)


class Gpu:
    """One simulated H200 SXM GPU (immutable by convention: `replace` makes a changed copy)."""

    FIELDS = ("index", "name", "uuid", "serial", "bus_id", "module_id", "node_index")  # in the constructor's order
    __slots__ = ("bus_id", "index", "module_id", "name", "node_index", "serial", "uuid")

    def __init__(
        self, index: int, name: str, uuid: str, serial: str, bus_id: str, module_id: int, node_index: int = -1
    ) -> None:
        self.index, self.name, self.uuid, self.serial = index, name, uuid, serial
        self.bus_id = bus_id  # 00000000:18:00.0
        self.module_id = module_id
        self.node_index = node_index  # its index on the node (-1: same as `index`); a container numbers from 0

    def _fields(self) -> tuple:
        return tuple(getattr(self, name) for name in self.FIELDS)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Gpu) and self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return "Gpu(" + ", ".join(f"{name}={getattr(self, name)!r}" for name in self.FIELDS) + ")"

    def replace(self, **changes: object) -> Gpu:
        return Gpu(**{**{name: getattr(self, name) for name in self.FIELDS}, **changes})

    @property
    def on_node(self) -> int:
        """The GPU's index on the node: its minor number, its NVLinks, its load file."""
        return self.index if self.node_index < 0 else self.node_index

    @property
    def short_bus(self) -> str:
        return self.bus_id[4:]


def uuid5(name: str) -> str:
    """`str(uuid.uuid5(uuid.NAMESPACE_URL, name))`, without importing uuid (RFC 4122 section 4.3)."""
    import hashlib

    b = bytearray(hashlib.sha1(NAMESPACE_URL + name.encode()).digest()[:16])
    b[6] = (b[6] & 0x0F) | 0x50
    b[8] = (b[8] & 0x3F) | 0x80
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def read(path: str) -> str:
    with open(path) as f:
        return f.read()


def node() -> dict:
    """The node description written by `hgxkit sim up`."""
    import json

    try:
        return json.loads(read(os.path.join(ETC, "node.json")))
    except (OSError, ValueError):
        return {"name": os.uname().nodename, "gpus": 8, "nvswitches": 4}


def enumerate_gpus() -> list[Gpu]:
    """The GPUs node.json gives this node (its configured count, at most 8)."""
    info = node()
    count = max(0, min(int(info.get("gpus", 8)), len(GPU_BUS)))
    out = []
    for i in range(count):
        u = uuid5(f"hgxkit-sim/{info.get('name', 'node')}/gpu/{i}")
        serial = str(1655023000000 + int(u[:6], 16) % 999999)
        out.append(Gpu(i, GPU_NAME, f"GPU-{u}", serial, f"00000000:{GPU_BUS[i]}:00.0", i + 1))
    return out


def gpus() -> list[Gpu]:
    """The GPUs a program sees: the node's as its boot enumerated them (`enumerate_gpus` before a boot, or where
    RUN is not mounted), through `visible`."""
    try:
        rows = [line.split(" ") for line in read(os.path.join(RUN, GPU_TABLE)).splitlines() if line]
        node_gpus = [Gpu(int(i), GPU_NAME, u, serial, bus, int(module)) for i, u, serial, bus, module in rows]
    except (OSError, ValueError):
        node_gpus = enumerate_gpus()
    return visible(node_gpus)


def visible(node_gpus: list[Gpu]) -> list[Gpu]:
    """The GPUs a program sees: all of the node's, or inside a GPU container those its NVIDIA_VISIBLE_DEVICES
    names (indices or UUIDs; `all`; `none`/`void`: none), numbered from 0 in the node's order."""
    try:
        wanted = read(VISIBLE).strip()
    except OSError:
        return node_gpus
    if wanted == "all":
        return node_gpus
    names = {w.strip() for w in wanted.split(",") if w.strip()} - {"none", "void"}
    chosen = [g for g in node_gpus if str(g.index) in names or g.uuid in names]
    return [g.replace(index=i, node_index=g.index) for i, g in enumerate(chosen)]


def fault(name: str) -> bool:
    """True when the fault switch /etc/hgxkit-sim/faults/<name> exists."""
    return os.path.exists(os.path.join(ETC, "faults", name))


def xids() -> dict[int, int]:
    """The last XID each GPU raised, from the fault switches xid-<X>-gpu<N> (the highest X when several)."""
    out: dict[int, int] = {}
    try:
        names = sorted(os.listdir(os.path.join(ETC, "faults")))
    except OSError:
        return out
    for name in names:
        parts = name.split("-")
        if (
            len(parts) == 3
            and parts[0] == "xid"
            and parts[1].isdigit()
            and parts[2][3:].isdigit()
            and parts[2].startswith("gpu")
        ):
            gpu = int(parts[2][3:])
            out[gpu] = max(out.get(gpu, 0), int(parts[1]))
    return out


def installed(pkg: str) -> str | None:
    """The upstream version of an installed simulated package, or None."""
    try:
        return read(os.path.join(VERSIONS, pkg)).strip() or None
    except OSError:
        return None


def installed_module() -> str | None:
    """The kernel module version installed on disk (what the next boot will load)."""
    for pkg in MODULE_PACKAGES:
        v = installed(pkg)
        if v:
            return v
    return None


def loaded_module() -> str | None:
    """The kernel module version "loaded" at the last boot, or None when no module is loaded."""
    try:
        return read(os.path.join(RUN, "nvidia", "module.version")).strip() or None
    except OSError:
        return None


def userspace() -> str | None:
    """The NVML (userspace driver) version installed, or None."""
    return installed("libnvidia-ml1")


def fabric_done() -> bool:
    """True when nv-fabricmanager registered the GPUs since the last boot."""
    return os.path.exists(os.path.join(RUN, "nvidia", "fabric.state")) and not fault("fabric-stuck")


def persistence() -> bool:
    return os.path.exists(os.path.join(RUN, "nvidia", "persistence"))


def link_speed(gpu: int, link: int) -> str:
    if fault("nvlink-degraded") and gpu == 3 and link == 10:
        return "1.562"
    return LINK_GBPS


def link_errors(gpu: int, link: int) -> int:
    return 17 if fault("nvlink-degraded") and gpu == 3 and link == 10 else 0


def write_run(rel: str, text: str) -> None:
    path = os.path.join(RUN, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def module_proc_version(version: str) -> str:
    """Text in the format of /proc/driver/nvidia/version for the open kernel module."""
    return (
        f"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {version}  Release Build  "
        f"(hgxkit-sim@simulated)  simulated\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n"
    )


def boot() -> int:
    """Boot: enumerate the GPUs, and "load" the installed module (make it the loaded one); run by hgxkit-sim-boot."""
    table = "".join(f"{g.index} {g.uuid} {g.serial} {g.bus_id} {g.module_id}\n" for g in enumerate_gpus())
    write_run(GPU_TABLE, table)
    version = installed_module()
    if version:
        write_run("nvidia/module.version", version + "\n")
        write_run("nvidia/version", module_proc_version(version))
        print(f"hgxkit-sim: loaded simulated nvidia module {version}")
    else:
        print("hgxkit-sim: no nvidia kernel module installed; none loaded")
    return 0


if __name__ == "__main__":
    sys.exit(boot() if sys.argv[1:] == ["boot"] else 2)
