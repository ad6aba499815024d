"""SGLang serving: one container per GPU group from a recipe, by image digest, idempotent and rolling.

Host checks (recipe errors, exposure policy, GPUs, HiCache host RAM, model present, ports) run before any
container starts. An unchanged spec leaves its container untouched (same ID, same start time); a changed
one is replaced group by group, each waiting for /health_generate, and a group that fails is put back on its
previous container while the others keep serving. The plan only reads the node (facts); pulls and
containers happen in the rollout operation, so `--dry` changes nothing.

Example (deploys/reproduce.py):
    from roles.sglang_serve import sglang_serve
    sglang_serve()
"""

from __future__ import annotations

import time
from pathlib import Path

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.api.exceptions import DeployError
from pyinfra.api.output import echo
from pyinfra.operations import python

from hgxkit.hostcmd import HostRunner, argv, script
from hgxkit.hostfiles import write_text
from hgxkit.knobs import knob, recipe_for
from hgxkit.node.facts import IsFile, JsonFile, MemTotalBytes, NvidiaSmi
from hgxkit.problems import Problem, refuse
from hgxkit.recipe.check import check_recipe
from hgxkit.recipe.model import Recipe
from hgxkit.secrets import redact
from hgxkit.serving.containers import ContainerSpec, container_specs
from hgxkit.serving.facts import ListeningPorts, ManagedContainers
from hgxkit.serving.image import RECORD_NAME, digest_from_inspect, image_record, pull_and_inspect, recorded_digest
from hgxkit.serving.policy import LOOPBACK, exposure_problems, hicache_need, memory_problems
from hgxkit.serving.rollout import RunningContainer, plan_rollout
from roles.sglang_serve.defaults import DEFAULTS

PREVIOUS_SUFFIX = "-hgxkit-previous"
H200_MEMORY_GB = 143771 / 1024  # what nvidia-smi reports for an H200 (used before the driver is installed)


def record_path() -> str:
    return f"{knob(host, 'serve_state_dir')}/{RECORD_NAME}"


def total_gpus_for_host() -> int | None:
    """GPUs to plan groups over: `serve_total_gpus`, else as many as nvidia-smi lists (None before bring-up)."""
    total = knob(host, "serve_total_gpus")
    return int(total) if total is not None else (len(host.get_fact(NvidiaSmi).gpus) or None)


def static_problems(recipe: Recipe, total_gpus: int | None) -> list[Problem]:
    """Checks that hold whatever earlier roles do in this run: exposure policy and HiCache host RAM."""
    data = host.data
    allow = bool(data.get("allow_unauthenticated"))
    problems = exposure_problems(knob(host, "bind_address"), knob(host, "api_key"), allow)
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


def runtime_problems(recipe: Recipe, *, gpus_only: bool = False) -> list[Problem]:
    """Checks on what earlier roles set up (run just before containers start): GPUs in the fabric, model."""
    problems = []
    smi = host.get_fact(NvidiaSmi)
    if not smi.ok:
        problems.append(Problem("gpus", f"nvidia-smi fails ({smi.failure})", "run deploys/bringup.py first"))
    stuck = [g.index for g in smi.gpus if g.fabric_state not in (None, "Completed")]
    if stuck:
        problems.append(Problem("gpus", f"GPUs {stuck} are not in the fabric", "run deploys/bringup.py first"))
    local_dir = recipe.model.local_dir
    if not gpus_only and local_dir and not host.get_fact(IsFile, path=f"{local_dir}/config.json"):
        problems.append(
            Problem("model", f"no config.json in {local_dir}", "download the model first (deploys/model.py)")
        )
    return problems


def port_problems(specs: list[ContainerSpec], current: list[RunningContainer]) -> list[Problem]:
    """Host ports a new container needs that something else already listens on."""
    listening = host.get_fact(ListeningPorts)
    ours = {c.name for c in current}
    return [
        Problem("port", f"port {spec.port} is in use on the host", "stop what listens there or change port_base")
        for spec in specs
        if spec.port in listening and spec.name not in ours
    ]


def specs_for(recipe: Recipe, total_gpus: int | None, digest: str) -> list[ContainerSpec]:
    return container_specs(
        recipe,
        total_gpus=total_gpus,
        bind_address=knob(host, "bind_address"),
        api_key=knob(host, "api_key") == "auto",
        image=recipe.image.at_digest(digest),
    )


