"""Serving a server that spans nodes (recipe `groups.nodes`, e.g. SGLang `--nnodes 2 --node-rank 0|1`) as one
unit: a multi-node preflight before anything changes, and a rollout that replaces every rank together.

Orchestration. pyinfra 3 plans each host in turn and then runs every operation on all hosts in lock-step, a
`python.call` callback once per host. A group's ranks must stop, start and be judged together, so the group
has one operation, on its head (rank 0): the callback drives every member through that member's own pyinfra
Host (same SSH connections, `HostRunner(member)`), while the members add no serving operation of their own.
The decisions are pure (hgxkit/serving/multinode.py); the node commands are hgxkit/serving/groupcmd.py.

Rollout of a changed group: write each rank's `docker run` (root-only), set every old rank aside
(`<name>-hgxkit-previous`, rank 0 first, as SGLang stops), start every rank, then wait until rank 0 answers
its health check while watching every rank's container (its last log line is printed). Any rank that exits,
or no health within `serve_health_timeout`: every rank is put back (the set-aside copies started again, or
the new containers removed when the group is new) and the run fails with every rank's last log lines.

Weakness, and recovery: unlike a single-node replace (a systemd unit on the node), this is driven by the
controller, so a controller killed mid-rollout leaves the group as it was at that moment, possibly not
serving, until the next run. That run sees the set-aside copies and recovers first: it keeps the new
containers when every rank runs the new spec and rank 0 is healthy, otherwise it puts every rank back, then
goes on as usual. Failures land on the head host in pyinfra's report; the members' hosts show no error.

Example (deploys/reproduce.py, before bring-up):
    from roles.serve.group import multinode_preflight
    multinode_preflight()
"""

from __future__ import annotations

import os
import time
from typing import Any

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.api.output import echo
from pyinfra.operations import python

from hgxkit.hostcmd import HostRunner, argv, script
from hgxkit.hostfiles import write_text
from hgxkit.node.facts_files import RecordFile
from hgxkit.node.facts_gpu import NvidiaSmi
from hgxkit.planfacts import plan_fact
from hgxkit.problems import Problem, refuse
from hgxkit.recipe.spec import Recipe
from hgxkit.runfailure import RunFailure, escape_control
from hgxkit.secrets import redact
from hgxkit.serving.containers import ContainerSpec, container_specs
from hgxkit.serving.facts import ListeningPorts, ManagedContainers
from hgxkit.serving.groupcmd import (
    finish_command,
    listener_command,
    logs_command,
    rank_status_command,
    reach_command,
    restore_command,
    set_aside_command,
    start_command,
)
from hgxkit.serving.image import (
    LOCAL_PREFIX,
    digest_from_inspect,
    image_record,
    image_to_run,
    pull_and_inspect,
    recorded_digest,
)
from hgxkit.serving.multinode import (
    NodeGroup,
    RankHealth,
    RankNow,
    decide_group,
    difference_table,
    failed_ranks,
    group_spec_hash,
    member_differences,
    parse_rank_health,
    ranks_now,
    recovery_action,
)
from hgxkit.serving.nodegroups import group_for, member_host, member_state, run_problems, spanning_recipe
from hgxkit.serving.probes import http_request, parse_response
from hgxkit.serving.replace import PREVIOUS_SUFFIX
from hgxkit.serving.steps import (
    ensure_api_key,
    env_allowlist,
    key_files,
    pull,
    record_path,
    runtime_problems,
    start_problems,
    workdir,
    write_start_files,
)
from roles.serve.defaults import DEFAULTS, ServeKnobs


def _total_gpus(h: Any) -> int | None:
    total = ServeKnobs.from_host(h).serve_total_gpus
    return int(total) if total is not None else (len(plan_fact(h, NvidiaSmi).gpus) or None)


# --- preflight ----------------------------------------------------------------------------------------------


