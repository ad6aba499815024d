"""The Slurm export's enroot + pyxis runtime (`--slurm-runtime pyxis`): NVIDIA's way of running containers under
Slurm on HGX and DGX clusters, where users have no Docker.

One `srun` step over the job's nodes runs every group of the node in one container of the recipe's image:
`srun --container-image=IMAGE --container-mounts=SRC:DST:ro,… --container-env=NAME,… --no-container-mount-home
bash -c "$node_script"`. pyxis imports the image itself (a registry's host is written `HOST#PATH`, enroot's form; a
digest needs enroot 4.0 or later) and runs no entrypoint of it, so the command is the whole program (the image's
entrypoint first where the recipe leaves it to the image). The node script, read from a quoted here-document, sets
the recipe's environment and each group's GPUs (`CUDA_VISIBLE_DEVICES`) before its server; a group spanning nodes
picks head or worker by `SLURM_NODEID`, as the Docker runtime does.

An enroot container has the host's network: where the recipe publishes a port, its server listens on the group's
host port at the judged bind address (`--host BIND --port PORT`, what `docker run -p BIND:PORT:…` gave it); a
recipe on the host's network already keeps its own. Secrets are read literally from `$HGXKIT_SECRETS_FILE` into
the batch step's environment, which srun passes to every task; `--container-env` names them (names only), so no
value is ever on a command line. The smoke cell runs in its own container of the same image on the head
(`srun --overlap --relative=0`), its output in `hgxkit-verify-<job>` of the submit directory. Unnamed containers
only: pyxis keeps a named one after the job, and a later job of the same name would run its old image.

Example:
    >>> pyxis_image("nvcr.io/nvidia/vllm:25.09-py3"), pyxis_image("lmsysorg/sglang:v0.5.6")
    ('nvcr.io#nvidia/vllm:25.09-py3', 'lmsysorg/sglang:v0.5.6')
"""

from __future__ import annotations

from dataclasses import replace

from pyinfra.api import StringCommand

from hgxkit.errors import InputError
from hgxkit.export.common import (
    KEY_CONFIG_IN_CONTAINER,
    START_STANDIN,
    Container,
    ExportGroup,
    Provenance,
    key_file_line,
    not_carried,
)
from hgxkit.hostcmd import argv, script, text
from hgxkit.kinds.base import ServerKind
from hgxkit.recipe.shellwords import quote_word
from hgxkit.recipe.spec import Mount, Recipe
from hgxkit.verify.plan import client_argv, plan_cells

VERIFY_DIR = '"${SLURM_SUBMIT_DIR:-$PWD}/hgxkit-verify-${SLURM_JOB_ID:-0}"'
OUTPUT_DIR = "/tmp/hgxkit-verify"  # where the client writes, in its container: the verify directory mounted
NODE_SCRIPT = "HGXKIT_NODE"  # the here-document's delimiters
SMOKE_SCRIPT = "HGXKIT_SMOKE"


def pyxis_image(reference: str) -> str:
    """The image as pyxis (enroot) names it: a registry host (a first part with `.` or `:`, or `localhost`)
    followed by `#` instead of `/`; a Docker Hub name as it is."""
    first, slash, rest = reference.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        return f"{first}#{rest}"
    return reference


def launch(recipe: Recipe, groups: list[ExportGroup], _origin: Provenance, bind: str, gpus_per_node: int) -> list[str]:
    """The batch lines that start every node's servers (the last: `server=$!`); the provenance is in the
    script's header (pyxis has no labels)."""
    head = groups[0].head
    secrets = list(dict.fromkeys(n for g in groups for c in g.containers for n in _secret_names(c)))
    srun = [
        "srun",
        '--nodes="$SLURM_JOB_NUM_NODES"',
        "--ntasks-per-node=1",
        f"--gpus-per-node={gpus_per_node}",
        "--kill-on-bad-exit=1",
        *_container_options(head, secrets),
        "bash",
        "-c",
        '"$node_script"',
    ]
    lines = [
        "# NAME=value lines (docker's env-file format) into this step's environment, literally: srun passes it to",
        "# every task and --container-env names the ones the container takes, so no value is ever on a command line.",
        'if [ -f "$HGXKIT_SECRETS_FILE" ]; then',
        '  while IFS= read -r line || [ -n "$line" ]; do',
        "    case \"$line\" in ''|'#'*) continue ;; esac",
        '    export "${line?}"',
        '  done < "$HGXKIT_SECRETS_FILE"',
        "fi",
        "# What each node runs in its container: every group's server on its GPUs (the host's network: each on its",
        "# own port at the bind address).",
        f"node_script=$(cat <<'{NODE_SCRIPT}'",
        "set -euo pipefail",
    ]
    for group in groups:
        lines += _group_lines(group, bind)
    lines += ["wait", NODE_SCRIPT, ")", " ".join(srun) + " &", "server=$!", ""]
    return lines


