"""Knobs of the preflight role (inventory data overrides each). Preflight changes nothing on the host.


Shared knobs read here (defaults and meaning in hgxkit/knobs.py): expected_gpu_count (GPUs the node must show
on PCI), models_dir (its free space is checked).
"""

from __future__ import annotations

from dataclasses import dataclass

from hgxkit.knobs import Knobs, declare, shared


@dataclass(frozen=True)
class PreflightKnobs(Knobs):
    """The preflight role's knobs (inventory data or `--data key=value` overrides each)."""

    expected_gpu_count: int | None = shared("expected_gpu_count")
    models_dir: str = shared("models_dir")
    expected_gpu_device_ids: list[str] = declare(
        ["2335"],
        "PCI device ids accepted as the GPU model (2335: H200 SXM 141GB).",
    )
    expected_nvswitch_count: int | None = declare(
        4,
        "NVSwitches on PCI (4 on an HGX H100/H200 baseboard); 0 for PCIe nodes, None skips.",
    )
    supported_arch: list[str] = declare(["x86_64"], "CPU architectures the NVIDIA packages are installed for.")
    allow_secure_boot: bool = declare(
        False,
        "Secure Boot on means DKMS modules need an enrolled MOK key; refused unless true.",
    )
    required_cgroup_version: int | None = declare(
        2,
        "2: Docker and the container toolkit are set up for cgroup v2; None skips.",
    )
    min_free_disk_gb: float = declare(
        400,
        "free space needed at models_dir (DeepSeek-V4-Flash-DSpark is about 150-170 GB).",
    )
    min_ram_gb: float = declare(
        512,
        "host RAM needed (HiCache host pools live there; the serve role checks the exact need).",
    )
    nvidia_repo_url: str | None = declare(
        None,
        "the NVIDIA repository the driver role uses; packages from it count as `cuda-repo`.",
    )


DEFAULTS = PreflightKnobs.defaults()
__doc__ = f"{__doc__}\n{PreflightKnobs.table()}\n"
