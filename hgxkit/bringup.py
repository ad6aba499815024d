"""Bring-up decisions as pure functions: preflight findings, the NVIDIA package plan, the driver gates.

The roles gather facts and call these; everything that decides is here, tested without a host.

Example:
    >>> plan = driver_package_plan(distro="ubuntu2404", branch="580", version="580.95.05", flavor="open")
    >>> plan.install_args()
    ['nvidia-open-580=580.95.05-*', 'nvidia-fabricmanager=580.95.05-*', 'libnvidia-nscq=580.95.05-*']
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from hgxkit.nvidia.host import PciInventory, SecureBoot
from hgxkit.nvidia.smi import SmiFailure, upstream_version

Flavor = Literal["open", "proprietary"]
CUDA_REPO_BASE = "https://developer.download.nvidia.com/compute/cuda/repos"
# The apt list file of NVIDIA's CUDA repository that the nvidia_driver role writes; DCGM comes from it too.
NVIDIA_CUDA_LIST = "hgxkit-nvidia-cuda"
SUPPORTED_OS = {("ubuntu", "22.04"): "ubuntu2204", ("ubuntu", "24.04"): "ubuntu2404", ("debian", "12"): "debian12"}


@dataclass(frozen=True)
class Problem:
    """A failed check: which check, what was found, and the remedy — one sentence when printed."""

    check: str
    found: str
    remedy: str

    def __str__(self) -> str:
        return f"[{self.check}] {self.found}; {self.remedy}"


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


@dataclass(frozen=True)
class DriverPlan:
    """The NVIDIA driver package set: metapackages for the driver, fabric manager and NSCQ at one version."""

    branch: str
    version: str | None
    driver_packages: tuple[str, ...]
    fabric_packages: tuple[str, ...]
    pre_packages: tuple[str, ...] = ()

    @property
    def packages(self) -> tuple[str, ...]:
        return self.driver_packages + self.fabric_packages

    def version_glob(self) -> str:
        """The apt version pattern: the exact upstream version with any Debian revision, or the branch."""
        return f"{self.version}-*" if self.version else f"{self.branch}.*"

    def install_args(self) -> list[str]:
        """`apt-get install` arguments pinning every package of the set."""
        return [*self.pre_packages, *(f"{name}={self.version_glob()}" for name in self.packages)]


def driver_package_plan(*, distro: str, branch: str, version: str | None, flavor: Flavor) -> DriverPlan:
    """The package names NVIDIA's CUDA repository uses for `branch` on `distro` (see roles/nvidia_driver)."""
    if version is not None and not version.startswith(f"{branch}."):
        raise ValueError(f"nvidia_driver_version {version} is not on branch {branch}; fix one of them")
    number = int(branch)
    if number >= 590:
        # From 590 the repo tracks the newest driver unless a pinning package is installed first.
        pre = (f"nvidia-driver-pinning-{branch}",)
        driver = ("nvidia-open",) if flavor == "open" else ("cuda-drivers",)
    elif distro.startswith("ubuntu"):
        pre = ()
        driver = (f"nvidia-open-{branch}",) if flavor == "open" else (f"cuda-drivers-{branch}",)
    else:
        pre = ()
        driver = ("nvidia-open",) if flavor == "open" else ("nvidia-driver",)
    if number >= 580:
        fabric = ("nvidia-fabricmanager", "libnvidia-nscq")
    else:
        fabric = (f"nvidia-fabricmanager-{branch}", f"libnvidia-nscq-{branch}")
    return DriverPlan(branch, version, driver, fabric, pre)


def default_cuda_repo_url(distro: str) -> str:
    return f"{CUDA_REPO_BASE}/{distro}/x86_64/"


def packages_needing_install(plan: DriverPlan, installed: dict[str, str]) -> list[str]:
    """Packages of the plan missing or at another upstream version than the plan's."""
    def wanted(have: str) -> bool:
        upstream = upstream_version(have)
        return upstream == plan.version if plan.version else upstream.startswith(f"{plan.branch}.")

    return [name for name in plan.packages if name not in installed or not wanted(installed[name])]


@dataclass(frozen=True)
class DriverState:
    """The driver as the host reports it now."""

    installed_version: str | None
    loaded_version: str | None
    smi_failure: SmiFailure | None
    fabric_manager_version: str | None


