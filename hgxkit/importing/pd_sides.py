"""Which command of a posted prefill/decode split is which side, and the side-channel port each side binds.

vLLM's NIXL docs and recipes give both servers `"kv_role":"kv_both"` (`PrefillDecode.either`) and let the router or
proxy decide: its command names where prefills go and where decodes go (vllm-router's `--prefill URL` /
`--decode URL`, the toy proxy's `--prefiller-ports` / `--decoder-ports`; `PrefillDecode.posted_router`). Each
server is matched to a side by the port it listens on, and its side flag written with the kind's own words
(kv_producer, kv_consumer), so the recipe names the sides as `recipe check` and the router read them.

Every server of a NIXL split binds `VLLM_NIXL_SIDE_CHANNEL_PORT` + DP rank on its host (`SideChannel`): the sides'
values are kept when their ranges do not meet, written as one value with `{{group}}` for every group.

Example:
    >>> side_channel_template([5600, 5601])
    '560{{group}}'
    >>> side_channel_template([5557, 5558]) is None
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hgxkit.errors import InputError
from hgxkit.kinds.base import PrefillDecode, json_key
from hgxkit.recipe.docker_parse import parse_option_words
from hgxkit.recipe.server_args import ServerCommand
from hgxkit.recipe.spec import DockerSpec


@dataclass(frozen=True)
class PostedRouter:
    """A router or proxy command of the post: where it is, and the ports it sends prefills and decodes to."""

    where: str
    prefill: tuple[int, ...]
    decode: tuple[int, ...]


def posted_routers(commands: Sequence[tuple[str, Sequence[str]]], split: PrefillDecode) -> list[PostedRouter]:
    """The router commands among the post's (where, words) that name both sides' ports."""
    if split.posted_router is None:
        return []
    found = []
    for where, words in commands:
        ports = split.posted_router(words)
        if ports is not None:
            found.append(PostedRouter(where, *ports))
    return found


def either_roles(servers: Sequence[ServerCommand]) -> bool:
    """True when every server names the role that leaves its side to the router (vLLM's kv_both) in its side flag."""
    kind = servers[0].server_kind
    split = kind.prefill_decode
    if split is None or split.either is None or kind.disaggregation is None or len(servers) < 2:
        return False
    flag = kind.disaggregation[0]
    return all(json_key(s.flag(flag), split.role_key) == split.either for s in servers)


def routed_sides(
    servers: Sequence[ServerCommand], ports: Sequence[int], routers: Sequence[PostedRouter], at: Sequence[str]
) -> tuple[list[ServerCommand], str]:
    """The servers with their side flag naming the side the post's router sends them (matched by the port each
    listens on), and the note that says so; InputError naming why when nothing tells the sides apart."""
    kind = servers[0].server_kind
    split = kind.prefill_decode
    assert split is not None and kind.disaggregation is not None
    flag = kind.disaggregation[0]
    backends = {split.backend(s.flag(split.backend_flag)) for s in servers}
    listed = ", ".join(at)
    if not backends <= set(split.backends):
        other = sorted(backends - set(split.backends))[0]
        raise InputError(
            f"{len(servers)} serving commands ({listed}) each carry {flag} with {split.backend_key or 'backend'} "
            f"{other}: the sides of {kind.title}'s prefill/decode split, which hgxkit deploys over "
            f"{' or '.join(split.backends)} only; write {split.backends[0]} in both"
        )
    said = f"{flag} {split.role_key} {split.either}" if split.role_key else f"{flag} {split.either}"
    if not routers:
        raise InputError(
            f"{len(servers)} serving commands ({listed}) each say {said}, and no router or proxy command of the "
            "post names which is the prefill and which the decode: write "
            f"{split.role_key or flag} {split.prefill} on the prefill and {split.decode} on the decode"
        )
    router = routers[0]
    sides = []
    for port, where in zip(ports, at, strict=True):
        listed_as = (("prefill", router.prefill), ("decode", router.decode))
        found = [side for side, listed_ports in listed_as if port in listed_ports]
        if len(found) != 1:
            raise InputError(
                f"{where}: the server listens on port {port}, which the router ({router.where}) lists "
                f"{'as both sides' if found else 'as neither side'} (prefill {_ports(router.prefill)}, decode "
                f"{_ports(router.decode)}), so its side is unknown; write {split.role_key or flag} "
                f"{split.prefill} or {split.decode} in its {flag}"
            )
        sides.append(found[0])
    if set(sides) != {"prefill", "decode"}:
        raise InputError(
            f"{len(servers)} serving commands ({listed}) are all {sides[0]} servers by the router's ports "
            f"({router.where}); a split needs a prefill and a decode"
        )
    rewritten = [_with_side(s, flag, split, side) for s, side in zip(servers, sides, strict=True)]
    shown = "; ".join(
        f"{where} (port {port}): {split.prefill if side == 'prefill' else split.decode}"
        for where, port, side in zip(at, ports, sides, strict=True)
    )
    note = (
        f"both sides say {said}; the router or proxy command ({router.where}) sends prefills to port "
        f"{_ports(router.prefill)} and decodes to {_ports(router.decode)}, so each server's "
        f"{split.role_key or flag} is written as its side: {shown}"
    )
    return rewritten, note


def _ports(ports: tuple[int, ...]) -> str:
    return ", ".join(map(str, ports))


def _with_side(server: ServerCommand, flag: str, split: PrefillDecode, side: str) -> ServerCommand:
    kind = server.server_kind
    args = []
    for entry in server.args:
        name, equals, rest = entry[0].partition("=")
        if kind.canonical_flag(name) != flag:
            args.append(entry)
        elif equals:
            args.append((f"{name}={split.with_role(rest, side)}", *entry[1:]))
        else:
            args.append((entry[0], *(split.with_role(w, side) for w in entry[1:])))
    return ServerCommand(server.program, tuple(args), server.kind)


def side_channel_template(values: Sequence[int]) -> str | None:
    """One value with `{{group}}` that gives each group its posted port (`values[i]` for group i), when the ports
    differ in one digit that is the group's index; None when no such value writes them."""
    texts = [str(v) for v in values]
    if len({len(t) for t in texts}) != 1:
        return None
    places = {i for t in texts for i, c in enumerate(t) if c != texts[0][i]}
    if len(places) != 1:
        return None
    place = places.pop()
    if [t[place] for t in texts] != [str(i) for i in range(len(texts))]:
        return None
    return texts[0][:place] + "{{group}}" + texts[0][place + 1 :]


def side_channel_ports(
    dockers: Sequence[DockerSpec], servers: Sequence[ServerCommand], at: Sequence[str], where: str
) -> tuple[DockerSpec, list[str]]:
    """The first command's docker options with the side-channel variable written for every group (the posted
    ports kept where one value writes them, else ports of the kind's own with a note); InputError naming both
    groups and the port when two sides' ranges meet (each DP rank binds the value + its rank on the host)."""
    kind = servers[0].server_kind
    split = kind.prefill_decode
    assert split is not None and split.side_channel is not None
    env = split.side_channel.env
    posted = []
    for docker in dockers:
        values = [s.value for s in docker.env() if s.name == env]
        value = values[-1] if values else str(split.side_channel.default)
        if value is None or not (value.isascii() and value.isdigit()):
            raise InputError(f"{where}: {env}={value or '(from the host)'}: not a port the import can check; write one")
        posted.append(int(value))
    ranks = [_dp(server) for server in servers]
    owners: dict[int, int] = {}
    for index, (value, count) in enumerate(zip(posted, ranks, strict=True)):
        for port in range(value, value + count):
            if port in owners:
                first = owners[port]
                raise InputError(
                    f"{where}: groups {first} ({at[first]}, {env}={posted[first]}, {ranks[first]} DP rank(s)) and "
                    f"{index} ({at[index]}, {env}={value}, {count} DP rank(s)) both bind port {port} on one host "
                    f"({kind.title} binds {env} + DP rank), so the second exits; give each group ports of its own "
                    f"(group {index} from {posted[first] + ranks[first]})"
                )
            owners[port] = index
    notes = []
    template = side_channel_template(posted)
    if template is None:
        stride = 10 if max(ranks) <= 10 else 100
        default = str(split.side_channel.default)
        place = len(default) - len(str(stride))
        template = f"{default[:place]}{{{{group}}}}{default[place + 1 :]}"
        notes.append(
            f"{where}: {env} {', '.join(map(str, posted))} (one per group) cannot be written as one value with "
            f"{{{{group}}}}, so every group binds {template} ({kind.title}'s default port with the group's digit, "
            "apart by its DP ranks)"
        )
    else:
        notes.append(f"{where}: {env} {', '.join(map(str, posted))} is written {template} (each group's own)")
    first = dockers[0]
    entries = [e for e in first.entries if not any((u.value or "").startswith(f"{env}=") for u in e.uses)]
    entries += parse_option_words(["-e", f"{env}={template}"], source=where)
    return DockerSpec(first.invocation, tuple(entries)), notes


def _dp(server: ServerCommand) -> int:
    """The data-parallel ranks the server runs on its host."""
    dp = server.flag(server.server_kind.dp_flag) or "1"
    return int(dp) if dp.isascii() and dp.isdigit() and int(dp) > 0 else 1