@deploy("hgxkit multi-node preflight", data_defaults=DEFAULTS)
def multinode_preflight() -> None:
    """Before anything on any node changes (plan time): the group's placement, every member in this run, the
    members equal (driver, recorded image digest, placed model commit) and every member reaching the head's
    fabric address on the rendezvous port. Nothing for a recipe served on one node; the checks run once, on
    the head's plan."""
    group, problems = group_for(host)
    if group is None and not problems:
        return
    heading = f"multi-node preflight failed on {host.name}; nothing was changed on any node"
    refuse(heading, problems)
    assert group is not None
    refuse(heading, run_problems(host, group))
    if host.name != group.head.host:
        return  # the head checks the whole group
    recipe = spanning_recipe(host)
    members = [(m, member_host(host, m.host)) for m in group.members]
    states = [member_state(h, recipe, m.rank) for m, h in members]
    differ = member_differences(states)
    if differ:
        table = "\n".join("    " + line for line in difference_table(states, differ).splitlines())
        refuse(
            f"{heading}: the hosts of the multi-node group {', '.join(group.hosts)} differ in {', '.join(differ)}",
            [
                *table.splitlines(),
                "make them equal first (pin nvidia_driver_version and run deploys/bringup.py on every member; "
                "deploys/model.py for the model; image_update for the image), then run this again",
            ],
        )
    refuse(heading, reach_problems(recipe, group))
    echo(
        f"[{host.name}] multi-node group {group.label()}: every member reaches the head at "
        f"{group.head.address}:{group.dist_port}"
    )


def reach_problems(recipe: Recipe, group: NodeGroup) -> list[Problem]:
    """Every member (the head too) opens a TCP connection to the head's fabric address and rendezvous port; a
    short-lived listener answers on the head when nothing listens there yet."""
    port = group.dist_port
    if port is None:
        return []
    head = member_host(host, group.head.host)
    timeout = int(ServeKnobs.from_host(host).multinode_reach_timeout)
    if port in plan_fact(head, ListeningPorts):
        ours = [c for c in plan_fact(head, ManagedContainers) if c.running]
        if not ours:
            return [
                Problem(
                    "dist-port",
                    f"port {port} on {group.head.host} is in use by something hgxkit does not run",
                    "stop what listens there, or set dist_port to a free port",
                )
            ]
    else:
        members = len(group.members)
        ok, said = HostRunner(head).status(listener_command(port, 10 + timeout * members, members))
        if not ok or "listening" not in said:
            found = f"could not listen on port {port} on {group.head.host} ({' '.join(said)[-200:] or 'no output'})"
            return [Problem("dist-port", found, "free the port, or set dist_port")]
    problems = []
    for member in group.members:
        ok, _ = HostRunner(member_host(host, member.host)).status(reach_command(group.head.address, port, timeout))
        if not ok:
            problems.append(
                Problem(
                    "reach",
                    f"{member.host} (rank {member.rank}) cannot reach the head "
                    f"{group.head.host} at {group.head.address}:{port} within {timeout} s",
                    f"open TCP {port} between the nodes, or set fabric_address of "
                    f"{group.head.host} to an address its members reach",
                )
            )
    return problems


# --- plan ---------------------------------------------------------------------------------------------------


def group_specs(
    recipe: Recipe, group: NodeGroup, digest: str, environ: dict[str, str] | None = None
) -> dict[str, ContainerSpec]:
    """Each member's container (by host name), labelled with one hash over every rank's spec."""

    def specs(group_hash: str | None) -> dict[str, ContainerSpec]:
        out = {}
        for member in group.members:
            h = member_host(host, member.host)
            found = container_specs(
                recipe,
                total_gpus=_total_gpus(h),
                bind_address=str(ServeKnobs.from_host(h).bind_address),
                api_key=key_files(h),
                image=image_to_run(recipe.image.reference, digest),
                environ=environ,
                rank=member.rank,
                head=group.head.address,
                group_hash=group_hash,
                state_dir=str(ServeKnobs.from_host(h).serve_state_dir),
                env_allowlist=env_allowlist(h, recipe),
            )
            if len(found) != 1:
                refuse(
                    f"{member.host}: the multi-node group was not started",
                    [
                        f"{recipe.path}: a server spanning nodes runs one container per host, but the recipe makes "
                        f"{len(found)} GPU groups on {member.host}; set groups.size to the GPUs of a node"
                    ],
                )
            out[member.host] = found[0]
        return out

    own = specs(None)
    return specs(group_spec_hash([own[m.host].spec_hash for m in group.members]))


