"""Start, list and remove simulated HGX-H200 nodes: containers on the local Docker engine (Docker SDK).

Each node runs systemd as PID 1, sshd published on 127.0.0.1:<port> only (key auth with a generated key),
its own dockerd (its /var/lib/docker is a Docker volume), and sees 8 simulated H200 GPUs and 4 NVSwitches.
Everything it creates carries the label `hgxkit.sim.cluster=<cluster>` and a `hgxkit-sim-` name prefix, so
`down` removes exactly what `up` made and never touches other containers.

Container settings that work on machines where `--privileged` is refused (checked on the CI machine):
cap_add ALL minus SYS_RESOURCE, seccomp/apparmor unconfined, device cgroup rule `a *:* rwm`, a writable
/sys/fs/cgroup bind mount with the host cgroup namespace, tmpfs on /run and /run/lock, restart policy
`always` (so `reboot` inside the node restarts it) and lxcfs's /proc/uptime (so pyinfra sees the uptime fall).
Without CAP_SYS_RESOURCE no container on such a machine gets more than the host's own hard limits (8 MiB of
locked memory here), so the node's runc is a wrapper (data/rootfs/usr/local/sbin/runc) that starts what a real
HGX node's Docker starts, `--ulimit memlock=-1` and `--privileged` included, within what the node has (and says so
in the container's HGXKIT_SIM_CLAMPED).

Example:
    >>> from hgxkit.sim.nodes import up, status, down
    >>> nodes = up(2)                       # doctest: +SKIP
    >>> [(n.name, n.port) for n in status()]  # doctest: +SKIP
    [('node1', 2222), ('node2', 2223)]
    >>> down()                              # doctest: +SKIP
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from io import BytesIO
from pathlib import Path

import docker
import docker.errors
from docker.models.containers import Container

from hgxkit.errors import HgxkitError, InputError
from hgxkit.sim import aptrepo, hubrepos, image
from hgxkit.sim.hwfiles import NodeHardware, lspci_dump, meminfo
from hgxkit.sim.paths import state_dir
from hgxkit.sim.standin import node as serving_node

PREFIX = "hgxkit-sim"
LABEL = "hgxkit.sim"
CLUSTER_LABEL = "hgxkit.sim.cluster"
NODE_LIB = Path(__file__).parent / "data" / "node"
LXCFS_DIR = Path("/var/lib/lxcfs")
FIRST_PORT = 2222
BOOT_TIMEOUT_S = 180


@dataclass(frozen=True)
class NodeInfo:
    """One running simulated node, as `hgxkit sim status --json` prints it."""

    name: str
    host: str
    port: int
    user: str
    key: str
    container: str
    state: str
    gpus: int

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def _check_cluster(cluster: str) -> None:
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,30}", cluster):
        raise InputError(f"cluster name {cluster!r} is invalid: use 1-31 lowercase letters, digits or '-'")


def client() -> docker.DockerClient:
    """A Docker SDK client for the local engine, or a one-line error saying how to start one."""
    try:
        c = docker.from_env(timeout=600)
        c.ping()
        return c
    except docker.errors.DockerException as err:
        raise HgxkitError(
            f"no Docker engine answers ({str(err).splitlines()[0][:120]}): start dockerd, or set DOCKER_HOST"
        ) from err


def ssh_key() -> Path:
    """The simulated nodes' SSH private key (ed25519, generated once under state_dir())."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = state_dir() / "id_ed25519"
    if not key.is_file():
        key.parent.mkdir(parents=True, exist_ok=True)
        private = Ed25519PrivateKey.generate()
        pem = private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
        )
        pub = private.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
        key.with_suffix(".pub").write_bytes(pub + b" hgxkit-sim\n")
    return key


