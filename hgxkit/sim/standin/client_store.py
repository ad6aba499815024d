"""The host's shared, read-only store of the REAL benchmark clients: SGLang's (sglang 0.5.23) and vLLM's
(vllm 0.33.0, ``vllm bench serve``), ~7.2 GB with one CUDA torch for both.

Installed ONCE per host with ``standin/install_clients.sh`` into ``/var/lib/hgxkit/sglang-client`` (the name
predates the vLLM client; $HGXKIT_SIM_CLIENT_STORE overrides), skipped when a stamp holding the hash of the
pinned requirements and the install script matches. Layout: the venv's site-packages holds SGLang's client and
everything both share; ``vllm-site/`` holds vllm and the few packages only its client needs (SGLang's import
chain would import vllm if it were importable, so it never sees that layer); ``bin/vllm`` runs vLLM's CLI
with both. Every simulated node bind-mounts the store read-only at /opt/hgxkit-sglang-client; the simulated
``nvidia-container-runtime-hook`` bind-mounts it from there into every GPU container (as the real hook
injects driver userspace), and the stand-in images' python3 finds it through .pth files. So
``docker exec <ctr> python3 -m sglang.benchmark.serving …`` and ``docker exec <ctr> vllm bench serve …``
run the real clients, as on a real node, while the images stay small and the store exists once per host.

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

STANDIN = Path(__file__).parent
INSTALL_SCRIPT = STANDIN / "install_clients.sh"
REQUIREMENTS = (STANDIN / "sglang" / "client-requirements.txt", STANDIN / "vllm" / "client-requirements.txt")
DEFAULT_STORE = Path("/var/lib/hgxkit/sglang-client")
STAMP = ".hgxkit-client-stamp"
SITE = "lib/python3.11/site-packages"
VLLM_SITE = "vllm-site"  # vllm's layer, on sys.path only for vLLM's client
PROBES = {  # client -> a file its benchmark entry point needs
    "sglang": f"{SITE}/sglang/benchmark/serving.py",
    "vllm": f"{VLLM_SITE}/vllm/benchmarks/serve.py",
}
PROBE = PROBES["sglang"]  # kept for existing callers


@dataclass(frozen=True)
class ClientStore:
    path: Path
    installed: bool  # True when this call installed it (False: it was already there)
    seconds: float


def store_path() -> Path:
    """The client store directory ($HGXKIT_SIM_CLIENT_STORE, default /var/lib/hgxkit/sglang-client)."""
    return Path(os.environ.get("HGXKIT_SIM_CLIENT_STORE", DEFAULT_STORE))


def requirements_hash() -> str:
    """Hash of what decides the store's content: both clients' pinned requirements and the install script."""
    h = hashlib.sha256()
    for path in (*REQUIREMENTS, INSTALL_SCRIPT):
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()[:16]


def installed_clients(store: Path | None = None) -> list[str]:
    """The clients whose files `store` holds (``sglang``, ``vllm``), whatever their requirements hash."""
    store = store or store_path()
    return [name for name, probe in PROBES.items() if (store / probe).is_file()]


def is_installed(store: Path | None = None) -> bool:
    """True when `store` holds both clients for the current requirements."""
    store = store or store_path()
    stamp = store / STAMP
    current = stamp.is_file() and stamp.read_text().strip() == requirements_hash()
    return current and installed_clients(store) == list(PROBES)


def vllm_command(store: Path) -> list[str] | None:
    """How to run vLLM's real CLI (``vllm``) from `store`, or None when it holds no vLLM client.

    A store made by install_clients.sh has ``bin/vllm`` (it adds the ``vllm-site`` layer); a plain venv with
    vllm installed (a developer's scratch venv) has the console script of the same name."""
    script = store / "bin" / "vllm"
    if script.is_file() and (
        (store / PROBES["vllm"]).is_file() or (store / SITE / "vllm/benchmarks/serve.py").is_file()
    ):
        return [str(store / "bin" / "python"), str(script)]
    return None


def vllm_python(store: Path) -> list[str] | None:
    """``python`` of `store` with vLLM's layer on ``sys.path`` (for ``-c`` scripts), or None without vLLM."""
    if vllm_command(store) is None:
        return None
    layer = store / VLLM_SITE
    prefix = f"import site; site.addsitedir({str(layer)!r}); " if layer.is_dir() else ""
    return [
        str(store / "bin" / "python"),
        "-c",
        prefix + "import runpy, sys; runpy.run_path(sys.argv[1], run_name='__main__')",
    ]


def mark_installed(store: Path) -> None:
    """Write the stamp (after install_clients.sh succeeded into `store`)."""
    (store / STAMP).write_text(requirements_hash() + "\n")


def ensure_installed(store: Path | None = None, log: Log = _stderr) -> ClientStore:
    """Install both clients into `store` unless they are there for the current requirements (minutes, 7.2 GB)."""
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
    log(f"installing SGLang's and vLLM's benchmark clients into {store} (about 7.2 GB, ~8 min, once per host)")
    start = time.monotonic()
    res = subprocess.run(
        ["bash", str(INSTALL_SCRIPT), str(store)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHON": python},
    )
    if res.returncode != 0:
        tail = " | ".join((res.stdout + res.stderr).strip().splitlines()[-3:])
        raise HgxkitError(f"install_clients.sh failed ({tail[-300:]}): check pip's access to PyPI and the wheel store")
    mark_installed(store)
    return ClientStore(store, True, round(time.monotonic() - start, 1))
