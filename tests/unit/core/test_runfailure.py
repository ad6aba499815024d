"""A failed deploy reads like an answer (hgxkit/runfailure.py): real pyinfra runs on @local with a failing callback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pyinfra.api.exceptions import DeployError

from hgxkit.runfailure import RunFailure, escape_control, failure_block

ROOT = Path(__file__).resolve().parents[3]
DEPLOY = """\
from pyinfra.operations import python, server

from hgxkit.runfailure import RunFailure, install

install()


def start_group():
    raise RunFailure("group 0 (dsv4-0) did not become healthy in 600 s",
                     ["docker: Error response from daemon: could not select device driver \\"nvidia\\"\\x1b[0m\\r"],
                     "install the NVIDIA container toolkit (deploys/bringup.py), then run again")


python.call(name="Start group 0", function=start_group)
server.shell(name="Never reached", commands=["echo never-reached"])
"""
BLOCK = (
    "@local: group 0 (dsv4-0) did not become healthy in 600 s\n"
    "  cause:\n"
    '    docker: Error response from daemon: could not select device driver "nvidia"\\x1b[0m\\x0d\n'
    "  remedy: install the NVIDIA container toolkit (deploys/bringup.py), then run again"
)


def _pyinfra(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess:
    deploy = tmp_path / "failing.py"
    deploy.write_text(DEPLOY)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYINFRA_PROGRESS": "off"}
    argv = [str(Path(sys.executable).parent / "pyinfra"), "-y", *flags, "@local", str(deploy)]
    return subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)


def test_a_failing_callback_ends_with_one_block_exit_1_and_no_traceback(tmp_path: Path) -> None:
    result = _pyinfra(tmp_path, "-v")
    out = result.stdout + result.stderr
    assert result.returncode == 1
    assert "Traceback" not in out
    assert "Unexpected error in Python callback" not in out
    assert "never-reached" not in out
    assert result.stderr.endswith(f"hgxkit: the run failed on 1 host(s):\n{BLOCK}\n")


def test_at_vv_pyinfra_shows_the_traceback(tmp_path: Path) -> None:
    result = _pyinfra(tmp_path, "-vv")
    assert result.returncode == 1
    assert "Traceback" in result.stdout + result.stderr
    assert "hgxkit: the run failed" not in result.stderr


def test_block_of_a_plain_deploy_error_keeps_its_lines_and_names_the_host_once() -> None:
    assert failure_block("node1", DeployError("node1: preflight failed:\n  - [gpu-count] 7 GPUs")) == (
        "node1: preflight failed:\n  - [gpu-count] 7 GPUs"
    )
    assert failure_block("node2", DeployError("no repository digest")) == "node2: no repository digest"


def test_escape_control_writes_terminal_codes_visibly() -> None:
    assert escape_control("a\x1b[31mb\rc\td\x07") == "a\\x1b[31mb\\x0dc\td\\x07"
    assert RunFailure("w", "one cause", "r").cause == ["one cause"]


def test_a_run_failures_own_message_is_escaped_too_for_pyinfras_traceback_at_vv() -> None:
    failure = RunFailure("group 0 did not start", ["\x1b]0;pwned\x07log\rline"], "fix it")
    assert str(failure) == "group 0 did not start: \\x1b]0;pwned\\x07log\\x0dline; fix it"
    assert escape_control("ok\tcsi\x9b2J bidi\u202e") == "ok\tcsi\\x9b2J bidi\\x202e"


def _node_text_echoes() -> list[str]:
    """Every `echo(...)` of a role or of hgxkit/serving that prints text read on the node (what passes through
    `redact`, or a progress line) without `escape_control` around it, as `path:line`."""
    import ast

    root = Path(__file__).resolve().parents[3]
    bare = []
    for path in sorted([*root.glob("roles/**/*.py"), *root.glob("hgxkit/serving/*.py")]):
        tree = ast.parse(path.read_text())
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            name = node.func.id if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) else ""
            if name not in ("redact", "progress_line"):
                continue
            up, escaped, echoed = parents.get(node), False, False
            while up is not None:
                if isinstance(up, ast.Call) and isinstance(up.func, ast.Name):
                    escaped |= up.func.id == "escape_control"
                    echoed |= up.func.id == "echo"
                up = parents.get(up)
            if echoed and not escaped:
                bare.append(f"{path.relative_to(root)}:{node.lineno}")
    return bare


def test_every_echo_of_text_read_on_the_node_goes_through_escape_control() -> None:
    assert _node_text_echoes() == []
