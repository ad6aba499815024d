"""Install ``vllm`` entry points that run the vLLM stand-in for serving and the REAL vLLM client for the rest.

In the stand-in image the real ``vllm`` (0.33.0, the benchmark client) is present only when the simulated
NVIDIA hook has mounted the host's client store (``--overlay`` = its site-packages). Both must coexist:

- ``vllm serve …`` (the image's ENTRYPOINT) and ``python3 -m vllm.entrypoints.openai.api_server …`` run the
  stand-in — vLLM's server cannot run without GPUs, and starting it must not import torch;
- ``vllm bench serve …`` (and any other sub-command) runs the real vLLM CLI from the store; without the store
  it fails with one clear line.

So a minimal ``vllm`` package is written into ``--site-packages`` (which comes before the store on
``sys.path``): an *overlay* that appends the real package's directory to its ``__path__`` when the store is
mounted (``vllm.benchmarks`` … then come from the real package), and executes the real ``vllm/__init__.py``
unless the process is a stand-in server entry point. It owns exactly these modules: ``vllm/__init__.py``,
``vllm/entrypoints/__init__.py``, ``vllm/entrypoints/openai/__init__.py`` (both empty in vLLM, here they
extend ``__path__``), ``vllm/entrypoints/openai/api_server.py`` and ``vllm/entrypoints/cli/main.py`` (the
dispatcher), plus the ``vllm`` console script in ``--bin-dir``. The stand-in's code is found on
``--stub-root``.

Example:
    python3 -m hgxkit.sim.standin.vllm install-shim --site-packages /usr/local/lib/python3.11/dist-packages \\
        --bin-dir /usr/local/bin --stub-root /opt/hgxkit-sim \\
        --overlay /opt/hgxkit-sglang-client/lib/python3.11/site-packages
"""

from __future__ import annotations

import sys
from pathlib import Path

from hgxkit.engines.vllm_serve import VLLM_VERSION

_HEADER = '"""SIMULATED by hgxkit: part of the vLLM stand-in (see hgxkit/sim/standin/vllm/shim.py)."""\n'

PACKAGE_INIT = (
    _HEADER
    + """import os as _os
import sys as _sys

__version__ = "{version}"
_REAL = {real!r}  # the real vllm of the benchmark-client store, when the GPU hook has mounted it


def _server_entry():
    argv = list(getattr(_sys, "orig_argv", _sys.argv))
    if "-m" in argv[:-1]:
        i = argv.index("-m")
        module, rest = argv[i + 1], argv[i + 2 :]
        return module == "vllm.entrypoints.openai.api_server" or (
            module == "vllm.entrypoints.cli.main" and rest[:1] == ["serve"]
        )
    return len(argv) > 2 and _os.path.basename(argv[1]) == "vllm" and argv[2:3] == ["serve"]


if _os.path.isfile(_os.path.join(_REAL, "__init__.py")):
    __path__.append(_REAL)
    if not _server_entry():
        _init = _os.path.join(_REAL, "__init__.py")
        with open(_init, encoding="utf-8") as _f:
            exec(compile(_f.read(), _init, "exec"))
"""
)

SUBPACKAGE_INIT = (
    _HEADER
    + """import os as _os

_REAL = {real!r}
if _os.path.isdir(_REAL):
    __path__.append(_REAL)
"""
)

API_SERVER = (
    _HEADER
    + """import os
import sys

if __name__ == "__main__":
    sys.path.insert(0, {root!r})
    from hgxkit.sim.standin.vllm.launcher import api_server_main

    sys.exit(api_server_main(sys.argv[1:], prog=os.path.basename(sys.argv[0])))
"""
)

CLI_MAIN = (
    _HEADER
    + """import os
import sys

_REAL_MAIN = {real_main!r}
VERSION = "{version}"
USAGE = (
    "usage: vllm [-h] [-v]\\n"
    "            {{chat,complete,serve,launch,bench,collect-env,download-kernels,preload,run-batch,snapshot}}\\n"
    "            ..."
)


def main():
    argv = sys.argv[1:]
    if argv[:1] == ["serve"]:
        sys.path.insert(0, {root!r})
        from hgxkit.sim.standin.vllm.launcher import serve_main

        return serve_main(argv[1:])
    if argv[:1] in (["-v"], ["--version"]):
        print(VERSION)
        return 0
    if not argv or argv[:1] in (["-h"], ["--help"]):
        print(USAGE + "\\n\\nvLLM CLI (hgxkit stand-in image, SIMULATED: `vllm serve` runs the stand-in; the other "
              "sub-commands run the real vLLM client when the host's client store is mounted)")
        return 0
    if not os.path.isfile(_REAL_MAIN):
        print(USAGE + f"\\nvllm: error: `vllm {{argv[0]}}` needs the real vLLM client, which is not mounted here "
              "(simulated image: the simulated NVIDIA hook mounts the host's client store into --gpus containers; "
              "run `hgxkit sim client install` on the host)", file=sys.stderr)
        return 2
    import runpy

    sys.argv = ["vllm", *argv]
    runpy.run_path(_REAL_MAIN, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
"""
)

CONSOLE_SCRIPT = """#!{python}
# SIMULATED by hgxkit: `vllm serve` runs the vLLM stand-in, other sub-commands the real vLLM client (if mounted).
import sys

from vllm.entrypoints.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
"""


RAY_SCRIPT = """#!{python}
# SIMULATED by hgxkit: a Ray stand-in (`ray start --head|--address`, `ray status`) for vLLM on a Ray cluster.
import sys

sys.path.insert(0, {root!r})
from hgxkit.sim.standin.vllm.cluster import ray_main

if __name__ == "__main__":
    sys.exit(ray_main(sys.argv[1:]))
"""


def install_shim(
    site_packages: Path,
    stub_root: Path,
    bin_dir: Path | None = None,
    python: str = "/usr/bin/python3",
    overlay: Path | None = None,
) -> list[Path]:
    """Write the overlay package and console script; returns the paths written (module doc)."""
    real = (overlay or Path("/nonexistent/hgxkit-no-client-store")) / "vllm"
    pkg = site_packages / "vllm"
    files = {
        pkg / "__init__.py": PACKAGE_INIT.format(version=VLLM_VERSION, real=str(real)),
        pkg / "entrypoints" / "__init__.py": SUBPACKAGE_INIT.format(real=str(real / "entrypoints")),
        pkg / "entrypoints" / "openai" / "__init__.py": SUBPACKAGE_INIT.format(real=str(real / "entrypoints/openai")),
        pkg / "entrypoints" / "openai" / "api_server.py": API_SERVER.format(root=str(stub_root)),
        pkg / "entrypoints" / "cli" / "__init__.py": SUBPACKAGE_INIT.format(real=str(real / "entrypoints/cli")),
        pkg / "entrypoints" / "cli" / "main.py": CLI_MAIN.format(
            root=str(stub_root), version=VLLM_VERSION, real_main=str(real / "entrypoints/cli/main.py")
        ),
    }
    if bin_dir is not None:
        files[bin_dir / "vllm"] = CONSOLE_SCRIPT.format(python=python)
        files[bin_dir / "ray"] = RAY_SCRIPT.format(python=python, root=str(stub_root))
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    if bin_dir is not None:
        (bin_dir / "vllm").chmod(0o755)
        (bin_dir / "ray").chmod(0o755)
    return list(files)


def default_stub_root() -> Path:
    """The directory that holds the `hgxkit` package this module was imported from."""
    return Path(__file__).resolve().parents[4]


if __name__ == "__main__":
    sys.exit("use: python3 -m hgxkit.sim.standin.vllm install-shim …")
