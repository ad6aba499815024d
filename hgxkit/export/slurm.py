"""Export a recipe as an sbatch script: one job, one `srun` task per node running each group's container.

The default runs Docker on every node: the render's own `docker run` (GPUs by id, ports bound as `--bind`
says, shm, ipc and ulimits as written) in the foreground under `srun`, stopped by `docker stop` and removed
when the task ends (`scancel` signals the task; the Docker client alone would leave the container running,
and a next job could not reuse its name). Values from the environment reach the container as `docker run -e
NAME` from the task's environment, which the node's task fills literally from `$HGXKIT_SECRETS_FILE` (docker's
env-file format; default `secrets.env` in the submit directory): no value is ever on a command line. A group
spanning nodes takes its rank from `SLURM_NODEID` (head and workers in `if [ "$SLURM_NODEID" = 0 ]` branches)
and its head from `scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1`. The batch step (on the first
node: the head) waits for the kind's health endpoint, runs the recipe's smoke cell with the kind's own
benchmark client inside the head's container, and keeps serving until the job is cancelled.

A prefill/decode split on one node (Docker only) runs its kind's router in PD mode (hgxkit.export.pd_router) as
one more step on the node once both sides are healthy; the smoke cell goes through it from the decode's container.

`--slurm-runtime pyxis` runs them with enroot + pyxis instead (`srun --container-image=…`: hgxkit.export.slurm_pyxis),
as HGX and DGX clusters whose users have no Docker do; both are entries of RUNTIMES.

Example:
    >>> from hgxkit.recipe.judge import judge
    >>> from hgxkit.recipe.read import load_recipe
    >>> out = export_slurm(judge(load_recipe("recipes/deepseek-v4-flash-dspark-marlin.yaml")), ExportOptions())
    >>> [line for line in out.files["deepseek-v4-flash-dspark-marlin.sbatch"].splitlines() if "#SBATCH" in line]
    ['#SBATCH --job-name=deepseek-v4-flash-dspark-marlin', '#SBATCH --nodes=1', '#SBATCH --ntasks-per-node=1', \
'#SBATCH --gpus-per-node=8', '#SBATCH --exclusive', '#SBATCH --time=7-00:00:00']
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from hgxkit.errors import InputError
from hgxkit.export import slurm_pyxis
from hgxkit.export.common import (
    HEAD_STANDIN,
    KEY_CONFIG_FILE,
    KEY_CONFIG_IN_CONTAINER,
    START_STANDIN,
    Container,
    Exported,
    ExportGroup,
    ExportOptions,
    Provenance,
    export_groups,
    key_file_line,
    model_entry_read_only,
    provenance,
)
from hgxkit.export.pd_router import READY_PATH, SplitRouter, keyless_groups, router_labels, router_name, split_router
from hgxkit.hostcmd import script, text
from hgxkit.recipe.docker_options import canonical
from hgxkit.recipe.docker_parse import OptionEntry
from hgxkit.recipe.judge import Judged
from hgxkit.recipe.pd import group_server, is_prefill_decode, side
from hgxkit.recipe.shellwords import quote_word
from hgxkit.recipe.spec import Recipe
from hgxkit.serving.containers import GROUP_LABEL, MANAGED_LABEL, RANK_LABEL, RECIPE_LABEL
from hgxkit.serving.router import ROUTER_LABEL as ROUTER_CONTAINER_LABEL
from hgxkit.verify.plan import client_argv, plan_cells, through_router

# The container runs in the foreground under srun: the options that detach or attach it are dropped.
_FOREGROUND_DROPS = {"--detach", "--interactive", "--tty", "--restart"}
OUTPUT_DIR = "/tmp/hgxkit-verify"


def export_slurm(judged: Judged, options: ExportOptions) -> Exported:
    """`<recipe>.sbatch`: every group of the recipe in one job (all groups span the same number of nodes), its
    containers run by the runtime `options.slurm_runtime` names (RUNTIMES)."""
    if options.slurm_runtime not in RUNTIMES:
        raise InputError(f"--slurm-runtime {options.slurm_runtime}: one of {', '.join(RUNTIMES)}")
    runtime = RUNTIMES[options.slurm_runtime]
    recipe = judged.recipe
    groups = export_groups(recipe, options)
    router, keyless = None, []
    if is_prefill_decode(recipe, options.total_gpus):
        if runtime is not RUNTIMES["docker"]:
            raise InputError(
                f"{recipe.name}: a prefill/decode split is not exported with --slurm-runtime {options.slurm_runtime} "
                "(its router in PD mode is written for Docker only); export it with --slurm-runtime docker"
            )
        groups, keyless = keyless_groups(groups)
        router = split_router(judged, groups)
    origin = provenance(judged, options)
    gpus = sum(len(c.gpus) if c.gpus is not None else options.total_gpus for c in (g.head for g in groups))
    per_node = min(gpus, options.total_gpus)
    job = re.sub(r"[^A-Za-z0-9_.-]", "-", recipe.name)
    bind = judged.allowances.bind_address
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name={job}",
        f"#SBATCH --nodes={groups[0].nodes}",
        "#SBATCH --ntasks-per-node=1",
        f"#SBATCH --gpus-per-node={per_node}",
        "#SBATCH --exclusive",
        f"#SBATCH --time={options.time_limit}",
        *(f"# {line}" for line in origin.comment()),
        *(f"# {line}" for line in runtime.about),
        "# The head is the job's first node (before pipefail: head closing the pipe early is no failure).",
        'HGXKIT_HEAD=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        "export HGXKIT_HEAD",
        "set -euo pipefail",
        'export HGXKIT_SECRETS_FILE="${HGXKIT_SECRETS_FILE:-${SLURM_SUBMIT_DIR:-$PWD}/secrets.env}"',  # SECRETS_FILE
        '[ -n "$HGXKIT_HEAD" ] || { echo "scontrol named no node of the job" >&2; exit 1; }',
        "",
        *runtime.launch(recipe, groups, origin, bind, per_node),
    ]
    for group in groups:
        lines += _wait_until_healthy(group, split=router is not None)
        if router is None:
            lines += [*runtime.smoke(recipe, group, bind), ""]
    if router is not None:
        lines += _router_lines(recipe, groups, router, origin)
    lines += ['wait "$server"', ""]
    return Exported(
        {f"{job}.sbatch": "\n".join(lines)},
        [*runtime.not_carried(groups), *keyless, *([router.by_tag] if router else [])],
    )


@dataclass(frozen=True)
class SlurmRuntime:
    """How the script runs each node's containers (`--slurm-runtime`). A new runtime is one of these in
    RUNTIMES: the comment that says how, the batch lines that start every node's servers (the last
    `server=$!`), the lines that run a healthy group's smoke cell, and what of the recipe it does not carry."""

    about: tuple[str, ...]
    launch: Callable[[Recipe, list[ExportGroup], Provenance, str, int], list[str]]
    smoke: Callable[[Recipe, ExportGroup, str], list[str]]
    not_carried: Callable[[list[ExportGroup]], list[str]]


