"""SGLang router (optional): one sglang-router container on one host, fronting every group of every host.

Runs after the serving role. Off unless `router: true`; only the chosen host (`router_host`, default the
first host with `router: true`) runs it. The container is labelled with a hash of its spec, so an unchanged
spec changes nothing; a changed one is replaced, then the role waits for /readiness and sends one chat
completion through the router. Knobs: roles/sglang_router/defaults.py.

Example (deploys/dspark.py):
    from roles.sglang_router import sglang_router
    if host.data.get("router"):
        sglang_router()
"""

from __future__ import annotations

import json
import time

from pyinfra import host
from pyinfra.api import FactBase, Host, deploy
from pyinfra.api.exceptions import DeployError
from pyinfra.api.output import echo
from pyinfra.operations import python

from hgxkit.driver_gate import Runner, run_on
from hgxkit.errors import HgxkitError
from hgxkit.facts import NvidiaSmi
from hgxkit.recipe.loader import load_recipe
from hgxkit.recipe.render import render_recipe
from hgxkit.secrets import redact
from hgxkit.serve import SPEC_LABEL, by_digest, exposure_problems
from roles.sglang_router.defaults import DEFAULTS
from roles.sglang_router.plan import (
    CONTAINER,
    RouterSpec,
    WorkerHost,
    choose_router_host,
    needs_replacing,
    router_spec,
    worker_urls,
)
from roles.sglang_serve.defaults import DEFAULTS as SERVE_DEFAULTS


class RouterContainer(FactBase[dict[str, str] | None]):
    """{"spec": hash label, "running": "true"/"false"} of the router container, or None when absent."""

    def command(self) -> str:
        return (
            f"docker inspect -f '{{{{index .Config.Labels \"{SPEC_LABEL}\"}}}} {{{{.State.Running}}}}' "
            f"{CONTAINER} 2>/dev/null || true"
        )

    @staticmethod
    def default() -> None:
        return None

    def process(self, output: list[str]) -> dict[str, str] | None:
        fields = " ".join(output).split()
        return {"spec": fields[0], "running": fields[1]} if len(fields) == 2 else None


def _data(h: Host, key: str) -> object:
    """`key` of host `h`, falling back to this role's or the serving role's defaults (those apply only
    inside their own @deploy)."""
    value = h.data.get(key)
    if value is None:
        return DEFAULTS.get(key, SERVE_DEFAULTS.get(key))
    return value


def _worker_host(h: Host) -> WorkerHost:
    """What the router needs of inventory host `h`: address, bind address and its groups' ports."""
    try:
        recipe = load_recipe(str(_data(h, "recipe")))
    except HgxkitError as err:
        raise DeployError(f"router: {err.message}") from None
    total = _data(h, "serve_total_gpus")
    if total is None:
        smi = h.get_fact(NvidiaSmi)
        total = len(smi.gpus) or None
    ports = [g.port for g in render_recipe(recipe, total_gpus=int(str(total)) if total else None) if g.port]
    candidates = (_data(h, "router_worker_address"), _data(h, "model_peer_address"), _data(h, "ssh_hostname"))
    address = next((str(v) for v in candidates if v), h.name)
    return WorkerHost(h.name, address, str(_data(h, "bind_address")), ports, bool(_data(h, "api_key")))


def _served_model(h: Host) -> str:
    recipe = load_recipe(str(_data(h, "recipe")))
    return str(recipe.server.flag("--served-model-name") or "default")


