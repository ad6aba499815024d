"""The setup checks of a recipe: what would break it on a node whatever the inventory allows.

Errors are setups that cannot work (overlapping GPU groups, a group size that is not the server's
parallel size, two groups on one host port, a prefill/decode split that cannot serve (hgxkit.recipe.pd), a
model path no mount provides, a server the published port cannot reach). Warnings are known pitfalls (each
kind names its own: `ServerKind.pitfalls`), each with its reason. What the inventory's allowances decide
(dangerous options, exposure, secrets) is the policy's; both are run together, by every consumer, in
`hgxkit.recipe.judge`.

Example:
    >>> from hgxkit.recipe.read import load_recipe
    >>> [f.code for f in check_recipe(load_recipe("recipes/deepseek-v4-flash-dspark-marlin.yaml"), 8)
    ...  if f.level == "error"]
    []
"""

from __future__ import annotations

from hgxkit.errors import InputError
from hgxkit.kinds import image_matches
from hgxkit.netaddr import is_loopback
from hgxkit.problems import Problem
from hgxkit.recipe.danger import expansion_problems
from hgxkit.recipe.effective import effective_host
from hgxkit.recipe.engine_start import engine_refusal
from hgxkit.recipe.groups import gpu_count_from_spec, group_problems, named_gpus, plan_groups
from hgxkit.recipe.network_env import host_interface_settings
from hgxkit.recipe.nodes import HGX_GPUS, ray_cluster
from hgxkit.recipe.nodes import parallel_size as nodes_parallel_size
from hgxkit.recipe.pd import pd_problems
from hgxkit.recipe.spec import Mount, Recipe
from hgxkit.recipe.validate import format_path

_DEV_TAGS = ("latest", "dev", "nightly")


def check_recipe(recipe: Recipe, total_gpus: int | None = None) -> list[Problem]:
    """Every error and warning for `recipe` on a node with `total_gpus` GPUs (None: the recipe's default)."""
    findings: list[Problem] = []
    findings += _check_groups(recipe, total_gpus)
    findings += _check_ports(recipe, total_gpus)
    findings += pd_problems(recipe, total_gpus)
    findings += _check_model_mount(recipe)
    findings += [Problem("expansion", f"{format_path(p.where)}: {p.message}") for p in expansion_problems(recipe)]
    findings += _check_exposure(recipe)
    findings += _check_host_interfaces(recipe)
    findings += _check_spanning_network(recipe)
    findings += _check_pitfalls(recipe)
    findings += _check_entrypoint(recipe)
    findings += _check_engine(recipe)
    findings += [Problem("host-input", note, level="warning") for note in recipe.host_inputs()]
    return findings


def parallel_size(recipe: Recipe) -> int:
    """GPUs one server uses over all its hosts: tp x pp, times dp unless SGLang's DP attention runs inside the
    TP group (flags spelled as the recipe's server kind spells them: vLLM's `-tp`, `--tensor_parallel_size`)."""
    return nodes_parallel_size(recipe.server, recipe.path or recipe.name)


def _planned_groups(recipe: Recipe, total_gpus: int | None) -> list[tuple[int, ...]]:
    """The recipe's GPU groups (the one planner, unsound plans kept: the checks below report them), or []
    when it has no grouping or no GPU count to plan on."""
    groups = recipe.groups
    if groups is None or (groups.explicit is None and (total_gpus or groups.gpus_per_node) is None):
        return []
    return plan_groups(recipe, total_gpus=total_gpus, refuse_unsound=False) or []


def _check_groups(recipe: Recipe, total_gpus: int | None) -> list[Problem]:
    findings: list[Problem] = []
    groups = recipe.groups
    total = total_gpus if total_gpus is not None else (groups.gpus_per_node if groups else None)
    try:
        planned = _planned_groups(recipe, total_gpus)
    except InputError as err:
        return [Problem("gpu-count", err.message)]
    findings += [Problem("gpu-groups", problem) for problem in group_problems(planned, total)]
    want = parallel_size(recipe)
    nodes = recipe.node_count()
    sizes = {len(group) for group in planned}
    if groups is None:  # one container: the GPUs its device list names must be the node's
        node = total if total is not None else HGX_GPUS
        beyond = [gpu for gpu in named_gpus(recipe.docker) if gpu >= node]
        findings += [
            Problem("gpu-groups", f"the container names GPU {gpu}, but the node has GPUs 0-{node - 1}")
            for gpu in beyond
        ]
    if groups is None:
        count = gpu_count_from_spec(recipe.docker.last("--gpus"))
        if count is not None:
            sizes = {count}
        elif total is not None and (recipe.docker.last("--gpus") or "").strip("\"'") == "all":
            findings += _gpus_all(want, nodes, total)
    for size in sorted(sizes):
        if size * nodes != want:
            findings.append(Problem("group-size", _size_message(size, nodes, want)))
    if groups is not None and len(planned) > 1 and (recipe.docker.last("--gpus") or "").strip("\"'") == "all":
        findings.append(
            Problem("gpus-all", "--gpus all gives every group every GPU", "use --gpus '\"device={{gpus}}\"'")
        )
    return findings


