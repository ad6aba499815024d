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


def deploy_argv(deploy: str, *data: str, flags: tuple[str, ...] = ("-y",)) -> list[str]:
    """`pyinfra FLAGS inventories/sim.py <deploy> --data …` as a user types it."""
    import sys
    from pathlib import Path

    argv = [str(Path(sys.executable).parent / "pyinfra"), *flags, "inventories/sim.py", deploy]
    for item in data:
        argv += ["--data", item]
    return argv


def deploy_env(cluster: str, env: dict[str, str] | None = None) -> dict[str, str]:
    return {**os.environ, "HGXKIT_SIM_CLUSTER": cluster, "PYINFRA_PROGRESS": "off", **(env or {})}


def run_deploy(
    cluster: str,
    deploy: str,
    *data: str,
    timeout: int = 1500,
    env: dict[str, str] | None = None,
    flags: tuple[str, ...] = ("-y",),
):
    """Run `pyinfra -y inventories/sim.py <deploy> --data …` as a user would; return the CompletedProcess."""
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    return subprocess.run(deploy_argv(deploy, *data, flags=flags), cwd=root, env=deploy_env(cluster, env),
                          capture_output=True, text=True, timeout=timeout, check=False)  # fmt: skip


def node_sh(cluster: str, command: str, node: str = "node1", timeout: int = 300) -> str:
    """stdout of `command` on a node, over a new SSH session (nodes may reboot between calls)."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    argv = [sys.executable, "-m", "hgxkit", "sim", "ssh", node, "--cluster", cluster, "--", command]
    return subprocess.run(argv, cwd=root, capture_output=True, text=True, timeout=timeout, check=False).stdout
