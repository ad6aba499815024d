"""Per-host steps the serve and router roles share: records, API key, image pull, checks before containers start.

The serve role's single-node and multi-node rollouts (roles/serve) and the router role (a role's own knob read
outside that role's @deploy) take them from here.

Every function takes the pyinfra Host it works on (`h`): the multi-node rollout drives other hosts of its group
from the head's operation.

Example (in a role):
    from hgxkit.serving.steps import record_path
    recorded = plan_fact(host, RecordFile, path=record_path(host))
"""

from __future__ import annotations

import time
from io import StringIO
from pathlib import Path

from pyinfra.api import Host, StringCommand
from pyinfra.api.exceptions import DeployError
from pyinfra.api.output import echo

from hgxkit.hostcmd import HostRunner, SecretLines, argv, script, text
from hgxkit.hostfiles import program_text
from hgxkit.kinds import KINDS
from hgxkit.knobs import knob
from hgxkit.node.facts_files import IsFile
from hgxkit.node.facts_gpu import NvidiaSmi
from hgxkit.node.facts_system import MemTotalBytes
from hgxkit.planfacts import plan_fact
from hgxkit.problems import Problem, refuse
from hgxkit.recipe.danger import host_paths, with_own_files
from hgxkit.recipe.host_recipe import recipe_for
from hgxkit.recipe.judge import Allowances, Judged, Refused, allowances_from_knobs, argv_problems, judge
from hgxkit.recipe.secretenv import default_env_allowlist
from hgxkit.recipe.spec import Recipe
from hgxkit.runfailure import RunFailure, escape_control
from hgxkit.serving.containers import ApiKeyFiles, ContainerSpec
from hgxkit.serving.image import RECORD_NAME, digest_from_inspect, pull_and_inspect
from hgxkit.serving.replace import CHECK_SCRIPT, mounts_check_script, start_preamble

PULL_UNIT = "hgxkit-image-pull"  # the node-side unit that pulls the recipe's image in the background


def record_path(h: Host) -> str:
    """The node's record of the image digest it runs."""
    return f"{knob(h, 'serve_state_dir')}/{RECORD_NAME}"


def workdir(h: Host, name: str) -> str:
    """Where a container's replace keeps its files on the node (status, progress, logs, its spec record)."""
    return f"{knob(h, 'serve_state_dir')}/replace/{name}"


def key_files(h: Host) -> ApiKeyFiles | None:
    """The API key files of `h` with `api_key: auto`, else None."""
    return ApiKeyFiles.beside(str(knob(h, "serve_api_key_file"))) if knob(h, "api_key") == "auto" else None


def runtime_problems(recipe: Recipe, h: Host, *, gpus_only: bool = False) -> list[Problem]:
    """Checks on what earlier roles set up (run just before containers start): GPUs in the fabric, model."""
    problems = []
    smi = plan_fact(h, NvidiaSmi)
    if not smi.ok:
        problems.append(Problem("gpus", f"nvidia-smi fails ({smi.failure})", "run deploys/bringup.py first"))
    stuck = [g.index for g in smi.gpus if g.fabric_state not in (None, "Completed")]
    if stuck:
        problems.append(Problem("gpus", f"GPUs {stuck} are not in the fabric", "run deploys/bringup.py first"))
    local_dir = recipe.model.local_dir
    if not gpus_only and local_dir and not h.get_fact(IsFile, path=f"{local_dir}/config.json"):
        problems.append(
            Problem("model", f"no config.json in {local_dir}", "download the model first (deploys/model.py)")
        )
    return problems


def pull_files(h: Host) -> tuple[str, str]:
    """Where the pull program (hgxkit/serving/pullprogress.py) and its progress file live on the node."""
    state = str(knob(h, "serve_state_dir"))
    return f"{state}/pullprogress.py", f"{state}/pull-progress.json"