def _ranks(group: NodeGroup, name: str) -> list[RankNow]:
    current = {m.host: plan_fact(member_host(host, m.host), ManagedContainers) for m in group.members}
    return ranks_now(current, group, name, PREVIOUS_SUFFIX)


def serve_group() -> None:
    """Plan time, inside the serving role's deploy: the head adds one operation that rolls out the whole
    group, or none when every rank already runs the spec; the other members add nothing."""
    recipe = spanning_recipe(host)
    group, problems = group_for(host)
    heading = f"serving checks failed on {host.name}; no container was started or stopped"
    refuse(heading, problems)
    assert group is not None
    refuse(heading, run_problems(host, group))
    if host.name != group.head.host:
        return  # rank >= 1: the head's operation starts and watches this host's rank
    recorded = recorded_digest(plan_fact(host, RecordFile, path=record_path(host)), recipe.image.reference)
    digest = recipe.image.digest or (None if ServeKnobs.from_host(host).image_update else recorded)
    why = "decided after pulling the image"
    if digest:
        specs = group_specs(recipe, group, digest)
        head_spec = specs[group.head.host]
        decision = decide_group(_ranks(group, head_spec.name), head_spec.spec_hash)
        if not decision.changes:
            return  # nothing differs on any rank: no operation, nothing restarted
        why = "; ".join(decision.reasons) or "remove containers no longer in the recipe"
    # One callback for the whole group: its ranks stop, start and are judged together, and whether rank 0
    # becomes healthy exists only at execute time (module doc).
    python.call(
        name=f"Roll out {recipe.name} on {', '.join(group.hosts)} as one multi-node group ({why})",
        function=rollout_group,
        recipe=recipe,
        group=group,
        digest=digest,
    )


# --- execute ------------------------------------------------------------------------------------------------


def _place_image(h: Any, recipe: Recipe, digest: str) -> None:
    """Make `h` run `digest` of the recipe's image: pull it by digest unless recorded, then record it."""
    reference = recipe.image.reference
    if recorded_digest(plan_fact(h, RecordFile, path=record_path(h)), reference) == digest:
        return
    if digest.startswith(LOCAL_PREFIX):
        refuse(
            f"{h.name}: the group was not changed",
            [
                f"{reference} is an image built on the head ({digest}); a group spanning nodes needs it from a "
                "registry every member can pull from"
            ],
        )
    run = HostRunner(h)
    by_digest = image_to_run(reference, digest)
    if digest_from_inspect(run(pull_and_inspect(by_digest)), by_digest) != digest:
        raise RunFailure(
            f"{h.name}: `docker pull {by_digest}` failed",
            [],
            "the group was not changed; check the registry and run again",
        )
    if not write_text(run, record_path(h), image_record(reference, digest)):
        raise RunFailure(f"{h.name}: could not write {record_path(h)}", [], "check the node's root file system")
    echo(f"[{h.name}] {reference} is {digest} (pulled by digest, as on the head)")


def _member_problems(recipe: Recipe, group: NodeGroup, digest: str) -> list[Problem | str]:
    """Just before containers change: every member's GPUs and model, and the members equal after bring-up."""
    problems: list[Problem | str] = list(run_problems(host, group))
    members = [(m, member_host(host, m.host)) for m in group.members]
    for member, h in members:
        problems += [f"{member.host}: {p}" for p in runtime_problems(recipe, h)]
    states = [member_state(h, recipe, m.rank) for m, h in members]
    differ = member_differences(states)
    if differ:
        problems.append(f"the members differ in {', '.join(differ)}:\n" + difference_table(states, differ))
    return problems