def reboot_reason(state: DriverState, target_version: str | None, packages_change: bool) -> str | None:
    """Why the node must reboot to run the target driver, or None when it need not."""
    target = target_version or state.installed_version
    if packages_change:
        return f"the driver packages change (to {target or 'the branch'})"
    if state.smi_failure == "version-mismatch":
        return f"the loaded module is {state.loaded_version or 'older'} but userspace is {state.installed_version}"
    if state.installed_version and state.loaded_version is None and state.smi_failure in ("no-driver", None):
        return f"driver {state.installed_version} is installed but no nvidia module is loaded"
    if state.loaded_version and target and state.loaded_version != target:
        return f"the loaded module is {state.loaded_version}, the installed driver {target}"
    return None


def gate_problems(
    *,
    expected_version: str,
    loaded_version: str | None,
    smi_versions: set[str],
    smi_failure: SmiFailure | None,
    fabric_manager_version: str | None,
    fabric_manager_active: bool,
    fabric: list[tuple[int, str | None, str | None]],
    nvlink_problems: list[str],
    expected_gpus: int | None,
) -> list[Problem]:
    """The post-reboot gates: one version everywhere, fabric manager up, every GPU in the fabric, NVLinks clean."""
    problems = []
    if smi_failure is not None:
        return [Problem("nvidia-smi", f"nvidia-smi fails ({smi_failure})", "reboot, or reinstall the driver set")]
    versions = {
        "loaded module": loaded_version,
        "userspace (nvidia-smi)": ",".join(sorted(smi_versions)) or None,
        "fabric manager": fabric_manager_version,
    }
    wrong = {k: v for k, v in versions.items() if v != expected_version}
    if wrong:
        found = ", ".join(f"{k} {v or 'missing'}" for k, v in versions.items())
        problems.append(Problem("driver-versions", found, f"all must be {expected_version}; rerun bring-up"))
    if not fabric_manager_active:
        problems.append(
            Problem(
                "fabric-manager",
                "nvidia-fabricmanager.service is not active",
                "see `journalctl -u nvidia-fabricmanager`; its version must equal the driver's",
            )
        )
    if expected_gpus is not None and len(fabric) != expected_gpus:
        problems.append(Problem("gpu-count", f"nvidia-smi lists {len(fabric)} GPUs", f"expected {expected_gpus}"))
    stuck = [f"GPU {i}: {s or '?'}/{t or '?'}" for i, s, t in fabric if (s, t) != ("Completed", "Success")]
    if stuck:
        problems.append(
            Problem(
                "fabric-state",
                "fabric not Completed/Success on " + "; ".join(stuck),
                "wait for fabric manager, then check `nvidia-smi -q | grep -A3 Fabric` and its journal",
            )
        )
    problems += [Problem("nvlink", issue, "reseat or RMA; see `nvidia-smi nvlink -s -e`") for issue in nvlink_problems]
    return problems


_ORIGIN_LINE = re.compile(r"^\s{6,}\d+\s+(\S+)")


def package_origin(policy_text: str, nvidia_repo_url: str | None = None) -> str:
    """Where the installed version of a package came from, from `apt-cache policy PKG` output.

    Returns `cuda-repo`, `distribution-archive` or `local` (only in dpkg's status: a .run or .deb install).
    """
    sources: list[str] = []
    in_installed = False
    for line in policy_text.splitlines():
        if line.lstrip().startswith("***"):
            in_installed = True
            continue
        if not in_installed:
            continue
        match = _ORIGIN_LINE.match(line)
        if not match:
            break  # the next version of the table
        sources.append(match.group(1))
    joined = " ".join(sources)
    if nvidia_repo_url and nvidia_repo_url.rstrip("/") in joined:
        return "cuda-repo"
    if "developer.download.nvidia.com" in joined:
        return "cuda-repo"
    if any(host in joined for host in ("ubuntu.com", "launchpad", "debian.org")):
        return "distribution-archive"
    return "local"


def apt_install_commands(list_name: str, args: list[str]) -> list[str]:
    """Refresh one apt source list and install `args` (pinned `pkg=version` words) non-interactively."""
    return [
        # Refresh only this role's list: quick, and other repositories are not the role's business.
        f"apt-get update -qq -o Dir::Etc::sourcelist=sources.list.d/{list_name}.list "
        "-o Dir::Etc::sourceparts=- -o APT::Get::List-Cleanup=0",
        "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --allow-downgrades --allow-change-held-packages "
        + " ".join(args),
    ]


def flat_repo_line(repo_url: str, keyring: str) -> str:
    """A flat apt source line (`URL /`), the layout of NVIDIA's CUDA and container-toolkit repositories."""
    return f"deb [signed-by={keyring}] {repo_url.rstrip('/')}/ /"
