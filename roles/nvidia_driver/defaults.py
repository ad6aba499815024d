"""Knobs of the nvidia_driver role (inventory data overrides each).

nvidia_driver_branch           driver branch to pin (580: the LTS branch that runs CUDA 12.x and 13.x images).
nvidia_driver_version          exact upstream version (e.g. "580.95.05"); None: the newest of the branch.
                               Fabric manager and NSCQ are always installed at exactly the driver's version.
nvidia_driver_flavor           "open" (open kernel modules; NVIDIA's default since 560) or "proprietary".
nvidia_repo_url                NVIDIA's CUDA repository or a mirror of it (air-gapped clusters); None: NVIDIA's
                               https://developer.download.nvidia.com/compute/cuda/repos/<distro>/x86_64/.
nvidia_repo_key_url            its signing key; None: <nvidia_repo_url>3bf863cc.pub (NVIDIA's CUDA repo key).
nvidia_install_kernel_headers  install dkms and linux-headers-$(uname -r) so DKMS can build the module.
nvidia_blacklist_nouveau       blacklist nouveau (and rebuild the initramfs when that changes).
nvidia_unattended_upgrades     "blacklist": keep NVIDIA, CUDA, fabric manager, NSCQ and kernel packages out of
                               unattended-upgrades; "remove": purge unattended-upgrades; "ignore".
nvidia_fabricmanager_mismatch  an installed fabric manager at another version than the driver: "repair"
                               (install the matching one) or "refuse" (stop before any change, with the remedy).
nvidia_persistence             enable nvidia-persistenced (persistence mode on).
allow_reboot                   reboot when the driver changed or the loaded module differs from the installed
                               one. False: stop in the "reboot required" state (/var/run/reboot-required is
                               written, the run fails naming the reason) with the packages installed and held.
nvidia_reboot_timeout          seconds to wait for the node to come back.

Shared knob read here (hgxkit/knobs.py): expected_gpu_count (GPUs nvidia-smi must list after bring-up).
bundle                             (shared, hgxkit/knobs.py; and bundle_fingerprint) a bundle directory: the driver,
                                   fabric manager, NSCQ and DCGM packages come from it only.
"""

from hgxkit.knobs import shared_defaults

DEFAULTS = {
    "nvidia_driver_branch": "580",
    "nvidia_driver_version": None,
    "nvidia_driver_flavor": "open",
    "nvidia_repo_url": None,
    "nvidia_repo_key_url": None,
    "nvidia_install_kernel_headers": True,
    "nvidia_blacklist_nouveau": True,
    "nvidia_unattended_upgrades": "blacklist",
    "nvidia_fabricmanager_mismatch": "repair",
    "nvidia_persistence": True,
    "allow_reboot": False,
    "nvidia_reboot_timeout": 900,
    **shared_defaults("expected_gpu_count", "bundle", "bundle_fingerprint"),
}

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