@deploy("hgxkit SGLang serving", data_defaults=DEFAULTS)
def sglang_serve() -> None:
    """Serve the recipe's groups; change only what changed, one group at a time."""
    recipe = recipe_for(host)
    total_gpus = total_gpus_for_host()
    errors = [f for f in check_recipe(recipe, total_gpus) if f.level == "error"]
    refuse(f"recipe {recipe.path} does not fit {host.name}; nothing was changed",
           [f"[{f.code}] {f.message}" for f in errors])  # fmt: skip
    heading = f"serving checks failed on {host.name}; no container was started or stopped"
    refuse(heading, static_problems(recipe, total_gpus))
    if host.get_fact(NvidiaSmi).ok:  # a brought-up node: check the GPUs now; on a fresh one, in the rollout
        refuse(heading, runtime_problems(recipe, gpus_only=True))
    bind = knob(host, "bind_address")
    if host.data.get("allow_unauthenticated") and bind not in LOOPBACK:
        echo(f"[{host.name}] WARNING: the SGLang API is published on {bind} without an API key")

    pin = bool(host.data.get("pin_image"))
    if pin and not recipe.image.digest:
        raise DeployError(f"{recipe.path}: pin_image is set but image.digest is empty; pin a digest first")
    if pin:  # the tag is asked at execute time (a pull), so --dry stays read-only
        python.call(name=f"Check that {recipe.image.reference} still is the pinned digest", function=_check_pin,
                    recipe=recipe)  # fmt: skip
    recorded = recorded_digest(host.get_fact(JsonFile, path=record_path()), recipe.image.reference)
    # The digest to run: the pinned one; else the recipe's; else what the node already runs (unless image_update).
    digest = recipe.image.digest or (None if host.data.get("image_update") else recorded)
    if digest and digest == recorded:
        current = host.get_fact(ManagedContainers)
        specs = specs_for(recipe, total_gpus, digest)
        rollout = plan_rollout(current, specs)
        if not rollout.changes:
            return  # nothing differs: no operation, nothing restarted, nothing pulled
        refuse(heading, port_problems(rollout.replace, current))
    python.call(
        name=f"Roll out {recipe.name} group by group",
        function=_rollout,
        recipe=recipe,
        total_gpus=total_gpus,
        digest=digest,
    )


def _pull(run: HostRunner, reference: str) -> str:
    """Pull `reference` and return its repository digest (`sha256:…`)."""
    digest = digest_from_inspect(run(pull_and_inspect(reference)), reference)
    if digest is None:
        raise DeployError(f"{host.name}: `docker pull {reference}` gave no repository digest; check the registry")
    return digest


def _check_pin(recipe: Recipe) -> None:
    """Refuse, before any container changes, when the recipe's tag now resolves to another digest."""
    pulled = _pull(HostRunner(host), recipe.image.reference)
    if pulled != recipe.image.digest:
        raise DeployError(
            f"{host.name}: {recipe.image.reference} now resolves to {pulled}, not the pinned {recipe.image.digest}; "
            f"update image.digest in {recipe.path} after checking the new image, or unset pin_image"
        )


def _rollout(recipe: Recipe, total_gpus: int | None, digest: str | None) -> None:
    """Execute time: pull (when needed), record the digest, and replace changed groups one at a time."""
    run = HostRunner(host)
    refuse(f"serving checks failed on {host.name}; no container was started or stopped", runtime_problems(recipe))
    recorded = recorded_digest(host.get_fact(JsonFile, path=record_path()), recipe.image.reference)
    if digest is None:
        digest = _pull(run, recipe.image.reference)
        echo(f"[{host.name}] {recipe.image.reference} is {digest}; containers run by this digest")
    if digest != recorded and not write_text(run, record_path(), image_record(recipe.image.reference, digest)):
        raise DeployError(f"{host.name}: could not write {record_path()}")
    key_file = _ensure_api_key(run) if knob(host, "api_key") == "auto" else None
    specs = specs_for(recipe, total_gpus, digest)
    current = host.get_fact(ManagedContainers)
    rollout = plan_rollout(current, specs)
    refuse(f"serving checks failed on {host.name}; no container was started or stopped",
           port_problems(rollout.replace, current))  # fmt: skip
    by_name = {c.name: c for c in current}
    for stale in rollout.remove:
        echo(f"[{host.name}] removing {stale.name}: its group is no longer in {recipe.name}")
        run(argv("docker", "rm", "-f", stale.container_id))
    for spec in rollout.replace:
        _replace_group(run, spec, by_name.get(spec.name), key_file)


