"""hgxkit: reproduce LLM serving setups on NVIDIA HGX-H200 nodes, and prove them with archived benchmarks."""

import sys

__version__ = "0.1.0"

# pyinfra's CLI turns bytecode writing off for its whole process (`sys.dont_write_bytecode = True` in
# pyinfra_cli.main, "don't write out deploy.pyc/config.pyc"). It compiles deploy and config files itself, so
# what the switch still stops is the modules a deploy imports keeping their bytecode: roles/ (the checkout's,
# never installed) and hgxkit itself in an editable install would be compiled from source on every run, a cost
# in the controller's CPU each time. Imported under
# pyinfra's CLI, hgxkit puts back the interpreter's own setting, so `-B` and PYTHONDONTWRITEBYTECODE still hold.
# Only in a deploy folder (pyinfra's working directory, where roles/ is) that the running user owns: root running
# pyinfra in someone else's checkout would leave root's __pycache__ folders in their way.
if "pyinfra_cli.main" in sys.modules and sys.dont_write_bytecode and not sys.flags.dont_write_bytecode:
    import os

    try:
        if os.stat(".").st_uid == os.geteuid():
            sys.dont_write_bytecode = False
    except OSError:
        pass