def pull_program() -> str:
    """The node-side pull program's text (stdlib only)."""
    return program_text("hgxkit.serving.pullprogress")


def start_pull_command(reference: str, program: str, progress: str) -> StringCommand:
    """Start the pull unit (unless it runs): the program with progress when the node has python3, else
    `docker pull -q`."""
    body = script(
        "if command -v python3 >/dev/null 2>&1; then exec python3 {program} {ref} {progress}; "
        "else exec docker pull -q {ref}; fi",
        program=program,
        ref=reference,
        progress=progress,
    )
    return script(
        "systemctl reset-failed {unit} >/dev/null 2>&1; systemctl is-active --quiet {unit} || "
        "{{ rm -f {progress}; systemd-run --unit {unit} --collect --quiet /bin/sh -c {body}; }}",
        unit=PULL_UNIT,
        progress=progress,
        body=text(body),
    )


def pull(h: Host, reference: str) -> str:
    """Execute time: pull `reference` on `h` in the pull unit (joining a background pull that runs), printing
    its progress (bytes, rate, ETA) every `serve_pull_progress_every_s`; its repository digest."""
    run = HostRunner(h)
    program, progress = pull_files(h)
    if run.status(argv("systemctl", "is-active", "--quiet", PULL_UNIT))[0]:
        echo(f"[{h.name}] joining the background pull of {reference} (unit {PULL_UNIT})")
    else:
        run(script("mkdir -p {d}", d=str(Path(program).parent)))
        h.put_file(StringIO(pull_program()), program)
        run(start_pull_command(reference, program, progress))
    every = float(h.data.get("serve_pull_progress_every_s") or 5)
    poll = script(
        "sleep 1; cat {f} 2>/dev/null; echo; systemctl is-active {unit} 2>/dev/null || true", f=progress, unit=PULL_UNIT
    )
    from hgxkit.serving.pullprogress import progress_line, read_progress  # here: only a pull waits on its progress

    last = 0.0
    state: dict = {}
    while True:
        lines = run(poll)
        state = read_progress(lines[0] if len(lines) > 1 else "") or state
        active = (lines[-1] if lines else "") in ("active", "activating")
        if time.monotonic() - last >= every and state.get("status") == "pulling":
            echo(f"[{h.name}] {escape_control(progress_line(reference, state))}")  # the registry's words
            last = time.monotonic()
        if not active:
            break
    if str(state.get("status", "")).startswith("failed"):
        raise RunFailure(
            f"the pull of {reference}",
            [state["status"].removeprefix("failed: ")],
            "check the image reference and the node's route to its registry or mirror "
            "(`hgxkit doctor INVENTORY`), then run again",
        )
    if state.get("status") == "ok":
        echo(f"[{h.name}] pulled {reference} in {float(state.get('elapsed') or 0):.0f} s")
    digest = digest_from_inspect(run(pull_and_inspect(reference)), reference)
    if digest is None:
        raise DeployError(f"{h.name}: `docker pull {reference}` gave no repository digest; check the registry")
    return digest


def ensure_api_key(h: Host) -> None:
    """Execute time: create the host's API key once (root-only), its files as each kind reads it (a `--config`
    YAML; an env file with every kind's key variable), and copy it to the controller once."""
    key_file = str(knob(h, "serve_api_key_file"))
    files = ApiKeyFiles.beside(key_file)
    names = list(dict.fromkeys(kind.api_key_env for kind in KINDS.values() if kind.api_key_env))
    created = HostRunner(h)(
        script(
            "umask 077 && mkdir -p {dir} && if [ -s {file} ]; then echo exists; else "
            "head -c 48 /dev/urandom | base64 | tr -dc A-Za-z0-9 | head -c 40 > {file} && echo created; fi && "
            'k=$(cat {file}) && printf "api-key: %s\\n" "$k" > {yaml} && '
            'for n in {names}; do printf "%s=%s\\n" "$n" "$k"; done > {env}',
            file=key_file,
            dir=str(Path(key_file).parent),
            yaml=files.config_yaml,
            env=files.env_file,
            names=names,
        )
    )
    local = Path(".hgxkit/secrets") / f"{h.name}.api-key"
    if created[-1:] == ["created"] or not local.exists():
        local.parent.mkdir(parents=True, exist_ok=True)
        local.parent.chmod(0o700)
        h.get_file(key_file, str(local))
        local.chmod(0o600)
        echo(f"[{h.name}] API key stored root-only at {key_file}; a copy is in {local} (keep it secret)")