def _size_message(size: int, nodes: int, want: int) -> str:
    """Why a group's GPUs do not match the server's parallel size, and the remedies that fit."""
    if nodes > 1:
        return (
            f"a group has {size} GPUs on each of {nodes} nodes ({size * nodes} in all) but the server runs on {want} "
            f"(tp x pp x dp); make them equal (groups.size x groups.nodes = tp x pp x dp)"
        )
    message = f"a group has {size} GPUs but the server runs on {want} (tp x pp x dp); make them equal "
    message += f"(e.g. --tp {size})"
    if want > size and want % size == 0:
        message += f", or spread the server over {want // size} nodes with --nnodes {want // size} and --node-rank"
    return message


def _gpus_all(want: int, nodes: int, total: int) -> list[Problem]:
    """`--gpus all` gives the container every GPU of the node: enough for the server's share, or not."""
    per_host = want // nodes if want % nodes == 0 else want
    if per_host > total:
        more = -(-want // total)
        message = (
            f"--gpus all gives the container the node's {total} GPUs but the server runs on {want} (tp x pp x dp) "
            f"on {nodes} node(s); lower tp x pp x dp to {total}, or spread the server over {more} nodes with "
            f"--nnodes {more} and --node-rank"
        )
        return [Problem("group-size", message)]
    if per_host < total:
        message = (
            f"--gpus all gives the container all {total} GPUs of the node but the server uses {per_host} "
            "(tp x pp x dp); the others idle: use --gpus '\"device=…\"' or GPU groups"
        )
        return [Problem("gpus-all", message, level="warning")]
    return []


def _check_ports(recipe: Recipe, total_gpus: int | None) -> list[Problem]:
    try:
        count = max(len(_planned_groups(recipe, total_gpus)), 1)
    except InputError:
        return []  # the group checks already explain why the recipe cannot be planned
    base = recipe.groups.port_base if recipe.groups else None
    owners: dict[tuple[str, str], int] = {}
    findings = []
    for index in range(count):
        group_port = str(base + index) if base is not None else ""
        for mapping in recipe.docker.ports():
            host_port = mapping.host_port.replace("{{port}}", group_port)
            if not host_port:
                continue
            key = (mapping.host_ip, host_port)
            if key in owners:
                who = f"groups {owners[key]} and {index}" if owners[key] != index else f"group {index}"
                findings.append(
                    Problem(
                        "port-clash",
                        f"{who} publish host port {host_port} twice",
                        "give the port an X placeholder (500X) so each group gets its own",
                    )
                )
            owners.setdefault(key, index)
    return findings


def _check_model_mount(recipe: Recipe) -> list[Problem]:
    findings = []
    kind = recipe.server.server_kind
    model_path = recipe.server.flag(kind.model_flag)
    mounts = recipe.docker.mounts()
    if model_path and model_path.startswith("/") and not any(_inside(model_path, m.target) for m in mounts):
        findings.append(
            Problem(
                "model-mount",
                f"{kind.model_flag} {model_path} is not inside any mount",
                f"add -v <host dir>:{model_path}",
            )
        )
    model = recipe.model
    local_dir, mount_point = model.local_dir, model.mount_point
    if local_dir and mount_point and not any(_mounted_at(local_dir, mount_point, m) for m in mounts):
        findings.append(
            Problem(
                "model-mount",
                f"model.local_dir {local_dir} is not mounted at {mount_point}",
                f"add -v {local_dir}:{mount_point}",
            )
        )
    return findings


def _inside(path: str, directory: str) -> bool:
    """True when `path` is `directory` or under it (a model under a mounted parent directory is mounted)."""
    base = directory.rstrip("/")
    return bool(base) and (path.rstrip("/") == base or path.startswith(base + "/"))


def _mounted_at(local_dir: str, mount_point: str, mount: Mount) -> bool:
    """True when `mount` puts host `local_dir` at `mount_point`: itself, or through a parent directory."""
    source, target = mount.source.rstrip("/"), mount.target.rstrip("/")
    if not source.startswith("/") or not _inside(local_dir, source):
        return False
    return mount_point.rstrip("/") == target + local_dir.rstrip("/")[len(source) :]


def _check_exposure(recipe: Recipe) -> list[Problem]:
    findings = []
    ports = recipe.docker.ports()
    kind = recipe.server.server_kind
    try:
        host = effective_host(recipe)  # what the engine really binds: through a sh -c wrapper, or its default
    except InputError as err:
        return [
            Problem(
                "wrapper",
                f"{err.message}, so who can reach the API is not known",
                "write the server's flags without a sh -c wrapper",
            )
        ]
    written = host if host != kind.default_host or recipe.server.flag("--host") else None
    network_host = recipe.docker.last("--network") == "host"
    if ports and not network_host and is_loopback(host):
        findings.append(
            Problem(  # an error: the deploy would wait for a health answer that can never come
                "unreachable",
                f"the server listens on {written or f'{host} ({kind.title} default)'} inside the container, so the "
                "published port cannot reach it",
                "add --host 0.0.0.0",
            )
        )
    if network_host and ports:
        findings.append(Problem("network-host", "-p is ignored with --network host", "drop one of them", "warning"))
    return findings


def _check_host_interfaces(recipe: Recipe) -> list[Problem]:
    """A container on its own (bridge) network told to use a host interface (`NCCL_SOCKET_IFNAME=bond0`):
    the interface does not exist there, and NCCL or Gloo fails at init."""
    if recipe.docker.last("--network") == "host":
        return []
    settings = host_interface_settings(
        ((e.name, e.value) for e in recipe.docker.env()), spanning=recipe.node_count() > 1
    )
    return [
        Problem(
            "host-interface",
            f"-e {name}={value} names a host network interface, but the container has its own "
            "network (no --network host), where only lo and eth0 exist",
            f"add --network host or drop {name}",
        )
        for name, value in settings
    ]


def _check_spanning_network(recipe: Recipe) -> list[Problem]:
    """A server spread over hosts from containers on Docker's bridge network: its ranks reach each other on the
    rendezvous port and on NCCL's/Gloo's own ports, which no `-p` publishes, so the group never forms (seen on
    simulated nodes: rank 0 waits for the other node until its health deadline)."""
    nodes = recipe.node_count()
    if nodes <= 1 or recipe.docker.last("--network") == "host":
        return []
    return [
        Problem(
            "spanning-network",
            f"the server spans {nodes} nodes, but its containers have Docker's own (bridge) "
            "network: the ranks reach each other on ports no -p publishes (the rendezvous, NCCL's), so the group "
            "never forms",
            "add --network host, as multi-node posts of both engines do",
        )
    ]


def _check_entrypoint(recipe: Recipe) -> list[Problem]:
    """The engine's own image already runs its launch program (vLLM's `vllm serve`): a program written after the
    image becomes the entrypoint's arguments, which the engine refuses (`vllm serve vllm serve M`: unrecognized
    arguments). A server on a Ray cluster is started by its shell (`--entrypoint` given by the render)."""
    server, docker = recipe.server, recipe.docker
    entrypoint = server.server_kind.image_entrypoint
    if not (entrypoint and server.program and image_matches(recipe.image.reference, server.server_kind.images)):
        return []
    if docker.values("--entrypoint") or ray_cluster(recipe) is not None:
        return []
    program, runs = " ".join(server.program), " ".join(entrypoint)
    return [
        Problem(
            "entrypoint-repeated",
            f"server.command {program!r}: the image's entrypoint is already `{runs}`, so the container would run "
            f"`{runs} {program} …`, which {server.server_kind.title} refuses (unrecognized arguments)",
            f"leave server.command empty: `{runs}` takes server.args",
        )
    ]


def _check_engine(recipe: Recipe) -> list[Problem]:
    """What the engine would refuse at start-up (an unknown flag for its image, a value it cannot parse): the
    same judgement an import refuses on, so a recipe written or edited by hand fails here, not in its container."""
    refusal = engine_refusal(recipe)
    if refusal is None:
        return []
    # The reason is worded for an import's way out; a recipe's is its image field.
    reason = refusal.reason.replace("import with --image REF", "set image.reference")
    return [Problem("engine", f"server.args: the engine would refuse: {reason}")]


def _check_pitfalls(recipe: Recipe) -> list[Problem]:
    findings = []
    server = recipe.server
    docker = recipe.docker

    def warn(code: str, found: str, remedy: str = "") -> None:
        findings.append(Problem(code, found, remedy, "warning"))

    if docker.values("--shm-size") and docker.last("--ipc") == "host":
        warn("shm-size-ignored", "--shm-size has no effect with --ipc=host (the host's /dev/shm is used)")
    if server.server_kind.pitfalls is not None:
        server.server_kind.pitfalls(recipe, warn)
    tag = recipe.image.reference.rsplit(":", 1)[-1] if ":" in recipe.image.reference.rsplit("/", 1)[-1] else "latest"
    if not recipe.image.digest and tag.startswith(_DEV_TAGS):
        warn(
            "moving-tag",
            f"image tag {tag!r} moves; the serve role runs the digest it pulled, pin it in image.digest to "
            "refuse a changed image",
        )
    return findings
