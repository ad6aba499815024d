"""Shell steps the simulated-node e2e tests run on nodes with plain apt commands (no hgxkit roles)."""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

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


SUFFIX_ENV = "HGXKIT_SIM_TEST_SUFFIX"


def session_suffix() -> str:
    """This test session's cluster suffix: $HGXKIT_SIM_TEST_SUFFIX, else one made for the session (`t` and 6 hex
    digits), put into the environment so every module and subprocess of the session uses the same one."""
    if not os.environ.get(SUFFIX_ENV):
        os.environ[SUFFIX_ENV] = "t" + secrets.token_hex(3)
    return os.environ[SUFFIX_ENV]


def cluster_name(base: str) -> str:
    """The cluster a test uses: `base-<session suffix>`, so two test sessions on one machine (a developer's, a CI
    clone's) and the demo's cluster never share simulated nodes, nor ports (`hgxkit sim up` picks free ones)."""
    return f"{base}-{session_suffix()}"


class TestSession:
    """This pytest session's claim on the clusters it starts, so a later session can clean up after a killed one.

    A lock file, `<state_dir>/test-sessions/<suffix>.lock`, held (flock) while the session lives, lists every
    cluster the session starts, written BEFORE the nodes start. A later session that can take another session's
    lock knows that session is gone (killed, crashed: the kernel drops a dead process's locks) and removes the
    clusters it listed. A held lock (a live session) and clusters no lock lists (the demo's, anyone's own) are
    never touched.
    """

    __test__ = False  # not a test class, despite its name

    def __init__(self, directory: Path, suffix: str) -> None:
        self.directory = directory
        self.suffix = suffix
        self.path = directory / f"{suffix}.lock"
        self._file = None

    def acquire(self) -> list[str]:
        """Take this session's lock; return the clusters a dead session with the same suffix left listed in it."""
        self.directory.mkdir(parents=True, exist_ok=True)
        f = self.path.open("a+")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.close()
            raise RuntimeError(
                f"{SUFFIX_ENV}={self.suffix} is in use by another live test session: unset it (each session then "
                "gets its own) or choose another"
            ) from None
        self._file = f
        left = _listed(f)
        f.truncate(0)
        f.write(json.dumps({"pid": os.getpid(), "started": time.time()}) + "\n")
        f.flush()
        return left

    def claim(self, cluster: str) -> None:
        """Record `cluster` as this session's (call before starting it: a kill during `up` must be cleaned too)."""
        assert self._file is not None, "acquire() first"
        self._file.write(json.dumps({"cluster": cluster}) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def release(self) -> None:
        """Done (every cluster removed): delete the lock file and let go of it."""
        if self._file is not None:
            self.path.unlink(missing_ok=True)
            self._file.close()
            self._file = None

    def dead_sessions(self) -> Iterator[tuple[Path, list[str]]]:
        """(lock file, listed clusters) of each other session that is gone, its lock held by us while we yield it;
        the file is deleted after the caller is done with it."""
        for path in sorted(self.directory.glob("*.lock")):
            if path == self.path:
                continue
            with path.open("a+") as f:
                try:
                    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # a live session
                yield path, _listed(f)
                path.unlink(missing_ok=True)


def _listed(f) -> list[str]:
    f.seek(0)
    clusters = []
    for line in f.read().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and isinstance(entry.get("cluster"), str):
            clusters.append(entry["cluster"])
    return clusters


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
