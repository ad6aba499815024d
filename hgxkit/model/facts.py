"""The model role's check: is the recipe's model a verified copy on the node? (metadata only, ≈1 s)

Example (in a deploy; the token goes on stdin, never on the command line):
    status = host.get_fact(ModelSyncStatus, python="/opt/hgxkit/hf-venv/bin/python",
                           script="/usr/local/lib/hgxkit/model/hgxkit_fetch.py", spec=spec.to_json(),
                           token=True, _stdin=SecretLines([token]))
    status["state"]   # complete | incomplete | running | error | absent
"""

from __future__ import annotations

import json
from pathlib import Path

from pyinfra.api import FactBase, StringCommand

from hgxkit.hostcmd import argv, script
from hgxkit.model import core, quickcheck

_FAILED = '{"state": "incomplete", "reason": "the status check failed"}'
# The program loaded as a module, not run as a script: Python keeps the compiled bytecode of an imported module
# (__pycache__ beside it) but compiles a script's 1,500 lines on every run, a third of this check's CPU time.
_AS_MODULE = (
    "import importlib.util as u, sys; s = u.spec_from_file_location('hgxkit_fetch', sys.argv[1]); "
    "m = u.module_from_spec(s); sys.modules['hgxkit_fetch'] = m; s.loader.exec_module(m); "
    "sys.exit(m.main(sys.argv[2:]))"
)
_ABSENT = '{"state": "absent"}'
# Sent inline, so a host never runs an older copy than the role's (nothing to upload, nothing to get stale).
_QUICK = Path(quickcheck.__file__).read_text()


class ModelSyncStatus(FactBase[dict]):
    """`fetch.py status`: one JSON object with `state` complete | incomplete | running | error | absent (the
    role's program is not installed yet) and a `reason`."""

    def command(self, python: str, script_path: str, spec: str, token: bool = False) -> StringCommand:
        status = argv(python, "-c", _AS_MODULE, script_path, "status", "--spec", spec,
                      *(["--token-stdin"] if token else []))  # fmt: skip
        try:
            pinned = json.loads(spec)
            pinned = pinned if core.is_commit(str(pinned.get("revision", ""))) else None
        except (ValueError, AttributeError):
            pinned = None
        if pinned is not None:
            # A pinned commit needs no Hub: the stdlib-only fast path answers for a verified, unchanged copy
            # (not while a sync unit runs); anything else falls through to the full check, as before.
            status = script(
                "{{ ! systemctl is-active --quiet {unit} 2>/dev/null && {quick} 2>/dev/null; }} || {{ {status}; }}",
                unit=core.unit_name(str(pinned.get("local_dir", ""))),
                quick=argv(python, "-I", "-S", "-c", _QUICK, spec, script_path),
                status=status,
            )
        return script(
            "if [ -x {python} ] && [ -f {program} ]; then {status} 2>/dev/null || echo {failed}; "
            "else echo {absent}; fi",
            python=python,
            program=script_path,
            status=status,
            failed=_FAILED,
            absent=_ABSENT,
        )

    def process(self, output: list[str]) -> dict:
        for line in reversed(output):
            if line.strip().startswith("{"):
                try:
                    return dict(json.loads(line))
                except ValueError:
                    break
        return {"state": "incomplete", "reason": "unreadable status: " + " ".join(output)[:120]}
