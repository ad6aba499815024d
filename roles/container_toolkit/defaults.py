"""Knobs of the container_toolkit role (inventory data overrides each).


Shared knobs read here (hgxkit/knobs.py): expected_gpu_count (GPUs the smoke test must see), state_dir (the
record of the last passed smoke test: <state_dir>/node/gpu-smoke.json).
"""

from __future__ import annotations

from dataclasses import dataclass

from hgxkit.knobs import Knobs, declare, shared


@dataclass(frozen=True)
class ContainerToolkitKnobs(Knobs):
    """The container_toolkit role's knobs (inventory data or `--data key=value` overrides each)."""

    nvidia_container_repo_url: str | None = declare(
        None,
        "the libnvidia-container repository or a mirror; None: NVIDIA's "
        "https://nvidia.github.io/libnvidia-container/stable/deb/amd64/",
    )
    nvidia_container_repo_key_url: str | None = declare(
        None,
        "its key; None: https://nvidia.github.io/libnvidia-container/gpgkey",
    )
    nvidia_container_toolkit_version: str = declare(
        "1.18.0-1",
        "Debian version pinned for nvidia-container-toolkit, -base, libnvidia-container-tools and "
        "libnvidia-container1 (held).",
    )
    container_toolkit_cgroupfs: bool = declare(
        True,
        "set Docker's cgroup driver to cgroupfs: with the systemd driver a `systemctl daemon-reload` strips GPU "
        'access from running containers ("Failed to initialize NVML: Unknown Error", nvidia-container-toolkit#48).',
    )
    container_smoke_image: str = declare(
        "ubuntu:24.04",
        "image of the GPU smoke test (nvidia-smi is injected by the toolkit).",
    )
    container_smoke_command: str = declare(
        "nvidia-smi -L",
        "its command (run by `sh -c` in the container); must list every GPU with `GPU <n>:` lines ...",
    )
    container_smoke_expect: str = declare(
        "gpu-list",
        '... ("gpu-list"), or print NVIDIA_VISIBLE_DEVICES ("visible-devices": the simulated nodes, whose no-op hook '
        "injects no nvidia-smi).",
    )
    expected_gpu_count: int | None = shared("expected_gpu_count")
    state_dir: str = shared("state_dir")
    bundle: str | None = shared("bundle")
    bundle_fingerprint: str | None = shared("bundle_fingerprint")


DEFAULTS = ContainerToolkitKnobs.defaults()
__doc__ = f"{__doc__}\n{ContainerToolkitKnobs.table()}\n"


REPO_URL = "https://nvidia.github.io/libnvidia-container/stable/deb/amd64/"
KEY_URL = "https://nvidia.github.io/libnvidia-container/gpgkey"
KEYRING = "/etc/apt/keyrings/hgxkit-nvidia-container-toolkit.asc"
SOURCES_FILE = "hgxkit-nvidia-container-toolkit"
PACKAGES = [
    "nvidia-container-toolkit",
    "nvidia-container-toolkit-base",
    "libnvidia-container-tools",
    "libnvidia-container1",
]
# Old list files that name the same repository with another key: apt then fails with "Conflicting values
# set for option Signed-By" (the toolkit's troubleshooting guide).
STALE_LISTS = [
    "nvidia-docker.list",
    "libnvidia-container.list",
    "nvidia-container-runtime.list",
    "nvidia-container-toolkit.list",
]
