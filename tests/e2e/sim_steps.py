"""Shell steps the simulated-node e2e tests run on nodes with plain apt commands (no hgxkit roles)."""

from __future__ import annotations

import os

REPO = "http://127.0.0.1:8081"

CUDA = f"{REPO}/cuda/debian12/x86_64"
NVCT = f"{REPO}/libnvidia-container"
ADD_REPOS = f"""set -e
curl -fsSL {CUDA}/hgxkit-sim.pub | gpg --batch --yes --dearmor -o /usr/share/keyrings/cuda.gpg
echo "deb [signed-by=/usr/share/keyrings/cuda.gpg] {CUDA}/ /" > /etc/apt/sources.list.d/cuda.list
curl -fsSL {NVCT}/gpgkey | gpg --batch --yes --dearmor -o /usr/share/keyrings/nv.gpg
echo "deb [signed-by=/usr/share/keyrings/nv.gpg] {NVCT}/stable/deb/amd64/ /" > /etc/apt/sources.list.d/nv.list
apt-get update -q -o Dir::Etc::sourcelist=- -o Dir::Etc::sourceparts=/etc/apt/sources.list.d
"""


def apt_install(*packages: str) -> str:
    """An apt-get install of exact package versions, allowing downgrades (for the mismatch tests)."""
    return (
        "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --allow-downgrades "
        "-o Dpkg::Options::=--force-confold " + " ".join(packages)
    )


DRIVER_PACKAGES = (
    "nvidia-open",
    "nvidia-kernel-open-dkms",
    "nvidia-driver-cuda",
    "nvidia-smi",
    "libcuda1",
    "nvidia-persistenced",
    "libnvidia-ml1",
    "firmware-nvidia-gsp",
)


def driver_pins(version: str) -> list[str]:
    """Every package of the open driver pinned to `version` (apt would pull the newest deps otherwise)."""
    return [f"{p}={version}-1" for p in DRIVER_PACKAGES]


def cluster_name(base: str) -> str:
    """The cluster a test uses: `base`, plus `-$HGXKIT_SIM_TEST_SUFFIX` when set, so two test sessions on
    one machine (a developer's and a CI clone's) never share simulated nodes."""
    suffix = os.environ.get("HGXKIT_SIM_TEST_SUFFIX", "")
    return f"{base}-{suffix}" if suffix else base