def _secret_names(container: Container) -> list[str]:
    return [*container.secret_env, *([container.key_config] if container.key_config else [])]


def _container_options(container: Container, secrets: list[str], extra_mounts: tuple[str, ...] = ()) -> list[str]:
    """pyxis's options for a container of the recipe's image: its mounts (host paths; the model read-only) and
    the names of the values it takes from the environment."""
    mounts = [f"{m.source}:{m.target}" + (":ro" if m.read_only else "") for m in container.mounts if _host_path(m)]
    # pyxis splits --container-mounts at commas: a comma in a path would be another mount than the one judged
    split = next((m for m in mounts if "," in m), None)
    if split is not None:
        raise InputError(
            f"{container.name}: the mount {split!r} has a comma, which pyxis reads as two mounts; rename the "
            "directory, or export with the Docker runtime"
        )
    options = [f"--container-image={quote_word(pyxis_image(container.image))}"]
    if mounts or extra_mounts:
        options.append(f"--container-mounts={','.join([*(quote_word(m) for m in mounts), *extra_mounts])}")
    if secrets:
        options.append(f"--container-env={','.join(secrets)}")
    return [*options, "--no-container-mount-home"]


def _host_path(mount: Mount) -> bool:
    return mount.source.startswith("/")


def _group_lines(group: ExportGroup, bind: str) -> list[str]:
    """One group's server started in the background on the node (both branches for a group spanning nodes)."""
    head = _on_host(group.head.for_engine("${HGXKIT_HEAD}", None, group.kind), bind, group.kind)
    lines = [f"# group {group.index}: {head.name}"]
    if head.key_config:  # the key file the server reads as its --config, written in the container from the secret
        lines += [
            text(argv("mkdir", "-p", KEY_CONFIG_IN_CONTAINER.rpartition("/")[0])),
            key_file_line(head.key_config, KEY_CONFIG_IN_CONTAINER),
        ]
    if group.nodes == 1:
        return [*lines, _server_line(head) + " &"]
    worker = _on_host(
        group.worker("${HGXKIT_HEAD}", "${SLURM_NODEID}", START_STANDIN if group.start_needed else None),
        bind,
        group.kind,
    )
    start = f'"$((SLURM_NODEID * {group.dp_per_host}))"'  # a worker's first data-parallel rank
    return [
        *lines,
        'if [ "$SLURM_NODEID" = 0 ]; then',
        "  " + _server_line(head) + " &",
        "else",
        "  " + _server_line(worker).replace(START_STANDIN, start) + " &",
        "fi",
    ]


def _on_host(container: Container, bind: str, kind: ServerKind) -> Container:
    """The container's command as it runs on the host's network: where the recipe publishes the server's port,
    the server listens at the bind address on the group's host port, as `-p BIND:PORT:…` made it."""
    if container.network_host or container.host_port is None:
        return container
    command = list(container.command)
    for flag, value in (("--host", bind), ("--port", str(container.host_port))):
        at = next((i for i, e in enumerate(command) if i and kind.canonical_flag(e[0].partition("=")[0]) == flag), None)
        if at is None:
            command.append((flag, value))
        else:
            command[at] = (f"{flag}={value}",) if "=" in command[at][0] else (command[at][0], value)
    return replace(container, command=tuple(command), container_port=container.host_port)


