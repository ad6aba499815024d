"""pyinfra inventory for a real 8xH200 HGX node — a documented example: copy it and edit the marked values.

    pyinfra inventories/h200.py deploys/bringup.py --dry     # what would change, changing nothing
    pyinfra -y inventories/h200.py deploys/bringup.py        # bring the node up
    pyinfra -y inventories/h200.py deploys/bringup.py --data allow_reboot=true

Every knob of every role, with its default and meaning, is in roles/<role>/defaults.py; set any of them
here (per host or for the group) or once on the command line with `--data key=value`.
"""

gpu_nodes = (
    [
        (
            "h200-1.example.com",  # EDIT: the node's address (or an SSH alias from ~/.ssh/config)
            {
                "ssh_user": "ubuntu",  # EDIT: a user with passwordless sudo
                "_sudo": True,
            },
        ),
        # A fleet: one tuple per node, e.g.
        # ("h200-2.example.com", {"ssh_user": "ubuntu", "_sudo": True}),
        #
        # Two nodes serving one server together (a recipe with `groups.nodes: 2`, e.g. DeepSeek-V3 TP16 imported
        # from SGLang's two-node post): the inventory order gives the ranks (the first is rank 0, the head), and
        # fabric_address is where the other node reaches each one (the cluster network, not the SSH address):
        # ("h200-1.example.com", {"ssh_user": "ubuntu", "_sudo": True, "fabric_address": "192.168.114.10"}),
        # ("h200-2.example.com", {"ssh_user": "ubuntu", "_sudo": True, "fabric_address": "192.168.114.11"}),
        # then: pyinfra -y inventories/h200.py deploys/reproduce.py --data recipe=recipes/dsv3-2node.yaml \
        #           --data api_key=auto --data 'allow_docker_options=["--network=host"]'
        # (the ranks need the host's network, which then lets each container reach the node's loopback services)
        # Other knobs: group_hosts (the ranks by host name, or an inventory group), dist_port (hgxkit/knobs.py).
    ],
    {
        # --- preflight (roles/preflight/defaults.py) ---
        "expected_gpu_count": 8,
        "expected_nvswitch_count": 4,
        "models_dir": "/data/models",
        "min_free_disk_gb": 400,
        # --- NVIDIA driver (roles/nvidia_driver/defaults.py) ---
        "nvidia_driver_branch": "580",
        # "nvidia_driver_version": "580.95.05",   # pin an exact release (recommended for a fleet)
        # "nvidia_repo_url": "http://mirror.lan/cuda/ubuntu2404/x86_64/",   # a mirror, for air-gapped sites
        "allow_reboot": False,  # True lets the deploy reboot the node when the driver changes
        # --- container toolkit (roles/container_toolkit/defaults.py) ---
        "nvidia_container_toolkit_version": "1.18.0-1",
        # --- GPU health (roles/gpu_health/defaults.py) ---
        "dcgm_package": "datacenter-gpu-manager-4-cuda13",
    },
)