def ensure_lxcfs() -> Path | None:
    """Path of lxcfs's per-container /proc/uptime; starts lxcfs when it is installed but not running."""
    uptime = LXCFS_DIR / "proc" / "uptime"
    try:
        if uptime.is_file():
            return uptime
    except OSError:
        # A dead lxcfs leaves its FUSE mount behind ("Transport endpoint is not connected"): unmount it.
        subprocess.run(["fusermount", "-u", "-z", str(LXCFS_DIR)], capture_output=True, check=False)
        subprocess.run(["umount", "-l", str(LXCFS_DIR)], capture_output=True, check=False)
    if shutil.which("lxcfs") and os.geteuid() == 0:
        LXCFS_DIR.mkdir(parents=True, exist_ok=True)
        log = open("/var/log/hgxkit-sim-lxcfs.log", "ab")  # noqa: SIM115 - the daemon keeps it
        subprocess.Popen(["lxcfs", str(LXCFS_DIR)], stdout=log, stderr=log, start_new_session=True)
        for _ in range(50):
            if uptime.is_file():
                return uptime
            time.sleep(0.1)
    print(
        "hgxkit sim: warning: lxcfs is not running, so a node's uptime will not fall on reboot "
        "(pyinfra's server.reboot then times out): run `lxcfs /var/lib/lxcfs &` as root",
        file=sys.stderr,
    )
    return None


def _containers(c: docker.DockerClient, cluster: str) -> list[Container]:
    found = c.containers.list(all=True, filters={"label": f"{CLUSTER_LABEL}={cluster}"}, ignore_removed=True)
    return sorted(found, key=lambda x: int(x.labels.get("hgxkit.sim.index", "0")))


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # ports in TIME_WAIT are free to docker
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def _free_ports(c: docker.DockerClient, count: int) -> list[int]:
    # other test sessions remove their nodes meanwhile: a container gone between the listing and its read is not one
    nodes = c.containers.list(all=True, filters={"label": LABEL}, ignore_removed=True)
    taken = {int(x.labels.get("hgxkit.sim.port", 0)) for x in nodes}
    ports: list[int] = []
    port = FIRST_PORT
    while len(ports) < count:
        if port not in taken and _port_free(port):
            ports.append(port)
        port += 1
        if port > 65000:
            raise HgxkitError("no free TCP port on 127.0.0.1 from 2222 up: free some ports and retry")
    return ports


def _tar(files: dict[str, tuple[bytes, int]]) -> bytes:
    buf = BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        dirs = sorted({str(Path(p).parent) for p in files})
        for d in dirs:
            info = tarfile.TarInfo(d)
            info.type = tarfile.DIRTYPE
            info.mode = 0o700 if d.endswith(".ssh") else 0o755
            tar.addfile(info)
        for path, (data, mode) in files.items():
            info = tarfile.TarInfo(path)
            info.size, info.mode, info.mtime = len(data), mode, int(time.time())
            tar.addfile(info, BytesIO(data))
    return buf.getvalue()


def _container_name(cluster: str, node: str) -> str:
    return f"{PREFIX}-{cluster}-{node}"


