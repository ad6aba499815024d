"""Knobs of the sglang_serve role (inventory data overrides each; `--data key=value` for one run).

recipe                     the recipe file (relative to where pyinfra runs); per host or group. Switch with
                           `--data recipe=recipes/deepseek-v4-flash-dspark-flashinfer.yaml`.
serve_total_gpus           GPUs to plan groups over; None: as many as nvidia-smi lists.
bind_address               host address published ports bind to. 127.0.0.1 keeps the API on the node.
api_key                    None, or "auto": a key generated once per host, kept root-only at serve_api_key_file,
                           passed as --api-key (SGLang takes it only as a flag, so `docker inspect` on the node
                           shows it to root), and copied once to the controller (.hgxkit/secrets/<host>.api-key).
allow_unauthenticated      allow a non-loopback bind_address without a key (warns on every run).
pin_image                  refuse to deploy when the recipe's tag now resolves to a digest other than the
                           recipe's image.digest (the run names both digests).
image_update               pull the tag again and move to its current digest. Off: a deployed node keeps the
                           digest it first pulled (recorded in serve_state_dir), so a moved tag never changes it.
serve_health_timeout       seconds a group may take to answer /health_generate (DSpark cold starts take 10-30 min).
serve_health_interval      seconds between health probes (progress is printed at each).
serve_model_weights_gb     weights of the model, for the HiCache host-RAM estimate (DeepSeek-V4-Flash: ~160 GB).
serve_host_ram_reserve_gb  host RAM kept out of the HiCache budget for the OS and everything else.
serve_state_dir            where the role records the image digest it runs, on the host.
serve_api_key_file         where the API key lives on the host (root-only).
"""

DEFAULTS = {
    "recipe": "recipes/deepseek-v4-flash-dspark-marlin.yaml",
    "serve_total_gpus": None,
    "bind_address": "127.0.0.1",
    "api_key": None,
    "allow_unauthenticated": False,
    "pin_image": False,
    "image_update": False,
    "serve_health_timeout": 2400,
    "serve_health_interval": 5,
    "serve_model_weights_gb": 160,
    "serve_host_ram_reserve_gb": 64,
    "serve_state_dir": "/var/lib/hgxkit/serve",
    "serve_api_key_file": "/etc/hgxkit/serve/api-key",
}
