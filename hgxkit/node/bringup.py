"""Bring-up's skip decision on a pyinfra host (deploys/bringup.py): read the node once, compare with the record
its last pass left, and write that record at the end of a bring-up that passed (see hgxkit.node.converged).

The deploy names what judges the node (the knobs its roles read, the source of the code that checks); this
library takes them as given and never looks up the roles itself.

Example (deploys/bringup.py):
    skip = bringup_skip(host, knob_names=BRINGUP_KNOBS, sources=JUDGING_SOURCES)
    if skip.reason:
        echo(f"[{host.name}] {skip.reason}")
    else:
        ...  # the roles
        if skip.record_needed:
            python.call(name="Record the verified bring-up", function=record_bringup, judged=skip.judged)
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pyinfra.api.exceptions import DeployError

from hgxkit.hostcmd import HostRunner
from hgxkit.hostfiles import write_text
from hgxkit.knobs import knob
from hgxkit.node.converged import (
    RECORD_NAME,
    judged_by,
    parse_state,
    rerun_reason,
    skip_reason,
    source_files,
    state_command,
    unit_blocks,
    units_command,
    verified_record,
    with_gpus,
    with_units,
)
from hgxkit.node.facts_gpu import NvidiaSmi
from hgxkit.node.facts_system import BringupState, NodeUnits
from hgxkit.planfacts import plan_fact


@dataclass(frozen=True)
class BringupSkip:
    """Whether to plan bring-up: a reason to skip it (printed), and whether a passed run should (re)write the
    record (no when it already says this state: a `recheck=true` run of an unchanged node changes nothing)."""

    reason: str | None
    record_needed: bool
    judged: str
    rerun: str | None = None  # what changed since the last passed bring-up, when it runs again


def record_path(host) -> str:
    return f"{knob(host, 'state_dir')}/{RECORD_NAME}"


def knob_values(host, names: Iterable[str]) -> dict[str, object]:
    """The inventory's (or `--data`'s) value of each knob in `names`, None where unset."""
    return {name: host.data.get(name) for name in sorted(set(names))}


_JUDGED: dict[tuple[str, tuple[Path, ...]], str] = {}


def _judged(knobs: dict[str, object], sources: tuple[Path, ...]) -> str:
    """`judged_by` once per run for each set of knob values: the sources are the controller's, the same for every
    host, and hashing them is most of the controller's work for an unchanged node."""
    key = (json.dumps(knobs, sort_keys=True, default=str), sources)
    if key not in _JUDGED:
        _JUDGED[key] = judged_by(knobs, source_files(sources))
    return _JUDGED[key]


def bringup_skip(host, knob_names: Iterable[str], sources: Iterable[Path]) -> BringupSkip:
    """Read the node's bring-up state (one fact) and decide.

    `knob_names`: every knob the bring-up roles read; `sources`: the files and folders (their `*.py`) of the
    code that judges the node. A change in either re-runs every check.
    """
    judged = _judged(knob_values(host, knob_names), tuple(sources))
    state, record = plan_fact(host, BringupState, state_file=record_path(host))
    state = with_gpus(with_units(state, plan_fact(host, NodeUnits)), plan_fact(host, NvidiaSmi))
    reason = skip_reason(state, judged, record, recheck=bool(knob(host, "recheck")))
    unchanged = bool(record) and record.get("state") == state.digest() and record.get("judged_by") == judged
    rerun = None if reason else rerun_reason(state, judged, record)
    return BringupSkip(reason, record_needed=not unchanged, judged=judged, rerun=rerun)


def plan_reads(host) -> list[tuple[type, dict[str, object]]]:
    """The facts `bringup_skip` reads, for `hgxkit.planfacts.prefetch` to read in one round trip with the other
    roles' (the serving role reads the same nvidia-smi and systemctl call)."""
    return [(BringupState, {"state_file": record_path(host)}), (NodeUnits, {}), (NvidiaSmi, {})]


def record_bringup(host, judged: str) -> None:
    """Execute time, after every bring-up role and gate passed: record the state they left."""
    run = HostRunner(host)
    state, _ = parse_state(run(state_command(record_path(host))))
    state = with_gpus(with_units(state, unit_blocks(run(units_command()))), host.get_fact(NvidiaSmi))  # fresh
    text = json.dumps(verified_record(state, judged), indent=1) + "\n"
    if not state.lines or not write_text(run, record_path(host), text):
        raise DeployError(f"{host.name}: could not record the verified bring-up at {record_path(host)}")
