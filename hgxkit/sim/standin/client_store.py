"""The host's shared, read-only store of SGLang's REAL benchmark client (sglang 0.5.23, ~6.3 GB with CUDA torch).

Installed ONCE per host with ``standin/sglang/install_client.sh`` into ``/var/lib/hgxkit/sglang-client``
($HGXKIT_SIM_CLIENT_STORE overrides), skipped when a stamp holding the hash of the pinned requirements and the
install script matches. Every simulated node bind-mounts it read-only at /opt/hgxkit-sglang-client; the
simulated ``nvidia-container-runtime-hook`` bind-mounts it from there into every GPU container (as the real
hook injects driver userspace), and the stand-in image's python3 finds it through a .pth file. So
``docker exec <serving container> python3 -m sglang.benchmark.serving …`` runs the real client, as on a real
node, while the image stays 161 MB and a 6.3 GB copy exists once per host, not once per node.

Install it into the directory itself (contents replaced, directory kept): running nodes keep seeing it,
because a bind mount follows the directory's inode.

Example:
    >>> from hgxkit.sim.standin import client_store as serving_client
    >>> len(serving_client.requirements_hash())
    16
    >>> serving_client.ensure_installed()   # doctest: +SKIP
    ClientStore(path=PosixPath('/var/lib/hgxkit/sglang-client'), installed=True, seconds=371.2)
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from hgxkit.errors import HgxkitError
from hgxkit.sim.image import Log, _stderr

STUB = Path(__file__).parent / "sglang"
DEFAULT_STORE = Path("/var/lib/hgxkit/sglang-client")
STAMP = ".hgxkit-client-stamp"
PROBE = "lib/python3.11/site-packages/sglang/benchmark/serving.py"


@dataclass(frozen=True)
class ClientStore:
    path: Path
    installed: bool  # True when this call installed it (False: it was already there)
    seconds: float


def store_path() -> Path:
    """The client store directory ($HGXKIT_SIM_CLIENT_STORE, default /var/lib/hgxkit/sglang-client)."""
    return Path(os.environ.get("HGXKIT_SIM_CLIENT_STORE", DEFAULT_STORE))


def requirements_hash() -> str:
    """Hash of what decides the store's content: the pinned requirements and the install script."""
    h = hashlib.sha256()
    for name in ("client-requirements.txt", "install_client.sh"):
        h.update(hashlib.sha256((STUB / name).read_bytes()).digest())
    return h.hexdigest()[:16]


def is_installed(store: Path | None = None) -> bool:
    """True when `store` holds the client for the current requirements."""
    store = store or store_path()
    stamp = store / STAMP
    return (store / PROBE).is_file() and stamp.is_file() and stamp.read_text().strip() == requirements_hash()


def mark_installed(store: Path) -> None:
    """Write the stamp (after install_client.sh succeeded into `store`)."""
    (store / STAMP).write_text(requirements_hash() + "\n")


def ensure_installed(store: Path | None = None, log: Log = _stderr) -> ClientStore:
    """Install the client into `store` unless it is there for the current requirements (minutes, 6.3 GB)."""
    store = store or store_path()
    if is_installed(store):
        return ClientStore(store, False, 0.0)
    python = os.environ.get("PYTHON", "python3.11")
    if shutil.which(python) is None:
        raise HgxkitError(f"{python} not found: the client store needs CPython 3.11 (set PYTHON=/path/to/python3.11)")
    store.mkdir(parents=True, exist_ok=True)
    for child in store.iterdir():  # keep the directory itself: nodes bind-mount it
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()
    log(f"installing SGLang's benchmark client into {store} (about 6.3 GB, several minutes, once per host)")
    start = time.monotonic()
    res = subprocess.run(
        ["bash", str(STUB / "install_client.sh"), str(store)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHON": python},
    )
    if res.returncode != 0:
        tail = " | ".join((res.stdout + res.stderr).strip().splitlines()[-3:])
        raise HgxkitError(f"install_client.sh failed ({tail[-300:]}): check pip's access to the wheel store")
    mark_installed(store)
    return ClientStore(store, True, round(time.monotonic() - start, 1))