def _create(
    c: docker.DockerClient,
    tag: str,
    cluster: str,
    hw: NodeHardware,
    index: int,
    port: int,
    repo: aptrepo.RepoBuild,
    uptime: Path | None,
) -> Container:
    node_dir = state_dir() / "clusters" / cluster / hw.name
    node_dir.mkdir(parents=True, exist_ok=True)
    (node_dir / "meminfo").write_text(meminfo(hw.memory_gib))
    volume = c.volumes.create(
        name=f"{PREFIX}-{cluster}-{hw.name}-docker", labels={LABEL: "volume", CLUSTER_LABEL: cluster}
    )
    volumes: dict[str, dict[str, str]] = {
        "/sys/fs/cgroup": {"bind": "/sys/fs/cgroup", "mode": "rw"},
        volume.name: {"bind": "/var/lib/docker", "mode": "rw"},
        str(node_dir / "meminfo"): {"bind": "/proc/meminfo", "mode": "ro"},
        str(NODE_LIB.resolve()): {"bind": "/usr/lib/hgxkit-sim", "mode": "ro"},
        str(repo.root.resolve()): {"bind": aptrepo.NODE_DIR, "mode": "ro"},
        # The Hub stand-in (hgxkit-sim-hub.service): its repo store and the stdlib-only hgxkit code.
        str(hubrepos.build_hub_store(state_dir() / "hub").resolve()): {"bind": hubrepos.NODE_DIR, "mode": "ro"},
        str(Path(__file__).resolve().parents[1]): {"bind": f"{hubrepos.NODE_PY_DIR}/hgxkit", "mode": "ro"},
        # Serving: the pre-loaded registry mirror's storage and the SGLang benchmark-client store (serving_node).
        **serving_node.volumes(),
    }
    if uptime:
        volumes[str(uptime)] = {"bind": "/proc/uptime", "mode": "ro"}
    labels = {
        LABEL: "node",
        CLUSTER_LABEL: cluster,
        "hgxkit.sim.node": hw.name,
        "hgxkit.sim.index": str(index),
        "hgxkit.sim.port": str(port),
        "hgxkit.sim.gpus": str(hw.gpus),
        "hgxkit.sim.memory_gib": str(hw.memory_gib),
        "hgxkit.sim.model_disk": hw.model_disk,
    }
    container = c.containers.create(
        tag,
        name=_container_name(cluster, hw.name),
        hostname=hw.name,
        labels=labels,
        detach=True,
        network=f"{PREFIX}-{cluster}",
        cap_add=["ALL"],
        cap_drop=["SYS_RESOURCE"],
        security_opt=["seccomp=unconfined", "apparmor=unconfined"],
        device_cgroup_rules=["a *:* rwm"],
        cgroupns="host",
        tmpfs={
            "/run": "rw,nosuid,nodev,mode=755",
            "/run/lock": "rw,nosuid,nodev,noexec",
            "/data/models": f"rw,size={hw.model_disk}",
        },
        volumes=volumes,
        ports={"22/tcp": ("127.0.0.1", port)},
        restart_policy={"Name": "always"},
        environment={"container": "docker"},
        stop_signal="SIGRTMIN+3",
    )
    pub = ssh_key().with_suffix(".pub").read_bytes()
    container.put_archive(
        "/",
        _tar(
            {
                "root/.ssh/authorized_keys": (pub, 0o600),
                "etc/hgxkit-sim/node.json": (hw.to_json().encode(), 0o644),
                "etc/hgxkit-sim/lspci.dump": (lspci_dump(hw.gpus, hw.nvswitches).encode(), 0o644),
            }
        ),
    )
    return container


def _wait_ready(container: Container, port: int, deadline: float) -> None:
    """Wait until systemd finished booting and sshd answers on 127.0.0.1:port."""
    while time.time() < deadline:
        container.reload()
        if container.status == "running":
            _code, out = container.exec_run(["timeout", "5", "systemctl", "is-system-running", "--wait"])
            state = out.decode().strip()
            if state in ("running", "degraded") and _ssh_banner(port):
                return
        time.sleep(0.5)
    raise HgxkitError(
        f"{container.name} did not finish booting in {BOOT_TIMEOUT_S}s: see `docker logs {container.name}`"
    )


