"""A RoleBasedGroup (sgl-project/rbg): a workload whose roles (a router, prefill and decode servers, a cache
store) each run pods of their own, placed by the scheduler and reached through Services.

hgxkit does not read its roles yet: a role's pods are no GPU group of one node, and a split's roles reach each
other by Service names a recipe has no place for. A RoleBasedGroup with a role that runs an engine hgxkit serves
is refused by name, with its roles listed, saying which are sides of a split; one whose roles run no such engine
(a Mooncake store, say) serves nothing, and the post is refused as having no serving command.

Example:
    >>> data = {"kind": "RoleBasedGroup", "metadata": {"name": "pd"}, "spec": {"roles": [
    ...     {"name": "prefill", "template": {"spec": {"containers": [{"command": ["python3", "-m",
    ...      "sglang.launch_server", "--disaggregation-mode", "prefill"]}]}}}]}}
    >>> role_refusal(data).split(": ")[0]
    'RoleBasedGroup pd (roles prefill; prefill is a side of a prefill/decode split)'
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from hgxkit.kinds import KINDS, python_program
from hgxkit.recipe.server_args import ServerCommand, group_args


def role_refusal(data: dict) -> str | None:
    """Why a RoleBasedGroup is refused, naming it and its roles; None when no role runs an engine hgxkit serves."""
    name = (data.get("metadata") or {}).get("name", "")
    roles = [r for r in (data.get("spec") or {}).get("roles") or [] if isinstance(r, dict)]
    served = {}
    for role in roles:
        for words in _commands(role):
            found = next((k for k in KINDS.values() if k.launches(python_program(words))), None)
            if found is not None:
                served[str(role.get("name"))] = _side(words, found.name)
    if not served:
        return None
    sides = [role for role, side in served.items() if side]
    said = f"{' and '.join(sides)} {'is a side' if len(sides) == 1 else 'are the sides'} of a prefill/decode split"
    listed = ", ".join(str(r.get("name")) for r in roles) + (f"; {said}" if sides else "")
    return (
        f"RoleBasedGroup {name} (roles {listed}): hgxkit does not read a RoleBasedGroup's roles, each its own pods "
        "reached through Services; import the serving commands of its roles as a post"
        + (" (the sides' commands join as one node's prefill and decode groups)" if sides else "")
    )


def _commands(node: Any) -> Iterator[list[str]]:
    """The command and args words of every container under `node` (templates, patterns, patches alike)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if str(key).startswith("__"):  # the reader's line bookkeeping, not the manifest's
                continue
            if key == "containers" and isinstance(value, list):
                for container in value:
                    if isinstance(container, dict):
                        yield [str(w) for w in [*(container.get("command") or []), *(container.get("args") or [])]]
            elif isinstance(value, (dict, list)):
                yield from _commands(value)
    elif isinstance(node, list):
        for item in node:
            yield from _commands(item)


def _side(words: list[str], kind: str) -> bool:
    """True when the launch is one side of a split (its kind's disaggregation flag names a side)."""
    server = ServerCommand((), tuple(group_args(words)), kind)
    found = server.server_kind.disaggregation
    return found is not None and server.flag(found[0]) is not None
