"""Knobs of the router role (inventory data overrides each; `--data key=value` for one run).


API key: with the serving role's `api_key: auto`, the router gets the same root-only key file, mounted
read-only and read by a small launcher (the router takes the key only as `--api-key`, so this keeps it out
of `docker inspect` and of the process list). Clients then send `Authorization: Bearer <key>` to the router,
which sends it on to the groups. Each host has its own key, so a keyed router fronts its own host only. vLLM's
split is refused with a key: vllm-router checks no client's key (hgxkit.recipe.pd.pd_key_problem).
"""

from __future__ import annotations

from dataclasses import dataclass

from hgxkit.knobs import Knobs, declare, shared


@dataclass(frozen=True)
class RouterKnobs(Knobs):
    """The router role's knobs (inventory data or `--data key=value` overrides each)."""

    router: bool = shared("router")
    router_host: str | None = shared("router_host")
    router_port: int = shared("router_port")
    router_policy: str = shared("router_policy")
    router_bind_address: str = declare(
        "127.0.0.1",
        "address the router listens on (host network). 127.0.0.1 keeps it on the node; any other needs api_key "
        "(serving role) or allow_unauthenticated, as for the groups.",
    )
    router_image: str | None = declare(
        None,
        "the router image, pulled and run by its repository digest. None: the split's kind's router image for a "
        "prefill/decode split (vllm/vllm-router:v0.1.17 for vLLM's, lmsysorg/sgl-model-gateway:latest for "
        "SGLang's), lmsysorg/sgl-model-gateway:latest otherwise.",
    )
    router_worker_address: str | None = declare(
        None,
        "(per host) how the router reaches this host's groups; None: model_peer_address, ssh_hostname, or the "
        "inventory name. Groups on other hosts must bind beyond loopback.",
    )
    allow_unauthenticated: bool = shared("allow_unauthenticated")
    bind_address: str = shared("bind_address")
    api_key: str | None = shared("api_key")
    serve_api_key_file: str = shared("serve_api_key_file")
    serve_total_gpus: int | None = shared("serve_total_gpus")
    model_peer_address: str | None = shared("model_peer_address")
    router_circuit_reopen_s: int = declare(
        5,
        "(prefill/decode split) seconds the router waits before it tries a worker whose circuit it opened again "
        "(--cb-timeout-duration-secs; the routers' own default is 60). In PD mode a failing decode opens the "
        "prefill's circuit too, so after a replaced group is healthy again the router would answer 503 for that long.",
    )
    router_health_timeout: float = declare(
        120,
        "seconds the router may take to answer /readiness (every worker healthy).",
    )


DEFAULTS = RouterKnobs.defaults()
__doc__ = f"{__doc__}\n{RouterKnobs.table()}\n"
