"""Knobs of the gpu_health role (inventory data overrides each).

dcgm_package                DCGM from NVIDIA's CUDA repository (the nvidia_driver role configures it);
                            -cuda13 for R580 drivers, -cuda12 for older ones.
dcgm_version                pin DCGM's Debian version (e.g. "1:4.4.1-1"); None: the newest.
dcgm_diag_level             `dcgmi diag -r N`: 1 (seconds, the readiness gate), 2 (~2 min), 3 (~15 min).
gpu_health_persistence      require persistence mode on every GPU.
gpu_health_allow_xids       XID codes tolerated in this boot's kernel log (all others fail the gate).

Shared knob read here (hgxkit/knobs.py): expected_gpu_count (GPUs that must report health).
"""

from hgxkit.knobs import shared_defaults

DEFAULTS = {
    "dcgm_package": "datacenter-gpu-manager-4-cuda13",
    "dcgm_version": None,
    "dcgm_diag_level": 1,
    "gpu_health_persistence": True,
    "gpu_health_allow_xids": [],
    **shared_defaults("expected_gpu_count"),
}

DCGM_UNIT = "nvidia-dcgm.service"
