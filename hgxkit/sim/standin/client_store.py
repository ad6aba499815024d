"""The host's shared, read-only store of the REAL benchmark clients: SGLang's (sglang 0.5.23) and vLLM's
(vllm 0.33.0, ``vllm bench serve``), ~7.2 GB with one CUDA torch for both.

Installed ONCE per host with ``standin/install_clients.sh`` into ``/var/lib/hgxkit/sglang-client`` (the name
predates the vLLM client; $HGXKIT_SIM_CLIENT_STORE overrides), one layer per client, each skipped when the stamp
holds the hash of what decides it (its pinned requirements, those of the layers under it, the install script):
a caller asks for the clients it needs (the demo for SGLang's alone), and a later call adds the other.

Layout: the venv's site-packages holds SGLang's client and everything both share; ``vllm-site/`` holds vllm and the
few packages only its client needs (SGLang's import chain would import vllm if it were importable, so it never sees
that layer); ``bin/vllm`` runs vLLM's CLI with both. Every simulated node bind-mounts the store read-only at
/opt/hgxkit-sglang-client; the simulated ``nvidia-container-runtime-hook`` bind-mounts it from there into every GPU
container (as the real hook injects driver userspace), and the stand-in images' python3 finds it through .pth files.
So ``docker exec <ctr> python3 -m sglang.benchmark.serving …`` and ``docker exec <ctr> vllm bench serve …`` run the
real clients, as on a real node, while the images stay small and the store exists once per host.

Install it into the directory itself (contents replaced, directory kept): running nodes keep seeing it,
because a bind mount follows the directory's inode.

Example:
    >>> from hgxkit.sim.standin import client_store as serving_client
    >>> len(serving_client.requirements_hash())
    16
    >>> serving_client.ensure_installed(clients=("sglang",))   # doctest: +SKIP
    ClientStore(path=PosixPath('/var/lib/hgxkit/sglang-client'), installed=True, seconds=98.2)
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from hgxkit.errors import HgxkitError

Log = Callable[[str], None]

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
CLIENTS = tuple(PROBES)  # in layer order: vLLM's layer needs SGLang's venv under it
# The layers' sizes as installed, for the progress line.
SIZES_GB = {"sglang": 6.3, "vllm": 0.9}


@dataclass(frozen=True)
class ClientStore:
    path: Path
    installed: bool  # True when this call installed a layer (False: all it asked for was there)
    seconds: float


def store_path() -> Path:
    """The client store directory ($HGXKIT_SIM_CLIENT_STORE, default /var/lib/hgxkit/sglang-client)."""
    return Path(os.environ.get("HGXKIT_SIM_CLIENT_STORE", DEFAULT_STORE))


def layer_hash(client: str) -> str:
    """Hash of what decides `client`'s layer: its requirements, those of the layers under it, the install script."""
    h = hashlib.sha256()
    for path in (*REQUIREMENTS[: CLIENTS.index(client) + 1], INSTALL_SCRIPT):
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()[:16]


def requirements_hash() -> str:
    """Hash of what decides the whole store (both clients' layers)."""
    return layer_hash(CLIENTS[-1])


def installed_clients(store: Path | None = None) -> list[str]:
    """The clients whose files `store` holds (``sglang``, ``vllm``), whatever their requirements hash."""
    store = store or store_path()
    return [name for name, probe in PROBES.items() if (store / probe).is_file()]


# install_clients.sh before it took layers installed the same files with both in one call; a store it stamped
# (one hash over both requirements and that script) is as current as one stamped per layer, and reinstalling
# 7.2 GB to rewrite a stamp would cost every existing host two minutes.
WHOLE_STORE_SCRIPT_SHA256 = "603f2e5aa8cd887fd05650027dc4db307e97b863c993bff19521e59400beda0f"


def _whole_store_hash() -> str:
    h = hashlib.sha256()
    for path in REQUIREMENTS:
        h.update(hashlib.sha256(path.read_bytes()).digest())
    h.update(bytes.fromhex(WHOLE_STORE_SCRIPT_SHA256))
    return h.hexdigest()[:16]


def _stamped(store: Path) -> dict[str, str]:
    stamp = store / STAMP
    lines = stamp.read_text().splitlines() if stamp.is_file() else []
    if lines == [_whole_store_hash()]:
        return {c: layer_hash(c) for c in CLIENTS}
    return dict(line.split(" ", 1) for line in lines if " " in line)