def _docker_launch(recipe: Recipe, groups: list[ExportGroup], origin: Provenance, bind: str, _gpus: int) -> list[str]:
    """`serve_node`, run by one srun task per node: every group's `docker run` in the foreground, stopped and
    removed with the task."""
    lines = [
        "serve_node() {",
        "  # NAME=value lines (docker's env-file format) into the task's environment, literally; `docker run -e NAME`",
        "  # passes each on, so no value is ever on a command line.",
        '  if [ -f "$HGXKIT_SECRETS_FILE" ]; then',
        '    while IFS= read -r line || [ -n "$line" ]; do',
        "      case \"$line\" in ''|'#'*) continue ;; esac",
        '      export "${line?}"',
        '    done < "$HGXKIT_SECRETS_FILE"',
        "  fi",
        "  names=()  # global: the EXIT trap runs after the function returns",
        "  # stopped and removed when the task ends (scancel), so the next job can start containers of these names",
        '  trap \'docker stop "${names[@]}" >/dev/null 2>&1; docker rm "${names[@]}" >/dev/null 2>&1\' EXIT TERM INT',
    ]
    for group in groups:
        lines += _node_lines(recipe, group, origin.annotations(), bind)
    return [
        *lines,
        "  wait",
        "}",
        "export -f serve_node",
        "",
        'srun --nodes="$SLURM_JOB_NUM_NODES" --ntasks-per-node=1 --kill-on-bad-exit=1 bash -c serve_node &',
        "server=$!",
        "",
    ]


def _docker_not_carried(groups: list[ExportGroup]) -> list[str]:
    """The script runs each group's whole `docker run`: every option is carried but these."""
    if any(g.head.restart for g in groups):
        return ["--restart: Slurm requeues a job, not a container (sbatch --requeue)"]
    return []


