"""Knobs several roles read, with their defaults and meaning, and the one rule that resolves them.

A role's own knobs live in `roles/<role>/defaults.py` (pyinfra applies them inside that role's `@deploy`).
The knobs below are read by more than one role, so they are defined once here: each role that reads one
puts it into its DEFAULTS with `shared_defaults(...)`, and code outside a role's deploy reads it with
`knob(host, name)` (a role's own knob, outside its deploy or for another host: `role_knob`). The rule is the
same everywhere: inventory or `--data` value, else the default. The recipe a host's `recipe` knob names is
loaded by hgxkit.recipe.host_recipe.

recipe              the recipe file (relative to where pyinfra runs, or to the hgxkit checkout); per host or
                    group. Default: the seed post's marlin recipe (SEED_RECIPE), which deploys/dspark.py serves;
                    deploys/reproduce.py refuses to guess and asks for --data recipe=FILE.
expected_gpu_count  NVIDIA GPUs a node must have (8 for HGX-H200); None skips the count checks.
models_dir          where models live on the node; recipes' model directories must resolve under it.
model_dirs_allowed  more directories a recipe's model.local_dir may be under (e.g. ["/mnt/nvme/models"]); every
                    other place (/etc, /root, a symlink leaving them, ...) is refused before anything is written.
serve_total_gpus    GPUs to plan serving groups over; None: as many as nvidia-smi lists.
bind_address        host address the serving groups' published ports bind to (127.0.0.1 keeps the API local).
api_key             None, or "auto": a key generated once per host, root-only at serve_api_key_file.
serve_state_dir     where the serving role records what it runs (image digest) on the node.
serve_api_key_file  where the API key lives on the node (root-only).
state_dir           hgxkit's own state on the node (records, locks): /var/lib/hgxkit.
recheck             true: run every bring-up role and gate even when the node is unchanged since they last all
                    passed (by default such a re-run skips them and says why; hgxkit/node/converged.py).
group_hosts         a server spanning nodes (recipe `groups.nodes`): the hosts of this host's group, in rank order
                    (a list of inventory host names, rank 0 first), or the name of an inventory group whose
                    hosts, in inventory order, are the ranks. None: every inventory host serving the same
                    recipe, in inventory order, `groups.nodes` at a time (hgxkit/serving/multinode.py).
fabric_address      the address the other nodes of a multi-node group reach this host at (the head's goes into
                    --dist-init-addr; an IPv4 address is safest). None: `model_peer_address`, else refused.
dist_port           the rendezvous port on a multi-node group's head; None: the recipe's `groups.dist_port`.
monitoring, monitoring_host, prometheus_port, prometheus_bind_address, prometheus_scrape_interval
                    the monitoring role's (documented in roles/monitoring/defaults.py); verify reads them too, to
                    find Prometheus and read each cell's telemetry from it.
bundle              None, or a bundle directory on the controller (`hgxkit bundle create`): every role reads only
                    from it (apt repositories, the image, the model, pip's wheels). It is copied to each node
                    over the deploy's SSH connection and verified there before anything is installed from it
                    (hgxkit/bundle/source.py); a bundle.json whose hash was edited stops the run first.
bundle_fingerprint  None, or the bundle key's fingerprint as the bundle's maker gave it to the site another way:
                    bundle.json must then carry a valid signature by that key, or the run stops before any change.
host_lock_wait_s    how long a run waits for another hgxkit run on the same node to finish (0: refuse at once,
                    naming the other run's PID and start time; hgxkit/hostlock.py).

Example:
    >>> shared_defaults("recipe", "models_dir")
    {'recipe': 'recipes/deepseek-v4-flash-dspark-marlin.yaml', 'models_dir': '/data/models'}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SEED_RECIPE = "recipes/deepseek-v4-flash-dspark-marlin.yaml"

SHARED_DEFAULTS: dict[str, Any] = {
    "recipe": SEED_RECIPE,
    "expected_gpu_count": 8,
    "models_dir": "/data/models",
    "model_dirs_allowed": [],
    "serve_total_gpus": None,
    "bind_address": "127.0.0.1",
    "api_key": None,
    "serve_state_dir": "/var/lib/hgxkit/serve",
    "serve_api_key_file": "/etc/hgxkit/serve/api-key",
    "state_dir": "/var/lib/hgxkit",
    "host_lock_wait_s": 0,
    "bundle": None,
    "bundle_fingerprint": None,
    "recheck": False,
    "group_hosts": None,
    "fabric_address": None,
    "dist_port": None,
    "monitoring": False,
    "monitoring_host": None,
    "prometheus_port": 9090,
    "prometheus_bind_address": "127.0.0.1",
    "prometheus_scrape_interval": "15s",
}


def shared_defaults(*names: str) -> dict[str, Any]:
    """The defaults of the shared knobs `names`, for a role's DEFAULTS."""
    unknown = [n for n in names if n not in SHARED_DEFAULTS]
    if unknown:
        raise KeyError(f"not a shared knob: {', '.join(unknown)} (see hgxkit/knobs.py)")
    return {name: SHARED_DEFAULTS[name] for name in names}


def knob(host: Any, name: str) -> Any:
    """The value of shared knob `name` for `host`: inventory or `--data`, else its default here."""
    value = host.data.get(name)
    return SHARED_DEFAULTS[name] if value is None else value


def role_knob(host: Any, name: str, defaults: Mapping[str, Any]) -> Any:
    """A role's own knob `name` for `host` where pyinfra has not applied the role's `defaults` (another
    inventory host, or code outside the role's `@deploy`): inventory or `--data`, else `defaults[name]`.

    Example:
        >>> from types import SimpleNamespace
        >>> role_knob(SimpleNamespace(data={"router_port": None}), "router_port", {"router_port": 30000})
        30000
    """
    value = host.data.get(name)
    return defaults.get(name) if value is None else value
