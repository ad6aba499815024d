"""Knobs of the serve role (inventory data overrides each; `--data key=value` for one run).


Shared knobs read here (defaults and meaning in hgxkit/knobs.py): recipe, serve_total_gpus, bind_address,
api_key ("auto": a key generated once per host, kept root-only at serve_api_key_file, passed as --api-key
(SGLang takes it only as a flag, so `docker inspect` on the node shows it to root), and copied once to the
controller, .hgxkit/secrets/<host>.api-key), serve_state_dir, serve_api_key_file, and the recipe's allowances
(hgxkit/recipe/judge.py): allow_docker_options, recipe_env_allowlist, allow_unauthenticated.
"""

from __future__ import annotations

from dataclasses import dataclass

from hgxkit.knobs import Knobs, declare, shared


@dataclass(frozen=True)
class ServeKnobs(Knobs):
    """The serve role's knobs (inventory data or `--data key=value` overrides each)."""

    recipe: str = shared("recipe")
    serve_total_gpus: int | None = shared("serve_total_gpus")
    bind_address: str = shared("bind_address")
    api_key: str | None = shared("api_key")
    serve_state_dir: str = shared("serve_state_dir")
    serve_api_key_file: str = shared("serve_api_key_file")
    group_hosts: str | list[str] | None = shared("group_hosts")
    fabric_address: str | None = shared("fabric_address")
    dist_port: int | None = shared("dist_port")
    bundle: str | None = shared("bundle")
    bundle_fingerprint: str | None = shared("bundle_fingerprint")
    allow_unauthenticated: bool = shared("allow_unauthenticated")
    router: bool = shared("router")
    pin_image: bool = declare(
        False,
        "refuse to deploy when the recipe's tag now resolves to a digest other than the recipe's image.digest (the "
        "run names both digests). The tag is checked when the node does not run the pinned digest yet; a node that "
        "runs it is left alone.",
    )
    image_update: bool = declare(
        False,
        "pull the tag again and move to its current digest. Off: a deployed node keeps the digest it first pulled "
        "(recorded in serve_state_dir), so a moved tag never changes it.",
    )
    image_prefetch: bool = declare(
        True,
        "start pulling the recipe's image in a node-side unit (hgxkit-image-pull) right after bring-up, so it "
        "downloads while the model does; the rollout waits for it. Off: the image is pulled when the containers are "
        "about to start (after the model; slower on a fresh node, kept for comparison: bench/fresh_overlap.py).",
    )
    serve_pull_progress_every_s: float = declare(
        5,
        "how often a line of the image pull's progress (bytes done/known, rate, ETA, layers) is printed while the "
        "pull unit runs (hgxkit/serving/pullprogress.py).",
    )
    serve_health_timeout: float = declare(
        2400,
        "seconds a group may take to answer /health_generate (DSpark cold starts take 10-30 min).",
    )
    serve_health_interval: float = declare(5, "seconds between health probes (progress is printed at each).")
    serve_model_weights_gb: int = declare(
        160,
        "weights of the model, for the HiCache host-RAM estimate (DeepSeek-V4-Flash: ~160 GB).",
    )
    serve_host_ram_reserve_gb: int = declare(
        64,
        "host RAM kept out of the HiCache budget for the OS and everything else.",
    )
    multinode_reach_timeout: int = declare(
        5,
        "seconds each member of a multi-node group may take to open a TCP connection to the head's fabric address and"
        " rendezvous port in the preflight (deploys/reproduce.py runs it before bring-up; roles/serve/group.py), and "
        "a split's decode host to each prefill's bootstrap port on another host (roles/serve/split.py). "
        "Placement knobs (group_hosts, fabric_address, dist_port) are shared: hgxkit/knobs.py.",
    )
    pd_accept_gap: bool = declare(
        False,
        "replace a prefill/decode split's group even when it is its side's only serving group, so the router answers "
        "502/503 until the new one is healthy (on one node there are no free GPUs for a second copy beside it). "
        "Off: such a rollout is refused at plan time, naming the group (hgxkit.serving.rollout.split_gaps).",
    )
    allow_docker_options: list[str] = shared("allow_docker_options")
    recipe_env_allowlist: list[str] | None = shared("recipe_env_allowlist")


DEFAULTS = ServeKnobs.defaults()
__doc__ = f"{__doc__}\n{ServeKnobs.table()}\n"
