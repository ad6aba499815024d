"""Export a recipe as SkyPilot task YAML: one task per GPU group (`sky launch skypilot-<group>.yaml`).

SkyPilot runs the task inside the recipe's image (`image_id: docker:<image@digest>`) on a node with the
group's GPUs (`accelerators: H200:<n>`), with the recipe's shm, ipc and ulimits as the container's run
options (`config.docker.run_options`) and the server's port opened. `setup` downloads the model at its
revision into the path the server reads it from; `run` starts the server with the render's command. A
group spanning nodes is `num_nodes` nodes: the rank is `SKYPILOT_NODE_RANK`, the head the first of
`SKYPILOT_NODE_IPS`. Values from the environment are `secrets` (given at launch with `--secret NAME`).
One task per group: in one container every group's server would listen on the same port.

Example:
    >>> from hgxkit.recipe.judge import judge
    >>> from hgxkit.recipe.read import load_recipe
    >>> out = export_skypilot(judge(load_recipe("recipes/deepseek-v4-flash-dspark-marlin.yaml")), ExportOptions())
    >>> sorted(out.files)
    ['skypilot-deepseek-v4-flash-0.yaml', 'skypilot-deepseek-v4-flash-1.yaml']
"""

from __future__ import annotations

from hgxkit.export.common import (
    KEY_CONFIG_IN_CONTAINER,
    START_STANDIN,
    Container,
    Exported,
    ExportGroup,
    ExportOptions,
    dump_yaml,
    expansion_names,
    export_groups,
    key_file_line,
    not_carried,
    provenance,
)
from hgxkit.hostcmd import script, text
from hgxkit.recipe.exposure import exposure_problems, own_key
from hgxkit.recipe.judge import Judged
from hgxkit.recipe.shellwords import quote_word, shell_value
from hgxkit.recipe.spec import Recipe

HEAD = "${HGXKIT_HEAD}"
RANK = "${SKYPILOT_NODE_RANK}"


def export_skypilot(judged: Judged, options: ExportOptions) -> Exported:
    """`skypilot-<group>.yaml` for every group."""
    recipe = judged.recipe
    groups = export_groups(recipe, options)
    origin = provenance(judged, options)
    files = {}
    for group in groups:
        task = _task(judged, group, options)
        files[f"skypilot-{group.head.name}.yaml"] = dump_yaml([task], origin.comment())
    dropped = not_carried(groups)
    if _opens_port(judged):
        dropped.append("GPU ids and the host port: each task has its own node's GPUs and opens the server's own port")
    else:
        dropped.append(
            "ports: the server takes no API key, so the task opens no port to the world; reach it with "
            "`ssh -L PORT:localhost:PORT <cluster>`, or give it a key (the recipe's --api-key) to open it"
        )
    if any(c.restart for g in groups for c in g.containers):
        dropped.append("--restart: SkyPilot restarts nothing in a task; a `sky serve` service replaces replicas")
    if judged.allowances.bind_address != "127.0.0.1":
        dropped.append(f"--bind {judged.allowances.bind_address}: a task's port is open to all or not opened")
    if any(c.env_files for g in groups for c in g.containers):
        dropped.append("--env-file: give its values as --secret NAME at launch")
    # the model is downloaded into the task's container (`setup`); any other host directory is not there
    others = [m for g in groups for c in g.containers for i, m in enumerate(c.mounts) if i != c.model_mount]
    for shown in dict.fromkeys(f"{m.source}:{m.target}" for m in others):
        dropped.append(f"the mount {shown}: a task's node has no such host directory (`file_mounts` copies files in)")
    return Exported(files, dropped)


def _opens_port(judged: Judged) -> bool:
    """SkyPilot's `ports:` opens the port to the world: only for a server that takes a key (the kind's key
    variable, a secret given at launch, or the recipe's own), or when allow_unauthenticated says so."""
    allowances = judged.allowances
    keyed = allowances.api_key or own_key(judged.recipe)
    return not exposure_problems("0.0.0.0", "auto" if keyed else None, allowances.unauthenticated)