def rollout_group(recipe: Recipe, group: NodeGroup, digest: str | None) -> None:
    """Execute time, on the head: recover a cut-off rollout, place the image on every member, then keep the
    group or replace all its ranks together (module doc)."""
    heading = f"serving checks failed for the multi-node group {', '.join(group.hosts)}; no container was changed"
    refuse(heading, run_problems(host, group))
    if digest is None:
        digest = pull(host, recipe.image.reference)
        echo(f"[{host.name}] {recipe.image.reference} is {digest}; every rank runs this digest")
    for member in group.members:
        _place_image(member_host(host, member.host), recipe, digest)
    refuse(heading, _member_problems(recipe, group, digest))
    for member in group.members:
        h = member_host(host, member.host)
        if key_files(h) is not None:
            ensure_api_key(h)
    specs = group_specs(recipe, group, digest, environ=dict(os.environ))
    head_spec = specs[group.head.host]
    decision = decide_group(_ranks(group, head_spec.name), head_spec.spec_hash)
    if decision.action == "recover":
        _recover(group, head_spec, _ranks(group, head_spec.name))
        decision = decide_group(_ranks(group, head_spec.name), head_spec.spec_hash)
    for name, stale in decision.stale.items():
        for container in stale:
            echo(f"[{name}] removing {container.name}: its group is no longer in {recipe.name}")
            HostRunner(member_host(host, name))(argv("docker", "rm", "-f", container.container_id))
    if decision.action == "keep":
        echo(f"[{host.name}] multi-node group {head_spec.name} ({group.label()}) is unchanged")
        return
    refuse(heading, _port_problems(recipe, group, _ranks(group, head_spec.name)))
    echo(f"[{host.name}] multi-node group {head_spec.name}: {'; '.join(decision.reasons)}")
    _replace(group, specs)


def _port_problems(recipe: Recipe, group: NodeGroup, ranks: list[RankNow]) -> list[Problem]:
    """Ports a new rank binds (the server's port; the rendezvous port on the head) that something other
    than the group's own running container listens on."""
    kind = recipe.server.server_kind
    problems = []
    for rank in ranks:
        if rank.container is not None and rank.container.running:
            continue  # its own old rank holds them, and stops first
        wanted = [int(recipe.server.flag("--port") or kind.default_port)]
        if rank.rank == 0 and group.dist_port:
            wanted.append(group.dist_port)
        busy = sorted(set(wanted) & plan_fact(member_host(host, rank.host), ListeningPorts))
        problems += [Problem("port", f"port {p} is in use on {rank.host}", "stop what listens there") for p in busy]
    return problems


def _head_health(spec: ContainerSpec) -> int | None:
    return parse_response(HostRunner(host)(http_request(spec.health_url, timeout_s=30)))[0]


def _recover(group: NodeGroup, head_spec: ContainerSpec, ranks: list[RankNow]) -> None:
    """A rollout was cut off (set-aside copies left): keep the new ranks when the group serves the new spec,
    else put every rank back."""
    action = recovery_action(ranks, head_spec.spec_hash, _head_health(head_spec) == 200)
    for rank in ranks:
        run = HostRunner(member_host(host, rank.host))
        if action == "finish":
            run(finish_command(head_spec.name))
        elif rank.set_aside is not None or (rank.container and rank.container.spec_hash == head_spec.spec_hash):
            ok, said = run.status(restore_command(head_spec.name))
            if not ok:
                raise RunFailure(
                    f"{rank.host}: could not put {head_spec.name} back", said, "fix the cause and run again"
                )
    what = "kept the new ranks (healthy)" if action == "finish" else "put every rank back as it was"
    echo(f"[{host.name}] multi-node group {head_spec.name}: an earlier rollout was cut off; {what}")


def _put_back(group: NodeGroup, name: str, touched: list[str]) -> list[str]:
    """Every rank the rollout touched (`touched`: hosts whose old rank was set aside, or that had none) as
    before: its set-aside copy started again, or the new container removed. Ranks not reached are left alone."""
    said = []
    for member in group.members:
        if member.host not in touched:
            continue
        ok, out = HostRunner(member_host(host, member.host)).status(restore_command(name))
        said.append(f"{member.host}: {' '.join(out) if ok else 'could not put back: ' + ' '.join(out)}")
    return said


