"""The router an export writes for a prefill/decode split on one node: the kind's router in PD mode, built by the
same functions the deploy's router role uses (hgxkit.serving.router), so an export and a deploy start one router.

The split's groups answer no request alone (SGLang's decode refuses a request without a bootstrap room), so an
export of a split is its groups plus this router, whose port is the one a user benchmarks. The router runs on the
host's network like the groups (the decode reaches the prefill at the address the router gives, 127.0.0.1) and
listens on the export's `--bind` address. It takes no API key in an export (the deploy hands it one from a
root-only file no engine has), so beyond loopback it needs `--allow-unauthenticated`, and a split whose groups
would want a key is refused by name.

On Kubernetes (`cluster_router`) the router is a pod of its own that reaches each side at its Service's DNS name,
listening on its pod's address behind its own ClusterIP Service: never loopback, so it always needs
`--allow-unauthenticated`, and so do the sides, which must listen beyond loopback for their Services and probes.

Example:
    >>> from hgxkit.export.common import ExportOptions, export_groups
    >>> from hgxkit.recipe.judge import Allowances, judge
    >>> from hgxkit.recipe.read import load_recipe
    >>> judged = judge(load_recipe("tests/fixtures/pd/dspark-pd-one-node.yaml"),
    ...                Allowances(docker_options=("--network=host",)))
    >>> router = split_router(judged, export_groups(judged.recipe, ExportOptions()))
    >>> router.image, router.program, router.args[:6]
    ('lmsysorg/sgl-model-gateway:latest', ('python3', '-m', 'sglang_router.launch_router'), \
['--pd-disaggregation', '--prefill', 'http://127.0.0.1:5000', '8998', '--decode', 'http://127.0.0.1:5001'])
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hgxkit.errors import InputError
from hgxkit.export.common import LABEL_PREFIX, ExportGroup, Provenance, dns_name
from hgxkit.knobs import SHARED_DEFAULTS
from hgxkit.netaddr import is_loopback
from hgxkit.problems import Problem, problem_lines
from hgxkit.recipe.effective import effective_host
from hgxkit.recipe.exposure import own_key
from hgxkit.recipe.judge import Judged
from hgxkit.recipe.pd import group_server, pd_key_problem
from hgxkit.serving.router import Side, group_sides, pd_workers, router_image

POLICY = str(SHARED_DEFAULTS["router_policy"])  # the router role's default, which both routers take for both sides
KEY_FLAG = "--api-key"  # both routers take the key this way, and so would the groups (never in an export)
ROUTER = "router"  # the router's service (compose) or step (Slurm)
ROUTER_LABEL = f"{LABEL_PREFIX}router"  # on the router, which is no GPU group (an importer skips a service without)
READY_PATH = "/readiness"  # 200 once every worker is healthy (both routers; the router role waits on it)
ANY_ADDRESS = "0.0.0.0"  # a router in a pod of its own listens on the pod's address, which its Service fronts
# What lets the router listen beyond loopback without a key: on one node's network, and in a pod of its own.
ON_HOST_REMEDY = "bind it on loopback (--bind 127.0.0.1), or pass --allow-unauthenticated on a trusted network"
CLUSTER_REMEDY = (
    "pass --allow-unauthenticated on a trusted network (the router's ClusterIP Service reaches every pod of the "
    "cluster)"
)


@dataclass(frozen=True)
class SplitRouter:
    """The router of an exported split: its image, the program that starts it there (the first word is the
    container's entrypoint), its arguments, and the port a user benchmarks."""

    image: str
    program: tuple[str, ...]
    args: list[str]
    port: int
    bind: str
    sides: tuple[Side | None, ...] = ()  # each group's, in the groups' order

    @property
    def by_tag(self) -> str:
        """The not-carried line for the router's image: the deploy runs the digest it pulled, an export the tag."""
        return f"{self.image}: the router's image by its tag (the deploy runs the digest it pulled)"

    @property
    def url(self) -> str:
        host = f"[{self.bind}]" if ":" in self.bind else self.bind
        return f"http://{'127.0.0.1' if self.bind in ('0.0.0.0', '::') else host}:{self.port}"


def split_router(judged: Judged, groups: list[ExportGroup], port: int | None = None) -> SplitRouter:
    """The router in PD mode for `groups` on one node and its network, or InputError naming each reason it cannot
    be exported."""
    bind = judged.allowances.bind_address
    port = port or int(SHARED_DEFAULTS["router_port"])
    problems = _problems(judged, groups, ROUTER, _exposure(judged, bind, ON_HOST_REMEDY))
    taken = [group.name for group in groups if group.head.container_port == port]
    if taken:
        problems.append(
            Problem("pd-export-port", f"the router's port {port} is {taken[0]}'s", "move the group (port_base)")
        )
    # The groups are on the host's network (recipe check refuses a split off it), so each is at its own port.
    urls = [f"http://127.0.0.1:{group.head.container_port}" for group in groups]
    return _router(judged, groups, urls, bind, port, problems)


def cluster_router(judged: Judged, groups: list[ExportGroup], services: list[str], name: str) -> SplitRouter:
    """The router in PD mode in a pod of its own named `name`, reaching each of `groups` at the Service address
    (`host:port`) of `services`, or InputError naming each reason it cannot be exported.

    Beyond the one-node refusals: sides that listen on loopback (a Service and the kubelet's probes reach a pod at
    its node's address), and a recipe that keys its own sides behind a router that cannot carry the key (the
    deploy refuses a keyed split the same way): dropping the recipe's key would open sides that listen beyond
    loopback."""
    port = int(SHARED_DEFAULTS["router_port"])
    problems = _problems(judged, groups, name, _exposure(judged, ANY_ADDRESS, CLUSTER_REMEDY))
    problems += _reach_problems(judged)
    keyed = pd_key_problem(judged.recipe) if own_key(judged.recipe) else None
    if keyed is not None:
        problems.append(keyed)
    urls = [f"http://{service}" for service in services]
    return _router(judged, groups, urls, ANY_ADDRESS, port, problems)


def _router(
    judged: Judged, groups: list[ExportGroup], urls: list[str], bind: str, port: int, problems: list[Problem]
) -> SplitRouter:
    """The router's arguments from the router role's own `pd_workers`, once nothing refuses it."""
    recipe = judged.recipe
    split = recipe.server.server_kind.prefill_decode
    assert split is not None  # a split is only read for a kind that has one (hgxkit.recipe.pd.side)
    if problems:
        raise InputError(f"{recipe.name}: the split's router cannot be exported:\n{problem_lines(problems)}")
    sides = group_sides(recipe, [group.index for group in groups])
    try:
        workers = pd_workers(urls, list(sides), POLICY, split.router)
    except ValueError as error:
        raise InputError(f"{recipe.name}: {error}") from None
    args = [*workers, "--host", bind, "--port", str(port), "--prometheus-host", "127.0.0.1"]
    return SplitRouter(router_image(None, split.router), split.router.launch, args, port, bind, sides)


def router_name(recipe: str) -> str:
    """The router's container (Slurm) or Deployment and Service (Kubernetes): the recipe's name and the role's."""
    return f"{dns_name(recipe)}-{ROUTER}"


def router_labels(origin: Provenance, short: bool = False) -> dict[str, str]:
    """The router's labels: which recipe it fronts, and that it is the split's router (not a group's server, whose
    labels an importer reads back as the recipe); `short`: as Kubernetes takes label values (the hash abbreviated)."""
    labels = origin.labels() if short else origin.annotations()
    return {
        ROUTER_LABEL: "prefill-decode",
        **{k: labels[k] for k in (f"{LABEL_PREFIX}recipe", f"{LABEL_PREFIX}recipe-hash")},
    }


def keyless_groups(groups: list[ExportGroup]) -> tuple[list[ExportGroup], list[str]]:
    """`groups` without the kind's own API-key variable (which every export otherwise passes on from the engine's
    secrets), and the line that says so: the exported router takes no key and sends none on (vLLM's checks no
    client's key in PD mode, hgxkit.recipe.pd.pd_key_problem), so keyed groups would refuse every request."""
    name = groups[0].kind.api_key_env
    if not name or not any(name in c.secret_env for g in groups for c in g.containers):
        return groups, []
    kept = [
        replace(
            g, containers=[replace(c, secret_env=tuple(n for n in c.secret_env if n != name)) for c in g.containers]
        )
        for g in groups
    ]
    return kept, [f"{name}: a split's groups serve without a key behind its router, which takes none in an export"]


def _problems(judged: Judged, groups: list[ExportGroup], name: str, exposure: list[Problem]) -> list[Problem]:
    """What refuses a split's router wherever it runs: sides over nodes or hosts, a side's own key, the router's
    exposure (`exposure`), a group with the router's `name`."""
    recipe = judged.recipe
    problems: list[Problem] = []
    if any(group.nodes > 1 for group in groups):
        problems.append(Problem("pd-export-nodes", "a group spans nodes", "export a split on one node"))
    hosts = recipe.groups.host_count if recipe.groups is not None else 1
    if hosts > 1:  # an export writes one host's share of the groups, which holds one side
        problems.append(
            Problem(
                "pd-export-hosts", f"the split is laid over {hosts} hosts (groups.hosts)", "export a split on one node"
            )
        )
    keyed = [g.name for g in groups if group_server(recipe, g.index).flag(KEY_FLAG) is not None]
    if keyed:
        problems.append(
            Problem(
                "pd-export-key",
                f"{keyed[0]} takes an API key ({KEY_FLAG}), which the exported router would need on its command line "
                "to send on",
                f"serve the split without {KEY_FLAG}, its router on loopback",
            )
        )
    problems += exposure
    if any(group.name == name for group in groups):
        problems.append(Problem("pd-export-name", f"a group is named {name}, the router's", "rename it"))
    return problems


def _exposure(judged: Judged, bind: str, remedy: str) -> list[Problem]:
    """The router listening on `bind` without a key, unless that is loopback or allowed."""
    if is_loopback(bind) or judged.allowances.unauthenticated:
        return []
    return [
        Problem("pd-export-exposure", f"the router would listen on {bind} and takes no API key in an export", remedy)
    ]


def _reach_problems(judged: Judged) -> list[Problem]:
    """Sides that listen where their Services cannot reach them: each side's pod is on its node's network (the
    decode fetches the KV at the prefill's node), and a Service sends to, and the kubelet probes, the node's
    address, never its loopback."""
    try:
        host = effective_host(judged.recipe)
    except InputError as error:
        host = f"an address hgxkit cannot read ({error.message})"
    else:
        if not is_loopback(host):
            return []
    return [
        Problem(
            "pd-export-reach",
            f"the split's servers listen on {host}, which neither each side's Service nor the kubelet's probes reach "
            "(each side's pod is on its node's network)",
            "set --host 0.0.0.0 in server.args (with --allow-unauthenticated on a trusted network)",
        )
    ]
