"""Serving: one container per GPU group from a recipe, by image digest, idempotent and rolling.

Host checks (recipe errors, dangerous docker options, exposure policy, GPUs, HiCache host RAM, secrets the
recipe needs, model present, container names, ports) run before any container starts. An unchanged spec
leaves its container untouched (same ID, same start time); a changed one is replaced group by group, each by
a systemd unit on the node (hgxkit/serving/replace.py) that waits for the kind's health check and keeps the
new container or puts the old one back — it finishes even when SSH drops or the controller is killed, and the
next run attaches to it (or, when a node rebooted mid-replace, finishes what it finds). The plan only reads
the node (facts); pulls and containers happen in operations, so `--dry` changes nothing.

What changes is decided at plan time and each group is its own operation, named by that decision
(hgxkit.serving.rollout.group_actions), so `pyinfra --dry` lists them: `group 0: replace container m-0
(--moe-runner-backend marlin -> flashinfer_mxfp4)`, `group 1: start container m-1`, a removal; unchanged groups
add nothing. A replace that leaves a side of a prefill/decode split with no serving group (its only decode, on one
node with no GPUs free for a second copy) is refused at plan time by name unless `pd_accept_gap`
(hgxkit.serving.rollout.split_gaps). Two cases are decided at execute time, in one operation: the digest to run is
not known before a pull (a fresh node, `image_update`), or a replace was interrupted (what the node runs is known
once it is finished). Any server kind (hgxkit/kinds); a server spanning nodes is roles/serve/group.py.

Example (deploys/reproduce.py):
    from roles.serve import serve
    serve()
"""

from __future__ import annotations

import json
import os
import time
from io import StringIO
from typing import Any

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.api.output import echo
from pyinfra.operations import files, python, server

from hgxkit.bundle.source import delivered, load_image
from hgxkit.hostcmd import HostRunner, argv, script
from hgxkit.hostfiles import write_text
from hgxkit.netaddr import is_loopback
from hgxkit.node.facts_files import JsonFile, RecordFile
from hgxkit.node.facts_gpu import NvidiaSmi
from hgxkit.node.facts_system import MemTotalBytes
from hgxkit.planfacts import plan_fact
from hgxkit.problems import Problem, refuse
from hgxkit.recipe.pd import is_prefill_decode, pd_key_problem, pd_router_problem
from hgxkit.recipe.spec import Recipe
from hgxkit.runfailure import RunFailure, escape_control
from hgxkit.secrets import redact
from hgxkit.serving.containers import ContainerSpec, container_specs
from hgxkit.serving.facts import ActiveUnits, ContainerNames, ListeningPorts, ManagedContainers, RouterContainers
from hgxkit.serving.image import image_record, image_to_run, recorded_digest
from hgxkit.serving.nodegroups import share_for
from hgxkit.serving.policy import H200_MEMORY_GB, hicache_need, memory_problems
from hgxkit.serving.replace import (
    PREVIOUS_SUFFIX,
    UNIT_PREFIX,
    poll_command,
    recovery_script,
    replace_script,
    unit_name,
)
from hgxkit.serving.rollout import (
    GroupAction,
    RunningContainer,
    SideGap,
    group_actions,
    held_ports,
    plan_rollout,
    spec_record,
    split_gaps,
)
from hgxkit.serving.router import group_sides
from hgxkit.serving.steps import (
    PULL_UNIT,
    ensure_api_key,
    env_allowlist,
    judged_for,
    key_files,
    pull,
    pull_files,
    pull_program,
    record_path,
    runtime_problems,
    start_problems,
    start_pull_command,
    total_gpus_for,
    workdir,
    write_start_files,
)
from roles.serve.defaults import DEFAULTS, ServeKnobs
from roles.serve.group import serve_group