def _replace(group: NodeGroup, specs: dict[str, ContainerSpec]) -> None:
    """Stop every old rank, start every new one, wait for rank 0 while watching all; keep, or put back."""
    head_spec = specs[group.head.host]
    name = head_spec.name
    echo(f"[{host.name}] multi-node group {name} ({group.label()}): starting the new spec on every rank")
    for member in group.members:  # the policy on each rank's literal argv, before any rank changes
        h = member_host(host, member.host)
        refuse(
            f"serving checks failed on {member.host}; no container was changed",
            start_problems(h, spanning_recipe(host), specs[member.host]),
        )
    for member in group.members:  # the command and secret files: root-only, on stdin, deleted once run
        h = member_host(host, member.host)
        if not write_start_files(h, workdir(h, name), specs[member.host]):
            raise RunFailure(
                f"{member.host}: could not write {workdir(h, name)}/docker-run.sh",
                [],
                "nothing was changed; check the node's disk",
            )
    why = None
    touched: list[str] = []
    for member in group.members:  # rank 0 first: SGLang's head tells the workers to stop
        ok, said = HostRunner(member_host(host, member.host)).status(set_aside_command(name))
        if not ok:
            why = f"could not set the old rank {member.rank} on {member.host} aside ({' '.join(said)})"
            break
        touched.append(member.host)
    if why is None:
        for member in group.members:
            h = member_host(host, member.host)
            ok, _ = HostRunner(h).status(start_command(workdir(h, name)))
            if not ok:
                log = HostRunner(h)(script("tail -n 5 {f} 2>/dev/null || true", f=f"{workdir(h, name)}/start.log"))
                why = f"rank {member.rank} on {member.host} did not start: {redact(' '.join(log))[-300:]}"
                break
    if why is None:
        why = _wait(group, head_spec)
    if why is None:
        for member in group.members:
            HostRunner(member_host(host, member.host))(finish_command(name))
        echo(f"[{host.name}] multi-node group {name} ({group.label()}) is serving")
        return
    logs = []
    for member in group.members:
        lines = HostRunner(member_host(host, member.host))(logs_command(name, 10))
        logs += [f"rank {member.rank} on {member.host}:", *("    " + _clip(redact(line)) for line in lines[-10:])]
    back = _put_back(group, name, touched)
    for member in group.members:  # a rank never started keeps no command (it may hold secrets)
        h = member_host(host, member.host)
        folder = workdir(h, name)
        HostRunner(h)(script("rm -f {f} {e}", f=f"{folder}/docker-run.sh", e=f"{folder}/secrets.env"))
    raise RunFailure(
        f"the multi-node group {name} ({group.label()}) failed: {why}",
        logs,
        f"Every rank was put back ({'; '.join(back)}); fix what the ranks' logs say, then run the deploy again",
    )


def _clip(line: str, width: int = 240) -> str:
    """A log line as the error shows it: one line (a TTY's carriage return dropped), at most `width` long."""
    line = line.replace("\r", "")
    return line if len(line) <= width else line[: width - 1] + "…"


def _wait(group: NodeGroup, head_spec: ContainerSpec) -> str | None:
    """Until rank 0 answers its health check (None) while every rank's container runs; else why not."""
    timeout = float(ServeKnobs.from_host(host).serve_health_timeout)
    interval = float(ServeKnobs.from_host(host).serve_health_interval)
    start, last = time.monotonic(), ""
    while True:
        status = _head_health(head_spec)
        health = [_rank_health(m.host, m.rank, head_spec.name) for m in group.members]
        failed = failed_ranks(health)
        elapsed = time.monotonic() - start
        if status == 200 and not failed:
            return None
        if failed:
            return "; ".join(failed) + " (a rank stopped before the group became healthy)"
        if elapsed > timeout:
            return f"rank 0 on {group.head.host} did not answer its health check within {timeout:.0f} s"
        shown = " | ".join(escape_control(redact(h.line())) for h in health)
        if shown != last:
            echo(f"[{host.name}] multi-node group {head_spec.name}, {elapsed:.0f} s: {shown}")
            last = shown
        time.sleep(interval)


def _rank_health(name_of_host: str, rank: int, container: str) -> RankHealth:
    """One rank's container state and last log line, read on its host."""
    lines = HostRunner(member_host(host, name_of_host))(rank_status_command(container))
    return parse_rank_health(name_of_host, rank, lines)
