"""The router's decisions as pure functions: which host runs it, its worker URLs, its container spec.

The router (SGLang's sglang-router, or a prefill/decode split's kind's router) runs in one container,
`<recipe>-router` beside its groups' `<recipe>-<group>`, with `--network host` on one inventory host, and fronts
every serving group of every host. It is labelled `hgxkit.router` (not `hgxkit.serve`, so the serving role never
treats it as a stale group) and carries a hash of its spec, so an unchanged spec leaves it untouched. The label,
not the name, makes a container hgxkit's router: one under another name (an earlier hgxkit's `sglang-router`, or
a renamed recipe's) holds the same port and is removed before the new one starts (`router_action`).

Example:
    >>> hosts = [WorkerHost("node1", "10.0.0.1", "127.0.0.1", [5000, 5001])]
    >>> worker_urls("node1", hosts)
    (['http://127.0.0.1:5000', 'http://127.0.0.1:5001'], [])
    >>> spec = router_spec(["http://127.0.0.1:5000"], name=container_name("m"),
    ...                    image="lmsysorg/sgl-model-gateway:latest", policy="cache_aware",
    ...                    bind_address="127.0.0.1", port=30000, api_key_file=None)
    >>> spec.name
    'm-router'
    >>> spec.argv[-8:]
    ['--policy', 'cache_aware', '--host', '127.0.0.1', '--port', '30000', '--prometheus-host', '127.0.0.1']
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from pyinfra.api import StringCommand

from hgxkit.hostcmd import script
from hgxkit.kinds.base import PDRouter
from hgxkit.netaddr import is_loopback
from hgxkit.problems import Problem
from hgxkit.recipe.pd import bootstrap_port, group_server, side
from hgxkit.recipe.shellwords import quote_word
from hgxkit.recipe.spec import Recipe
from hgxkit.serving.containers import PORT_LABEL, SPEC_LABEL
from hgxkit.serving.rollout import RunningContainer

ROUTER_LABEL = "hgxkit.router"
# The router of groups that serve both phases, whatever their kind: SGLang's, with a worker list.
WORKER_LIST_MODULE = "sglang_router.launch_router"
WORKER_LIST_IMAGE = "lmsysorg/sgl-model-gateway:latest"
POLICIES = ("random", "round_robin", "power_of_two", "cache_aware", "bucket")
KEY_IN_CONTAINER = "/run/hgxkit/api-key"
# The router takes its key only as --api-key. The launcher reads it from a root-only file mounted read-only,
# so it shows neither in `docker inspect` nor in the process's command line (unlike the serving groups).


def container_name(recipe_name: str) -> str:
    """The router's container: `<recipe>-router`, named as its groups are (`<recipe>-<group>`), whichever
    engine's router runs in it."""
    return f"{recipe_name}-router"


def key_launcher(module: str) -> str:
    """The Python that runs the router's `module` with the key read from KEY_IN_CONTAINER as `--api-key`."""
    return (
        "import runpy, sys; "
        f"key = open('{KEY_IN_CONTAINER}').read().strip(); "
        f"sys.argv = ['{module}', *sys.argv[1:], '--api-key', key]; "
        f"runpy.run_module('{module}', run_name='__main__', alter_sys=True)"
    )


@dataclass(frozen=True)
class Side:
    """A group that is one side of a prefill/decode split: 'prefill' (with its bootstrap port, where its kind has
    one) or 'decode'."""

    role: str
    bootstrap_port: int | None = None


@dataclass(frozen=True)
class WorkerHost:
    """A serving host as the router sees it: its address, the address its groups bind, their ports, and each
    group's side of a prefill/decode split (none: every group serves both phases)."""

    name: str
    address: str
    bind_address: str
    ports: list[int]
    api_key: bool = False
    sides: tuple[Side | None, ...] = ()
    # One host's share of a recipe laid over hosts (`groups.hosts`): the router reaches it at `address` even on its
    # own host, since the decode fetches the KV at the prefill URL's address (hgxkit.serving.hostshare).
    shared: bool = False


