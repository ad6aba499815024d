"""Install ``sglang serve`` / ``python3 -m sglang.launch_server`` shims that run the stand-in (image build).

In a stand-in image the real ``sglang`` package may be installed too (for its benchmark client, see
``../install_clients.sh``). Its server cannot run without GPUs, so the shim replaces exactly two modules of it:
``sglang/launch_server.py`` and ``sglang/cli/main.py``; everything else (``sglang.benchmark.serving``,
``sglang.bench_serving``) stays real. Where no ``sglang`` package exists, a minimal one is created that
holds only those two entry points. A ``sglang`` console script is written to ``--bin-dir``. The shims put
``--stub-root`` (the directory holding the stdlib-only ``hgxkit`` package copy) on ``sys.path``.

With ``--overlay REAL_SITE_PACKAGES`` the minimal package is an *overlay* of a real ``sglang`` that may or may
not be mounted at run time (the simulated nodes' read-only benchmark-client store): when
``REAL_SITE_PACKAGES/sglang`` exists, its directory is appended to the package's ``__path__`` (the two
entry points stay the stand-in's; ``sglang.benchmark.serving`` & co. come from the real package) and, unless
the process is a server entry point, the real ``sglang/__init__.py`` runs too, as it would in the real image.
Server start-up thus never imports torch.

Example:
    python3 -m hgxkit.sim.standin.sglang install-shim \\
        --site-packages /opt/venv/lib/python3.11/site-packages --bin-dir /opt/venv/bin \\
        --stub-root /opt/hgxkit-sim
"""

from __future__ import annotations

import sys
from pathlib import Path

_HEADER = '"""SIMULATED by hgxkit: this entry point runs the SGLang stand-in, not SGLang."""\n'

LAUNCH_SERVER = (
    _HEADER
    + """import sys

sys.path.insert(0, {root!r})
from hgxkit.sim.standin.sglang.launcher import launch_server_main  # noqa: E402

if __name__ == "__main__":
    sys.exit(launch_server_main(sys.argv[1:]))
"""
)

CLI_MAIN = (
    _HEADER
    + """import sys

sys.path.insert(0, {root!r})
from hgxkit.sim.standin.sglang.launcher import serve_main  # noqa: E402

USAGE = "usage: sglang [-h] {{serve,generate,version}} ..."


def main():
    argv = sys.argv[1:]
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    if argv[0] == "version":
        print("sglang version: {version} (hgxkit stand-in, simulated)")
        return 0
    if argv[0] != "serve":
        print(USAGE + "\\nsglang: error: the hgxkit stand-in implements only `sglang serve`", file=sys.stderr)
        return 2
    return serve_main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
"""
)

MINIMAL_INIT = _HEADER + '__version__ = "{version}"\n'

OVERLAY_INIT = (
    _HEADER
    + """import os as _os
import sys as _sys

__version__ = "{version}"
_REAL = {real!r}  # the real sglang of the benchmark-client store, when it is mounted


def _server_entry():
    argv = list(getattr(_sys, "orig_argv", _sys.argv))
    if "-m" in argv[:-1]:
        return argv[argv.index("-m") + 1] in ("sglang.launch_server", "sglang.cli.main")
    return len(argv) > 1 and _os.path.basename(argv[1]) == "sglang"


if _os.path.isfile(_os.path.join(_REAL, "__init__.py")):
    __path__.append(_REAL)
    if not _server_entry():
        _init = _os.path.join(_REAL, "__init__.py")
        with open(_init, encoding="utf-8") as _f:
            exec(compile(_f.read(), _init, "exec"))
"""
)

OVERLAY_CLI_INIT = (
    _HEADER
    + """import os as _os

_REAL = {real!r}
if _os.path.isdir(_REAL):
    __path__.append(_REAL)
"""
)

CONSOLE_SCRIPT = """#!{python}
# SIMULATED by hgxkit: `sglang` runs the SGLang stand-in.
import sys

from sglang.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
"""


def install_shim(
    site_packages: Path,
    stub_root: Path,
    bin_dir: Path | None = None,
    python: str = "/usr/bin/python3",
    version: str = "0.5.23",
    overlay: Path | None = None,
) -> list[Path]:
    """Write the shim files; returns the paths written (see the module doc for `overlay`)."""
    pkg = site_packages / "sglang"
    written: list[Path] = []
    if overlay is not None:
        (pkg / "cli").mkdir(parents=True, exist_ok=True)
        real = str(overlay / "sglang")
        (pkg / "__init__.py").write_text(OVERLAY_INIT.format(version=version, real=real))
        (pkg / "cli" / "__init__.py").write_text(OVERLAY_CLI_INIT.format(real=real + "/cli"))
        written += [pkg / "__init__.py", pkg / "cli" / "__init__.py"]
    elif not (pkg / "__init__.py").exists():
        (pkg / "cli").mkdir(parents=True, exist_ok=True)
        (pkg / "__init__.py").write_text(MINIMAL_INIT.format(version=version))
        (pkg / "cli" / "__init__.py").write_text(_HEADER)
        written += [pkg / "__init__.py", pkg / "cli" / "__init__.py"]
    (pkg / "cli").mkdir(parents=True, exist_ok=True)
    (pkg / "launch_server.py").write_text(LAUNCH_SERVER.format(root=str(stub_root)))
    (pkg / "cli" / "main.py").write_text(CLI_MAIN.format(root=str(stub_root), version=version))
    written += [pkg / "launch_server.py", pkg / "cli" / "main.py"]
    if bin_dir is not None:
        bin_dir.mkdir(parents=True, exist_ok=True)
        script = bin_dir / "sglang"
        script.write_text(CONSOLE_SCRIPT.format(python=python))
        script.chmod(0o755)
        written.append(script)
    return written


def default_stub_root() -> Path:
    """The directory that holds the `hgxkit` package this module was imported from."""
    return Path(__file__).resolve().parents[4]


if __name__ == "__main__":
    sys.exit("use: python3 -m hgxkit.sim.standin.sglang install-shim …")
