"""The e2e suite's own judges (tests/e2e/sim_steps.py, tests/faults/hook): the one node-command helper fails on
an SSH error and on an empty answer; the service probe's verdict fails on one dropped request and on samples
that do not cover the window; the fault hook stops a controller at its point and nowhere else."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

E2E = Path(__file__).resolve().parents[2] / "e2e"
HOOK = Path(__file__).resolve().parents[2] / "faults" / "hook"
_spec = importlib.util.spec_from_file_location("sim_steps_probe_under_test", E2E / "sim_steps.py")
assert _spec and _spec.loader
sim_steps = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sim_steps)
S = 1_000_000_000


def answered(monkeypatch: pytest.MonkeyPatch, returncode: int, stdout: str, stderr: str) -> list[list[str]]:
    calls: list[list[str]] = []

    def fake_run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        return subprocess.CompletedProcess(argv, returncode, stdout, stderr)

    monkeypatch.setattr(subprocess, "run", fake_run)
    monkeypatch.setattr(sim_steps, "ssh_to", lambda cluster, node, command: ["ssh", f"{node}.{cluster}", command])
    return calls


def test_node_sh_returns_stdout_and_wraps_the_command_to_report_its_status(monkeypatch) -> None:
    calls = answered(monkeypatch, 0, "hello\n", "__hgxkit_node_rc=0\n")
    assert sim_steps.node_sh("c", "echo hello", node="node2") == "hello\n"
    assert calls[0] == ["ssh", "node2.c", "( echo hello\n); echo __hgxkit_node_rc=$? >&2"]


def test_node_sh_fails_when_ssh_did_not_run_the_command(monkeypatch) -> None:
    answered(monkeypatch, 255, "", "ssh: connect to host 127.0.0.1 port 2201: Connection refused\n")
    with pytest.raises(sim_steps.NodeCommandError, match=r"did not complete over SSH \(exit 255\): ssh: connect"):
        sim_steps.node_sh("c", "docker ps")


def test_node_sh_fails_on_an_empty_answer_only_when_one_is_expected(monkeypatch) -> None:
    answered(monkeypatch, 0, "  \n", "__hgxkit_node_rc=0\n")
    assert sim_steps.node_sh("c", "touch /tmp/x") == "  \n"
    with pytest.raises(sim_steps.NodeCommandError, match=r"'docker ps' answered nothing \(exit 0\)"):
        sim_steps.node_sh("c", "docker ps", answer=True)


def test_node_sh_fails_on_a_nonzero_exit_only_with_check(monkeypatch) -> None:
    answered(monkeypatch, 3, "", "no such file\n__hgxkit_node_rc=3\n")
    assert sim_steps.node_sh("c", "cat /nope") == ""
    with pytest.raises(sim_steps.NodeCommandError, match=r"'cat /nope' exited 3: no such file"):
        sim_steps.node_sh("c", "cat /nope", check=True)


def steady(port: int, start: float, end: float, step: float = 0.5, code: str = "200") -> list:
    out, t = [], start
    while t < end:
        out += [
            sim_steps.Sample(int(t * S), int((t + 0.1) * S), port, "health", code),
            sim_steps.Sample(int(t * S), int((t + step) * S), port, "chat", code),
        ]
        t += step
    return out


def test_probe_lines_parse_and_torn_lines_are_skipped() -> None:
    text = "1000 2000 5001 health 200\n1000 2000 5001 chat 000\ngarbage\n1000 20"
    assert sim_steps.parse_samples(text) == [
        sim_steps.Sample(1000, 2000, 5001, "health", "200"),
        sim_steps.Sample(1000, 2000, 5001, "chat", "000"),
    ]


def test_a_steady_port_over_the_window_has_no_problem() -> None:
    assert sim_steps.service_problems(steady(5001, 0, 20), 5001, (2 * S, 18 * S)) == []


def test_one_dropped_request_is_a_problem() -> None:
    samples = steady(5001, 0, 20)
    samples[11] = sim_steps.Sample(samples[11].start, samples[11].end, 5001, "chat", "000")
    assert sim_steps.service_problems(samples, 5001, (2 * S, 18 * S)) == [
        "port 5001: 1 of 80 requests failed (chat 000 at 2.5)"
    ]


def test_failures_outside_the_window_are_not_this_windows_problem() -> None:
    samples = steady(5001, 0, 20)
    samples[1] = sim_steps.Sample(samples[1].start, samples[1].end, 5001, "chat", "000")  # 0.0-0.5 s
    samples[-1] = sim_steps.Sample(samples[-1].start, samples[-1].end, 5001, "chat", "503")  # 19.5-20 s
    assert sim_steps.service_problems(samples, 5001, (2 * S, 18 * S)) == []
    assert sim_steps.service_problems(samples, 5001, (0, int(19.6 * S))) == [
        "port 5001: 2 of 80 requests failed (chat 000 at 0.0, chat 503 at 19.5)"
    ]


def test_samples_that_miss_part_of_the_window_are_problems() -> None:
    late = steady(5001, 5, 20)
    assert sim_steps.service_problems(late, 5001, (2 * S, 18 * S)) == [
        "port 5001: health samples start 3.0 s into the window",
        "port 5001: chat samples start 3.0 s into the window",
    ]
    died = steady(5001, 0, 3)  # a poller that died early proves nothing
    assert sim_steps.service_problems(died, 5001, (2 * S, 18 * S)) == [
        "port 5001: health samples end 15.4 s before the window closes",
        "port 5001: chat samples end 15.0 s before the window closes",
    ]
    stalled = steady(5001, 0, 6) + steady(5001, 13, 20)
    assert sim_steps.service_problems(stalled, 5001, (2 * S, 18 * S)) == [
        "port 5001: no health sample for 7.4 s in the window",
        "port 5001: no chat sample for 7.0 s in the window",
    ]
    assert sim_steps.service_problems(steady(5000, 0, 20), 5001, (2 * S, 18 * S)) == [
        "port 5001: no health samples at all",
        "port 5001: no chat samples at all",
    ]


def test_the_fault_hook_stops_the_process_at_its_point_only() -> None:
    code = (
        "from hgxkit.serving import replace as r\n"
        "print(r.unit_name('a'), flush=True)\nprint(r.unit_name('grp-0'), flush=True)\nprint('after', flush=True)\n"
    )
    root = Path(__file__).resolve().parents[3]
    env = {
        **os.environ,
        "PYTHONPATH": f"{HOOK}{os.pathsep}{root}",
        "HGXKIT_FAULT_AT": "hgxkit.serving.replace:unit_name:grp",
    }
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "T":
            assert time.monotonic() < deadline and proc.poll() is None, "never stopped"
            time.sleep(0.05)
        os.kill(proc.pid, 18)  # SIGCONT
        stdout, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert stdout.splitlines() == [
        "hgxkit-serve-a",
        "",
        f"HGXKIT-FAULT-PAUSED hgxkit.serving.replace:unit_name pid {proc.pid}",
        "hgxkit-serve-grp-0",
        "after",
    ]