@dataclass(frozen=True)
class RouterSpec:
    """The router container: `docker run` words (image by tag) and the hash of everything but the name."""

    name: str
    image: str
    argv: list[str]
    spec_hash: str

    def words(self, image: str | None = None) -> list[str]:
        """The `docker run` words, optionally running `image` (e.g. by digest) instead of the tag.

        >>> RouterSpec("r", "a:1", ["docker", "run", "a:1", "-c", "x y"], "h").words("a@sha256:0")
        ['docker', 'run', 'a@sha256:0', '-c', 'x y']
        """
        return [image if image and w == self.image else w for w in self.argv]

    def command(self, image: str | None = None) -> StringCommand:
        """The `docker run` command for a host (see `words`)."""
        return StringCommand(*(quote_word(w) for w in self.words(image)))


def choose_router_host(explicit: str | None, candidates: list[str], inventory: list[str]) -> tuple[str | None, str]:
    """The host that runs the router: `router_host` when set, else the first host with `router: true`.

    Returns (host, error); error is "" when a host was chosen.

    >>> choose_router_host(None, ["node2", "node3"], ["node1", "node2", "node3"])
    ('node2', '')
    >>> choose_router_host("nodeX", ["node1"], ["node1"])[1]
    'router_host nodeX is not in the inventory (hosts: node1): set router_host to one of them'
    """
    if explicit:
        if explicit not in inventory:
            return None, (
                f"router_host {explicit} is not in the inventory (hosts: {', '.join(inventory)}): "
                "set router_host to one of them"
            )
        return explicit, ""
    return (candidates[0], "") if candidates else (None, "")


def group_sides(recipe: Recipe, groups: list[int]) -> tuple[Side | None, ...]:
    """The side of each of the recipe's `groups` (indices), read from its own server command."""
    out = []
    for index in groups:
        server = group_server(recipe, index)
        role = side(server)
        port = bootstrap_port(server) if role == "prefill" else None
        out.append(Side(role, int(port) if port and port.isdigit() else None) if role else None)
    return tuple(out)


def worker_sides(router_host: str, hosts: list[WorkerHost]) -> list[Side | None]:
    """Each of `worker_urls`' URLs' side, in the same order (None for a group that serves both phases).

    >>> worker_sides("n1", [WorkerHost("n1", "a", "127.0.0.1", [5000, 5001], sides=(Side("prefill", 8998),))])
    [Side(role='prefill', bootstrap_port=8998), None]
    """
    out: list[Side | None] = []
    for h in hosts:
        if (h.name == router_host and not h.shared) or not is_loopback(h.bind_address):
            out.extend(h.sides[i] if i < len(h.sides) else None for i in range(len(h.ports)))
    return out


def worker_urls(router_host: str, hosts: list[WorkerHost]) -> tuple[list[str], list[Problem]]:
    """One URL per serving group of every host; the router's own host is reached over 127.0.0.1.

    A group on another host must be published beyond loopback, or the router cannot reach it; a share of a recipe
    laid over hosts (`WorkerHost.shared`) is reached at its host's address on the router's host too.

    >>> worker_urls("node1", [WorkerHost("node2", "node2.lan", "127.0.0.1", [5000])])[1][0].code
    'router-reach'
    >>> worker_urls("node1", [WorkerHost("node1", "node1", "0.0.0.0", [5000], shared=True)])
    (['http://node1:5000'], [])
    """
    urls: list[str] = []
    problems: list[Problem] = []
    for h in hosts:
        if h.name == router_host and not h.shared:
            address = "127.0.0.1"
        elif is_loopback(h.bind_address):
            problems.append(_reach_problem(router_host, h))
            continue
        else:
            address = h.address if ":" not in h.address else f"[{h.address}]"
        urls.extend(f"http://{address}:{port}" for port in h.ports)
    if any(h.api_key for h in hosts) and len(hosts) > 1:
        problems.append(
            Problem(
                "router-key",
                "api_key is set and the router fronts several hosts, but each host has its own key and the "
                "router passes one key to every worker",
                "run one router per host (router_host), or serve without api_key on a private network",
            )
        )
    if not urls and not problems:
        problems.append(Problem("router-workers", "no serving group to front", "check the recipe and inventory"))
    return urls, problems


