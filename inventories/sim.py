"""pyinfra inventory of the running simulated HGX-H200 nodes (`hgxkit sim up`), reached over plain @ssh.

    hgxkit sim up --nodes 2
    pyinfra -y inventories/sim.py exec -- nvidia-smi -L
    HGXKIT_SIM_CLUSTER=e2e pyinfra -y inventories/sim.py fact server.Hostname

Hosts come from `hgxkit sim status --json` ($HGXKIT_SIM_CLUSTER selects the cluster, default "default");
with HGXKIT_SIM_VAGRANT=1 the one host is the Vagrantfile's VM instead (`@vagrant/hgxkit-h200`).
They form the group `gpu_nodes`, whose data points the roles at the simulated NVIDIA repositories that
every node serves on http://127.0.0.1:8081/ (built by hgxkit/sim/aptrepo.py). Group data keys:

    hgxkit_simulated               True: this is a simulated node; roles may relax hardware-only checks
    nvidia_repo_url                flat CUDA repo for debian12/x86_64 (driver, fabric manager, NSCQ, DCGM)
    nvidia_repo_key_url            its ASCII-armoured signing key (a throwaway key made at build time)
    nvidia_container_repo_url      flat libnvidia-container repo (nvidia-container-toolkit & co.)
    nvidia_container_repo_key_url  its signing key (same throwaway key, as nvidia.github.io/.../gpgkey)
    nvidia_driver_branch           "580"
    nvidia_driver_version          the newest simulated driver, "580.105.08" (packages are <version>-1)
    nvidia_driver_versions         every simulated driver version, oldest first (for pin/mismatch tests)
    nvidia_container_toolkit_version   "1.18.0-1"
    dcgm_package                   "datacenter-gpu-manager-4-cuda13"
    expected_gpu_count             the GPUs each node was started with (`hgxkit sim up --gpus`)
    models_dir                     "/data/models" (a size-limited tmpfs, `hgxkit sim up --model-disk`)
    hf_endpoint                    the Hub stand-in every node serves on http://127.0.0.1:8088 (hgxkit/sim/hubrepos.py)
    model_peer_address (per host)  the node's container name: other nodes of the cluster reach it by that name
    fabric_address (per host)      the same name: where a multi-node group's members reach its head (the
                                   `--dist-init-addr` host); the nodes, in inventory order, are the ranks
"""

import json
import os
import subprocess
import sys

_cluster = os.environ.get("HGXKIT_SIM_CLUSTER", "default")
_vagrant = os.environ.get("HGXKIT_SIM_VAGRANT") == "1"
_nodes: list = []
if not _vagrant:
    _cmd = [sys.executable, "-m", "hgxkit", "sim", "status", "--json", "--cluster", _cluster]
    _res = subprocess.run(_cmd, capture_output=True, text=True, check=False)
    if _res.returncode != 0:
        raise SystemExit(f"inventories/sim.py: `hgxkit sim status --json` failed: {_res.stderr.strip()}")
    _nodes = [n for n in json.loads(_res.stdout)["nodes"] if n.get("state", "running") == "running"]
if not _nodes and not _vagrant:
    raise SystemExit(f"inventories/sim.py: no running simulated nodes in cluster {_cluster!r}: run `hgxkit sim up`")

_REPO = "http://127.0.0.1:8081"

_hosts = (
    [("@vagrant/hgxkit-h200", {"expected_gpu_count": int(os.environ.get("HGXKIT_SIM_GPUS", "8"))})]
    if _vagrant
    else [
        (
            n["name"],
            {
                "ssh_hostname": n["host"],
                "ssh_port": n["port"],
                "ssh_user": n["user"],
                "ssh_key": n["key"],
                "ssh_strict_host_key_checking": "off",
                "ssh_known_hosts_file": "/dev/null",
                "expected_gpu_count": n.get("gpus", 8),
                "model_peer_address": n["container"],  # Docker's DNS on the cluster network (peer copies)
                "fabric_address": n["container"],  # where the other nodes reach it (a multi-node group's head)
            },
        )
        for n in _nodes
    ]
)

gpu_nodes = (
    _hosts,
    {
        "hgxkit_simulated": True,
        "nvidia_repo_url": f"{_REPO}/cuda/debian12/x86_64/",
        "nvidia_repo_key_url": f"{_REPO}/cuda/debian12/x86_64/hgxkit-sim.pub",
        "nvidia_container_repo_url": f"{_REPO}/libnvidia-container/stable/deb/amd64/",
        "nvidia_container_repo_key_url": f"{_REPO}/libnvidia-container/gpgkey",
        "nvidia_driver_branch": "580",
        "nvidia_driver_version": "580.105.08",
        "nvidia_driver_versions": ["580.95.05", "580.105.08"],
        "nvidia_container_toolkit_version": "1.18.0-1",
        "dcgm_package": "datacenter-gpu-manager-4-cuda13",
        "models_dir": "/data/models",
        "hf_endpoint": "http://127.0.0.1:8088",  # the node's own Hub stand-in (hgxkit-sim-hub.service)
        # Role knobs that differ on a simulated node (every knob: roles/<role>/defaults.py):
        "allow_reboot": True,  # a simulated node reboots in about 10 s
        "nvidia_install_kernel_headers": False,  # nothing is compiled; no headers exist for the host's kernel
        "required_cgroup_version": None,  # nodes share the host's cgroup hierarchy (v1 on some CI machines)
        "container_smoke_image": "hgxkit-sim/busybox:latest",  # seeded into each node's Docker at boot
        "container_smoke_command": "echo $NVIDIA_VISIBLE_DEVICES",
        "container_smoke_expect": "visible-devices",  # the simulated hook injects no nvidia-smi
        # The DCGM exporter stand-in (`hgxkit sim image build --dcgm-exporter`): the nodes' mirror serves Docker
        # Hub names only, not nvcr.io (monitoring: true; hgxkit/sim/standin/dcgm).
        "dcgm_exporter_image": "hgxkit-sim/dcgm-exporter:4.4.2-4.7.1-ubuntu22.04",
    },
)
