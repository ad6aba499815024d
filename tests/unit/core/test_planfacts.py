"""Plan-time fact reads: once per host and arguments while pyinfra plans (several in one command), fresh at
execute time."""

from __future__ import annotations

import subprocess
import threading
from types import SimpleNamespace

from pyinfra.api import FactBase, StringCommand
from pyinfra.api.state import StateStage

from hgxkit.hostcmd import script
from hgxkit.node.facts_files import JsonFile
from hgxkit.node.facts_gpu import NvidiaSmi
from hgxkit.planfacts import FactBatch, plan_fact, prefetch, split_batch


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


class Echo(FactBase[list[str]]):
    """A fact whose command prints its argument (or fails when told to)."""

    def command(self, text: str, fail: bool = False) -> StringCommand:
        return script("echo {text}; [ {fail} = no ]", text=text, fail="yes" if fail else "no")

    @staticmethod
    def default() -> list[str]:
        return ["default"]

    def process(self, output: list[str]) -> list[str]:
        return [f"processed {line}" for line in output]


class NeedsTool(Echo):
    def requires_command(self, **kwargs: object) -> str:
        return "some-tool"


class ShellHost(CountingHost):
    """Runs FactBatch's command in a local shell, as the node would; other facts are counted."""

    def get_fact(self, fact: type, **kwargs: object) -> object:
        if fact is not FactBatch:
            return super().get_fact(fact, **kwargs)
        self.calls.append((fact, kwargs))
        raw = fact().command(**kwargs).get_raw_value()
        out = subprocess.run(["sh", "-c", raw], capture_output=True, text=True, check=True).stdout
        return fact().process(out.splitlines())


def test_prefetch_reads_every_fact_in_one_command_and_plan_fact_then_asks_nothing() -> None:
    h = ShellHost(StateStage.Prepare)
    kept = prefetch(
        h, [(Echo, {"text": "a b"}), (Echo, {"text": "c"}), (Echo, {"text": "c"}), (NeedsTool, {"text": "x"})]
    )
    assert kept == 3 and [c[0] for c in h.calls] == [FactBatch]  # one round trip; NeedsTool is not batched
    assert len(h.calls[0][1]["commands"]) == 2  # the same command is run once for both reads
    assert plan_fact(h, Echo, text="a b") == ["processed a b"] and plan_fact(h, Echo, text="c") == ["processed c"]
    assert len(h.calls) == 1
    assert prefetch(h, [(Echo, {"text": "c"})]) == 0 and len(h.calls) == 1  # all read already: no command


def test_a_failed_part_is_read_again_on_its_own_and_execute_time_prefetches_nothing() -> None:
    h = ShellHost(StateStage.Prepare)
    assert prefetch(h, [(Echo, {"text": "ok"}), (Echo, {"text": "bad", "fail": True})]) == 1
    plan_fact(h, Echo, text="bad", fail=True)
    assert [c[0] for c in h.calls] == [FactBatch, Echo]  # pyinfra's own read, with its error handling
    later = ShellHost(StateStage.Execute)
    assert prefetch(later, [(Echo, {"text": "ok"})]) == 0 and later.calls == []


def test_split_batch_keeps_empty_parts_and_marks_a_cut_off_one() -> None:
    lines = [
        "##hgxkit-batch-0:",
        "##hgxkit-batch-0:0",
        "##hgxkit-batch-1:",
        "x",
        "##hgxkit-batch-1:3",
        "##hgxkit-batch-2:",
        "half",
    ]
    assert split_batch(lines) == [(0, []), (3, ["x"]), (-1, ["half"])]


def test_the_run_locks_holder_carries_the_batch_and_its_answers_are_kept(tmp_path) -> None:
    """`prefetch_command` + hgxkit.hostlock: the holder takes the lock, runs the batch (no stdin, no lock fd),
    ends it with the marker and keeps the lock; the kept answers are what `prefetch` would have kept, and a
    following `prefetch` asks nothing."""
    from hgxkit.hostcmd import text
    from hgxkit.hostlock import BUSY, PREFETCH_END, holder_command
    from hgxkit.planfacts import prefetch_command

    h = ShellHost(StateStage.Prepare)
    reads = [
        (Echo, {"text": "a b"}),
        (Echo, {"text": "bad", "fail": True}),
        (Echo, {"text": "stdin"}),
        (Echo, {"text": "fd9"}),
    ]
    command, keep = prefetch_command(h, reads)
    probe = script("read -r line && echo got-stdin; [ -e /dev/fd/9 ] && echo has-fd9; {command}", command=command)
    lock = tmp_path / "run.lock"
    holder = subprocess.Popen(
        ["sh", "-c", text(holder_command(lock=str(lock), then=probe))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdin is not None and holder.stdout is not None
    watchdog = threading.Timer(60, holder.kill)  # a holder that never ends its reads fails the test, not hangs it
    watchdog.start()
    holder.stdin.write("controller data\n")
    holder.stdin.flush()
    assert holder.stdout.readline().strip() == "hgxkit-locked"
    lines = []
    for line in iter(holder.stdout.readline, ""):
        if line.rstrip("\n") == PREFETCH_END:
            break
        lines.append(line.rstrip("\n"))
    assert "got-stdin" not in lines and "has-fd9" not in lines  # the batch reads no stdin, holds no lock fd
    busy = subprocess.run(
        ["sh", "-c", text(holder_command(lock=str(lock)))],
        input="",
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert busy.returncode == BUSY  # still held after the batch
    assert keep(lines) == 3  # the failed part is not kept
    assert prefetch(h, reads) == 0 and [c[0] for c in h.calls] == [FactBatch]  # the failed one, read again
    assert len(h.calls[0][1]["commands"]) == 1
    assert plan_fact(h, Echo, text="a b") == ["processed a b"] and plan_fact(h, Echo, text="fd9") == ["processed fd9"]
    holder.communicate("", timeout=30)
    watchdog.cancel()
    assert holder.returncode == 0


def test_hosts_planned_at_once_through_pyinfras_host_proxy_each_keep_their_own_answers() -> None:
    """pyinfra plans every host at once, each in a greenlet, and roles hand `plan_fact` its shared `host` proxy:
    a node must never get another node's answer (GPUs, containers, bring-up state)."""
    import gevent
    from pyinfra import host
    from pyinfra.context import ctx_host

    class Yielding(CountingHost):
        def get_fact(self, fact: type, **kwargs: object) -> object:
            gevent.sleep(0.01)  # an SSH round trip: the other host's plan runs meanwhile
            return super().get_fact(fact, **kwargs)

    nodes = [Yielding(StateStage.Prepare), Yielding(StateStage.Prepare)]

    def plan(node: Yielding) -> tuple[object, object]:
        with ctx_host.use(node):
            first = plan_fact(host, NvidiaSmi)
            gevent.sleep(0.02)
            return first, plan_fact(host, NvidiaSmi)

    planned = [gevent.spawn(plan, node) for node in nodes]
    gevent.joinall(planned, raise_error=True)
    (a1, a2), (b1, b2) = (g.value for g in planned)
    assert a1 is a2 and b1 is b2 and a1 is not b1
    assert [len(node.calls) for node in nodes] == [1, 1]