def allowances_for(h: Host) -> Allowances:
    """The allowances `h`'s inventory gives every recipe judged for it (hgxkit.recipe.judge): its allow-knobs,
    its model directories and its memory."""
    memory = plan_fact(h, MemTotalBytes)
    return allowances_from_knobs(lambda name: knob(h, name), int(memory) if memory else None)


def total_gpus_for(h: Host) -> int | None:
    """GPUs to plan groups over: `serve_total_gpus`, else as many as nvidia-smi lists (None before bring-up)."""
    total = knob(h, "serve_total_gpus")
    return int(total) if total is not None else (len(plan_fact(h, NvidiaSmi).gpus) or None)


def plan_reads(h: Host) -> list[tuple[type, dict[str, object]]]:
    """The facts `judged_for` reads, for `hgxkit.planfacts.prefetch` to read in one round trip with the roles'."""
    return [(MemTotalBytes, {}), *([(NvidiaSmi, {})] if knob(h, "serve_total_gpus") is None else [])]


_JUDGED: dict[tuple[int, Allowances, int | None], Judged] = {}


def judged_for(h: Host) -> Judged:
    """`h`'s recipe judged under `h`'s allowances (hgxkit.recipe.judge), once per run: every role takes its recipe
    from here, so each inherits the judgement; a refusal stops the run before anything changes."""
    recipe, allowances, total = recipe_for(h), allowances_for(h), total_gpus_for(h)
    key = (id(recipe), allowances, total)  # recipe_for keeps one object per file and mtime
    if key not in _JUDGED:
        try:
            _JUDGED[key] = judge(recipe, allowances, total)
        except Refused as refused:
            refuse(f"recipe {recipe.path} does not fit {h.name}; nothing was changed", refused.problems)
    return _JUDGED[key]


def env_allowlist(h: Host, recipe: Recipe) -> tuple[str, ...]:
    """The `{{env:NAME}}` names `h` lets the recipe take: `recipe_env_allowlist`, else the kind's default."""
    names = allowances_for(h).env_allowlist
    return names if names is not None else default_env_allowlist(recipe)


def start_problems(h: Host, recipe: Recipe, spec: ContainerSpec) -> list[Problem]:
    """The last check before a container starts: the policy on the literal argv the node hands Docker."""
    allowances = allowances_for(h)
    context = with_own_files(allowances.context(recipe), spec.own_files)
    return argv_problems(spec.final_argv(), allowances.docker_options, context)


def write_start_files(h: Host, folder: str, spec: ContainerSpec) -> bool:
    """Write the start command and its secret files root-only (0600, in a 0700 folder) on `h`, from stdin. The
    command first walks every host path of its argv with no symlink followed (hgxkit.serving.replace), so what
    a container replaced with a link since the plan is refused at the moment of use."""
    run = HostRunner(h)
    files = {
        CHECK_SCRIPT: mounts_check_script(host_paths(spec.final_argv())),
        "docker-run.sh": start_preamble(folder) + text(spec.command()),
        **spec.secret_files(),
    }
    for name, content in files.items():
        ok, _ = run.status(
            script("umask 077 && mkdir -p {dir} && cat > {path}", dir=folder, path=f"{folder}/{name}"),
            _stdin=SecretLines([content.rstrip("\n")]),
        )
        if not ok:
            return False
    return True