@deploy("hgxkit SGLang router", data_defaults=DEFAULTS)
def sglang_router() -> None:
    """Run the router on the chosen host only; change nothing when its spec is unchanged."""
    data = host.data
    if not data.get("router"):
        return
    hosts = list(host.inventory)
    chosen, error = choose_router_host(
        data.get("router_host"), [h.name for h in hosts if h.data.get("router")], [h.name for h in hosts]
    )
    if error:
        raise DeployError(error)
    if chosen != host.name:
        return
    urls, problems = worker_urls(host.name, [_worker_host(h) for h in hosts])
    problems += exposure_problems(
        data.get("router_bind_address"), data.get("api_key"), bool(data.get("allow_unauthenticated"))
    )
    if problems:
        lines = "\n".join(f"  - {problem}" for problem in problems)
        raise DeployError(f"router checks failed on {host.name}; the router was not started:\n{lines}")
    key_file = str(_data(host, "serve_api_key_file")) if data.get("api_key") == "auto" else None
    try:
        spec = router_spec(
            urls,
            image=data.get("router_image"),
            policy=data.get("router_policy"),
            bind_address=data.get("router_bind_address"),
            port=int(data.get("router_port")),
            api_key_file=key_file,
        )
    except ValueError as err:
        raise DeployError(str(err)) from None
    if not needs_replacing(host.get_fact(RouterContainer), spec):
        return  # nothing differs: no operation, nothing restarted
    python.call(
        name=f"Start the SGLang router on port {data.get('router_port')} ({len(urls)} workers)",
        function=_start,
        spec=spec,
        key_file=key_file,
        model=_served_model(host),
    )


def _start(spec: RouterSpec, key_file: str | None, model: str) -> None:
    """Execute time: pull the image, (re)create the router by digest, wait for /readiness, send one request."""
    from roles.sglang_serve import pull_digest

    run = run_on(host)
    digest = pull_digest(run, spec.image)
    run(f"docker rm -f {spec.name} >/dev/null 2>&1 || true")
    started = run(f"{spec.shell(by_digest(spec.image, digest))} 2>&1")
    echo(f"[{host.name}] router {spec.name} started from {spec.image} ({digest})")
    error = _wait_ready(run, spec, key_file, model)
    if error is None:
        echo(f"[{host.name}] router {spec.name} answers on port {host.data.get('router_port')}")
        return
    logs = [redact(line) for line in run(f"docker logs --tail 20 {spec.name} 2>&1 || true") or started[-5:]]
    tail = "\n".join(f"    {line}" for line in logs[-20:])
    raise DeployError(
        f"{host.name}: router {spec.name} {error}; check the serving groups and router_* knobs. "
        f"Its last log lines:\n{tail}"
    )


def _curl(key_file: str | None) -> str:
    """curl with the API key as a header read from the root-only file (never on a command line)."""
    if not key_file:
        return "curl"
    return f'printf \'header = "Authorization: Bearer %s"\\n\' "$(cat {key_file})" | curl -K -'


def _wait_ready(run: Runner, spec: RouterSpec, key_file: str | None, model: str) -> str | None:
    """Poll /readiness (every worker healthy) until 200, the container exits, or the timeout passes;
    then send one chat completion through the router."""
    timeout = float(host.data.get("router_health_timeout"))
    port = int(host.data.get("router_port"))
    start = time.monotonic()
    url = f"http://127.0.0.1:{port}"
    while True:
        status = run(
            f"curl -sS -m 10 -o /dev/null -w '%{{http_code}}' {url}/readiness 2>/dev/null; echo; "
            f"docker inspect -f '{{{{.State.Running}}}}' {spec.name} 2>/dev/null || echo missing"
        )
        if status and status[0].strip() == "200":
            break
        if status and status[-1].strip() in ("false", "missing"):
            return "exited before it became ready"
        elapsed = time.monotonic() - start
        if elapsed > timeout:
            return f"did not answer /readiness within {timeout:.0f} s"
        echo(f"[{host.name}] router: waiting for /readiness, {elapsed:.0f} s")
        time.sleep(2)
    body = json.dumps({"model": model, "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]})
    answer = run(
        f"{_curl(key_file)} -sS -m 120 {url}/v1/chat/completions -H 'Content-Type: application/json' "
        f"-d '{body}' 2>&1 || true"
    )
    try:
        content = json.loads("\n".join(answer))["choices"][0]["message"]
    except (ValueError, KeyError, IndexError, TypeError):
        return f"is ready but a chat completion through it failed: {redact(' '.join(answer))[:300]}"
    return None if content else "answered a chat completion without a message"
