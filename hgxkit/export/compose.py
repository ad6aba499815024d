"""Export a recipe as a compose file: one service per GPU group (one file per node rank for a group spanning nodes).

Each service pins its group's GPUs (`deploy.resources.reservations.devices` with `device_ids`), publishes its
port on the `--bind` address (loopback unless told), mounts the model directory read-only, takes every secret
from the environment of `docker-compose up` (a name with no value: never written into the file, and no file to
make by hand; the header names them), checks health on the kind's endpoint, and keeps the recipe's ipc,
shm_size and ulimits. A prefill/decode split on one node gets its kind's router in PD mode as one more service
(hgxkit.export.pd_router), started once both sides are healthy; its port is the one to benchmark.
The command is the render's, word for word: the recipe's `$$` and `${NAME}` notation is compose's own.

Example:
    >>> from hgxkit.recipe.judge import judge
    >>> from hgxkit.recipe.read import load_recipe
    >>> out = export_compose(judge(load_recipe("recipes/deepseek-v4-flash-dspark-marlin.yaml")), ExportOptions())
    >>> sorted(out.files)
    ['compose.yaml']
"""

from __future__ import annotations

from hgxkit.export.common import (
    HEAD_STANDIN,
    KEY_CONFIG_FILE,
    KEY_CONFIG_IN_CONTAINER,
    Container,
    Exported,
    ExportGroup,
    ExportOptions,
    dump_yaml,
    expansion_names,
    export_groups,
    not_carried,
    provenance,
)
from hgxkit.export.pd_router import ROUTER, SplitRouter, keyless_groups, router_labels, split_router
from hgxkit.recipe.judge import Judged
from hgxkit.recipe.pd import is_prefill_decode

HEAD_VARIABLE = "${HGXKIT_HEAD:?set HGXKIT_HEAD to the head node's address}"


KEY_SECRET = "api-key"  # the compose secret that holds the key file (hgxkit.export.common: KEY_CONFIG_FILE)


def export_compose(judged: Judged, options: ExportOptions) -> Exported:
    """`compose.yaml` (and `compose.rank-N.yaml` for the other nodes of a group spanning nodes)."""
    recipe = judged.recipe
    groups = export_groups(recipe, options)
    router, keyless = None, []
    if is_prefill_decode(recipe, options.total_gpus):
        groups, keyless = keyless_groups(groups)
        router = split_router(judged, groups)
    origin = provenance(judged, options)
    nodes = max(g.nodes for g in groups)
    files: dict[str, str] = {}
    secrets: list[str] = []
    for rank in range(nodes):
        services: dict[str, object] = {}
        volumes: dict[str, dict] = {}
        for group in groups:
            container = group.containers[rank].for_engine(HEAD_VARIABLE, None, group.kind)
            services[container.name] = _service(container, group, judged.allowances.bind_address, volumes)
            # The same labels on every group's service: the services differ only where the groups do (GPUs,
            # port, name), so an importer reads them back as one recipe.
            services[container.name]["labels"] = origin.annotations()
            secrets += [*container.secret_env, *expansion_names(container.args)]
        if router is not None:
            # Its own labels: the router is no GPU group of the recipe, and an importer reads the others as groups.
            services[ROUTER] = {**_router_service(router, list(services)), "labels": router_labels(origin)}
        document: dict[str, object] = {"services": services}
        if volumes:
            document["volumes"] = volumes
        if any("secrets" in service for service in services.values()):
            document["secrets"] = {KEY_SECRET: {"file": f"./{KEY_CONFIG_FILE}"}}
        header = [*origin.comment()]
        names = list(dict.fromkeys(secrets))  # `${HGXKIT_HEAD:?…}` (a required value) is no expansion of these
        if names:
            header.append(f"secrets from the environment of docker-compose up: export {' '.join(names)}")
        if router is not None:
            header.append(f"prefill/decode split: send requests to the router, {router.url} (the groups alone fail)")
        if nodes > 1:
            header.append(f"node rank {rank} of {nodes}: run on that node with HGXKIT_HEAD=<rank 0's address>")
        name = "compose.yaml" if rank == 0 else f"compose.rank-{rank}.yaml"
        files[name] = dump_yaml([document], header)
    if any(c.key_config for g in groups for c in g.containers):
        files[f"{KEY_CONFIG_FILE}.example"] = (
            f"# Copy to {KEY_CONFIG_FILE} beside the compose file (chmod 600) and put the server's API key in it: "
            "the server reads it as its --config, never from its command line.\n"
            'api-key: ""\n'
        )
    dropped = [*not_carried(groups), *keyless, *([router.by_tag] if router else [])]
    if router is not None:
        dropped.append("network_mode host: each group's port is the host's; --bind applies to the router alone")
    elif any(c.host_port is None for g in groups for c in g.containers):
        dropped.append("network_mode host: the server's port is the host's; --bind does not apply")
    return Exported(files, dropped)


