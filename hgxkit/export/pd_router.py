"""The router an export writes for a prefill/decode split on one node: the kind's router in PD mode, built by the
same functions the deploy's router role uses (hgxkit.serving.router), so an export and a deploy start one router.

The split's groups answer no request alone (SGLang's decode refuses a request without a bootstrap room), so an
export of a split is its groups plus this router, whose port is the one a user benchmarks. The router runs on the
host's network like the groups (the decode reaches the prefill at the address the router gives, 127.0.0.1) and
listens on the export's `--bind` address. It takes no API key in an export (the deploy hands it one from a
root-only file no engine has), so beyond loopback it needs `--allow-unauthenticated`, and a split whose groups
would want a key is refused by name.

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
from hgxkit.export.common import LABEL_PREFIX, ExportGroup, Provenance
from hgxkit.knobs import SHARED_DEFAULTS
from hgxkit.netaddr import is_loopback
from hgxkit.problems import Problem, problem_lines
from hgxkit.recipe.judge import Judged
from hgxkit.recipe.pd import group_server
from hgxkit.serving.router import group_sides, pd_workers, router_image

POLICY = str(SHARED_DEFAULTS["router_policy"])  # the router role's default, which both routers take for both sides
KEY_FLAG = "--api-key"  # both routers take the key this way, and so would the groups (never in an export)
ROUTER = "router"  # the router's service (compose) or step (Slurm)
ROUTER_LABEL = f"{LABEL_PREFIX}router"  # on the router, which is no GPU group (an importer skips a service without)
READY_PATH = "/readiness"  # 200 once every worker is healthy (both routers; the router role waits on it)


@dataclass(frozen=True)
class SplitRouter:
    """The router of an exported split: its image, the program that starts it there (the first word is the
    container's entrypoint), its arguments, and the port a user benchmarks."""

    image: str
    program: tuple[str, ...]
    args: list[str]
    port: int
    bind: str

    @property
    def by_tag(self) -> str:
        """The not-carried line for the router's image: the deploy runs the digest it pulled, an export the tag."""
        return f"{self.image}: the router's image by its tag (the deploy runs the digest it pulled)"

    @property
    def url(self) -> str:
        host = f"[{self.bind}]" if ":" in self.bind else self.bind
        return f"http://{'127.0.0.1' if self.bind in ('0.0.0.0', '::') else host}:{self.port}"


def split_router(judged: Judged, groups: list[ExportGroup], port: int | None = None) -> SplitRouter:
    """The router in PD mode for `groups` (one node), or InputError naming each reason it cannot be exported."""
    recipe = judged.recipe
    kind = recipe.server.server_kind
    split = kind.prefill_decode
    assert split is not None  # a split is only read for a kind that has one (hgxkit.recipe.pd.side)
    bind = judged.allowances.bind_address
    port = port or int(SHARED_DEFAULTS["router_port"])
    problems = _problems(judged, groups, port)
    if problems:
        raise InputError(f"{recipe.name}: the split's router cannot be exported:\n{problem_lines(problems)}")
    # The groups are on the host's network (recipe check refuses a split off it), so each is at its own port.
    urls = [f"http://127.0.0.1:{group.head.container_port}" for group in groups]
    sides = list(group_sides(recipe, [group.index for group in groups]))
    try:
        workers = pd_workers(urls, sides, POLICY, split.router)
    except ValueError as error:
        raise InputError(f"{recipe.name}: {error}") from None
    args = [*workers, "--host", bind, "--port", str(port), "--prometheus-host", "127.0.0.1"]
    return SplitRouter(router_image(None, split.router), split.router.launch, args, port, bind)


def router_labels(origin: Provenance) -> dict[str, str]:
    """The router's labels: which recipe it fronts, and that it is the split's router (not a group's server, whose
    labels an importer reads back as the recipe)."""
    labels = origin.annotations()
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


def _problems(judged: Judged, groups: list[ExportGroup], port: int) -> list[Problem]:
    recipe = judged.recipe
    problems: list[Problem] = []
    if any(group.nodes > 1 for group in groups):
        problems.append(Problem("pd-export-nodes", "a group spans nodes", "export a split on one node"))
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
    if not is_loopback(judged.allowances.bind_address) and not judged.allowances.unauthenticated:
        problems.append(
            Problem(
                "pd-export-exposure",
                f"the router would listen on {judged.allowances.bind_address} and takes no API key in an export",
                "bind it on loopback (--bind 127.0.0.1), or pass --allow-unauthenticated on a trusted network",
            )
        )
    if any(group.name == ROUTER for group in groups):
        problems.append(Problem("pd-export-name", f"a group is named {ROUTER}, the router's", "rename it"))
    taken = [group.name for group in groups if group.head.container_port == port]
    if taken:
        problems.append(
            Problem("pd-export-port", f"the router's port {port} is {taken[0]}'s", "move the group (port_base)")
        )
    return problems