def _task(judged: Judged, group: ExportGroup, options: ExportOptions) -> dict:
    recipe = judged.recipe
    head = group.head
    product = options.gpu_product.removeprefix("NVIDIA-")
    gpus = head.gpu_count or options.total_gpus
    resources: dict[str, object] = {
        "accelerators": f"{product}:{gpus}",
        "image_id": f"docker:{head.image}",
        "disk_size": options.disk_gb,
    }
    if _opens_port(judged):
        resources["ports"] = [head.container_port]
    task: dict[str, object] = {"name": head.name, "resources": resources}
    if group.nodes > 1:
        task["num_nodes"] = group.nodes
    envs = {name: shell_value(value) for name, value in head.env}  # `$$` is one literal `$`
    envs.update(_provenance_envs(judged, options))
    task["envs"] = envs
    named = [*head.secret_env, *expansion_names(head.args), *([head.key_config] if head.key_config else [])]
    secrets = list(dict.fromkeys(named))
    if secrets:
        task["secrets"] = dict.fromkeys(secrets)  # null: given at launch, never written here
    run_options = _run_options(head)
    if run_options:
        task["config"] = {"docker": {"run_options": run_options}}
    task["setup"] = _setup(recipe, head)
    task["run"] = _run(group)
    return task


def _provenance_envs(judged: Judged, options: ExportOptions) -> dict[str, str]:
    origin = provenance(judged, options)
    return {
        "HGXKIT_" + k.removeprefix("hgxkit.io/").upper().replace("-", "_"): v for k, v in origin.annotations().items()
    }


def _run_options(container: Container) -> list[str]:
    out = []
    if container.shm_size:
        out.append(f"--shm-size={container.shm_size}")
    if container.ipc:
        out.append(f"--ipc={container.ipc}")
    out += [f"--ulimit={u.name}={u.soft}:{u.hard}" for u in container.ulimits]
    out += [f"--cap-add={cap}" for cap in container.cap_add]
    if container.privileged:
        out.append("--privileged")
    return out


def _setup(recipe: Recipe, container: Container) -> str:
    model = recipe.model
    if not model.repo_id:
        return "# the recipe names no model repository: put the weights where the server's flags say\n"
    target = (
        container.mounts[container.model_mount].target
        if container.model_mount is not None
        else model.mount_point or model.local_dir or "/model"
    )
    words = ["hf", "download", model.repo_id, "--revision", model.revision, "--local-dir", target]
    for pattern in model.allow_patterns:
        words += ["--include", pattern]
    command = " ".join(quote_word(w) for w in words)
    legacy = " ".join(quote_word(w) for w in ["huggingface-cli", *words[1:]])
    return (
        "set -euo pipefail\n"
        f"mkdir -p {quote_word(target)}\n"
        "# the model at the recipe's revision (hf is huggingface_hub's CLI; older images have huggingface-cli)\n"
        f"if command -v hf >/dev/null; then {command}; else {legacy}; fi\n"
    )


def _preamble(head: Container) -> list[str]:
    lines = ["set -euo pipefail"]
    if head.key_config:
        lines += ["mkdir -p /run/hgxkit", key_file_line(head.key_config, KEY_CONFIG_IN_CONTAINER)]
    if head.gpus is not None:
        # The node has exactly the group's GPUs: they are the container's 0..n-1.
        visible = ",".join(str(i) for i in range(len(head.gpus)))
        lines.append(text(script("export CUDA_VISIBLE_DEVICES={gpus}", gpus=visible)))
    return lines


def _run(group: ExportGroup) -> str:
    head = group.head
    if group.nodes == 1:
        return "\n".join([*_preamble(head), "exec " + _command(head), ""])
    leader = head.for_engine(HEAD, None, group.kind)
    worker = group.worker(HEAD, RANK, START_STANDIN if group.start_needed else None)
    start = f'"$((SKYPILOT_NODE_RANK * {group.dp_per_host}))"'  # a worker's first data-parallel rank
    # The head is the first node, read before pipefail: head closing the pipe early is no failure (under pipefail
    # echo's SIGPIPE would end the task with 141 whenever head exits first).
    lines = [
        "# the group's head: the first of the task's nodes",
        'HGXKIT_HEAD=$(echo "$SKYPILOT_NODE_IPS" | head -n 1)',
    ]
    lines += _preamble(head)
    lines += [
        'if [ "$SKYPILOT_NODE_RANK" = 0 ]; then',
        "  exec " + _command(leader),
        "else",
        "  exec " + _command(worker).replace(START_STANDIN, start),
        "fi",
        "",
    ]
    return "\n".join(lines)


def _command(container: Container) -> str:
    return " ".join(quote_word(word) for word in container.shell_words)