def _docker_words(recipe: Recipe, container: Container, bind: str, labels: dict[str, str]) -> tuple[int, list[str]]:
    """(words of the invocation, the `docker run` words) with hgxkit's name, labels and bind address, the model
    mounted read-only."""
    rendered = container.rendered
    assert rendered is not None
    secret = set(container.secret_env)
    kept = [model_entry_read_only(recipe, e) for e in rendered.options if not _dropped(e, secret)]
    body = replace(rendered, options=tuple(kept))
    body = body.with_overrides(name=container.name, labels=labels, publish_address=bind)
    return len(body.invocation), body.argv


def _dropped(entry: OptionEntry, secret: set[str]) -> bool:
    names = {canonical(u.option.name) for u in entry.uses}
    if names <= _FOREGROUND_DROPS:
        return True
    # A value from the environment goes through the env file, never onto a command line.
    return names == {"--env"} and all((u.value or "").partition("=")[0] in secret for u in entry.uses)


def _node_lines(recipe: Recipe, group: ExportGroup, annotations: dict[str, str], bind: str) -> list[str]:
    labels = {MANAGED_LABEL: "1", RECIPE_LABEL: recipe.name, GROUP_LABEL: str(group.index), **annotations}
    head = _with_key_file(group.head.for_engine("${HGXKIT_HEAD}", None, group.kind))
    head_words = _docker_words(recipe, head, bind, labels | ({RANK_LABEL: "0"} if group.nodes > 1 else {}))
    lines = [f"  names+=({quote_word(head.name)})"]
    if head.key_config:  # the key file in a private directory of this task, mounted read-only as --config
        lines += ["  HGXKIT_KEY_DIR=$(mktemp -d)", "  " + key_file_line(head.key_config, KEY_FILE)]
    if group.nodes == 1:
        return [*lines, "  " + _with_secrets(head_words, head.secret_env) + " &"]
    worker = _with_key_file(
        group.worker("${HGXKIT_HEAD}", "${SLURM_NODEID}", START_STANDIN if group.start_needed else None)
    )
    worker_words = _docker_words(recipe, worker, bind, labels | {RANK_LABEL: "${SLURM_NODEID}"})
    start = f'"$((SLURM_NODEID * {group.dp_per_host}))"'  # a worker's first data-parallel rank
    return [
        *lines,
        '  if [ "$SLURM_NODEID" = 0 ]; then',
        "    " + _with_secrets(head_words, head.secret_env) + " &",
        "  else",
        "    " + _with_secrets(worker_words, worker.secret_env).replace(START_STANDIN, start) + " &",
        "  fi",
    ]


KEY_FILE = f'"$HGXKIT_KEY_DIR/{KEY_CONFIG_FILE}"'


def _with_key_file(container: Container) -> Container:
    """The container with the task's key file mounted where its `--config` reads it (hgxkit.export.common)."""
    if not container.key_config or container.rendered is None:
        return container
    mount = OptionEntry.long("--volume", f"${{HGXKIT_KEY_DIR}}/{KEY_CONFIG_FILE}:{KEY_CONFIG_IN_CONTAINER}:ro")
    rendered = replace(container.rendered, options=(*container.rendered.options, mount))
    return replace(container, rendered=rendered)


def _with_secrets(docker: tuple[int, list[str]], secrets: tuple[str, ...]) -> str:
    """`docker run` + `-e NAME` for each value from the environment + the rest, quoted for the shell."""
    count, words = docker
    quoted = [quote_word(word) for word in words]
    return " ".join([*quoted[:count], *(f"-e {quote_word(name)}" for name in secrets), *quoted[count:]])


def _wait_until_healthy(group: ExportGroup, split: bool = False) -> list[str]:
    head = group.head
    port = head.host_port or head.container_port
    url = f"http://127.0.0.1:{port}{group.kind.health_path}"
    then = (
        "(one side of the split: the smoke cell goes through the router)"
        if split
        else (f"then the recipe's smoke cell with {group.kind.client}")
    )
    return [
        f"# group {group.index}: wait until {head.name} can generate, {then}",
        f"until curl -fsS -o /dev/null --max-time 10 {quote_word(url)}; do",
        '  kill -0 "$server" 2>/dev/null || { echo "the servers stopped before they were healthy" >&2; exit 1; }',
        "  sleep 10",
        "done",
    ]


