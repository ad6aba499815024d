"""The NVIDIA driver as pure decisions: the package set, when to reboot, where packages came from, the gates.

The nvidia_driver role reads the node through facts and calls these; `driver_gate` reads the node itself
through any `get_fact` (pyinfra's `host.get_fact`), at plan time or after a reboot.

Example:
    >>> plan = driver_package_plan(distro="ubuntu2404", branch="580", version="580.95.05", flavor="open")
    >>> plan.install_args()
    ['nvidia-open-580=580.95.05-*', 'nvidia-fabricmanager=580.95.05-*', 'libnvidia-nscq=580.95.05-*']
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from hgxkit.node.facts_apt import InstalledPackages
from hgxkit.node.facts_driver import NvidiaLoadedModule
from hgxkit.node.facts_gpu import NvidiaSmi, Nvlink, SmiResult
from hgxkit.node.facts_system import ServiceActive
from hgxkit.nvidia.smi import SmiFailure, upstream_version
from hgxkit.problems import Problem

Flavor = Literal["open", "proprietary"]
GetFact = Callable[..., Any]
CUDA_REPO_BASE = "https://developer.download.nvidia.com/compute/cuda/repos"
# The apt list file of NVIDIA's CUDA repository that the nvidia_driver role writes; DCGM comes from it too.
NVIDIA_CUDA_LIST = "hgxkit-nvidia-cuda"
FABRIC_MANAGER_UNIT = "nvidia-fabricmanager.service"  # the same unit name under both package namings


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


def driver_state(
    get_fact: GetFact, fabric_package: str, driver_package: str, smi: SmiResult | None = None
) -> DriverState:
    """Installed, loaded and fabric-manager versions as the host reports them now."""
    smi = smi or get_fact(NvidiaSmi)
    loaded = get_fact(NvidiaLoadedModule)
    if loaded is None and smi.ok and smi.gpus:
        loaded = smi.gpus[0].driver_version  # NVML reports the loaded kernel driver's version
    installed = get_fact(InstalledPackages, patterns=f"{driver_package} {fabric_package}")
    driver = installed.get(driver_package)
    fabric = installed.get(fabric_package)
    return DriverState(
        installed_version=upstream_version(driver) if driver else None,
        loaded_version=loaded,
        smi_failure=smi.failure,
        fabric_manager_version=upstream_version(fabric) if fabric else None,
    )


def driver_gate(
    get_fact: GetFact,
    *,
    expected_version: str | None,
    expected_gpus: int | None,
    fabric_package: str,
    driver_package: str,
) -> list[Problem]:
    """Every post-bring-up gate that fails now: versions, fabric manager, fabric state, NVLinks.

    Example (execute time): `driver_gate(host.get_fact, expected_version="580.105.08", expected_gpus=8,
    fabric_package="nvidia-fabricmanager", driver_package="nvidia-open")`
    """
    smi = get_fact(NvidiaSmi)
    state = driver_state(get_fact, fabric_package, driver_package, smi)
    nvlink = get_fact(Nvlink)
    return gate_problems(
        expected_version=expected_version or state.installed_version or "?",
        loaded_version=state.loaded_version,
        smi_versions={gpu.driver_version for gpu in smi.gpus},
        smi_failure=smi.failure,
        fabric_manager_version=state.fabric_manager_version,
        fabric_manager_active=get_fact(ServiceActive, unit=FABRIC_MANAGER_UNIT),
        fabric=[(gpu.index, gpu.fabric_state, gpu.fabric_status) for gpu in smi.gpus],
        nvlink_problems=nvlink.problems() if nvlink else ["nvidia-smi nvlink failed"],
        expected_gpus=expected_gpus,
    )


def reboot_wait_line(host_name: str, reason: str, target: str | None, timeout_s: int) -> str:
    """What bring-up's reboot waits for, said before the silent wait starts.

    >>> reboot_wait_line("node1", "driver changed", "580.105.08", 900)[:79]
    '[node1] rebooting (driver changed); waiting up to 900 s for SSH to answer again'
    """
    module = f"the loaded nvidia module is {target}" if target else "the nvidia module loaded"
    return (
        f"[{host_name}] rebooting ({reason}); waiting up to {timeout_s} s for SSH to answer again, then checking that "
        f"{module}, the fabric manager runs and NVLink is up"
    )
