"""`make demo`'s own logic (hgxkit/sim/demo.py) without a node: phase timing from pyinfra's streamed output, the
run it archived, and the table of the measured cells against the post's numbers."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest
from test_results import make_run

from hgxkit.errors import HgxkitError
from hgxkit.sim import demo

ROOT = Path(__file__).resolve().parents[3]
# What pyinfra 3 printed for deploys/dspark.py on a simulated node (abridged; with a terminal's colours). The
# "model" in the model role's operation name and the included files before each role name must not mislead.
TRANSCRIPT = [
    "--> Loading config...",
    "--> Connecting to hosts...",
    "    [node1] Connected",
    "--> Preparing operation files...",
    "--> Beginning operation run...",
    "--> Starting operation: \x1b[1mdeploys/reproduce.py | deploys/bringup.py | hgxkit NVIDIA driver + fabric "
    "manager | Keep NVIDIA and kernel packages out of unattended-upgrades\x1b[0m ",
    "    [node1] Success",
    "--> Starting operation: deploys/reproduce.py | deploys/bringup.py | hgxkit NVIDIA driver + fabric manager | "
    "Reboot: the driver packages change (to 580.105.08) ",
    "    Starting nested operation: Reboot ",
    "--> Starting serial operation: deploys/reproduce.py | deploys/bringup.py | hgxkit GPU health | Gate: GPU health ",
    "--> Starting operation: deploys/reproduce.py | hgxkit model | Verified /data/models/deepseek-v4-flash-dspark ",
    "--> Starting operation: deploys/reproduce.py | hgxkit serving | Roll out deepseek-v4-flash-dspark-marlin group "
    "by group ",
    "--> Starting operation: deploys/reproduce.py | hgxkit verify | Verify deepseek-v4-flash-dspark-marlin (smoke "
    "benchmark) and archive the run ",
    "[node1] run archived in /tmp/r/node1/20260101T000000Z_x (hgxkit results show node1/20260101T000000Z_x)",
    "--> Results:",
    "--> Disconnecting from hosts...",
]


def test_phase_clock_times_each_phase_from_the_stream() -> None:
    clock = demo.PhaseClock(100.0)
    times = [100, 101, 103, 108, 109, 110, 140, 141, 150, 160, 171, 180, 195, 195, 196, 197]
    started = [p for t, line in zip(times, TRANSCRIPT, strict=True) if (p := clock.feed(float(t), line))]
    clock.finish(199.0)
    assert started == ["bring-up", "model", "serve", "verify"]
    assert clock.spent == {"pyinfra plan": 10.0, "bring-up": 61.0, "model": 9.0, "serve": 15.0, "verify": 1.0}


def test_deploy_streams_the_output_into_the_log_and_times_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = "import sys, time\nfor line in sys.argv[1:]:\n    print(line)\n    time.sleep(0.05)\n"
    monkeypatch.setattr(demo, "_pyinfra_argv", lambda cluster, results: [sys.executable, "-c", script, *TRANSCRIPT])
    ticks = iter(range(0, 1000, 7))  # a clock read once at the start, once per line, once at the end: +7 s each

    class Clock:
        @staticmethod
        def monotonic() -> float:
            return float(next(ticks))

    monkeypatch.setattr(demo, "time", Clock)
    said: list[str] = []
    clock, output = demo.deploy("demo-x", tmp_path, tmp_path / "deploy.log", said.append, verbose=False)
    # Line i (0-based) arrives at 7 * (i + 1): bring-up starts with line 5 (42 s), model 10 (77), serve 11 (84),
    # verify 12 (91), and "--> Results:" (line 14, 105 s) ends it.
    assert clock.spent == {"pyinfra plan": 42.0, "bring-up": 35.0, "model": 7.0, "serve": 7.0, "verify": 14.0}
    assert said[1:] == ["demo: [0:42] bring-up", "demo: [1:17] model", "demo: [1:24] serve", "demo: [1:31] verify"]
    assert (tmp_path / "deploy.log").read_text().splitlines() == TRANSCRIPT
    assert "\x1b" not in output


def test_a_failed_deploy_names_its_last_lines_and_the_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = "print('--> Starting operation: hgxkit preflight | x'); print('    [node1] Error: no GPUs'); exit(1)"
    monkeypatch.setattr(demo, "_pyinfra_argv", lambda cluster, results: [sys.executable, "-c", script])
    with pytest.raises(HgxkitError, match=r"(?s)pyinfra failed \(exit 1\).*\[node1\] Error: no GPUs.*deploy.log"):
        demo.deploy("demo-x", tmp_path, tmp_path / "deploy.log", lambda _: None, verbose=False)


def test_the_answer_shows_the_measured_cells_against_the_post(tmp_path: Path) -> None:
    make_run(tmp_path, "node1", "20261130T120000Z", "deepseek-v4-flash-dspark-marlin")
    output = "[node1] run archived in {p} (hgxkit results show node1/20261130T120000Z_deepseek-v4-flash-dspark-marlin)"
    run = demo.find_run(
        output.format(p=tmp_path / "node1" / "20261130T120000Z_deepseek-v4-flash-dspark-marlin"), tmp_path, since=0
    )
    assert run.run_id == "node1/20261130T120000Z_deepseek-v4-flash-dspark-marlin"
    table, reference = demo.reference_table(run)
    assert reference is not None
    assert "| TTFT mean | 5K | 5 | 330.12 |" in table  # the post's marlin number at 5K x 5, next to the run's
    assert "not measured |" not in table  # only the cells the smoke run measured
    assert "not measured" in table.split("|")[0]  # ... and the count of the others, in the sentence above
    assert "SIMULATED" in table


def test_find_run_falls_back_to_the_newest_fresh_run(tmp_path: Path) -> None:
    make_run(tmp_path, "node1", "20261130T120000Z", "deepseek-v4-flash-dspark-marlin")
    assert demo.find_run("no archive line", tmp_path, since=0).summary.recipe == "deepseek-v4-flash-dspark-marlin"
    with pytest.raises(HgxkitError, match="archived no run"):
        demo.find_run("no archive line", tmp_path, since=4e9)


def test_the_closing_lines_give_every_phase_the_run_the_report_and_the_way_out(tmp_path: Path) -> None:
    path = make_run(tmp_path, "node1", "20261130T120000Z", "deepseek-v4-flash-dspark-marlin")
    run = demo.find_run("", tmp_path, since=0)
    spent = {
        "benchmark client": 0.0,
        "image build": 1.2,
        "node start": 0.4,
        "pyinfra plan": 14.0,
        "bring-up": 2.0,
        "verify": 108.3,
    }  # a warm rerun: model and serve had nothing to do
    lines = demo.closing_lines(spent, 127.0, run, path / "report.html", "demo")
    assert lines[0].startswith("SIMULATED: no real GPU was used")
    assert lines[1] == (
        "phases:  benchmark client 0 s and image build 1 s (side by side), node start 0 s, pyinfra plan 14 s, "
        "bring-up 2 s, "
        "model 0 s, serve 0 s, verify 108 s; total 127 s"
    )
    assert lines[2].startswith("run:     node1/20261130T120000Z_deepseek-v4-flash-dspark-marlin  (archived in ")
    assert lines[3] == f"report:  {path / 'report.html'}"
    assert lines[4].endswith("hgxkit sim down --cluster demo")


def test_the_client_store_and_the_image_build_run_side_by_side() -> None:
    # Each step waits for the other to have started: run one after the other, the first would wait forever.
    started = {name: threading.Event() for name in ("benchmark client", "image build")}

    def step(name: str, other: str) -> None:
        started[name].set()
        assert started[other].wait(timeout=30), f"{other} never started while {name} ran"

    said: list[str] = []
    spent = demo.side_by_side(
        {
            "benchmark client": lambda: step("benchmark client", "image build"),
            "image build": lambda: step("image build", "benchmark client"),
        },
        said.append,
        begun=0.0,
    )
    assert list(spent) == ["benchmark client", "image build"] and all(s >= 0 for s in spent.values())
    assert "benchmark client and image build, side by side" in said[0]


def test_a_failed_step_is_raised_after_the_other_has_ended() -> None:
    ended = threading.Event()

    def build() -> None:
        raise HgxkitError("debootstrap failed")

    with pytest.raises(HgxkitError, match="debootstrap failed"):
        demo.side_by_side({"benchmark client": ended.set, "image build": build}, lambda _: None, begun=0.0)
    assert ended.is_set()