def is_installed(store: Path | None = None, clients: tuple[str, ...] = CLIENTS) -> bool:
    """True when `store` holds each of `clients` (default both) for the current requirements."""
    store = store or store_path()
    stamped, present = _stamped(store), installed_clients(store)
    # A layer is current only on current layers: vLLM's on a stale SGLang venv is stale too.
    under = {layer for c in clients for layer in CLIENTS[: CLIENTS.index(c) + 1]}
    return all(stamped.get(layer) == layer_hash(layer) and layer in present for layer in under)


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


def mark_installed(store: Path, clients: tuple[str, ...] = CLIENTS) -> None:
    """Stamp `clients`' layers as current (after install_clients.sh installed them into `store`)."""
    stamped = {**_stamped(store), **{c: layer_hash(c) for c in clients}}
    (store / STAMP).write_text("".join(f"{c} {stamped[c]}\n" for c in CLIENTS if c in stamped))


def layers_to_install(store: Path, clients: tuple[str, ...] = CLIENTS) -> list[str]:
    """The layers an install of `clients` must (re)install, in order: SGLang's stale means the whole store."""
    stale = [c for c in CLIENTS if c in clients and not is_installed(store, (c,))]
    if stale and not is_installed(store, CLIENTS[:1]):
        return [c for c in CLIENTS if c == CLIENTS[0] or c in clients]
    return stale


def _empty(store: Path) -> None:
    """Remove `store`'s contents but keep the directory itself: nodes bind-mount it."""
    for child in store.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def _stderr(line: str) -> None:
    print(f"hgxkit sim: {line}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def _install_lock(store: Path, log: Log) -> Iterator[None]:
    """One install of `store` at a time (`make demo` starts one before the demo runs; a user may start another):
    each empties the store first, so two at once would break both."""
    fd = os.open(store.parent / f".{store.name}.lock", os.O_CREAT | os.O_RDWR, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"waiting for the install of {store} that another process has under way")
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def ensure_installed(store: Path | None = None, log: Log = _stderr, clients: tuple[str, ...] = CLIENTS) -> ClientStore:
    """Install the layers of `clients` (default both) that `store` lacks for the current requirements."""
    store = store or store_path()
    store.mkdir(parents=True, exist_ok=True)
    if not layers_to_install(store, clients):
        return ClientStore(store, False, 0.0)
    with _install_lock(store, log):
        layers = layers_to_install(store, clients)  # what the install we waited for left to do
        if not layers:
            return ClientStore(store, False, 0.0)
        return _install(store, layers, log)


def _install(store: Path, layers: list[str], log: Log) -> ClientStore:
    python = os.environ.get("PYTHON", "python3.11")
    if shutil.which(python) is None:
        raise HgxkitError(f"{python} not found: the client store needs CPython 3.11 (set PYTHON=/path/to/python3.11)")
    if CLIENTS[0] in layers:
        _empty(store)
    size = sum(SIZES_GB[c] for c in layers)
    log(f"installing the {' and '.join(layers)} benchmark client(s) into {store} (about {size:.1f} GB, once per host)")
    start = time.monotonic()
    res = subprocess.run(
        ["bash", str(INSTALL_SCRIPT), str(store), *layers],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHON": python},
    )
    if res.returncode != 0:
        tail = " | ".join((res.stdout + res.stderr).strip().splitlines()[-3:])
        raise HgxkitError(f"install_clients.sh failed ({tail[-300:]}): check pip's access to PyPI and the wheel store")
    mark_installed(store, tuple(layers))
    return ClientStore(store, True, round(time.monotonic() - start, 1))


def main(argv: list[str]) -> int:
    """``python3 -m hgxkit.sim.standin.client_store [CLIENT...]``: the install with the standard library alone, so
    `make demo` can start it before the controller's venv exists (`hgxkit sim client install` is the same call)."""
    try:
        done = ensure_installed(clients=tuple(argv) or CLIENTS)
    except HgxkitError as error:
        print(f"hgxkit sim: {error.message}", file=sys.stderr)
        return 1
    state = f"installed in {done.seconds:.0f} s" if done.installed else "up to date"
    print(f"hgxkit sim: client store {done.path}: {state}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
