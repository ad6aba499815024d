"""Knobs of the sglang_router role (inventory data overrides each; `--data key=value` for one run).

router                  False. True: run an SGLang router (sglang-router, the SGLang Model Gateway) fronting
                        every serving group of every inventory host. Benchmarks still address each group
                        directly (speculative accept length is per server).
router_host             the inventory host that runs the router; None: the first host with `router: true`.
router_port             the router's port (its default, 30000).
router_policy           load-balancing policy: random, round_robin, power_of_two, cache_aware (prefix-cache
                        aware, the router's default) or bucket.
router_bind_address     address the router listens on (host network). 127.0.0.1 keeps it on the node; any
                        other needs api_key (serving role) or allow_unauthenticated, as for the groups.
router_image            the router image, pulled and run by its repository digest.
router_worker_address   (per host) how the router reaches this host's groups; None: model_peer_address,
                        ssh_hostname, or the inventory name. Groups on other hosts must bind beyond loopback.
router_health_timeout   seconds the router may take to answer /readiness (every worker healthy).

API key: with the serving role's `api_key: auto`, the router gets the same root-only key file, mounted
read-only and read by a small launcher (the router takes the key only as `--api-key`, so this keeps it out
of `docker inspect` and of the process list). Clients then send `Authorization: Bearer <key>` to the router,
which sends it on to the groups. Each host has its own key, so a keyed router fronts its own host only.
"""

DEFAULTS = {
    "router": False,
    "router_host": None,
    "router_port": 30000,
    "router_policy": "cache_aware",
    "router_bind_address": "127.0.0.1",
    "router_image": "lmsysorg/sgl-model-gateway:latest",
    "router_worker_address": None,
    "router_health_timeout": 120,
}
