"""Preflight: refuse a host that cannot become an HGX-H200 serving node, before anything changes.

Checks OS and architecture, GPUs and NVSwitches on PCI against the inventory, Secure Boot, cgroup version,
host RAM, free disk at the model directory, and that installed NVIDIA packages come from one source. Every
failure names the check, what was found and the remedy; the run stops before any host is changed.

Example (deploys/bringup.py):
    from roles.preflight import preflight
    preflight()
"""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.facts.server import Arch

from hgxkit.node.driver import package_origin
from hgxkit.node.facts_apt import InstalledPackages, PackagePolicies
from hgxkit.node.facts_driver import NvidiaPci, SecureBootState
from hgxkit.node.facts_system import CgroupVersion, FreeBytes, MemTotalBytes, OsRelease
from hgxkit.node.preflight import HostFacts, PreflightPolicy, preflight_problems
from hgxkit.problems import refuse
from roles.preflight.defaults import DEFAULTS, PreflightKnobs

NVIDIA_PACKAGE_GLOBS = "nvidia-* libnvidia-* cuda-drivers* datacenter-gpu-manager*"
CONTAINER_TOOLKIT_PREFIXES = ("nvidia-container", "libnvidia-container")


def gather_host_facts(models_dir: str, repo_url: str | None) -> HostFacts:
    """Read everything preflight judges from the current host."""
    release = host.get_fact(OsRelease)
    policies = host.get_fact(PackagePolicies, patterns=NVIDIA_PACKAGE_GLOBS)
    return HostFacts(
        os_id=release.get("ID"),
        os_version=release.get("VERSION_ID"),
        arch=host.get_fact(Arch),
        pci=host.get_fact(NvidiaPci),
        secure_boot=host.get_fact(SecureBootState),
        cgroup_version=host.get_fact(CgroupVersion),
        ram_bytes=host.get_fact(MemTotalBytes),
        models_dir_free_bytes=host.get_fact(FreeBytes, path=models_dir),
        nvidia_packages=host.get_fact(InstalledPackages, patterns=NVIDIA_PACKAGE_GLOBS),
        nvidia_package_origins={
            name: package_origin(text, repo_url)
            for name, text in policies.items()
            if not name.startswith(CONTAINER_TOOLKIT_PREFIXES)  # their own repository, not the driver's
        },
    )


def policy_from_data() -> PreflightPolicy:
    """The preflight policy from the role's knobs (roles/preflight/defaults.py)."""
    knobs = PreflightKnobs.from_host(host)
    return PreflightPolicy(
        expected_gpu_count=knobs.expected_gpu_count,
        expected_gpu_device_ids=tuple(knobs.expected_gpu_device_ids),
        expected_nvswitch_count=knobs.expected_nvswitch_count,
        supported_arch=tuple(knobs.supported_arch),
        allow_secure_boot=knobs.allow_secure_boot,
        required_cgroup_version=knobs.required_cgroup_version,
        models_dir=knobs.models_dir,
        min_free_disk_gb=float(knobs.min_free_disk_gb),
        min_ram_gb=float(knobs.min_ram_gb),
    )


@deploy("hgxkit preflight", data_defaults=DEFAULTS)
def preflight() -> None:
    """Fail the run, naming every problem, unless this host can be brought up. Changes nothing."""
    policy = policy_from_data()
    facts = gather_host_facts(policy.models_dir, PreflightKnobs.from_host(host).nvidia_repo_url)
    refuse(f"preflight failed on {host.name}; nothing was changed", preflight_problems(facts, policy))
