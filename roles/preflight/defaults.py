"""Knobs of the preflight role (inventory data overrides each). Preflight changes nothing on the host.

expected_gpu_device_ids  PCI device ids accepted as the GPU model (2335: H200 SXM 141GB).
expected_nvswitch_count  NVSwitches on PCI (4 on an HGX H100/H200 baseboard); 0 for PCIe nodes, None skips.
supported_arch           CPU architectures the NVIDIA packages are installed for.
allow_secure_boot        Secure Boot on means DKMS modules need an enrolled MOK key; refused unless true.
required_cgroup_version  2: Docker and the container toolkit are set up for cgroup v2; None skips.
min_free_disk_gb         free space needed at models_dir (DeepSeek-V4-Flash-DSpark is about 150-170 GB).
min_ram_gb               host RAM needed (HiCache host pools live there; the serve role checks the exact need).
nvidia_repo_url          the NVIDIA repository the driver role uses; packages from it count as `cuda-repo`.

Shared knobs read here (defaults and meaning in hgxkit/knobs.py): expected_gpu_count (GPUs the node must show
on PCI), models_dir (its free space is checked).
"""

from hgxkit.knobs import shared_defaults

DEFAULTS = {
    **shared_defaults("expected_gpu_count", "models_dir"),
    "expected_gpu_device_ids": ["2335"],
    "expected_nvswitch_count": 4,
    "supported_arch": ["x86_64"],
    "allow_secure_boot": False,
    "required_cgroup_version": 2,
    "min_free_disk_gb": 400,
    "min_ram_gb": 512,
    "nvidia_repo_url": None,
}
