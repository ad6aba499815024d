"""Bring-up's skip decision on a pyinfra host (deploys/bringup.py): read the node once, compare with the record
its last pass left, and write that record at the end of a bring-up that passed (see hgxkit.node.converged).

Example (deploys/bringup.py):
    skip = bringup_skip(host)
    if skip.reason:
        echo(f"[{host.name}] {skip.reason}")
    else:
        ...  # the roles
        if skip.record_needed:
            python.call(name="Record the verified bring-up", function=record_bringup, judged=skip.judged)
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from pathlib import Path

from pyinfra.api.exceptions import DeployError

from hgxkit.hostcmd import HostRunner
from hgxkit.hostfiles import write_text
from hgxkit.knobs import knob
from hgxkit.node.converged import RECORD_NAME, judged_by, parse_state, skip_reason, state_command, verified_record
from hgxkit.node.facts_system import BringupState

ROOT = Path(__file__).resolve().parents[2]
BRINGUP_ROLES = ("preflight", "nvidia_driver", "docker", "container_toolkit", "gpu_health")
# The code that judges the node: a change here (an upgraded hgxkit) re-runs every check.
JUDGING_SOURCES = (*(f"roles/{role}" for role in BRINGUP_ROLES), "hgxkit/node", "hgxkit/nvidia", "deploys/bringup.py")


@dataclass(frozen=True)
class BringupSkip:
    """Whether to plan bring-up: a reason to skip it (printed), and whether a passed run should (re)write the
    record (no when it already says this state: a `recheck=true` run of an unchanged node changes nothing)."""

    reason: str | None
    record_needed: bool
    judged: str


def record_path(host) -> str:
    return f"{knob(host, 'state_dir')}/{RECORD_NAME}"


def bringup_knobs(host) -> dict[str, object]:
    """The values of every knob a bring-up role reads (their defaults files name them)."""
    names: set[str] = set()
    for role in BRINGUP_ROLES:
        names |= set(importlib.import_module(f"roles.{role}.defaults").DEFAULTS)
    return {name: host.data.get(name) for name in sorted(names)}


def judging_sources() -> list[Path]:
    files: list[Path] = []
    for item in JUDGING_SOURCES:
        path = ROOT / item
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return files


def bringup_skip(host) -> BringupSkip:
    """Read the node's bring-up state (one fact) and decide."""
    judged = judged_by(bringup_knobs(host), judging_sources())
    state, record = host.get_fact(BringupState, state_file=record_path(host))
    reason = skip_reason(state, judged, record, recheck=bool(knob(host, "recheck")))
    unchanged = bool(record) and record.get("state") == state.digest() and record.get("judged_by") == judged
    return BringupSkip(reason, record_needed=not unchanged, judged=judged)


def record_bringup(host, judged: str) -> None:
    """Execute time, after every bring-up role and gate passed: record the state they left."""
    run = HostRunner(host)
    state, _ = parse_state(run(state_command(record_path(host))))
    text = json.dumps(verified_record(state, judged), indent=1) + "\n"
    if not state.lines or not write_text(run, record_path(host), text):
        raise DeployError(f"{host.name}: could not record the verified bring-up at {record_path(host)}")
