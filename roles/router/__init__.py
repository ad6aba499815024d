"""The router (optional): one container on one host, fronting every serving group of every host.

Groups that serve both phases get SGLang's own router (`python -m sglang_router.launch_router --worker-urls`); a
prefill/decode split gets its kind's router in PD mode (`PrefillDecode.router`: sglang-router for SGLang's,
`vllm-router` for vLLM's NIXL split), each from its own image unless `router_image` names one.

Runs after the serving role. Off unless `router: true`; only the chosen host (`router_host`, default the
first host with `router: true`) runs it, as `<recipe>-router`. The container is labelled with a hash of its spec,
so an unchanged spec changes nothing; a changed one is replaced, then the role waits for /readiness and sends one
chat completion through the router. hgxkit's routers under another name on that host (an earlier hgxkit's
`sglang-router`, a renamed recipe's) are removed just before the new one starts: they hold its port. Knobs:
roles/router/defaults.py.

Example (deploys/dspark.py):
    from roles.router import router
    router()  # nothing unless `router: true`
"""

from __future__ import annotations

import json
import time

from pyinfra import host
from pyinfra.api import Host, deploy
from pyinfra.api.output import echo
from pyinfra.operations import python

from hgxkit.hostcmd import HostRunner, script
from hgxkit.kinds.base import PDRouter
from hgxkit.knobs import ssh_hostname
from hgxkit.node.facts_gpu import NvidiaSmi
from hgxkit.planfacts import plan_fact
from hgxkit.problems import refuse
from hgxkit.recipe.exposure import exposure_problems
from hgxkit.recipe.pd import pd_key_problem
from hgxkit.recipe.render import render_recipe
from hgxkit.runfailure import RunFailure
from hgxkit.secrets import redact
from hgxkit.serving.facts import ContainerNames, RouterContainers
from hgxkit.serving.image import digest_from_inspect, image_to_run, pull_and_inspect
from hgxkit.serving.multinode import head_worker
from hgxkit.serving.nodegroups import group_for, share_for
from hgxkit.serving.probes import http_request, parse_response
from hgxkit.serving.router import (
    RouterAction,
    RouterSpec,
    WorkerHost,
    choose_router_host,
    container_name,
    group_sides,
    name_problem,
    port_problem,
    remove_command,
    router_action,
    router_spec,
    split_plan,
    worker_sides,
    worker_urls,
)
from hgxkit.serving.steps import judged_for
from roles.router.defaults import DEFAULTS, RouterKnobs


def _worker_host(h: Host) -> WorkerHost | None:
    """What the router needs of inventory host `h`: address, bind address and its groups' ports. A multi-node
    group is one worker, its rank 0 (None for the hosts of its other ranks)."""
    recipe, knobs = judged_for(h).recipe, RouterKnobs.from_host(h)
    if recipe.node_count() > 1:
        group, problems = group_for(h)
        refuse(f"router checks failed on {host.name}; the router was not started", problems)
        if group is None or group.head.host != h.name:
            return None
        return head_worker(recipe, group, bind_address=knobs.bind_address, api_key=bool(knobs.api_key))
    total = knobs.serve_total_gpus
    if total is None:
        total = len(h.get_fact(NvidiaSmi).gpus) or None
    gpus = int(str(total)) if total else None
    share, problems = share_for(h, gpus)
    refuse(f"router checks failed on {host.name}; the router was not started", problems)
    first = share.first_group if share is not None else 0
    groups = [g for g in render_recipe(recipe, total_gpus=gpus, first_group=first) if g.port]
    candidates = (knobs.router_worker_address, knobs.model_peer_address, ssh_hostname(h))
    address = next((str(v) for v in candidates if v), h.name)
    ports, sides = [int(str(g.port)) for g in groups], group_sides(recipe, [g.group for g in groups])
    if share is not None:  # on the hosts' network: each side listens on the server's own --host
        bind = str(recipe.server.flag("--host") or "127.0.0.1")
        return WorkerHost(h.name, share.address, bind, ports, bool(knobs.api_key), sides, shared=True)
    return WorkerHost(h.name, address, knobs.bind_address, ports, bool(knobs.api_key), sides)


def _pd_router(h: Host) -> PDRouter | None:
    """The router of the recipe's kind for a prefill/decode split (SGLang's or vLLM's), None for a kind without."""
    split = judged_for(h).recipe.server.server_kind.prefill_decode
    return split.router if split is not None else None


def _served_model(h: Host) -> str:
    return str(judged_for(h).recipe.server.flag("--served-model-name") or "default")


