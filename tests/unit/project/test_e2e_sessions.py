"""The end-to-end suite's session bookkeeping (tests/e2e/sim_steps.py): a killed session's clusters are found by
the next session; a live session's, and clusters no session listed (the demo's), never are."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

E2E = Path(__file__).resolve().parents[2] / "e2e"
_spec = importlib.util.spec_from_file_location("sim_steps_under_test", E2E / "sim_steps.py")
assert _spec and _spec.loader
sim_steps = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sim_steps)

HOLDER = """
import importlib.util, sys, time
spec = importlib.util.spec_from_file_location("s", sys.argv[1]); s = importlib.util.module_from_spec(spec)
spec.loader.exec_module(s)
session = s.TestSession(__import__("pathlib").Path(sys.argv[2]), sys.argv[3])
session.acquire()
for cluster in sys.argv[4:]:
    session.claim(cluster)
print("ready", flush=True)
time.sleep(120)
"""


def start_session(directory: Path, suffix: str, *clusters: str) -> subprocess.Popen[str]:
    argv = [sys.executable, "-c", HOLDER, str(E2E / "sim_steps.py"), str(directory), suffix, *clusters]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    assert proc.stdout and proc.stdout.readline().strip() == "ready"
    return proc


def test_a_killed_sessions_clusters_are_found_a_live_ones_are_not(tmp_path: Path) -> None:
    killed = start_session(tmp_path, "tdead01", "serve-tdead01", "bringup-tdead01")
    live = start_session(tmp_path, "tlive01", "serve-tlive01")
    try:
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait()
        me = sim_steps.TestSession(tmp_path, "tmine01")
        assert me.acquire() == []
        found = [(path.name, clusters) for path, clusters in me.dead_sessions()]
        assert found == [("tdead01.lock", ["serve-tdead01", "bringup-tdead01"])]
        assert not (tmp_path / "tdead01.lock").exists()  # cleaned up once handled
        assert (tmp_path / "tlive01.lock").exists()
        assert list(me.dead_sessions()) == []  # the live one is never reported
        me.claim("serve-tmine01")
        me.release()
        assert not (tmp_path / "tmine01.lock").exists()
    finally:
        live.kill()
        live.wait()


def test_a_suffix_in_use_by_a_live_session_is_refused(tmp_path: Path) -> None:
    live = start_session(tmp_path, "ci", "serve-ci")
    try:
        with pytest.raises(RuntimeError, match="HGXKIT_SIM_TEST_SUFFIX=ci is in use by another live test session"):
            sim_steps.TestSession(tmp_path, "ci").acquire()
    finally:
        live.kill()
        live.wait()
    # Once that session is dead, the next one with the same suffix inherits its list to clean.
    assert sim_steps.TestSession(tmp_path, "ci").acquire() == ["serve-ci"]


def test_cluster_names_carry_the_session_suffix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HGXKIT_SIM_TEST_SUFFIX", raising=False)
    first = sim_steps.cluster_name("serve")
    assert first.startswith("serve-t") and len(first) == len("serve-t") + 6
    assert sim_steps.cluster_name("bringup") == "bringup-" + first.split("-", 1)[1]  # one suffix per session
    assert os.environ["HGXKIT_SIM_TEST_SUFFIX"] == first.split("-", 1)[1]  # subprocesses inherit it
    monkeypatch.setenv("HGXKIT_SIM_TEST_SUFFIX", "ci")
    assert sim_steps.cluster_name("servestack") == "servestack-ci"
