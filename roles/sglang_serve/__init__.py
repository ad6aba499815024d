"""SGLang serving: one container per GPU group from a recipe, by image digest, idempotent and rolling.

Host checks (recipe errors, exposure policy, GPUs, HiCache host RAM, model present, ports) run before any
container starts. An unchanged spec leaves its container untouched (same ID, same start time); a changed
one is replaced group by group, each waiting for /health_generate, and a group that fails is put back on its
previous container while the others keep serving.

Example (deploys/dspark.py):
    from roles.sglang_serve import sglang_serve
    sglang_serve()
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.api.exceptions import DeployError
from pyinfra.api.output import echo
from pyinfra.operations import python

from hgxkit.bringup import Problem
from hgxkit.driver_gate import Runner, read_smi, run_on
from hgxkit.errors import HgxkitError
from hgxkit.facts import FileText, MemTotalBytes, NvidiaSmi
from hgxkit.facts_docker import INSPECT_MANAGED, ListeningPorts, ManagedContainers, parse_managed
from hgxkit.recipe.check import check_recipe
from hgxkit.recipe.loader import load_recipe
from hgxkit.recipe.model import Recipe
from hgxkit.secrets import redact
from hgxkit.serve import (
    ContainerSpec,
    RunningContainer,
    by_digest,
    container_specs,
    digest_of,
    exposure_problems,
    hicache_need,
    memory_problems,
    plan_rollout,
)
from roles.sglang_serve.defaults import DEFAULTS

PREVIOUS_SUFFIX = "-hgxkit-previous"
H200_MEMORY_GB = 143771 / 1024  # what nvidia-smi reports for an H200 (used before the driver is installed)


def _fail(problems: list[Problem] | list[str], what: str) -> None:
    if problems:
        lines = "\n".join(f"  - {problem}" for problem in problems)
        raise DeployError(f"{what} on {host.name}; no container was started or stopped:\n{lines}")


def recipe_for_host() -> Recipe:
    """The recipe named by the `recipe` data key, validated (errors stop the run before any change)."""
    try:
        return load_recipe(host.data.get("recipe"))
    except HgxkitError as err:
        raise DeployError(err.message) from None


def state_file() -> str:
    return f"{host.data.get('serve_state_dir')}/image.json"


def recorded_digest(recipe: Recipe) -> str | None:
    """The digest this host already runs for the recipe's image reference, if recorded."""
    text = host.get_fact(FileText, path=state_file())
    try:
        state = json.loads(text) if text else {}
    except json.JSONDecodeError:
        return None
    return state.get("digest") if state.get("reference") == recipe.image.reference else None


def pull_digest(run: Runner, reference: str) -> str:
    """Pull `reference` and return its repository digest (`sha256:…`)."""
    lines = run(
        f"docker pull -q {reference} >/dev/null 2>&1; "
        f"docker image inspect --format '{{{{json .RepoDigests}}}}' {reference} 2>/dev/null || true"
    )
    digests = json.loads(lines[-1]) if lines and lines[-1].startswith("[") else []
    repo = reference.split("@", 1)[0].rsplit(":", 1)[0] if ":" in reference.rsplit("/", 1)[-1] else reference
    for repo_digest in digests:
        if repo_digest.startswith(repo + "@") and digest_of(repo_digest):
            return digest_of(repo_digest)  # type: ignore[return-value]
    raise DeployError(f"{host.name}: `docker pull {reference}` gave no repository digest; check the registry")