def _router_service(router: SplitRouter, groups: list[str]) -> dict:
    """The split's router: on the host's network like its groups, started once every group answers its health
    check (the router refuses to start, or routes to a dead side, before)."""
    return {
        "image": router.image,
        "entrypoint": [router.program[0]],
        "command": [*router.program[1:], *router.args],
        "network_mode": "host",
        "restart": "unless-stopped",
        "depends_on": {name: {"condition": "service_healthy"} for name in groups},
    }


def _service(container: Container, group: ExportGroup, bind: str, volumes: dict[str, dict]) -> dict:
    service: dict[str, object] = {"image": container.image}
    if container.entrypoint is not None:
        service["entrypoint"] = list(container.entrypoint)
    service["command"] = container.args
    # A secret's value comes from the environment of `docker-compose up` (a name with no value): nothing to
    # write by hand, and nothing of it in the file.
    environment = {**dict(container.env), **dict.fromkeys(n for n in container.secret_env if n not in container.env)}
    if environment:
        service["environment"] = environment
    if container.env_files:
        service["env_file"] = list(container.env_files)
    if container.key_config:
        service["secrets"] = [{"source": KEY_SECRET, "target": KEY_CONFIG_IN_CONTAINER}]
    if container.network_host:
        service["network_mode"] = "host"
    else:
        host = f"[{bind}]" if ":" in bind else bind
        service["ports"] = [f"{host}:{container.host_port}:{container.container_port}"]
    if container.ipc:
        service["ipc"] = container.ipc
    if container.shm_size:
        service["shm_size"] = container.shm_size
    if container.ulimits:
        service["ulimits"] = {u.name: {"soft": u.soft, "hard": u.hard} for u in container.ulimits}
    if container.privileged:
        service["privileged"] = True
    if container.cap_add:
        service["cap_add"] = list(container.cap_add)
    if container.restart:
        service["restart"] = container.restart
    mounts = []
    for mount in container.mounts:
        if mount.source.startswith(("/", ".")):  # a host path (the judgement refuses `~`): else a volume name
            mounts.append(
                {"type": "bind", "source": mount.source, "target": mount.target, "read_only": mount.read_only}
            )
        else:
            entry: dict[str, object] = {"type": "volume", "target": mount.target, "read_only": mount.read_only}
            if mount.source:
                entry["source"] = mount.source
                volumes[mount.source] = {}
            mounts.append(entry)
    if mounts:
        service["volumes"] = mounts
    device: dict[str, object] = {"driver": "nvidia", "capabilities": ["gpu"]}
    if container.gpus is None:
        device["count"] = "all"
    else:
        device["device_ids"] = [str(gpu) for gpu in container.gpus]
    service["deploy"] = {"resources": {"reservations": {"devices": [device]}}}
    if container.rank in (None, 0):
        url = f"http://127.0.0.1:{container.container_port}{group.kind.health_path}"
        probe = f"import urllib.request; urllib.request.urlopen('{url}', timeout=10)"
        # Python is in every engine's image; curl is not.
        service["healthcheck"] = {
            "test": ["CMD", "python3", "-c", probe],
            "interval": "30s",
            "timeout": "15s",
            "retries": 3,
            "start_period": "3600s",
        }
    assert HEAD_STANDIN not in str(service)
    return service