def _server_line(container: Container) -> str:
    """`NAME=value … program args`: the recipe's environment, then the group's GPUs, for this one server."""
    settings = [f"{name}={quote_word(value)}" for name, value in container.env if name != "CUDA_VISIBLE_DEVICES"]
    gpus = dict(container.env).get("CUDA_VISIBLE_DEVICES")
    if container.gpus is not None:
        gpus = ",".join(str(gpu) for gpu in container.gpus)
    if gpus is not None:
        settings.append(f"CUDA_VISIBLE_DEVICES={quote_word(gpus)}")
    return " ".join([*settings, *(quote_word(word) for word in container.shell_words)])


def smoke(recipe: Recipe, group: ExportGroup, bind: str) -> list[str]:
    """Once the group is healthy: its smoke cell with the kind's own client (the first of its modules the image
    has, as verify picks it) in a container of the same image on the head; a failure is reported and the job goes
    on."""
    head = _on_host(group.head, bind, group.kind)
    cell = replace(plan_cells(recipe, "smoke", [(group.index, head.name)])[0], port=head.container_port)
    args = client_argv(cell, OUTPUT_DIR)
    modules = list(group.kind.bench.modules)
    mount = f"{VERIFY_DIR}:{OUTPUT_DIR}"
    srun = [
        "HF_HUB_OFFLINE=1",  # offline, as verify runs it: the tokenizer is the model the server serves
        "srun",
        "--overlap",
        "--nodes=1",
        "--ntasks=1",
        "--relative=0",
        *_container_options(head, ["HF_HUB_OFFLINE"], (mount,)),
        "bash",
        "-c",
        '"$smoke_script"',
    ]
    missing = f"no benchmark client of {group.kind.title} in {head.image}: the smoke cell was not run"
    make_dir = script("mkdir -p {dir}", dir=StringCommand(VERIFY_DIR))  # VERIFY_DIR is shell text the job expands
    lines = [text(make_dir), f"smoke_script=$(cat <<'{SMOKE_SCRIPT}'"]
    for module, prefix in modules:  # the first the image has runs the cell
        words = ["python3", "-m", module, *prefix, *args]
        lines += [
            text(script("if python3 -c {code} >/dev/null 2>&1; then", code=f"import {module}")),
            "  " + text(script("exec {words}", words=words)),
            "fi",
        ]
    lines += [
        text(script("echo {missing} >&2", missing=missing)),
        SMOKE_SCRIPT,
        ")",
        " ".join(srun) + ' || echo "the smoke cell failed" >&2',
    ]
    return lines


def pyxis_not_carried(groups: list[ExportGroup]) -> list[str]:
    """What of the recipe's `docker run` an enroot container does not take, each with what stands for it."""
    containers = [c for g in groups for c in g.containers]
    notes = not_carried(groups)
    if any(c.shm_size or c.ipc for c in containers):
        notes.append("--shm-size, --ipc: an enroot container uses the host's /dev/shm and IPC")
    if any(c.ulimits for c in containers):
        notes.append("--ulimit: srun passes the submitting shell's limits on (set memlock there, or in slurm.conf)")
    if any(c.privileged or c.cap_add for c in containers):
        notes.append("--privileged, --cap-add: an enroot container runs as the user, with no added privilege")
    if any(not c.network_host and c.host_port is not None for c in containers):
        notes.append(
            "-p: an enroot container has the host's network; each server listens at the bind address on its "
            "group's port (--host, --port)"
        )
    if any(c.gpus is not None for c in containers):
        notes.append("--gpus device=…: each server's CUDA_VISIBLE_DEVICES (the container has the step's GPUs)")
    if any(not _host_path(m) for c in containers for m in c.mounts):
        notes.append("a named docker volume: enroot mounts host paths only (--container-mounts)")
    if any(c.env_files for c in containers):
        notes.append("--env-file: put its NAME=value lines in $HGXKIT_SECRETS_FILE")
    if any(c.restart for c in containers):
        notes.append("--restart: Slurm requeues a job, not a container (sbatch --requeue)")
    return notes