def static_problems(recipe: Recipe, total_gpus: int | None) -> list[Problem]:
    """Checks that hold whatever earlier roles do in this run: exposure policy and HiCache host RAM."""
    data = host.data
    problems = exposure_problems(data.get("bind_address"), data.get("api_key"), bool(data.get("allow_unauthenticated")))
    smi = host.get_fact(NvidiaSmi)
    gpus = total_gpus if total_gpus is not None else (recipe.groups.gpus_per_node if recipe.groups else None) or 8
    groups = 1
    if recipe.groups and recipe.groups.size:
        groups = max(gpus // recipe.groups.size, 1)
    elif recipe.groups and recipe.groups.explicit:
        groups = len(recipe.groups.explicit)
    memory_gb = (smi.gpus[0].memory_total_mib or 0) / 1024 if smi.gpus else H200_MEMORY_GB
    weights_gb = float(data.get("serve_model_weights_gb"))
    need = hicache_need(recipe, groups=groups, gpu_memory_gb=memory_gb, weights_gb=weights_gb)
    problems += memory_problems(need, host.get_fact(MemTotalBytes), float(data.get("serve_host_ram_reserve_gb")))
    return problems


def runtime_problems(run: Runner, recipe: Recipe) -> list[Problem]:
    """Checks on what earlier roles set up (run just before containers start): GPUs in the fabric, model."""
    problems = []
    smi = read_smi(run)
    if not smi.ok:
        problems.append(Problem("gpus", f"nvidia-smi fails ({smi.failure})", "run deploys/bringup.py first"))
    stuck = [g.index for g in smi.gpus if g.fabric_state not in (None, "Completed")]
    if stuck:
        problems.append(Problem("gpus", f"GPUs {stuck} are not in the fabric", "run deploys/bringup.py first"))
    local_dir = recipe.model.local_dir
    if local_dir and run(f"test -f {local_dir}/config.json && echo present || true") != ["present"]:
        problems.append(
            Problem("model", f"no config.json in {local_dir}", "download the model first (deploys/model.py)")
        )
    return problems


def port_problems(rollout_specs: list[ContainerSpec], current: list[RunningContainer]) -> list[Problem]:
    """Host ports a new container needs that something else already listens on."""
    listening = host.get_fact(ListeningPorts)
    ours = {c.name for c in current}
    return [
        Problem("port", f"port {spec.port} is in use on the host", "stop what listens there or change port_base")
        for spec in rollout_specs
        if spec.port in listening and spec.name not in ours
    ]


@deploy("hgxkit SGLang serving", data_defaults=DEFAULTS)
def sglang_serve() -> None:
    """Serve the recipe's groups; change only what changed, one group at a time."""
    data = host.data
    recipe = recipe_for_host()
    total = data.get("serve_total_gpus")
    smi = host.get_fact(NvidiaSmi)
    total_gpus = int(total) if total is not None else (len(smi.gpus) or None)
    errors = [f for f in check_recipe(recipe, total_gpus) if f.level == "error"]
    _fail([f"[{f.code}] {f.message}" for f in errors], f"recipe {recipe.path} does not fit this node")
    _fail(static_problems(recipe, total_gpus), "serving checks failed")
    if smi.ok:  # a brought-up node: check the GPUs now; on a fresh one bring-up runs first, then _rollout checks
        _fail([p for p in runtime_problems(run_on(host), recipe) if p.check == "gpus"], "serving checks failed")
    if data.get("allow_unauthenticated") and data.get("bind_address") not in ("127.0.0.1", "::1", "localhost"):
        echo(f"[{host.name}] WARNING: the SGLang API is published on {data.get('bind_address')} without an API key")

    run = run_on(host)
    digest = recipe.image.digest
    if data.get("pin_image"):
        if not digest:
            raise DeployError(f"{recipe.path}: pin_image is set but image.digest is empty; pin a digest first")
        current_digest = pull_digest(run, recipe.image.reference)
        if current_digest != digest:
            raise DeployError(
                f"{host.name}: {recipe.image.reference} now resolves to {current_digest}, not the pinned "
                f"{digest}; update image.digest in {recipe.path} after checking the new image, or unset pin_image"
            )
    elif not digest and not data.get("image_update"):
        digest = recorded_digest(recipe)
    settings = {
        "recipe_path": recipe.path,
        "total_gpus": total_gpus,
        "digest": digest,
    }
    current = host.get_fact(ManagedContainers)
    if digest:
        specs = _specs(recipe, total_gpus, digest)
        rollout = plan_rollout(current, specs)
        if not rollout.changes:
            return  # nothing differs: no operation, nothing restarted
        _fail(port_problems(rollout.replace, current), "serving checks failed")
    python.call(name=f"Roll out {recipe.name} group by group", function=_rollout, **settings)


def _specs(recipe: Recipe, total_gpus: int | None, digest: str) -> list[ContainerSpec]:
    return container_specs(
        recipe,
        total_gpus=total_gpus,
        bind_address=host.data.get("bind_address"),
        api_key=host.data.get("api_key") == "auto",
        image=by_digest(recipe.image.reference, digest),
    )


def _rollout(recipe_path: str, total_gpus: int | None, digest: str | None) -> None:
    """Execute time: pull (when needed), record the digest, and replace changed groups one at a time."""
    run = run_on(host)
    recipe = load_recipe(recipe_path)
    problems = runtime_problems(run, recipe)
    if problems:
        lines = "\n".join(f"  - {problem}" for problem in problems)
        raise DeployError(f"serving checks failed on {host.name}; no container was started or stopped:\n{lines}")
    if digest is None:
        digest = pull_digest(run, recipe.image.reference)
        echo(f"[{host.name}] {recipe.image.reference} is {digest}; containers run by this digest")
    state_dir = host.data.get("serve_state_dir")
    record = json.dumps({"reference": recipe.image.reference, "digest": digest})
    run(f"mkdir -p {state_dir} && printf '%s\\n' '{record}' > {state_file()}")
    key_file = None
    if host.data.get("api_key") == "auto":
        key_file = _ensure_api_key(run)
    specs = _specs(recipe, total_gpus, digest)
    current = parse_managed("\n".join(run(INSPECT_MANAGED)))
    rollout = plan_rollout(current, specs)
    by_name = {c.name: c for c in current}
    for stale in rollout.remove:
        echo(f"[{host.name}] removing {stale.name}: its group is no longer in {recipe.name}")
        run(f"docker rm -f {stale.name} >/dev/null 2>&1 || true")
    for spec in rollout.replace:
        _replace_group(run, spec, by_name.get(spec.name), key_file)


def _ensure_api_key(run: Runner) -> str:
    """Create the host's API key once (root-only) and copy it to the controller once; return its path."""
    key_file = host.data.get("serve_api_key_file")
    created = run(
        f"if [ -s {key_file} ]; then echo exists; else mkdir -p $(dirname {key_file}) && umask 077 && "
        f"head -c 48 /dev/urandom | base64 | tr -dc A-Za-z0-9 | head -c 40 > {key_file} && echo created; fi"
    )
    local = Path(".hgxkit/secrets") / f"{host.name}.api-key"
    if created[-1:] == ["created"] or not local.exists():
        local.parent.mkdir(parents=True, exist_ok=True)
        local.parent.chmod(0o700)
        host.get_file(key_file, str(local))
        local.chmod(0o600)
        echo(f"[{host.name}] API key stored root-only at {key_file}; a copy is in {local} (keep it secret)")
    return key_file


def _replace_group(run: Runner, spec: ContainerSpec, old: RunningContainer | None, key_file: str | None) -> None:
    echo(f"[{host.name}] group {spec.group} ({spec.name}, GPUs {spec.gpus}, port {spec.port}): starting new spec")
    previous = f"{spec.name}{PREVIOUS_SUFFIX}"
    run(f"docker rm -f {previous} >/dev/null 2>&1 || true")
    if old is not None:
        run(f"docker stop {old.name} >/dev/null 2>&1; docker rename {old.name} {previous}")
    started = run(f"{spec.shell(key_file)} 2>&1")
    error = _wait_healthy(run, spec)
    if error is None:
        if old is not None:
            run(f"docker rm -f {previous} >/dev/null 2>&1 || true")
        echo(f"[{host.name}] group {spec.group} ({spec.name}) is serving")
        return
    known = run(f"cat {key_file}") if key_file else []
    logs = [redact(line, known) for line in run(f"docker logs --tail 20 {spec.name} 2>&1 || true") or started[-5:]]
    run(f"docker rm -f {spec.name} >/dev/null 2>&1 || true")
    if old is not None:
        run(f"docker rename {previous} {spec.name} && docker start {spec.name} >/dev/null")
    restored = "; the previous container was restarted" if old is not None else ""
    tail = "\n".join(f"    {line}" for line in logs[-20:])
    raise DeployError(f"{host.name}: group {spec.group} ({spec.name}) {error}{restored}. Its last log lines:\n{tail}")


def _wait_healthy(run: Runner, spec: ContainerSpec) -> str | None:
    """Poll /health_generate until it answers 200, the container exits, or the timeout passes."""
    timeout = float(host.data.get("serve_health_timeout"))
    interval = float(host.data.get("serve_health_interval"))
    start = time.monotonic()
    while True:
        status = run(
            f"curl -fsS -m 30 -o /dev/null -w '%{{http_code}}' http://127.0.0.1:{spec.port}/health_generate "
            f"2>/dev/null; echo; docker inspect -f '{{{{.State.Running}}}} {{{{.RestartCount}}}}' {spec.name} "
            "2>/dev/null || echo missing"
        )
        if status and status[0].strip() == "200":
            return None
        state = status[-1].split() if status else ["missing"]
        if state[0] in ("false", "missing") or (len(state) > 1 and state[1] != "0"):
            return "exited before it became healthy"
        elapsed = time.monotonic() - start
        if elapsed > timeout:
            return f"did not answer /health_generate within {timeout:.0f} s"
        last = run(f"docker logs --tail 1 {spec.name} 2>&1 || true")
        line = redact(last[-1] if last else "")[:160]
        echo(f"[{host.name}] group {spec.group}: waiting for /health_generate, {elapsed:.0f} s; last log: {line}")
        time.sleep(interval)