def _ensure_api_key(run: HostRunner) -> str:
    """Create the host's API key once (root-only) and copy it to the controller once; return its path."""
    key_file = str(knob(host, "serve_api_key_file"))
    created = run(
        script(
            "if [ -s {file} ]; then echo exists; else mkdir -p {dir} && umask 077 && "
            "head -c 48 /dev/urandom | base64 | tr -dc A-Za-z0-9 | head -c 40 > {file} && echo created; fi",
            file=key_file,
            dir=str(Path(key_file).parent),
        )
    )
    local = Path(".hgxkit/secrets") / f"{host.name}.api-key"
    if created[-1:] == ["created"] or not local.exists():
        local.parent.mkdir(parents=True, exist_ok=True)
        local.parent.chmod(0o700)
        host.get_file(key_file, str(local))
        local.chmod(0o600)
        echo(f"[{host.name}] API key stored root-only at {key_file}; a copy is in {local} (keep it secret)")
    return key_file


def _replace_group(run: HostRunner, spec: ContainerSpec, old: RunningContainer | None, key_file: str | None) -> None:
    echo(f"[{host.name}] group {spec.group} ({spec.name}, GPUs {spec.gpus}, port {spec.port}): starting new spec")
    previous = f"{spec.name}{PREVIOUS_SUFFIX}"
    run(script("docker rm -f {name} >/dev/null 2>&1 || true", name=previous))
    if old is not None:
        run(script("docker stop {old} >/dev/null 2>&1; docker rename {old} {prev}", old=old.name, prev=previous))
    started = run(script("{run} 2>&1", run=spec.command(key_file)))
    error = _wait_healthy(run, spec)
    if error is None:
        if old is not None:
            run(script("docker rm -f {name} >/dev/null 2>&1 || true", name=previous))
        echo(f"[{host.name}] group {spec.group} ({spec.name}) is serving")
        return
    known = run(argv("cat", key_file)) if key_file else []
    logs = run(script("docker logs --tail 20 {name} 2>&1 || true", name=spec.name)) or started[-5:]
    logs = [redact(line, known) for line in logs]
    run(script("docker rm -f {name} >/dev/null 2>&1 || true", name=spec.name))
    if old is not None:
        run(script("docker rename {prev} {name} && docker start {name} >/dev/null", prev=previous, name=spec.name))
    restored = "; the previous container was restarted" if old is not None else ""
    tail = "\n".join(f"    {line}" for line in logs[-20:])
    raise DeployError(f"{host.name}: group {spec.group} ({spec.name}) {error}{restored}. Its last log lines:\n{tail}")


def _wait_healthy(run: HostRunner, spec: ContainerSpec) -> str | None:
    """Poll /health_generate until it answers 200, the container exits, or the timeout passes."""
    timeout = float(host.data.get("serve_health_timeout"))
    interval = float(host.data.get("serve_health_interval"))
    probe = script(
        "curl -fsS -m 30 -o /dev/null -w '%{{http_code}}' {url} 2>/dev/null; echo; "
        "docker inspect -f {format} {name} 2>/dev/null || echo missing",
        url=f"http://127.0.0.1:{spec.port}/health_generate",
        format="{{.State.Running}} {{.RestartCount}}",
        name=spec.name,
    )
    start = time.monotonic()
    while True:
        status = run(probe)
        if status and status[0].strip() == "200":
            return None
        state = status[-1].split() if status else ["missing"]
        if state[0] in ("false", "missing") or (len(state) > 1 and state[1] != "0"):
            return "exited before it became healthy"
        elapsed = time.monotonic() - start
        if elapsed > timeout:
            return f"did not answer /health_generate within {timeout:.0f} s"
        last = run(script("docker logs --tail 1 {name} 2>&1 || true", name=spec.name))
        line = redact(last[-1] if last else "")[:160]
        echo(f"[{host.name}] group {spec.group}: waiting for /health_generate, {elapsed:.0f} s; last log: {line}")
        time.sleep(interval)
