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

# pyinfra lists its global arguments by evaluating `AllArguments`' type hints (typing.get_type_hints, which
# compiles every string annotation) on each call: once per fact class defined and once per operation or fact
# call, about 0.9 ms each, the same answer every time. Loaded by pyinfra, hgxkit keeps the first answer; callers
# get their own copy of the list, as before.
if "pyinfra.api.arguments" in sys.modules or "pyinfra_cli.main" in sys.modules:
    import functools

    import pyinfra.api.arguments
    import pyinfra.api.facts

    _listed = functools.cache(pyinfra.api.arguments.all_global_arguments)

    def _all_global_arguments() -> list[tuple[str, type]]:
        return list(_listed())

    pyinfra.api.arguments.all_global_arguments = _all_global_arguments
    pyinfra.api.facts.all_global_arguments = _all_global_arguments
