"""Plan-time fact reads, once per host and arguments, several in one SSH round trip.

pyinfra 3 runs a fact's command every time it is asked for (it keeps no cache), and while it plans a deploy the
roles ask for some facts several times: nvidia-smi (which takes about half a second on a real 8-GPU node),
the serving containers, the image record. While pyinfra plans, nothing on the host changes, so one read per host
and arguments is the same answer; at execute time (inside `python.call` functions) an operation may have
changed the host, so facts are read fresh there. `prefetch` reads a list of such facts in one SSH command
(`FactBatch`) and keeps their answers for `plan_fact`: a no-op re-run asks the node once, not once per fact.
`prefetch_command` gives the same batch to `hgxkit.hostlock`, which runs it on the run lock's own channel as soon as
it holds the lock: a no-op's reads then cost no SSH round trip of their own.

Example:
    >>> from hgxkit.node.facts_gpu import NvidiaSmi
    >>> smi = plan_fact(host, NvidiaSmi)  # doctest: +SKIP
    >>> plan_fact(host, NvidiaSmi) is smi  # doctest: +SKIP   (planning: the first read, no second command)
    True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from pyinfra.api import Host, StringCommand
from pyinfra.api.facts import FactBase
from pyinfra.api.state import StateStage

from hgxkit.hostcmd import script

T = TypeVar("T")
_MEMO = "_hgxkit_plan_facts"


def _memo(h: Host) -> dict:
    """The host's kept answers. Kept as an attribute of the host itself: pyinfra's `host` is a proxy shared by every
    host's plan (each in its own greenlet, at once), so the proxy's own `__dict__` would hand one node's answers
    to another; `getattr`/`setattr` go through the proxy to the host it stands for."""
    memo = getattr(h, _MEMO, None)
    if memo is None:
        memo = {}
        setattr(h, _MEMO, memo)
    return memo


def plan_fact(h: Host, fact: type[FactBase[T]], **kwargs: Any) -> T:
    """`h.get_fact(fact, **kwargs)`, read once per host and arguments while pyinfra plans; fresh at execute time."""
    state = getattr(h, "state", None)
    if state is None or getattr(state, "current_stage", None) != StateStage.Prepare:
        return h.get_fact(fact, **kwargs)
    key = (fact, tuple(sorted(kwargs.items())))
    try:
        hash(key)
    except TypeError:  # arguments that cannot be a key (none of the cached facts take such): no memo
        return h.get_fact(fact, **kwargs)
    memo = _memo(h)
    if key not in memo:
        memo[key] = h.get_fact(fact, **kwargs)
    return memo[key]


_BATCH_MARK = "##hgxkit-batch-"


class FactBatch(FactBase[list[tuple[int, list[str]]]]):
    """Several facts' commands run in one SSH round trip: each one's stdout and exit status, in order.

    The command always succeeds (`; true`): a part that failed is reported by its status, never by failing
    the whole read. Each part runs in its own subshell with stderr dropped, as a fact's stderr is only shown
    when it fails, and a failed part is read again on its own (`prefetch`), with pyinfra's usual handling.
    """

    def command(self, commands: tuple[StringCommand, ...]) -> StringCommand:
        parts = [
            script("echo {mark}; ( {command} ) 2>/dev/null; echo {mark}$?", mark=f"{_BATCH_MARK}{i}:", command=cmd)
            for i, cmd in enumerate(commands)
        ]
        return StringCommand(*parts, "true", _separator="; ")

    @staticmethod
    def default() -> list[tuple[int, list[str]]]:
        return []

    def process(self, output: list[str]) -> list[tuple[int, list[str]]]:
        return split_batch(output)


def split_batch(output: list[str]) -> list[tuple[int, list[str]]]:
    """`FactBatch` output -> [(exit status, stdout lines)] per part, in order; a part cut off has status -1.

    >>> split_batch(["##hgxkit-batch-0:", "a", "##hgxkit-batch-0:0", "##hgxkit-batch-1:", "##hgxkit-batch-1:2"])
    [(0, ['a']), (2, [])]
    """
    parts: list[tuple[int, list[str]]] = []
    current: list[str] | None = None
    for line in output:
        mark = f"{_BATCH_MARK}{len(parts)}:"
        if line == mark and current is None:
            current = []
        elif current is not None and line.startswith(mark) and line[len(mark) :].isdigit():
            parts.append((int(line[len(mark) :]), current))
            current = None
        elif current is not None:
            current.append(line)
    if current is not None:
        parts.append((-1, current))
    return parts


def _batchable_command(fact: FactBase, kwargs: dict[str, Any]) -> StringCommand | None:
    """The fact's command when it can run inside a batch: no required binary, no shell of its own."""
    requires = fact.requires_command(**kwargs) if callable(fact.requires_command) else fact.requires_command
    if requires or fact.shell_executable:
        return None
    command = fact.command(**kwargs) if callable(fact.command) else fact.command
    return command if isinstance(command, StringCommand) else StringCommand(command)