def _ssh_banner(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            return s.recv(8).startswith(b"SSH-")
    except OSError:
        return False


def up(
    nodes: int = 1, gpus: int = 8, memory_gib: int = 2048, model_disk: str = "4t", cluster: str = "default"
) -> list[NodeInfo]:
    """Start `nodes` simulated nodes (node1..nodeN), reusing ones that exist; return them when SSH answers."""
    _check_cluster(cluster)
    if not 1 <= nodes <= 32:
        raise InputError(f"--nodes {nodes} is out of range: use 1 to 32")
    if not 0 <= gpus <= 8:
        raise InputError(f"--gpus {gpus} is out of range: an HGX-H200 board has 0 to 8 GPUs")
    if not re.fullmatch(r"\d+[kmgt]?", model_disk.lower()):
        raise InputError(f"--model-disk {model_disk!r} is not a size: use e.g. 500g or 4t")
    c = client()
    state_dir().mkdir(parents=True, exist_ok=True)
    # Concurrent `sim up`s (parallel test sessions on a fresh machine) build one at a time: the second finds
    # every image and store ready instead of building them again beside the first.
    with open(state_dir() / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        tag = image.ensure_node_image(c)
        repo = aptrepo.build_repo(state_dir() / "repos")
        hubrepos.build_hub_store(state_dir() / "hub")
        serving_node.prepare(c)  # the SGLang stand-in in the registry mirror storage; the client store dir
    uptime = ensure_lxcfs()
    existing = {x.labels.get("hgxkit.sim.node"): x for x in _containers(c, cluster)}
    for name, x in existing.items():
        want = {"hgxkit.sim.gpus": str(gpus), "hgxkit.sim.memory_gib": str(memory_gib)}
        if any(x.labels.get(k) != v for k, v in want.items()):
            raise InputError(
                f"{name} of cluster {cluster!r} runs with other settings: run `hgxkit sim down` first, then `up`"
            )
    net_name = f"{PREFIX}-{cluster}"
    if not [n for n in c.networks.list(names=[net_name]) if n.name == net_name]:  # names= matches substrings
        c.networks.create(net_name, driver="bridge", labels={LABEL: "network", CLUSTER_LABEL: cluster})
    missing = [i for i in range(1, nodes + 1) if f"node{i}" not in existing]
    started = dict(existing)
    for i in missing:
        hw = NodeHardware(f"node{i}", gpus=gpus, memory_gib=memory_gib, model_disk=model_disk)
        for attempt in range(5):  # another `sim up` running at the same time may take the port first
            (port,) = _free_ports(c, 1)
            container = _create(c, tag, cluster, hw, i, port, repo, uptime)
            try:
                container.start()
                break
            except docker.errors.APIError as err:
                container.remove(force=True)
                port_taken = "already allocated" in str(err) or "address already in use" in str(err)
                if not port_taken or attempt == 4:
                    raise HgxkitError(f"starting {container.name} failed: {str(err)[:200]}") from err
        started[hw.name] = container
    for x in started.values():
        x.reload()
        if x.status != "running":
            x.start()
    deadline = time.time() + BOOT_TIMEOUT_S
    with ThreadPoolExecutor(max_workers=max(1, len(started))) as pool:
        for fut in [pool.submit(_wait_ready, x, int(x.labels["hgxkit.sim.port"]), deadline) for x in started.values()]:
            fut.result()
    return status(cluster)


def status(cluster: str = "default") -> list[NodeInfo]:
    """The nodes of `cluster` (running or not), in node order."""
    _check_cluster(cluster)
    key = str(ssh_key())
    return [
        NodeInfo(
            name=x.labels["hgxkit.sim.node"],
            host="127.0.0.1",
            port=int(x.labels["hgxkit.sim.port"]),
            user="root",
            key=key,
            container=x.name,
            state=x.status,
            gpus=int(x.labels.get("hgxkit.sim.gpus", "8")),
        )
        for x in _containers(client(), cluster)
    ]


@dataclass(frozen=True)
class DownReport:
    containers: int
    volumes: int
    networks: int


def down(cluster: str = "default") -> DownReport:
    """Remove every container, volume and network of `cluster` (found by label); keep images and the key."""
    _check_cluster(cluster)
    c = client()
    flt = {"label": f"{CLUSTER_LABEL}={cluster}"}
    containers = c.containers.list(all=True, filters=flt, ignore_removed=True)
    for x in containers:
        x.remove(force=True)
    volumes = c.volumes.list(filters=flt)
    for v in volumes:
        v.remove(force=True)
    networks = c.networks.list(filters=flt)
    for n in networks:
        n.remove()
    shutil.rmtree(state_dir() / "clusters" / cluster, ignore_errors=True)
    return DownReport(len(containers), len(volumes), len(networks))


def ssh_argv(node: NodeInfo, command: list[str]) -> list[str]:
    """The `ssh` command line that logs into `node` (and runs `command`, if any)."""
    return [
        "ssh",
        "-i",
        node.key,
        "-p",
        str(node.port),
        "-o",
        "StrictHostKeyChecking=no",
        "-o",
        "UserKnownHostsFile=/dev/null",
        "-o",
        "LogLevel=ERROR",
        f"{node.user}@{node.host}",
        *command,
    ]
