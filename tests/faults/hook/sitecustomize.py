"""Test-only fault hook for a controller under test: pause it at a named point of hgxkit's code.

Put this folder first on PYTHONPATH and set `HGXKIT_FAULT_AT=<module>:<function>[:<text>]`: when the controller
first calls `<module>.<function>` with `<text>` in the repr of its arguments, it prints
`HGXKIT-FAULT-PAUSED <module>:<function> pid <pid>` (flushed) and stops itself (SIGSTOP). The test then injects
its fault (SIGKILL of the process group, an SSH cut, a reboot, ...) and resumes it (SIGCONT) or not.
Nothing of this is in the product: it wraps the function once the module is imported.
"""

from __future__ import annotations

import functools
import importlib.abc
import os
import signal
import sys

_SPEC = os.environ.get("HGXKIT_FAULT_AT", "")
MARK = "HGXKIT-FAULT-PAUSED"


def _wrap(module: object, name: str, text: str, point: str) -> None:
    original = getattr(module, name)
    fired = []

    @functools.wraps(original)
    def paused(*args: object, **kwargs: object) -> object:
        if not fired and text in repr(args) + repr(kwargs):
            fired.append(True)
            sys.stdout.write(f"\n{MARK} {point} pid {os.getpid()}\n")
            sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGSTOP)
        return original(*args, **kwargs)

    setattr(module, name, paused)


class _Finder(importlib.abc.MetaPathFinder):
    """Wraps the target function right after its module is executed."""

    def __init__(self, module: str, name: str, text: str) -> None:
        self.module, self.name, self.text = module, name, text

    def find_spec(self, fullname, path, target=None):
        if fullname != self.module:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        loader, hook = spec.loader, self

        class _Loader(importlib.abc.Loader):
            def create_module(self, spec):
                return loader.create_module(spec)

            def exec_module(self, module) -> None:
                loader.exec_module(module)
                _wrap(module, hook.name, hook.text, f"{hook.module}:{hook.name}")

        spec.loader = _Loader()
        return spec


if _SPEC:
    import importlib.util

    _module, _name, *_rest = _SPEC.split(":", 2)
    sys.meta_path.insert(0, _Finder(_module, _name, _rest[0] if _rest else ""))