def port_problem(router_host: str, hosts: list[WorkerHost], port: int) -> Problem | None:
    """The router's port is one a serving group holds on the router's own host (its server port, or a prefill's
    bootstrap port), so the router could not bind it; None when it is free of them.

    >>> port_problem("node1", [WorkerHost("node1", "node1", "0.0.0.0", [30000, 30001])], 30000).code
    'router-port'
    >>> port_problem("node1", [WorkerHost("node2", "node2", "0.0.0.0", [30000])], 30000) is None
    True
    """
    for h in hosts:
        if h.name != router_host:
            continue
        bootstrap = [s.bootstrap_port for s in h.sides if s is not None and s.bootstrap_port]
        if port in h.ports or port in bootstrap:
            what = "a serving group's port" if port in h.ports else "a prefill group's bootstrap port"
            free = max([*h.ports, *bootstrap]) + 1
            return Problem(
                "router-port",
                f"the router's port {port} on {router_host} is {what} there, so the router could not listen on it",
                f"give the router another port (--data router_port={free}), or move the groups (groups.port_base)",
            )
    return None


def _reach_problem(router_host: str, h: WorkerHost) -> Problem:
    """`h`'s groups listen on loopback, where the router (and, for a share of a split, the other host's side)
    cannot reach them."""
    if h.shared:
        return Problem(
            "router-reach",
            f"{h.name}'s groups listen on {h.bind_address} only; the router and the split's other hosts reach them at "
            f"{h.address}",
            "set --host 0.0.0.0 (or the node's fabric address) in the recipe's server.args",
        )
    return Problem(
        "router-reach",
        f"{h.name} publishes its groups on {h.bind_address} only; the router on {router_host} cannot reach them",
        f"set bind_address (and api_key: auto) for {h.name}, or run the router on it",
    )


def pd_workers(urls: list[str], sides: list[Side | None], policy: str, pd: PDRouter) -> list[str]:
    """The router's arguments for a prefill/decode split: its PD flag (`pd.pd_flag`), then `--prefill URL
    [BOOTSTRAP_PORT]` per prefill and `--decode URL` per decode (sglang-router 0.3.2's `launch_router`, vllm-router
    0.1.17's: the same form), with `--policy` for both sides and the router's own `pd.extra`. Raises ValueError
    for a group that serves both phases beside them, a split that lacks a side, or a policy the router does not
    take for both sides.

    >>> R = PDRouter("m", "--pd-disaggregation", ("round_robin",), bootstrap=True)
    >>> pd_workers(["http://a:1", "http://a:2"], [Side("prefill", 8998), Side("decode")], "round_robin", R)
    ['--pd-disaggregation', '--prefill', 'http://a:1', '8998', '--decode', 'http://a:2', '--policy', 'round_robin']
    """
    if policy not in pd.policies:
        raise ValueError(
            f"router_policy {policy} is not a policy the router takes for both prefill and decode groups: set "
            f"router_policy to one of {', '.join(pd.policies)}"
        )
    if len(sides) != len(urls) or any(s is None for s in sides):
        raise ValueError(
            "the router would front prefill/decode groups and groups that serve both phases, which it cannot mix: "
            "run one router per kind of group (router_host)"
        )
    args = [pd.pd_flag]
    for url, one in zip(urls, sides, strict=True):
        assert one is not None
        port = [str(one.bootstrap_port)] if pd.bootstrap and one.role == "prefill" and one.bootstrap_port else []
        args += ["--prefill", url, *port] if one.role == "prefill" else ["--decode", url]
    if "--prefill" not in args or "--decode" not in args:
        raise ValueError("the router would front one side of a prefill/decode split alone: serve both sides")
    return [*args, "--policy", policy, *pd.extra]


