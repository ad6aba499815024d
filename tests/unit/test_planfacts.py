"""Plan-time fact reads: once per host and arguments while pyinfra plans, fresh at execute time."""

from __future__ import annotations

from types import SimpleNamespace

from pyinfra.api.state import StateStage

from hgxkit.node.facts_files import JsonFile
from hgxkit.node.facts_gpu import NvidiaSmi
from hgxkit.planfacts import plan_fact


class CountingHost:
    """A host whose get_fact counts its calls and answers a new object each time (as a new command would)."""

    def __init__(self, stage: StateStage) -> None:
        self.state = SimpleNamespace(current_stage=stage)
        self.calls: list[tuple[type, dict]] = []

    def get_fact(self, fact: type, **kwargs: object) -> object:
        self.calls.append((fact, kwargs))
        return object()


def test_planning_reads_each_fact_and_arguments_once_per_host() -> None:
    h, other = CountingHost(StateStage.Prepare), CountingHost(StateStage.Prepare)
    first = plan_fact(h, NvidiaSmi)
    assert plan_fact(h, NvidiaSmi) is first and len(h.calls) == 1
    a, b = plan_fact(h, JsonFile, path="/a"), plan_fact(h, JsonFile, path="/b")
    assert a is not b and plan_fact(h, JsonFile, path="/a") is a and len(h.calls) == 3
    plan_fact(other, NvidiaSmi)
    assert len(other.calls) == 1  # another host reads its own


def test_execute_time_reads_are_fresh_and_unhashable_arguments_are_not_kept() -> None:
    h = CountingHost(StateStage.Execute)
    assert plan_fact(h, NvidiaSmi) is not plan_fact(h, NvidiaSmi) and len(h.calls) == 2
    planning = CountingHost(StateStage.Prepare)
    plan_fact(planning, JsonFile, path=["/a"])
    plan_fact(planning, JsonFile, path=["/a"])
    assert len(planning.calls) == 2