def _router_lines(recipe: Recipe, groups: list[ExportGroup], router: SplitRouter, origin: Provenance) -> list[str]:
    """A split's router as its own step on the node (started once both sides answer, stopped and removed with the
    job like the groups), a wait for its readiness, then the smoke cell through it from the first decode's
    container, as verify measures a split."""
    name = router_name(recipe.name)
    labels = [f"--label={key}={value}" for key, value in {ROUTER_CONTAINER_LABEL: "1", **router_labels(origin)}.items()]
    run = ["docker", "run", "--name", name, *labels, "--network", "host", "--entrypoint", router.program[0]]
    words = [*run, router.image, *router.program[1:], *router.args]
    stop = text(script("docker stop {name} >/dev/null 2>&1; docker rm {name} >/dev/null 2>&1", name=name))
    url = f"{router.url}{READY_PATH}"
    decode = next(g for g in groups if side(group_server(recipe, g.index)) == "decode")
    return [
        f"# the router in PD mode: requests go to {router.url} (the groups alone fail)",
        "serve_router() {",
        f"  trap {quote_word(stop)} EXIT TERM INT",
        "  " + " ".join(quote_word(word) for word in words) + " &",
        "  wait",
        "}",
        "export -f serve_router",
        "srun --overlap --nodes=1 --ntasks=1 --relative=0 bash -c serve_router &",
        "router=$!",
        f"until curl -fsS -o /dev/null --max-time 10 {quote_word(url)}; do",
        '  kill -0 "$router" 2>/dev/null || { echo "the router stopped before it was ready" >&2; exit 1; }',
        "  sleep 10",
        "done",
        *_docker_smoke(recipe, decode, router.bind, router.port),
        "",
    ]


def _docker_smoke(recipe: Recipe, group: ExportGroup, _bind: str, router_port: int | None = None) -> list[str]:
    """The smoke cell inside the head's container (`docker exec`), offline as verify runs it: the client reads
    the tokenizer from the model the container serves; its module the first of the kind's the image has. With
    `router_port` (a split) the cell goes to the router on the host's network."""
    head = group.head
    cells = plan_cells(recipe, "smoke", [(group.index, head.name)], port=router_port)
    cell = (through_router(cells) if router_port is not None else cells)[0]
    client = ["docker", "exec", "-e", "HF_HUB_OFFLINE=1", head.name, "python3", "-m"]
    client_args = [*client_argv(cell, OUTPUT_DIR)]
    modules = [module for module, _ in group.kind.bench.modules]
    prefixes = {module: prefix for module, prefix in group.kind.bench.modules}
    assert HEAD_STANDIN not in " ".join(client_args)
    failed = '|| echo "the smoke cell failed" >&2'  # reported, and the job goes on: the servers keep serving
    if len(modules) == 1:
        (module,) = modules
        words = [*client, module, *prefixes[module], *client_args]
        choose = [f"{' '.join(quote_word(word) for word in words)} {failed}"]
    else:
        choose = _choose_module(head.name, modules, prefixes, client, client_args, group.kind.title, failed)
    return [text(script("docker exec {name} mkdir -p {dir}", name=head.name, dir=OUTPUT_DIR)), *choose]


def _choose_module(
    name: str,
    modules: list[str],
    prefixes: dict[str, tuple[str, ...]],
    client: list[str],
    client_args: list[str],
    title: str,
    failed: str,
) -> list[str]:
    """Shell lines that run the smoke cell with the first of the kind's client modules the image has."""
    pick = text(
        script(
            'module=$(for m in {modules}; do docker exec {name} python3 -c "import $m" >/dev/null 2>&1 && '
            "{{ echo $m; break; }}; done; true)",
            modules=modules,
            name=name,
        )
    )
    lines = [pick]
    for module in modules:
        words = [*client, module, *prefixes[module], *client_args]
        lines.append(f'{"elif" if len(lines) > 1 else "if"} [ "$module" = {quote_word(module)} ]; then')
        lines.append(f"  {' '.join(quote_word(word) for word in words)} {failed}")
    missing = f"no benchmark client of {title} in {name}: the smoke cell was not run"
    return [*lines, "else", "  " + text(script("echo {message} >&2", message=missing)), "fi"]


RUNTIMES: dict[str, SlurmRuntime] = {
    "docker": SlurmRuntime(
        ("Containers run with Docker on each node (--slurm-runtime pyxis: with enroot + pyxis).",),
        _docker_launch,
        _docker_smoke,
        _docker_not_carried,
    ),
    "pyxis": SlurmRuntime(
        (
            "Containers run with enroot + pyxis (srun --container-image), on the host's network; a digest needs",
            "enroot 4.0 or later.",
        ),
        slurm_pyxis.launch,
        slurm_pyxis.smoke,
        slurm_pyxis.pyxis_not_carried,
    ),
}
