"""Knobs of the nvidia_driver role (inventory data overrides each).


Shared knob read here (hgxkit/knobs.py): expected_gpu_count (GPUs nvidia-smi must list after bring-up).
"""

from __future__ import annotations

from dataclasses import dataclass

from hgxkit.knobs import Knobs, declare, shared


@dataclass(frozen=True)
class NvidiaDriverKnobs(Knobs):
    """The nvidia_driver role's knobs (inventory data or `--data key=value` overrides each)."""

    nvidia_driver_branch: str = declare(
        "580",
        "driver branch to pin (580: the LTS branch that runs CUDA 12.x and 13.x images).",
    )
    nvidia_driver_version: str | None = declare(
        None,
        'exact upstream version (e.g. "580.95.05"); None: the newest of the branch. Fabric manager and NSCQ are '
        "always installed at exactly the driver's version.",
    )
    nvidia_driver_flavor: str = declare(
        "open",
        '"open" (open kernel modules; NVIDIA\'s default since 560) or "proprietary".',
    )
    nvidia_repo_url: str | None = declare(
        None,
        "NVIDIA's CUDA repository or a mirror of it (air-gapped clusters); None: NVIDIA's "
        "https://developer.download.nvidia.com/compute/cuda/repos/<distro>/x86_64/.",
    )
    nvidia_repo_key_url: str | None = declare(
        None,
        "its signing key; None: <nvidia_repo_url>3bf863cc.pub (NVIDIA's CUDA repo key).",
    )
    nvidia_install_kernel_headers: bool = declare(
        True,
        "install dkms and linux-headers-$(uname -r) so DKMS can build the module.",
    )
    nvidia_blacklist_nouveau: bool = declare(True, "blacklist nouveau (and rebuild the initramfs when that changes).")
    nvidia_unattended_upgrades: str = declare(
        "blacklist",
        '"blacklist": keep NVIDIA, CUDA, fabric manager, NSCQ and kernel packages out of unattended-upgrades; '
        '"remove": purge unattended-upgrades; "ignore".',
    )
    nvidia_fabricmanager_mismatch: str = declare(
        "repair",
        'an installed fabric manager at another version than the driver: "repair" (install the matching one) or '
        '"refuse" (stop before any change, with the remedy).',
    )
    nvidia_persistence: bool = declare(True, "enable nvidia-persistenced (persistence mode on).")
    allow_reboot: bool = declare(
        False,
        "reboot when the driver changed or the loaded module differs from the installed one. False: stop in the "
        '"reboot required" state (/var/run/reboot-required is written, the run fails naming the reason) with the '
        "packages installed and held.",
    )
    nvidia_reboot_timeout: int = declare(900, "seconds to wait for the node to come back.")
    expected_gpu_count: int | None = shared("expected_gpu_count")
    bundle: str | None = shared("bundle")
    bundle_fingerprint: str | None = shared("bundle_fingerprint")


DEFAULTS = NvidiaDriverKnobs.defaults()
__doc__ = f"{__doc__}\n{NvidiaDriverKnobs.table()}\n"


KEYRING = "/etc/apt/keyrings/hgxkit-nvidia-cuda.asc"
CUDA_REPO_KEY_FILE = "3bf863cc.pub"
NOUVEAU_CONF = "/etc/modprobe.d/blacklist-nouveau.conf"
NOUVEAU_TEXT = "# managed by hgxkit (roles/nvidia_driver)\nblacklist nouveau\noptions nouveau modeset=0\n"
UNATTENDED_CONF = "/etc/apt/apt.conf.d/51hgxkit-nvidia-blacklist"
# Unattended-upgrades must never move these: a userspace upgrade under a loaded module breaks NVML.
UNATTENDED_TEXT = """// managed by hgxkit (roles/nvidia_driver): NVIDIA packages change only through hgxkit.
Unattended-Upgrade::Package-Blacklist {
    "nvidia-";
    "libnvidia-";
    "cuda-";
    "xserver-xorg-video-nvidia-";
    ".*fabricmanager.*";
    ".*nscq.*";
    "datacenter-gpu-manager";
    "linux-image-";
    "linux-headers-";
    "linux-modules-";
};
"""