def node_problems(recipe: Recipe, total_gpus: int | None) -> list[Problem]:
    """What the recipe's judgement cannot know: the controller's environment and the node's RAM for HiCache."""
    knobs = ServeKnobs.from_host(host)
    problems = [
        Problem(
            "secret",
            f"the recipe takes {{{{env:{name}}}}} from the controller, where ${name} is not set",
            f"export {name} before running pyinfra",
        )
        for name in recipe.env_refs()
        if not os.environ.get(name)
    ]
    if is_prefill_decode(recipe, total_gpus):
        if not knobs.router:
            problems.append(pd_router_problem(recipe))
        keyless = pd_key_problem(recipe) if knobs.api_key else None
        if keyless is not None:
            problems.append(keyless)
    smi = plan_fact(host, NvidiaSmi)
    gpus = total_gpus if total_gpus is not None else (recipe.groups.gpus_per_node if recipe.groups else None) or 8
    groups = 1
    if recipe.groups and recipe.groups.size:
        groups = max(gpus // recipe.groups.size, 1)
    elif recipe.groups and recipe.groups.explicit:
        groups = len(recipe.groups.explicit)
    memory_gb = (smi.gpus[0].memory_total_mib or 0) / 1024 if smi.gpus else H200_MEMORY_GB
    weights_gb = float(knobs.serve_model_weights_gb)
    need = hicache_need(recipe, groups=groups, gpu_memory_gb=memory_gb, weights_gb=weights_gb)
    problems += memory_problems(need, plan_fact(host, MemTotalBytes), float(knobs.serve_host_ram_reserve_gb))
    return problems


def name_problems(specs: list[ContainerSpec]) -> list[Problem]:
    """A group's container name (or its set-aside copy's) held by a container hgxkit did not make."""
    foreign = {name for name, ours in plan_fact(host, ContainerNames).items() if not ours}
    return [
        Problem(
            "container-name",
            f"a container named {name} exists and hgxkit did not make it",
            f"rename or remove it (`docker rm -f {name}`), or give the recipe's group another name",
        )
        for spec in specs
        for name in (spec.name, spec.name + PREVIOUS_SUFFIX)
        if name in foreign
    ]


def port_problems(
    specs: list[ContainerSpec], current: list[RunningContainer], removed: list[RunningContainer]
) -> list[Problem]:
    """Host ports a new container needs that something else already listens on (`held_ports`)."""
    listening = plan_fact(host, ListeningPorts)
    return held_ports(specs, current, removed, listening, plan_fact(host, RouterContainers))


def specs_for(recipe: Recipe, total_gpus: int | None, digest: str, environ: dict | None = None) -> list[ContainerSpec]:
    """This host's containers: every group, or its share of a recipe laid over hosts (`groups.hosts`)."""
    share, problems = share_for(host, total_gpus)
    refuse(HEADING.format(host=host.name), problems)
    return container_specs(
        recipe,
        total_gpus=total_gpus,
        bind_address=ServeKnobs.from_host(host).bind_address,
        api_key=key_files(host),
        image=image_to_run(recipe.image.reference, digest),
        environ=environ,
        state_dir=str(ServeKnobs.from_host(host).serve_state_dir),
        env_allowlist=env_allowlist(host, recipe),
        first_group=share.first_group if share is not None else 0,
    )


def interrupted(current: list[RunningContainer]) -> bool:
    """A replace is running on the node, or one was cut off (a set-aside copy is still there)."""
    return bool(plan_fact(host, ActiveUnits, prefix=UNIT_PREFIX)) or any(
        c.name.endswith(PREVIOUS_SUFFIX) for c in current
    )


HEADING = "serving checks failed on {host}; no container was started or stopped"


def plan_reads() -> list[tuple[type, dict[str, Any]]]:
    """The facts `serve()` and `prefetch_image()` read while pyinfra plans a single-node recipe, for
    `hgxkit.planfacts.prefetch` to read in one round trip with the other roles'."""
    return [
        (RecordFile, {"path": record_path(host)}),
        (NvidiaSmi, {}),
        (MemTotalBytes, {}),
        (ManagedContainers, {}),
        (ContainerNames, {}),
        (ActiveUnits, {"prefix": UNIT_PREFIX}),
    ]


@deploy("hgxkit serving", data_defaults=DEFAULTS)
def serve() -> None:
    """Serve the recipe's groups; change only what changed, one group at a time."""
    recipe = judged_for(host).recipe
    total_gpus = total_gpus_for(host)
    heading = HEADING.format(host=host.name)
    refuse(heading, node_problems(recipe, total_gpus))
    if plan_fact(host, NvidiaSmi).ok:  # a brought-up node: check the GPUs now; on a fresh one, in the rollout
        refuse(heading, runtime_problems(recipe, host, gpus_only=True))
    bind = ServeKnobs.from_host(host).bind_address
    if ServeKnobs.from_host(host).allow_unauthenticated and not is_loopback(bind):
        echo(f"[{host.name}] WARNING: the API is published on {bind} without an API key")

    bundle = delivered(host)  # the `bundle` knob: the image is loaded from the bundle and run by its ID
    pin = (
        bool(ServeKnobs.from_host(host).pin_image) and not bundle
    )  # a bundle's image was checked against the pin at create
    if pin and not recipe.image.digest:
        refuse(
            f"{host.name}: nothing was served",
            [f"{recipe.path}: pin_image is set but image.digest is empty; pin a digest first"],
        )
    if pin:  # the tag is asked at execute time (a pull), so --dry stays read-only
        python.call(
            name=f"Check that {recipe.image.reference} still is the pinned digest", function=_check_pin, recipe=recipe
        )
    if recipe.node_count() > 1:  # a server spanning nodes: its head drives every rank as one unit
        serve_group()
        return
    recorded = recorded_digest(plan_fact(host, RecordFile, path=record_path(host)), recipe.image.reference)
    # The digest to run: the bundle's image; the pinned one; else the recipe's; else what the node already runs
    # (unless image_update).
    digest = recipe.image.digest or (None if ServeKnobs.from_host(host).image_update else recorded)
    if bundle:
        load_image(host, bundle)
        digest = bundle.image_digest()
    current = plan_fact(host, ManagedContainers)
    if digest is None or interrupted(current):
        # Decided at execute time: without a digest the specs exist only after the pull, and while a replace
        # is unfinished what the node runs is known only once it is finished.
        why = "after pulling the image" if digest is None else "after finishing the interrupted replace"
        python.call(
            name=f"Roll out {recipe.name} group by group (decided {why})",
            function=_rollout,
            recipe=recipe,
            total_gpus=total_gpus,
            digest=digest,
        )
        return
    specs = specs_for(recipe, total_gpus, digest)
    refuse(heading, name_problems(specs))
    rollout = plan_rollout(current, specs)
    if not rollout.changes:
        return  # nothing differs: no operation, nothing restarted, nothing pulled
    refuse(heading, port_problems(rollout.replace, current, rollout.remove))
    running = {c.name for c in current}
    records = {
        spec.name: plan_fact(host, JsonFile, path=spec_record_path(spec.name))
        for spec in rollout.replace
        if spec.name in running
    }
    # A callback: the GPUs and the model are set up by earlier roles of this run (judged once they have run), and
    # the API key is made on the node and copied back.
    python.call(
        name=f"Check the GPUs and the model before {recipe.name}'s containers change",
        function=_prepare,
        recipe=recipe,
        digest=digest,
        recorded=recorded,
    )
    actions = group_actions(current, specs, records, recipe.server.kind)
    gaps = accepted_gaps(recipe, specs, actions)
    for action in actions:
        _plan_action(recipe, total_gpus, digest, action, gaps.get(action.name))


def accepted_gaps(recipe: Recipe, specs: list[ContainerSpec], actions: list[GroupAction]) -> dict[str, SideGap]:
    """The replaces that leave a side of a prefill/decode split with no group serving (by container name): refused
    unless `pd_accept_gap`, else each warned of by name."""
    indices = [spec.group for spec in specs]
    sides = {g: one.role for g, one in zip(indices, group_sides(recipe, indices), strict=True) if one is not None}
    gaps = split_gaps(actions, sides)
    if not ServeKnobs.from_host(host).pd_accept_gap:
        refuse(HEADING.format(host=host.name), [gap.problem() for gap in gaps])
    for gap in gaps:
        echo(f"[{host.name}] WARNING: {gap.line()}; accepted (pd_accept_gap)")
    return {gap.name: gap for gap in gaps}


def _plan_action(
    recipe: Recipe, total_gpus: int | None, digest: str, action: GroupAction, gap: SideGap | None = None
) -> None:
    """One group's operation, named by what it does (`group 0: replace container m-0 (--tp-size 4 -> 8)`), and,
    for a split's side left without a serving group meanwhile, saying so."""
    if action.action == "remove" and action.old is not None:
        server.shell(name=action.line(), commands=[argv("docker", "rm", "-f", action.old.container_id)])
    elif action.action in ("start", "replace") and action.spec is not None:
        # A callback: the new container's health, and whether the unit keeps it, exist only at execute time.
        python.call(
            name=action.line() + (f"; no {gap.side} serves meanwhile (pd_accept_gap)" if gap else ""),
            function=_start_group,
            recipe=recipe,
            total_gpus=total_gpus,
            digest=digest,
            group=action.spec.group,
            old_id=action.old.container_id if action.old else "",
        )


def spec_record_path(name: str) -> str:
    """Where the node keeps what container `name` was started with (hgxkit.serving.rollout.spec_record)."""
    return f"{workdir(host, name)}/spec.json"


@deploy("hgxkit serving: image prefetch", data_defaults=DEFAULTS)
def prefetch_image() -> None:
    """Start pulling the recipe's image in a systemd unit on the node, so it downloads while the model does
    (deploys/reproduce.py runs this before the model role); the rollout waits for it. Nothing when the node
    already runs a recorded digest for this image (a re-run pulls nothing)."""
    recipe = judged_for(host).recipe
    if (
        not ServeKnobs.from_host(host).image_prefetch or ServeKnobs.from_host(host).bundle
    ):  # a bundle's image is loaded by serve
        return
    recorded = recorded_digest(plan_fact(host, RecordFile, path=record_path(host)), recipe.image.reference)
    if recipe.image.digest or recorded:
        return
    reference = recipe.image.reference
    program, progress = pull_files(host)
    files.put(
        name="Upload the pull program (progress: bytes, rate, ETA)",
        src=StringIO(pull_program()),
        dest=program,
        mode="0644",
    )
    server.shell(
        name=f"Start pulling {reference} in the background (unit {PULL_UNIT})",
        commands=[start_pull_command(reference, program, progress)],
    )


def _check_pin(recipe: Recipe) -> None:
    """Refuse, before any container changes, when the recipe's tag now resolves to another digest."""
    pulled = pull(host, recipe.image.reference)
    if pulled != recipe.image.digest:
        refuse(
            f"{host.name}: the pinned image moved; nothing was served",
            [
                f"{recipe.image.reference} now resolves to {pulled}, not the pinned {recipe.image.digest}; "
                f"update image.digest in {recipe.path} after checking the new image, or unset pin_image"
            ],
        )


def _prepare(recipe: Recipe, digest: str, recorded: str | None) -> None:
    """Execute time, before any container changes: the GPUs and the model (earlier roles of this run set them
    up, so they are judged once those have run), the digest record, the API key (made once, on the node)."""
    refuse(HEADING.format(host=host.name), runtime_problems(recipe, host))
    _record_and_key(recipe, digest, recorded)


def _record_and_key(recipe: Recipe, digest: str, recorded: str | None) -> None:
    run = HostRunner(host)
    if digest != recorded and not write_text(run, record_path(host), image_record(recipe.image.reference, digest)):
        raise RunFailure(
            f"could not write {record_path(host)}", [], "check the node's root file system (space, read-only)"
        )
    if key_files(host) is not None:
        ensure_api_key(host)


def _start_group(recipe: Recipe, total_gpus: int | None, digest: str, group: int, old_id: str) -> None:
    """Execute time: start one group's container as planned (replacing `old_id`, when given). The spec is made
    again here with the recipe's `{{env:NAME}}` values from the controller's environment: they stay out of
    the plan's operation arguments."""
    specs = specs_for(recipe, total_gpus, digest, environ=dict(os.environ))
    spec = next(s for s in specs if s.group == group)
    _replace_group(HostRunner(host), recipe, spec, old_id)


def _rollout(recipe: Recipe, total_gpus: int | None, digest: str | None) -> None:
    """Execute time: finish interrupted replaces, pull (when needed), record the digest, replace changed groups
    one at a time (the case the plan cannot decide: see `serve`)."""
    run = HostRunner(host)
    heading = HEADING.format(host=host.name)
    for unit in host.get_fact(ActiveUnits, prefix=UNIT_PREFIX):
        echo(f"[{host.name}] attaching to {unit}, a group replace still running from an earlier run")
        _follow(run, unit, workdir(host, unit.removeprefix(UNIT_PREFIX).removesuffix(".service")), unit)
    refuse(heading, runtime_problems(recipe, host))
    recorded = recorded_digest(host.get_fact(RecordFile, path=record_path(host)), recipe.image.reference)
    if digest is None:
        digest = pull(host, recipe.image.reference)
        echo(f"[{host.name}] {recipe.image.reference} is {digest}; containers run by this digest")
    _record_and_key(recipe, digest, recorded)
    specs = specs_for(recipe, total_gpus, digest, environ=dict(os.environ))
    refuse(heading, name_problems(specs))
    _recover(run, specs)
    current = host.get_fact(ManagedContainers)
    settled = [c for c in current if not c.name.endswith(PREVIOUS_SUFFIX)]
    rollout = plan_rollout(settled, specs)
    refuse(heading, port_problems(rollout.replace, current, rollout.remove))
    accepted_gaps(recipe, specs, group_actions(settled, specs, {}, recipe.server.kind))
    by_name = {c.name: c for c in current}
    for stale in rollout.remove:
        echo(f"[{host.name}] removing {stale.name}: its group is no longer in {recipe.name}")
        run(argv("docker", "rm", "-f", stale.container_id))
    for spec in rollout.replace:
        old = by_name.get(spec.name)
        _replace_group(run, recipe, spec, old.container_id if old else "")


def _recover(run: HostRunner, specs: list[ContainerSpec]) -> None:
    """Finish replaces cut off without their unit (e.g. a node rebooted): new copy if healthy, else the old."""
    current = {c.name for c in host.get_fact(ManagedContainers)}
    for spec in specs:
        if spec.name + PREVIOUS_SUFFIX in current:
            ok, said = run.status(argv("sh", "-s"), _stdin=recovery_script(name=spec.name, health_url=spec.health_url))
            echo(f"[{host.name}] group {spec.group} ({spec.name}): {' '.join(said) or 'recovered'}")
            if not ok:
                raise RunFailure(
                    f"could not finish the interrupted replace of {spec.name}", said, "fix the cause and run again"
                )


def _replace_group(run: HostRunner, recipe: Recipe, spec: ContainerSpec, old_id: str) -> None:
    """Start the group's replace unit and follow it to its end (it goes on if this run is cut off); then keep
    on the node what the container was started with (its spec record, for the next plan's flag diff)."""
    echo(f"[{host.name}] group {spec.group} ({spec.name}, GPUs {spec.gpus}, port {spec.port}): starting new spec")
    folder, unit = workdir(host, spec.name), unit_name(spec.name)
    program = replace_script(
        name=spec.name,
        old_id=old_id,
        health_url=spec.health_url,
        timeout_s=float(ServeKnobs.from_host(host).serve_health_timeout),
        interval_s=float(ServeKnobs.from_host(host).serve_health_interval),
        workdir=folder,
    )
    # The last check: the policy on the very argv the node hands Docker (secrets already moved to files).
    refuse(HEADING.format(host=host.name), start_problems(host, recipe, spec))
    # The command and the recipe's secret files: root-only, sent on stdin; the command and env file are
    # deleted once run.
    run(script("rm -f {f}", f=f"{folder}/status"))
    ok = write_start_files(host, folder, spec)
    if not ok or not write_text(run, f"{folder}/replace.sh", program, mode="0700"):
        raise RunFailure(f"could not write the replace script under {folder}", [], "check the node's root file system")
    run(
        script(
            "systemctl reset-failed {unit} >/dev/null 2>&1; systemd-run --unit {unit} --collect --quiet "
            "/bin/sh {program}",
            unit=unit,
            program=f"{folder}/replace.sh",
        )
    )
    _follow(run, unit, folder, f"group {spec.group} ({spec.name})")
    record = json.dumps(spec_record(spec, recipe.server.kind), indent=2) + "\n"
    if not write_text(run, spec_record_path(spec.name), record, mode="0600"):
        echo(f"[{host.name}] could not write {spec_record_path(spec.name)}; the next plan shows no flag diff")


def _follow(run: HostRunner, unit: str, folder: str, what: str) -> None:
    """Print a replace unit's progress until it writes its status; fail the run, with the logs, if it failed."""
    timeout = float(ServeKnobs.from_host(host).serve_health_timeout) + 300
    interval = float(ServeKnobs.from_host(host).serve_health_interval)
    poll = poll_command(unit, folder)
    start, last = time.monotonic(), ""
    while True:
        lines = run(poll)
        parts = "\n".join(lines).split("#\n")
        status, progress, active = (p.strip() for p in ([*parts, "", "", ""])[:3])
        if status:
            break
        if progress and progress != last:
            echo(f"[{host.name}] {what}: {escape_control(redact(progress))}")  # a container's last log line
            last = progress
        if active not in ("active", "activating") and time.monotonic() - start > 10:
            raise RunFailure(
                f"{what}: the replace unit {unit} stopped without a result",
                f"see `journalctl -u {unit}`",
                "the next run finishes or rolls back what it left",
            )
        if time.monotonic() - start > timeout:
            raise RunFailure(
                f"{what}: the replace unit {unit} is still running after {timeout:.0f} s",
                [],
                "it goes on, and the next run attaches to it",
            )
        time.sleep(interval)
    if status == "ok":
        echo(f"[{host.name}] {what} is serving")
        return
    logs = [redact(line) for line in run(script("cat {f} 2>/dev/null || true", f=f"{folder}/failed.log"))]
    raise RunFailure(
        f"{what} {status.removeprefix('failed: ')}",
        logs[-20:] or ["(the container left no log)"],
        "fix what the cause says (the recipe's image, flags or GPUs, or the node), then run the deploy "
        "again; the status above says which container serves now",
    )