def split_plan(router_host: str, hosts: list[WorkerHost], spec: RouterSpec) -> list[str]:
    """What `--dry` shows of a prefill/decode split: which host runs which side on which port, and the router's
    arguments (its words after the image); [] for groups that serve both phases.

    >>> hosts = [WorkerHost("n1", "a", "0.0.0.0", [5000], sides=(Side("prefill", 8998),), shared=True),
    ...          WorkerHost("n2", "b", "0.0.0.0", [5001], sides=(Side("decode"),), shared=True)]
    >>> spec = RouterSpec("r", "img", ["docker", "run", "img", "--prefill", "http://a:5000"], "h")
    >>> split_plan("n1", hosts, spec)[0]
    'n1 runs group port 5000 as prefill (bootstrap port 8998)'
    >>> split_plan("n1", hosts, spec)[1:]
    ['n2 runs group port 5001 as decode', 'the router on n1: --prefill http://a:5000']
    """
    lines = []
    for h in hosts:
        for port, one in zip(h.ports, h.sides, strict=False):
            if one is not None:
                boot = f" (bootstrap port {one.bootstrap_port})" if one.bootstrap_port else ""
                lines.append(f"{h.name} runs group port {port} as {one.role}{boot}")
    if not lines:
        return []
    return [*lines, f"the router on {router_host}: {' '.join(spec.argv[spec.argv.index(spec.image) + 1 :])}"]


def router_image(knob: str | None, pd: PDRouter | None) -> str:
    """The image the router runs: the `router_image` knob when set, else the split's router's own image (`pd`:
    the groups' kind's `PrefillDecode.router`, None for groups that serve both phases), else SGLang's router.

    >>> router_image(None, None), router_image("my/router:1", None)
    ('lmsysorg/sgl-model-gateway:latest', 'my/router:1')
    >>> router_image(None, PDRouter("m", "--pd", ("random",), False, image="vllm/vllm-router:v0.1.17"))
    'vllm/vllm-router:v0.1.17'
    """
    if knob:
        return knob
    return pd.image if pd is not None and pd.image else WORKER_LIST_IMAGE


def router_spec(
    urls: list[str],
    *,
    name: str,
    image: str | None,
    policy: str,
    bind_address: str,
    port: int,
    api_key_file: str | None,
    sides: list[Side | None] | None = None,
    pd: PDRouter | None = None,
    circuit_reopen_s: int | None = None,
) -> RouterSpec:
    """The router container: host network, restart unless stopped, labelled with its spec hash. With `sides`
    naming a prefill/decode split (parallel to `urls`), the router runs in PD mode (`pd_workers`): the router of
    the groups' kind (`pd`, its `PrefillDecode.router`: SGLang's or vLLM's) from its own image unless `image`
    names one, else SGLang's router with a worker list (`router_image`).

    With `api_key_file` (the serving role's root-only key on this host) the key is mounted read-only and
    handed to the router by `key_launcher`: clients then need it, and the router sends it to the workers (a split
    whose router cannot is refused before, `hgxkit.recipe.pd.pd_key_problem`). Metrics (Prometheus, port 29000)
    stay on 127.0.0.1. `circuit_reopen_s` (PD mode only): how long the router shuns a worker whose circuit it
    opened; a failing decode opens the prefill's circuit too (sglang-router 0.3.2), so the whole split answers 503
    that long after a replaced side is back.
    """
    if policy not in POLICIES:
        raise ValueError(f"router_policy {policy!r} is not one of {', '.join(POLICIES)}: set router_policy")
    split = sides is not None and any(sides)
    if split and pd is None:
        raise ValueError("the router fronts a prefill/decode split, but the groups' kind names no router for it")
    router = pd if split else None
    if router is not None:
        workers = pd_workers(urls, list(sides or ()), policy, router)
        if circuit_reopen_s is not None:
            workers += ["--cb-timeout-duration-secs", str(int(circuit_reopen_s))]
    else:
        workers = ["--worker-urls", *urls, "--policy", policy]
    module = router.module if router is not None else WORKER_LIST_MODULE
    launch = router.launch if router is not None else ("python3", "-m", module)
    image = router_image(image, router)
    server = [
        *workers,
        "--host",
        bind_address,
        "--port",
        str(port),
        "--prometheus-host",
        "127.0.0.1",
    ]
    if api_key_file:
        options = ["-v", f"{api_key_file}:{KEY_IN_CONTAINER}:ro", "--entrypoint", "python3"]
        command = ["-c", key_launcher(module)]
    else:
        options = ["--entrypoint", launch[0]]
        command = list(launch[1:])
    body = ["--network", "host", "--restart", "unless-stopped", *options, image, *command, *server]
    spec_hash = hashlib.sha256(json.dumps(body).encode()).hexdigest()[:16]
    labels = ["--label", f"{ROUTER_LABEL}=1", "--label", f"{SPEC_LABEL}={spec_hash}", "--label", f"{PORT_LABEL}={port}"]
    argv = ["docker", "run", "-d", "--name", name, *labels, *body]
    return RouterSpec(name, image, argv, spec_hash)


