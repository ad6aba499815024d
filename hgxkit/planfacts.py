"""Plan-time fact reads, once per host and arguments.

pyinfra 3 runs a fact's command every time it is asked for (it keeps no cache), and while it plans a deploy the
roles ask for some facts several times: nvidia-smi (which takes about half a second on a real 8-GPU node),
the serving containers, the image record. While pyinfra plans, nothing on the host changes, so one read per host
and arguments is the same answer; at execute time (inside `python.call` functions) an operation may have
changed the host, so facts are read fresh there.

Example:
    >>> from hgxkit.node.facts_gpu import NvidiaSmi
    >>> smi = plan_fact(host, NvidiaSmi)  # doctest: +SKIP
    >>> plan_fact(host, NvidiaSmi) is smi  # doctest: +SKIP   (planning: the first read, no second command)
    True
"""

from __future__ import annotations

from typing import Any, TypeVar

from pyinfra.api import Host
from pyinfra.api.facts import FactBase
from pyinfra.api.state import StateStage

T = TypeVar("T")
_MEMO = "_hgxkit_plan_facts"


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
    memo: dict = h.__dict__.setdefault(_MEMO, {})
    if key not in memo:
        memo[key] = h.get_fact(fact, **kwargs)
    return memo[key]
