"""Knobs of the gpu_health role (inventory data overrides each).


Shared knob read here (hgxkit/knobs.py): expected_gpu_count (GPUs that must report health).
"""

from __future__ import annotations

from dataclasses import dataclass

from hgxkit.knobs import Knobs, declare, shared


@dataclass(frozen=True)
class GpuHealthKnobs(Knobs):
    """The gpu_health role's knobs (inventory data or `--data key=value` overrides each)."""

    dcgm_package: str = declare(
        "datacenter-gpu-manager-4-cuda13",
        "DCGM from NVIDIA's CUDA repository (the nvidia_driver role configures it); -cuda13 for R580 drivers, -cuda12"
        " for older ones.",
    )
    dcgm_version: str | None = declare(None, 'pin DCGM\'s Debian version (e.g. "1:4.4.1-1"); None: the newest.')
    dcgm_diag_level: int = declare(1, "`dcgmi diag -r N`: 1 (seconds, the readiness gate), 2 (~2 min), 3 (~15 min).")
    gpu_health_persistence: bool = declare(True, "require persistence mode on every GPU.")
    gpu_health_allow_xids: list[int] = declare(
        [],
        "XID codes tolerated in this boot's kernel log (all others fail the gate).",
    )
    expected_gpu_count: int | None = shared("expected_gpu_count")


DEFAULTS = GpuHealthKnobs.defaults()
__doc__ = f"{__doc__}\n{GpuHealthKnobs.table()}\n"


DCGM_UNIT = "nvidia-dcgm.service"