def needs_replacing(current: RunningContainer | None, spec: RouterSpec) -> bool:
    """True unless the router container exists, runs, and carries `spec`'s hash.

    >>> needs_replacing(RunningContainer("m-router", "id", "abc", None, True), RouterSpec("r", "i", [], "abc"))
    False
    """
    return current is None or current.spec_hash != spec.spec_hash or not current.running


@dataclass(frozen=True)
class RouterAction:
    """What the router role does on its host: remove hgxkit's routers under another name than the spec's (each
    holds the router's port), and whether to (re)create the spec's container."""

    remove: tuple[str, ...]
    start: bool

    @property
    def changes(self) -> bool:
        return self.start or bool(self.remove)


def router_action(current: list[RunningContainer], spec: RouterSpec) -> RouterAction:
    """The router's change on its host, from every container there labelled `hgxkit.router` (`current`).

    >>> spec = RouterSpec("m-router", "i", [], "abc")
    >>> router_action([RunningContainer("m-router", "id", "abc", None, True)], spec)
    RouterAction(remove=(), start=False)
    >>> router_action([RunningContainer("sglang-router", "id", "abc", None, True)], spec)
    RouterAction(remove=('sglang-router',), start=True)
    """
    mine = next((c for c in current if c.name == spec.name), None)
    others = tuple(c.name for c in current if c.name != spec.name)
    return RouterAction(others, needs_replacing(mine, spec))


def name_problem(spec: RouterSpec, names: dict[str, bool], routers: list[RunningContainer]) -> Problem | None:
    """A container already named as the router that is not one of hgxkit's routers (a group's, or one hgxkit did
    not start): creating the router would have to remove it. `names`: every container's name on the host and
    whether hgxkit made it (`ContainerNames`); `routers`: hgxkit's routers there.

    >>> name_problem(RouterSpec("m-router", "i", [], "h"), {"m-router": False}, []).code
    'router-name'
    >>> mine = RunningContainer("m-router", "c", "h", None, True)
    >>> name_problem(RouterSpec("m-router", "i", [], "h"), {"m-router": True}, [mine])
    """
    if spec.name not in names or any(c.name == spec.name for c in routers):
        return None
    whose = "a serving group of hgxkit's" if names[spec.name] else "a container hgxkit did not start"
    return Problem(
        "router-name",
        f"the router's container name {spec.name} is taken by {whose}",
        f"rename or remove that container (docker rm -f {spec.name}), or rename the recipe (name:)",
    )


def remove_command(name: str) -> StringCommand:
    """Remove container `name` if it carries the router label, so nothing but hgxkit's router is ever removed."""
    return script(
        '[ "$(docker inspect -f {fmt} {name} 2>/dev/null)" != 1 ] || docker rm -f {name} >/dev/null',
        fmt='{{index .Config.Labels "' + ROUTER_LABEL + '"}}',
        name=name,
    )