@deploy("hgxkit router", data_defaults=DEFAULTS)
def router() -> None:
    """Run the router on the chosen host only; change nothing when its spec is unchanged."""
    knobs = RouterKnobs.from_host(host)
    if not knobs.router:
        return
    hosts = list(host.inventory)
    chosen, error = choose_router_host(
        knobs.router_host, [h.name for h in hosts if RouterKnobs.from_host(h).router], [h.name for h in hosts]
    )
    refuse(f"router checks failed on {host.name}; the router was not started", [error] if error else [])
    if chosen != host.name:
        return
    workers = [w for w in (_worker_host(h) for h in hosts) if w is not None]
    urls, problems = worker_urls(host.name, workers)
    problems += exposure_problems(knobs.router_bind_address, knobs.api_key, knobs.allow_unauthenticated)
    taken = port_problem(host.name, workers, knobs.router_port)
    if taken is not None:
        problems.append(taken)
    sides = worker_sides(host.name, workers)
    keyless = pd_key_problem(judged_for(host).recipe) if knobs.api_key and any(sides) else None
    if keyless is not None:
        problems.append(keyless)
    refuse(f"router checks failed on {host.name}; the router was not started", problems)
    key_file = knobs.serve_api_key_file if knobs.api_key == "auto" else None
    try:
        spec = router_spec(
            urls,
            name=container_name(judged_for(host).recipe.name),
            image=knobs.router_image,
            policy=knobs.router_policy,
            bind_address=knobs.router_bind_address,
            port=knobs.router_port,
            api_key_file=key_file,
            sides=sides,
            pd=_pd_router(host),
            circuit_reopen_s=knobs.router_circuit_reopen_s,
        )
    except ValueError as err:
        refuse(f"router checks failed on {host.name}; the router was not started", [str(err)])
        raise
    for line in split_plan(host.name, workers, spec):
        echo(f"[{host.name}] prefill/decode split: {line}")
    routers = host.get_fact(RouterContainers)
    clash = name_problem(spec, plan_fact(host, ContainerNames), routers)
    refuse(f"router checks failed on {host.name}; the router was not started", [clash] if clash else [])
    action = router_action(routers, spec)
    if not action.changes:
        return  # nothing differs: no operation, nothing restarted
    # A callback: the image's digest exists only after the pull, and the router's readiness only once it runs.
    python.call(
        name=_operation_name(spec, action, knobs.router_port, len(urls)),
        function=_start,
        spec=spec,
        action=action,
        key_file=key_file,
        model=_served_model(host),
    )


def _operation_name(spec: RouterSpec, action: RouterAction, port: int, workers: int) -> str:
    """What `--dry` lists for the router's change."""
    retired = f", removing hgxkit's router {', '.join(action.remove)} that holds its port" if action.remove else ""
    if not action.start:
        return f"Remove hgxkit's router {', '.join(action.remove)}: {spec.name} is the router on port {port}"
    return f"Start the router {spec.image} as {spec.name} on port {port} ({workers} workers){retired}"


def _start(spec: RouterSpec, action: RouterAction, key_file: str | None, model: str) -> None:
    """Execute time: pull the image, remove hgxkit's routers under other names, (re)create the router by digest,
    wait for /readiness, send one request."""
    run = HostRunner(host)
    if not action.start:
        for name in action.remove:
            run(remove_command(name))
        return
    digest = digest_from_inspect(run(pull_and_inspect(spec.image)), spec.image)
    if digest is None:
        raise RunFailure(f"`docker pull {spec.image}` gave no repository digest", [], "check the registry")
    for name in (*action.remove, spec.name):  # after the pull: the port is free only for the new router's start
        run(remove_command(name))
    started = run(script("{run} 2>&1", run=spec.command(image_to_run(spec.image, digest))))
    echo(f"[{host.name}] router {spec.name} started from {spec.image} ({digest})")
    error = _wait_ready(run, spec, key_file, model)
    if error is None:
        echo(f"[{host.name}] router {spec.name} answers on port {RouterKnobs.from_host(host).router_port}")
        return
    logs = run(script("docker logs --tail 20 {name} 2>&1 || true", name=spec.name)) or started[-5:]
    raise RunFailure(
        f"router {spec.name} {error}",
        [redact(line) for line in logs[-20:]],
        "check the serving groups and router_* knobs",
    )


def _wait_ready(run: HostRunner, spec: RouterSpec, key_file: str | None, model: str) -> str | None:
    """Poll /readiness (every worker healthy) until 200, the container exits, or the timeout passes;
    then send one chat completion through the router."""
    timeout = float(RouterKnobs.from_host(host).router_health_timeout)
    url = f"http://127.0.0.1:{RouterKnobs.from_host(host).router_port}"
    probe = script(
        "curl -sS -m 10 -o /dev/null -w '%{{http_code}}' {url} 2>/dev/null; echo; "
        "docker inspect -f {format} {name} 2>/dev/null || echo missing",
        url=f"{url}/readiness",
        format="{{.State.Running}}",
        name=spec.name,
    )
    start = time.monotonic()
    while True:
        status = run(probe)
        if status and status[0].strip() == "200":
            break
        if status and status[-1].strip() in ("false", "missing"):
            return "exited before it became ready"
        elapsed = time.monotonic() - start
        if elapsed > timeout:
            return f"did not answer /readiness within {timeout:.0f} s"
        echo(f"[{host.name}] router: waiting for /readiness, {elapsed:.0f} s")
        time.sleep(2)
    body = {"model": model, "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
    answer = run(http_request(f"{url}/v1/chat/completions", body=body, key_file=key_file))
    try:
        content = json.loads(parse_response(answer)[1])["choices"][0]["message"]
    except (ValueError, KeyError, IndexError, TypeError):
        return f"is ready but a chat completion through it failed: {redact(' '.join(answer))[:300]}"
    return None if content else "answered a chat completion without a message"
