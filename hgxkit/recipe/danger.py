"""Docker options that give a container power over its host, each with a stable name and a one-line reason.

A recipe is untrusted input that hgxkit runs as root on GPU nodes, so `recipe check` reports each of these
as an error (code `dangerous-option`) and `recipe import` notes it. The serving role lets one through only
when the inventory lists its name, e.g. `allow_docker_options: ["--privileged"]`; the names are
`DANGER_NAMES`, stable so that inventories keep matching.

Allowed on purpose: `--ipc=host`. SGLang and vLLM document it for tensor-parallel serving (NCCL and
PyTorch share memory between the ranks through /dev/shm) and the seed post uses it; it shares the host's
System V IPC and /dev/shm, not its processes, files or devices. `--gpus` and `--runtime nvidia` are how
the GPUs get in. `--network=host` is named: it also exposes every port the server opens on every interface.
Except for a server spanning nodes (`recipe.node_count() > 1`): its ranks advertise their own addresses and
open rendezvous, NCCL and Gloo ports that no `-p` can predict, so SGLang's and vLLM's multi-node setups run
with the host's network; there the serving role's exposure policy decides instead (the server's own `--host`
binds, and a non-loopback one needs an API key), and the fabric between the nodes must be trusted.

Example:
    >>> from hgxkit.recipe.importing.docker_run import import_docker_run
    >>> [d.name for d in dangerous_options(import_docker_run("docker run --privileged -v /:/host img"))]
    ['--privileged', 'host-system-mount']
"""

from __future__ import annotations

import csv
import posixpath
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hgxkit.recipe.docker_options import canonical
from hgxkit.recipe.shellwords import shell_value

if TYPE_CHECKING:
    from hgxkit.recipe.model import Recipe

# Host directories whose bind mount (or a mount of a directory above them) gives the container the host:
# its configuration, root's home, the kernel's interfaces, devices, programs, Docker's own state.
SYSTEM_DIRS = (
    "/etc", "/root", "/var/run", "/run", "/proc", "/sys", "/boot", "/dev", "/usr", "/bin", "/sbin", "/lib",
    "/lib64", "/var/lib/docker", "/var/lib/containerd", "/var/lib/kubelet",
)  # fmt: skip
# hgxkit's own secrets on a node: API keys, tokens, the SSH keys it deploys with.
HGXKIT_SECRET_DIRS = ("/etc/hgxkit", "/run/hgxkit", "/root/.ssh", "/var/lib/hgxkit")

# Every name `dangerous_options` can return, in the order the checks run.
DANGER_NAMES: tuple[str, ...] = (
    "--privileged",
    "--pid=host",
    "--userns=host",
    "--uts=host",
    "--network=host",
    "--cgroupns=host",
    "--cap-add",
    "--security-opt=seccomp=unconfined",
    "--security-opt=apparmor=unconfined",
    "--security-opt=label=disable",
    "--security-opt=systempaths=unconfined",
    "--device",
    "--device-cgroup-rule",
    "--volumes-from",
    "--group-add",
    "--use-api-socket",
    "--cidfile",
    "host-file-read",
    "docker-socket-mount",
    "hgxkit-secret-mount",
    "host-system-mount",
)

_VOLUME_NAME_RE = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.-]*")
_TRUE = frozenset({"", "true", "1", "t", "True", "TRUE"})
_HOST_NAMESPACES = {
    "--pid": "shares the host's processes: the container sees, signals and traces every process on the host",
    "--userns": "turns off user-namespace remapping: root in the container is root on the host",
    "--uts": "shares the host's hostname, which the container can change",
    "--network": "shares the host's network stack: every port the server opens is open on every interface",
    "--cgroupns": "shares the host's cgroup namespace: the container sees the host's cgroup tree",
}
_SECURITY_OPTS = {
    "seccomp=unconfined": "turns off the seccomp filter: every system call is allowed",
    "apparmor=unconfined": "turns off the AppArmor profile",
    "label=disable": "turns off SELinux labelling of the container",
    "systempaths=unconfined": "unmasks /proc and /sys paths Docker hides (kcore, sysrq-trigger, …)",
}
_PLAIN_OPTIONS = {
    "--cap-add": "adds a Linux capability to the container's root",
    "--device": "gives the container a host device node",
    "--device-cgroup-rule": "lets the container use host devices by number",
    "--volumes-from": "mounts every volume of another container, whatever it holds",
    "--group-add": "adds the container's user to a host group (the docker group's id gives the Docker socket)",
    "--cidfile": "makes docker write a file on the host, as root, wherever the recipe says",
}
# Options whose value is a host file the docker client reads into the container (environment, labels).
_HOST_FILE_OPTIONS = ("--env-file", "--label-file")


@dataclass(frozen=True)
class Danger:
    """One dangerous option: its stable name (see `DANGER_NAMES`), how it was written, why it matters.

    `entry` is the index of the docker option entry that holds it (`recipe.docker.entries`).
    """

    name: str
    option: str
    reason: str
    entry: int

    def message(self) -> str:
        """One line for `recipe check`: the option, the reason, the knob that allows it."""
        return (
            f"{self.option}: {self.reason}; remove it, or allow it on the node with "
            f'allow_docker_options: ["{self.name}"]'
        )


