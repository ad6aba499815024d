"""Under pyinfra, hgxkit keeps pyinfra's list of global arguments (hgxkit/__init__.py) instead of letting pyinfra
evaluate `AllArguments`' type hints again on every fact class and every operation call: the same list, a copy
per caller."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_the_kept_list_is_pyinfra_s_own_and_each_caller_gets_a_copy() -> None:
    probe = textwrap.dedent(
        """
        from typing import get_type_hints
        from unittest import mock

        import pyinfra.api.arguments as arguments
        import pyinfra.api.facts as facts
        import hgxkit

        expected = list(get_type_hints(arguments.AllArguments).items())
        assert facts.all_global_arguments is arguments.all_global_arguments
        first = arguments.all_global_arguments()
        assert first == expected and first is not arguments.all_global_arguments()
        first.clear()  # a caller changing its copy changes no one else's
        with mock.patch.object(arguments, "get_type_hints", side_effect=AssertionError("evaluated again")):
            assert arguments.all_global_arguments() == expected
        """
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]


def test_without_pyinfra_hgxkit_leaves_it_unloaded() -> None:
    probe = "import sys, hgxkit; assert 'pyinfra' not in sys.modules"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
