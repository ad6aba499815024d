"""Install ``sglang serve`` / ``python3 -m sglang.launch_server`` shims that run the stand-in (image build).

In a stand-in image the real ``sglang`` package may be installed too (for its benchmark client, see
``install_client.sh``). Its server cannot run without GPUs, so the shim replaces exactly two modules of it:
``sglang/launch_server.py`` and ``sglang/cli/main.py``; everything else (``sglang.benchmark.serving``,
``sglang.bench_serving``) stays real. Where no ``sglang`` package exists, a minimal one is created that
holds only those two entry points. A ``sglang`` console script is written to ``--bin-dir``. The shims put
``--stub-root`` (the directory holding the stdlib-only ``hgxkit`` package copy) on ``sys.path``.

Example:
    python3 -m hgxkit.sim.sglang_stub install-shim \\
        --site-packages /opt/venv/lib/python3.11/site-packages --bin-dir /opt/venv/bin \\
        --stub-root /opt/hgxkit-sim
"""

from __future__ import annotations

import sys
from pathlib import Path

_HEADER = '"""SIMULATED by hgxkit: this entry point runs the SGLang stand-in, not SGLang."""\n'

LAUNCH_SERVER = (
    _HEADER
    + """import os
import sys

sys.path.insert(0, {root!r})
from hgxkit.sim.sglang_stub.launcher import launch_server_main  # noqa: E402

if __name__ == "__main__":
    sys.exit(launch_server_main(sys.argv[1:], prog=os.path.basename(sys.argv[0])))
"""
)

CLI_MAIN = (
    _HEADER
    + """import sys

sys.path.insert(0, {root!r})
from hgxkit.sim.sglang_stub.launcher import serve_main  # noqa: E402

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
    return serve_main(argv[1:], prog="sglang")


if __name__ == "__main__":
    sys.exit(main())
"""
)

MINIMAL_INIT = _HEADER + '__version__ = "{version}"\n'

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
) -> list[Path]:
    """Write the shim files; returns the paths written."""
    pkg = site_packages / "sglang"
    written: list[Path] = []
    if not (pkg / "__init__.py").exists():
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
    return Path(__file__).resolve().parents[3]


if __name__ == "__main__":
    sys.exit("use: python3 -m hgxkit.sim.sglang_stub install-shim …")