def dangerous_options(recipe: Recipe) -> list[Danger]:
    """Every dangerous docker option of `recipe`, in option order (pure: reads nothing but the recipe)."""
    found: list[Danger] = []
    spans_nodes = recipe.node_count() > 1  # host networking is how a multi-node server works (module doc)
    for index, entry in enumerate(recipe.docker.entries):
        for use in entry.uses:
            name = canonical(use.option.name)
            value = shell_value(use.value) if use.value is not None else None
            written = f"{use.option.name}={value}" if value is not None else use.option.name
            danger = _option_danger(name, value)
            if danger is not None and not (spans_nodes and danger[0] == "--network=host"):
                found.append(Danger(danger[0], written, danger[1], index))
            for mount_source in _mount_sources(name, value):
                mount = _mount_danger(mount_source)
                if mount is not None:
                    found.append(Danger(mount[0], written, mount[1], index))
            if name in _HOST_FILE_OPTIONS and value and _mount_danger(value, file=True) is not None:
                found.append(
                    Danger(
                        "host-file-read",
                        written,
                        f"reads the host file {value} into the container; keep such files outside system "
                        "directories and give an absolute path",
                        index,
                    )
                )
    return found


def _option_danger(name: str, value: str | None) -> tuple[str, str] | None:
    """The (name, reason) of an option that is dangerous by itself, whatever it mounts."""
    switched_on = value is None or value in _TRUE
    if name == "--privileged" and switched_on:
        return "--privileged", "gives the container every device and capability of the host"
    if name == "--use-api-socket" and switched_on:
        return "--use-api-socket", "gives the container the Docker API and its credentials: root on the host"
    if name in _HOST_NAMESPACES and value == "host":
        return f"{name}=host", _HOST_NAMESPACES[name]
    if name == "--security-opt" and value is not None:
        setting = value.replace(":", "=", 1) if "=" not in value else value  # the old `seccomp:unconfined`
        if setting in _SECURITY_OPTS:
            return f"--security-opt={setting}", _SECURITY_OPTS[setting]
        return None
    if name in _PLAIN_OPTIONS:
        return name, _PLAIN_OPTIONS[name]
    return None


def _mount_sources(name: str, value: str | None) -> list[str]:
    """Host paths a `-v`/`--mount` value binds (a named volume binds none)."""
    if value is None:
        return []
    if name == "--volume":
        source, has_colon, _rest = value.partition(":")
        return [source] if has_colon and source else []
    if name == "--mount":
        fields = _mount_fields(value)
        # A local volume with `o=bind` binds its `device` path: a bind mount by another name.
        return [fields[key] for key in ("source", "src", "volume-opt=device") if fields.get(key)]
    return []


def _mount_fields(value: str) -> dict[str, str]:
    """`--mount` is CSV (Docker parses it with encoding/csv): `"source=/a,b",target=/x` is two fields."""
    try:
        items = next(csv.reader([value]), [])
    except csv.Error:
        items = value.split(",")
    fields: dict[str, str] = {}
    for item in items:
        key, _, val = item.partition("=")
        key = key.strip().lower()
        if key == "volume-opt":
            opt_key, _, opt_val = val.partition("=")
            fields[f"volume-opt={opt_key.strip().lower()}"] = opt_val
        else:
            fields[key] = val
    return fields


def _mount_danger(source: str, *, file: bool = False) -> tuple[str, str] | None:
    """The (name, reason) of a bind-mount source (or, `file`, a host file the client reads) that exposes the
    host, or None for an ordinary directory."""
    if not source.startswith("/"):
        if _VOLUME_NAME_RE.fullmatch(source) and not file:
            return None  # `-v name:/x`: a named volume, Docker's storage; `--env-file name` is a relative file
        return (
            "host-system-mount",
            f"mounts {source}, a host path decided when the command runs ($HOME is /root when hgxkit deploys "
            "as root; a relative path depends on the working directory); write the absolute directory",
        )
    path = posixpath.normpath(source)
    if path.startswith("//"):
        path = "/" + path.lstrip("/")
    if path.endswith("docker.sock") or path.endswith("containerd.sock"):
        return "docker-socket-mount", f"mounts the container runtime's socket {source}: root on the host"
    for secret_dir in HGXKIT_SECRET_DIRS:
        if _at_or_under(path, secret_dir):
            return "hgxkit-secret-mount", f"mounts {source}, where hgxkit keeps the node's API keys and tokens"
    if path == "/":
        return "host-system-mount", "mounts the host's root file system"
    for system_dir in SYSTEM_DIRS:
        if _at_or_under(path, system_dir) or _at_or_under(system_dir, path):
            return "host-system-mount", f"mounts {source}, which holds or is inside the host's {system_dir}"
    return None


def _at_or_under(path: str, directory: str) -> bool:
    """True when `path` is `directory` or inside it (both normalised)."""
    return path == directory or path.startswith(directory.rstrip("/") + "/")
