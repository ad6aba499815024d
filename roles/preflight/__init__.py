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

from hgxkit.knobs import knob
from hgxkit.node.driver import package_origin
from hgxkit.node.facts_apt import InstalledPackages, PackagePolicies
from hgxkit.node.facts_driver import NvidiaPci, SecureBootState
from hgxkit.node.facts_system import CgroupVersion, FreeBytes, MemTotalBytes, OsRelease
from hgxkit.node.preflight import HostFacts, PreflightPolicy, preflight_problems
from hgxkit.problems import refuse
from roles.preflight.defaults import DEFAULTS

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
    """The preflight policy from inventory data (falling back to `defaults.DEFAULTS`)."""
    data = host.data
    count = knob(host, "expected_gpu_count")
    switches = data.get("expected_nvswitch_count")
    return PreflightPolicy(
        expected_gpu_count=int(count) if count is not None else None,
        expected_gpu_device_ids=tuple(data.get("expected_gpu_device_ids")),
        expected_nvswitch_count=int(switches) if switches is not None else None,
        supported_arch=tuple(data.get("supported_arch")),
        allow_secure_boot=bool(data.get("allow_secure_boot")),
        required_cgroup_version=data.get("required_cgroup_version"),
        models_dir=knob(host, "models_dir"),
        min_free_disk_gb=float(data.get("min_free_disk_gb")),
        min_ram_gb=float(data.get("min_ram_gb")),
    )


@deploy("hgxkit preflight", data_defaults=DEFAULTS)
def preflight() -> None:
    """Fail the run, naming every problem, unless this host can be brought up. Changes nothing."""
    policy = policy_from_data()
    facts = gather_host_facts(policy.models_dir, host.data.get("nvidia_repo_url"))
    refuse(f"preflight failed on {host.name}; nothing was changed", preflight_problems(facts, policy))