def _planned(h: Host, reads: list[tuple[type[FactBase], dict[str, Any]]]) -> tuple[list, dict] | None:
    """(the reads still to make: key, fact, part; the batch's parts by command text), or None when not planning."""
    state = getattr(h, "state", None)
    if state is None or getattr(state, "current_stage", None) != StateStage.Prepare:
        return None
    memo = _memo(h)
    todo: list[tuple[tuple, FactBase, int]] = []
    commands: dict[str, tuple[int, StringCommand]] = {}  # raw text -> (part, command): facts sharing one run it once
    for fact_cls, kwargs in reads:
        key = (fact_cls, tuple(sorted(kwargs.items())))
        fact = fact_cls()
        if key in memo or fact.check_preconditions(state, h):
            continue
        command = _batchable_command(fact, kwargs)
        if command is not None:
            part, _ = commands.setdefault(command.get_raw_value(), (len(commands), command))
            todo.append((key, fact, part))
    return todo, commands


def _keep(h: Host, todo: list, results: list[tuple[int, list[str]]]) -> int:
    memo = _memo(h)
    kept = 0
    for key, fact, part in todo:
        status, lines = results[part] if part < len(results) else (-1, [])
        if status != 0:
            continue
        try:
            memo[key] = fact.process(lines) if lines else fact.default()
        except Exception:  # the fact is read again on its own, where pyinfra reports the error
            continue
        kept += 1
    return kept


def prefetch(h: Host, reads: list[tuple[type[FactBase], dict[str, Any]]]) -> int:
    """Read several plan-time facts in one round trip and keep them for `plan_fact`; returns how many it kept.

    Only while pyinfra plans (at execute time facts are read fresh, so this does nothing). A fact whose part
    fails, whose output its `process` refuses, or that cannot run in a batch is not kept: `plan_fact` then reads
    it on its own. A read whose arguments differ from what a role later asks is only a
    wasted part, never a wrong answer. Facts already kept (`prefetch_command`'s caller read them) are not read.
    """
    planned = _planned(h, reads)
    if not planned or not planned[0]:
        return 0
    todo, commands = planned
    results = h.get_fact(FactBatch, commands=tuple(cmd for _, cmd in commands.values()))
    return _keep(h, todo, results)


def prefetch_command(
    h: Host, reads: list[tuple[type[FactBase], dict[str, Any]]]
) -> tuple[StringCommand, Callable[[list[str]], int]] | None:
    """`prefetch`'s batch for a caller that runs it on an SSH channel of its own (`hgxkit.hostlock`, as soon as it
    holds the run lock, so the reads cost no round trip of their own): the command, and a function that keeps the
    answers from its stdout lines (returns how many). None when there is nothing to read or pyinfra is not
    planning. What the caller could not read is left to `prefetch`, which reads it then."""
    planned = _planned(h, reads)
    if not planned or not planned[0]:
        return None
    todo, commands = planned
    command = FactBatch().command(tuple(cmd for _, cmd in commands.values()))
    return command, lambda lines: _keep(h, todo, split_batch(lines))
