"""Preflight as a pure function: every reason a host cannot become an HGX-H200 serving node.

The preflight role gathers `HostFacts` (node facts) and calls `preflight_problems`; nothing here touches a host.

Example:
    >>> distro_key("ubuntu", "24.04"), distro_key("debian", "12.7"), distro_key("centos", "9")
    ('ubuntu2404', 'debian12', None)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hgxkit.nvidia.host import PciInventory, SecureBoot
from hgxkit.problems import Problem

SUPPORTED_OS = {("ubuntu", "22.04"): "ubuntu2204", ("ubuntu", "24.04"): "ubuntu2404", ("debian", "12"): "debian12"}


@dataclass(frozen=True)
class HostFacts:
    """What preflight reads from a host (each None when it could not be read)."""

    os_id: str | None
    os_version: str | None
    arch: str | None
    pci: PciInventory | None
    secure_boot: SecureBoot
    cgroup_version: int | None
    ram_bytes: int | None
    models_dir_free_bytes: int | None
    nvidia_packages: dict[str, str] = field(default_factory=dict)
    nvidia_package_origins: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PreflightPolicy:
    """What the host must be: the preflight role's knobs, in one place (see roles/preflight/defaults.py)."""

    expected_gpu_count: int | None = 8
    expected_gpu_device_ids: tuple[str, ...] = ("2335",)
    expected_nvswitch_count: int | None = 4
    supported_arch: tuple[str, ...] = ("x86_64",)
    allow_secure_boot: bool = False
    required_cgroup_version: int | None = 2
    models_dir: str = "/data/models"
    min_free_disk_gb: float = 400.0
    min_ram_gb: float = 512.0


def distro_key(os_id: str | None, os_version: str | None) -> str | None:
    """NVIDIA's repository name for a supported OS (`ubuntu2404`), or None when unsupported."""
    if not os_id or not os_version:
        return None
    major = os_version if os_id == "ubuntu" else os_version.split(".")[0]
    return SUPPORTED_OS.get((os_id.lower(), major))


def preflight_problems(facts: HostFacts, policy: PreflightPolicy) -> list[Problem]:
    """Every reason the host is not a node hgxkit can bring up; empty when it is."""
    problems: list[Problem] = []
    if distro_key(facts.os_id, facts.os_version) is None:
        problems.append(
            Problem("os", f"{facts.os_id or '?'} {facts.os_version or '?'}", "use Ubuntu 22.04, 24.04 or Debian 12")
        )
    if facts.arch not in policy.supported_arch:
        problems.append(Problem("arch", f"{facts.arch or '?'}", f"use {', '.join(policy.supported_arch)}"))
    problems += _pci_problems(facts.pci, policy)
    if facts.secure_boot == "enabled" and not policy.allow_secure_boot:
        problems.append(
            Problem(
                "secure-boot",
                "Secure Boot is enabled, so DKMS-built NVIDIA modules will not load (Key was rejected by service)",
                "disable Secure Boot in firmware, or enroll a MOK key and set allow_secure_boot: true",
            )
        )
    if policy.required_cgroup_version and facts.cgroup_version != policy.required_cgroup_version:
        problems.append(
            Problem(
                "cgroup",
                f"cgroup v{facts.cgroup_version or '?'}",
                f"boot with cgroup v{policy.required_cgroup_version} (systemd.unified_cgroup_hierarchy=1)",
            )
        )
    gib = 1024**3
    if facts.ram_bytes is not None and facts.ram_bytes < policy.min_ram_gb * gib:
        problems.append(
            Problem(
                "ram",
                f"{facts.ram_bytes / gib:.0f} GiB RAM, need {policy.min_ram_gb:.0f} GiB",
                "use a node with more memory or lower min_ram_gb",
            )
        )
    free = facts.models_dir_free_bytes
    if free is not None and free < policy.min_free_disk_gb * 1e9:
        problems.append(
            Problem(
                "disk",
                f"{free / 1e9:.1f} GB free at {policy.models_dir}, need {policy.min_free_disk_gb:.0f} GB",
                "free space, mount a larger disk there, or lower min_free_disk_gb",
            )
        )
    origins = sorted(set(facts.nvidia_package_origins.values()))
    if len(origins) > 1:
        detail = ", ".join(f"{p} from {o}" for p, o in sorted(facts.nvidia_package_origins.items()))
        problems.append(
            Problem(
                "nvidia-package-source",
                f"NVIDIA packages from more than one source ({detail})",
                "purge one set (apt-get purge) so driver and fabric manager come from one repository",
            )
        )
    return problems


def _pci_problems(pci: PciInventory | None, policy: PreflightPolicy) -> list[Problem]:
    if pci is None:
        return [Problem("pci", "lspci is not installed", "install pciutils (apt-get install pciutils)")]
    problems = []
    if policy.expected_gpu_count is not None and pci.gpus != policy.expected_gpu_count:
        problems.append(
            Problem(
                "gpu-count",
                f"{pci.gpus} NVIDIA GPUs on PCI, the inventory expects {policy.expected_gpu_count}",
                "reseat or RMA the missing GPU (check `lspci -d 10de:` and the BMC), or set expected_gpu_count",
            )
        )
    unexpected = sorted(set(pci.gpu_device_ids) - set(policy.expected_gpu_device_ids))
    if unexpected:
        problems.append(
            Problem(
                "gpu-model",
                f"GPU PCI device ids {', '.join('10de:' + d for d in unexpected)}",
                f"expected {', '.join('10de:' + d for d in policy.expected_gpu_device_ids)} (H200 SXM); "
                "set expected_gpu_device_ids for other GPUs",
            )
        )
    if policy.expected_nvswitch_count is not None and pci.nvswitches != policy.expected_nvswitch_count:
        problems.append(
            Problem(
                "nvswitch",
                f"{pci.nvswitches} NVSwitches on PCI, expected {policy.expected_nvswitch_count}",
                "check the HGX baseboard, or set expected_nvswitch_count (0 for PCIe nodes)",
            )
        )
    return problems
