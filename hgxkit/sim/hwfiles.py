"""Files that give a simulated node its "hardware": an `lspci -x` dump, /proc/meminfo and node.json.

The dump is in the format `lspci -x` prints, which the real lspci reads back with `-F FILE`; the node's
`/usr/bin/lspci` is a wrapper doing exactly that, so pci.ids naming and every lspci option stay real.

Example:
    >>> from hgxkit.sim.hwfiles import lspci_dump
    >>> print(lspci_dump(gpus=1, nvswitches=0).splitlines()[0])
    18:00.0 3D controller: NVIDIA Corporation GH100 [H200 SXM 141GB] (rev a1)
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

GPU_BUSES = ("18", "2a", "3a", "5d", "9a", "ab", "ba", "db")
NVSWITCH_BUSES = ("05", "06", "07", "08")
NVIDIA = 0x10DE
H200_SXM = 0x2335
H200_SUBSYS = 0x18BE
NVSWITCH = 0x22A3
NVSWITCH_SUBSYS = 0x1796


@dataclass(frozen=True)
class NodeHardware:
    """What `hgxkit sim up` gives one node; written to /etc/hgxkit-sim/node.json."""

    name: str
    gpus: int = 8
    nvswitches: int = 4
    memory_gib: int = 2048
    model_disk: str = "4t"
    simulated: bool = True

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"


def _config_space(device: int, cls: int, subclass: int, subsys: int, bar0: int) -> bytes:
    cfg = bytearray(64)
    cfg[0:2] = NVIDIA.to_bytes(2, "little")
    cfg[2:4] = device.to_bytes(2, "little")
    cfg[4:6] = (0x0006).to_bytes(2, "little")  # memory space + bus master
    cfg[8] = 0xA1  # revision
    cfg[10] = subclass
    cfg[11] = cls
    cfg[0x10:0x14] = bar0.to_bytes(4, "little")
    cfg[0x2C:0x2E] = NVIDIA.to_bytes(2, "little")
    cfg[0x2E:0x30] = subsys.to_bytes(2, "little")
    cfg[0x3C] = 0xFF
    cfg[0x3D] = 0x01
    return bytes(cfg)


def _device(slot: str, title: str, cfg: bytes) -> str:
    rows = [f"{off:02x}: " + " ".join(f"{b:02x}" for b in cfg[off : off + 16]) for off in range(0, len(cfg), 16)]
    return f"{slot} {title}\n" + "\n".join(rows) + "\n\n"


def lspci_dump(gpus: int = 8, nvswitches: int = 4) -> str:
    """An `lspci -x`-format dump: `gpus` H200 SXM GPUs (10de:2335), `nvswitches` NVSwitches (10de:22a3)."""
    out = []
    for i in range(nvswitches):
        cfg = _config_space(NVSWITCH, 0x06, 0x80, NVSWITCH_SUBSYS, 0xA0000000 + i * 0x2000000)
        out.append(
            _device(f"{NVSWITCH_BUSES[i]}:00.0", "Bridge: NVIDIA Corporation GH100 [H100 NVSwitch] (rev a1)", cfg)
        )
    for i in range(gpus):
        cfg = _config_space(H200_SXM, 0x03, 0x02, H200_SUBSYS, 0x9C000000 + i * 0x1000000)
        title = "3D controller: NVIDIA Corporation GH100 [H200 SXM 141GB] (rev a1)"
        out.append(_device(f"{GPU_BUSES[i]}:00.0", title, cfg))
    out.sort(key=lambda block: block.split(":", 1)[0])
    return "".join(out)


def meminfo(memory_gib: int) -> str:
    """A /proc/meminfo for a host with `memory_gib` GiB of RAM, mostly free (bind-mounted like lxcfs does)."""
    total = memory_gib * 1024 * 1024
    free = total - total // 50
    rows = [
        ("MemTotal", total),
        ("MemFree", free),
        ("MemAvailable", free),
        ("Buffers", 1024 * 512),
        ("Cached", total // 100),
        ("SwapCached", 0),
        ("Active", total // 200),
        ("Inactive", total // 200),
        ("Shmem", 65536),
        ("SwapTotal", 0),
        ("SwapFree", 0),
        ("Dirty", 0),
        ("HugePages_Total", 0),
    ]
    lines = []
    for key, kib in rows:
        lines.append(f"{key + ':':<16}{kib:>8}" + ("" if key.startswith("HugePages") else " kB"))
    lines += ["HugePages_Free:        0", "Hugepagesize:       2048 kB"]
    return "\n".join(lines) + "\n"
