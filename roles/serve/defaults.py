"""Knobs of the serve role (inventory data overrides each; `--data key=value` for one run).

allow_unauthenticated      allow a non-loopback bind_address without a key (warns on every run).
pin_image                  refuse to deploy when the recipe's tag now resolves to a digest other than the
                           recipe's image.digest (the run names both digests). The tag is checked when the node
                           does not run the pinned digest yet; a node that runs it is left alone.
image_update               pull the tag again and move to its current digest. Off: a deployed node keeps the
                           digest it first pulled (recorded in serve_state_dir), so a moved tag never changes it.
image_prefetch             start pulling the recipe's image in a node-side unit (hgxkit-image-pull) right after
                           bring-up, so it downloads while the model does; the rollout waits for it. Off: the
                           image is pulled when the containers are about to start (after the model; slower on a
                           fresh node, kept for comparison: bench/fresh_overlap.py).
serve_pull_progress_every_s  how often a line of the image pull's progress (bytes done/known, rate, ETA, layers) is
                           printed while the pull unit runs (hgxkit/serving/pullprogress.py).
serve_health_timeout       seconds a group may take to answer /health_generate (DSpark cold starts take 10-30 min).
serve_health_interval      seconds between health probes (progress is printed at each).
serve_model_weights_gb     weights of the model, for the HiCache host-RAM estimate (DeepSeek-V4-Flash: ~160 GB).
serve_host_ram_reserve_gb  host RAM kept out of the HiCache budget for the OS and everything else.
recipe_env_allowlist       the names a recipe's {{env:NAME}} may take from the operator's environment (None: HF_TOKEN
                           and the kind's API-key variable, VLLM_API_KEY or SGLANG_API_KEY); any other is refused.
                           Values reach the container only through root-only files (hgxkit/recipe/secretenv.py).
multinode_reach_timeout    seconds each member of a multi-node group may take to open a TCP connection to the
                           head's fabric address and rendezvous port in the preflight (deploys/reproduce.py runs
                           it before bring-up; roles/serve/group.py). Placement knobs (group_hosts,
                           fabric_address, dist_port) are shared: hgxkit/knobs.py.

Shared knobs read here (defaults and meaning in hgxkit/knobs.py): recipe, serve_total_gpus, bind_address,
api_key ("auto": a key generated once per host, kept root-only at serve_api_key_file, passed as --api-key
(SGLang takes it only as a flag, so `docker inspect` on the node shows it to root), and copied once to the
controller, .hgxkit/secrets/<host>.api-key), serve_state_dir, serve_api_key_file.
bundle                 (shared, hgxkit/knobs.py; and bundle_fingerprint) a bundle directory: the image is loaded from
                       it, never pulled.
"""

from hgxkit.knobs import shared_defaults

DEFAULTS = {
    **shared_defaults(
        "recipe",
        "serve_total_gpus",
        "bind_address",
        "api_key",
        "serve_state_dir",
        "serve_api_key_file",
        "group_hosts",
        "fabric_address",
        "dist_port",
        "bundle",
        "bundle_fingerprint",
    ),
    "allow_unauthenticated": False,
    "pin_image": False,
    "image_update": False,
    "image_prefetch": True,
    "serve_pull_progress_every_s": 5,
    "serve_health_timeout": 2400,
    "serve_health_interval": 5,
    "serve_model_weights_gb": 160,
    "serve_host_ram_reserve_gb": 64,
    "multinode_reach_timeout": 5,
    "recipe_env_allowlist": None,
}
