"""Parse host facts the bring-up roles check: PCI devices, Secure Boot, held packages, installed packages.

Example:
    >>> line = "18:00.0 3D controller [0302]: NVIDIA Corporation GH100 [H200 SXM 141GB] [10de:2335] (rev a1)"
    >>> inv = parse_lspci(line)
    >>> inv.gpus, inv.gpu_models
    (1, ['NVIDIA Corporation GH100 [H200 SXM 141GB]'])
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

NVIDIA_VENDOR = "10de"
H200_SXM_DEVICE = "2335"
# NVSwitch (third generation, HGX H100/H200 baseboards) shows up as a bridge.
NVSWITCH_DEVICES = frozenset({"22a3"})
SecureBoot = Literal["enabled", "disabled", "unsupported", "unknown"]


@dataclass(frozen=True)
class PciInventory:
    """NVIDIA devices from `lspci -nn`: GPU count and models, NVSwitch count, device ids seen."""

    gpus: int = 0
    nvswitches: int = 0
    gpu_models: list[str] = field(default_factory=list)
    gpu_device_ids: list[str] = field(default_factory=list)


_LSPCI_LINE = re.compile(
    r"^(?P<slot>\S+)\s+(?P<cls>[^\[]+?)\s*\[(?P<cc>[0-9a-f]{4})\]:\s*(?P<desc>.*?)\s*"
    r"\[(?P<vendor>[0-9a-f]{4}):(?P<device>[0-9a-f]{4})\]"
)


def parse_lspci(text: str) -> PciInventory:
    """Count NVIDIA GPUs (class 0300/0302) and NVSwitches (bridge class 0680 or a known NVSwitch id)."""
    gpus = nvswitches = 0
    models: list[str] = []
    device_ids: list[str] = []
    for line in text.splitlines():
        match = _LSPCI_LINE.match(line.strip())
        if not match or match.group("vendor") != NVIDIA_VENDOR:
            continue
        class_code, device = match.group("cc"), match.group("device")
        if class_code in ("0300", "0302"):
            gpus += 1
            models.append(match.group("desc"))
            device_ids.append(device)
        elif class_code == "0680" or device in NVSWITCH_DEVICES:
            nvswitches += 1
    return PciInventory(gpus, nvswitches, models, device_ids)


def parse_secure_boot(text: str) -> SecureBoot:
    """`mokutil --sb-state` output -> enabled / disabled / unsupported (no EFI) / unknown."""
    lowered = text.lower()
    if "secureboot enabled" in lowered:
        return "enabled"
    if "secureboot disabled" in lowered:
        return "disabled"
    if "not supported" in lowered or "efi variables are not supported" in lowered:
        return "unsupported"
    return "unknown"


def parse_dpkg_query(text: str) -> dict[str, str]:
    """`dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}\\n'` -> {package: version}.

    Only installed packages, held or not ("ii", "hi"); dpkg also lists packages it merely knows of.
    """
    installed: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[2][:2] in ("ii", "hi"):  # "hi": installed and on hold
            installed[parts[0].split(":")[0]] = parts[1]
    return installed


def parse_os_release(text: str) -> dict[str, str]:
    """`/etc/os-release` as a dict (quotes removed)."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip():
            out[key.strip()] = value.strip().strip('"').strip("'")
    return out


def parse_meminfo_bytes(text: str, key: str = "MemTotal") -> int | None:
    """A `/proc/meminfo` field in bytes."""
    match = re.search(rf"^{key}:\s+(\d+)\s*kB", text, re.M)
    return int(match.group(1)) * 1024 if match else None
