"""Every `docker run` option of Docker 28 (`docker run --help`, plus the hidden aliases) with its arity.

Knowing which options take a value is what lets the importer stop at the image: `--rm` takes none, so in
`docker run --rm img --tp 4` the word after it is the image and `--tp 4` belongs to the container.

Example:
    >>> DOCKER_RUN_OPTIONS["--gpus"].takes_value
    True
    >>> lookup_short("d").name
    '--detach'
    >>> DOCKER_RUN_OPTIONS["--shm-size"].klass
    'resources'
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DockerOption:
    """One `docker run` option: canonical long name, optional one-letter alias, and value shape."""

    name: str
    short: str | None
    takes_value: bool
    repeatable: bool
    klass: str = "lifecycle"  # its class in OPTION_CLASSES: what it gives the container (hgxkit.recipe.danger)


# (long name, short alias, value type as `docker run --help` prints it; "" for booleans).
# Types "list", "map", "ulimit", "mount" and "gpu-request"-like lists may be repeated.
_TABLE: tuple[tuple[str, str | None, str], ...] = (
    ("--add-host", None, "list"),
    ("--annotation", None, "map"),
    ("--attach", "a", "list"),
    ("--blkio-weight", None, "uint16"),
    ("--blkio-weight-device", None, "list"),
    ("--cap-add", None, "list"),
    ("--cap-drop", None, "list"),
    ("--cgroup-parent", None, "string"),
    ("--cgroupns", None, "string"),
    ("--cidfile", None, "string"),
    ("--cpu-count", None, "int"),
    ("--cpu-percent", None, "int"),
    ("--cpu-period", None, "int"),
    ("--cpu-quota", None, "int"),
    ("--cpu-rt-period", None, "int"),
    ("--cpu-rt-runtime", None, "int"),
    ("--cpu-shares", "c", "int"),
    ("--cpus", None, "decimal"),
    ("--cpuset-cpus", None, "string"),
    ("--cpuset-mems", None, "string"),
    ("--detach", "d", ""),
    ("--detach-keys", None, "string"),
    ("--device", None, "list"),
    ("--device-cgroup-rule", None, "list"),
    ("--device-read-bps", None, "list"),
    ("--device-read-iops", None, "list"),
    ("--device-write-bps", None, "list"),
    ("--device-write-iops", None, "list"),
    ("--disable-content-trust", None, ""),
    ("--dns", None, "list"),
    ("--dns-option", None, "list"),
    ("--dns-opt", None, "list"),
    ("--dns-search", None, "list"),
    ("--domainname", None, "string"),
    ("--entrypoint", None, "string"),
    ("--env", "e", "list"),
    ("--env-file", None, "list"),
    ("--expose", None, "list"),
    ("--gpus", None, "gpu-request"),
    ("--group-add", None, "list"),
    ("--health-cmd", None, "string"),
    ("--health-interval", None, "duration"),
    ("--health-retries", None, "int"),
    ("--health-start-interval", None, "duration"),
    ("--health-start-period", None, "duration"),
    ("--health-timeout", None, "duration"),
    ("--help", None, ""),
    ("--hostname", "h", "string"),
    ("--init", None, ""),
    ("--interactive", "i", ""),
    ("--io-maxbandwidth", None, "bytes"),
    ("--io-maxiops", None, "uint"),
    ("--ip", None, "string"),
    ("--ip6", None, "string"),
    ("--ipc", None, "string"),
    ("--isolation", None, "string"),
    ("--kernel-memory", None, "bytes"),
    ("--label", "l", "list"),
    ("--label-file", None, "list"),
    ("--link", None, "list"),
    ("--link-local-ip", None, "list"),
    ("--log-driver", None, "string"),
    ("--log-opt", None, "list"),
    ("--mac-address", None, "string"),
    ("--memory", "m", "bytes"),
    ("--memory-reservation", None, "bytes"),
    ("--memory-swap", None, "bytes"),
    ("--memory-swappiness", None, "int"),
    ("--mount", None, "mount"),
    ("--name", None, "string"),
    ("--net", None, "network"),  # hidden alias of --network
    ("--net-alias", None, "list"),  # hidden alias of --network-alias
    ("--network", None, "network"),
    ("--network-alias", None, "list"),
    ("--no-healthcheck", None, ""),
    ("--oom-kill-disable", None, ""),
    ("--oom-score-adj", None, "int"),
    ("--pid", None, "string"),
    ("--pids-limit", None, "int"),
    ("--platform", None, "string"),
    ("--privileged", None, ""),
    ("--publish", "p", "list"),
    ("--publish-all", "P", ""),
    ("--pull", None, "string"),
    ("--quiet", "q", ""),
    ("--read-only", None, ""),
    ("--restart", None, "string"),
    ("--rm", None, ""),
    ("--runtime", None, "string"),
    ("--security-opt", None, "list"),
    ("--shm-size", None, "bytes"),
    ("--sig-proxy", None, ""),
    ("--stop-signal", None, "string"),
    ("--stop-timeout", None, "int"),
    ("--storage-opt", None, "list"),
    ("--sysctl", None, "map"),
    ("--tmpfs", None, "list"),
    ("--tty", "t", ""),
    ("--ulimit", None, "ulimit"),
    ("--use-api-socket", None, ""),
    ("--user", "u", "string"),
    ("--userns", None, "string"),
    ("--uts", None, "string"),
    ("--volume", "v", "list"),
    ("--volume-driver", None, "string"),
    ("--volumes-from", None, "list"),
    ("--workdir", "w", "string"),
)

_REPEATABLE_TYPES = frozenset({"list", "map", "ulimit", "mount"})

# Each option's class: what it gives the container. hgxkit.recipe.danger judges each class's values (safe by
# default, or named and allowed only by `allow_docker_options: [<class or name>]`).
OPTION_CLASSES: dict[str, tuple[str, ...]] = {
    "lifecycle": (
        "--attach",
        "--detach",
        "--detach-keys",
        "--disable-content-trust",
        "--help",
        "--init",
        "--interactive",
        "--tty",
        "--pull",
        "--quiet",
        "--restart",
        "--rm",
        "--sig-proxy",
        "--stop-signal",
        "--stop-timeout",
        "--platform",
        "--entrypoint",
        "--health-cmd",
        "--health-interval",
        "--health-retries",
        "--health-start-interval",
        "--health-start-period",
        "--health-timeout",
        "--no-healthcheck",
    ),
    "identity": ("--name", "--hostname", "--domainname", "--user", "--workdir"),
    "env": ("--env", "--env-file"),
    "labels": ("--label", "--label-file", "--annotation"),
    "gpus": ("--gpus",),
    "ports": ("--publish", "--publish-all", "--expose"),
    "network": (
        "--network",
        "--net",
        "--network-alias",
        "--net-alias",
        "--ip",
        "--ip6",
        "--link",
        "--link-local-ip",
        "--mac-address",
        "--add-host",
        "--dns",
        "--dns-option",
        "--dns-opt",
        "--dns-search",
    ),
    "namespaces": ("--pid", "--uts", "--cgroupns", "--ipc", "--userns"),
    "security": ("--security-opt", "--cap-drop"),
    "privileges": ("--privileged", "--cap-add", "--group-add", "--use-api-socket"),
    "resources": (
        "--blkio-weight",
        "--blkio-weight-device",
        "--cpu-count",
        "--cpu-percent",
        "--cpu-period",
        "--cpu-quota",
        "--cpu-rt-period",
        "--cpu-rt-runtime",
        "--cpu-shares",
        "--cpus",
        "--cpuset-cpus",
        "--cpuset-mems",
        "--device-read-bps",
        "--device-read-iops",
        "--device-write-bps",
        "--device-write-iops",
        "--io-maxbandwidth",
        "--io-maxiops",
        "--kernel-memory",
        "--memory",
        "--memory-reservation",
        "--memory-swap",
        "--memory-swappiness",
        "--oom-kill-disable",
        "--oom-score-adj",
        "--pids-limit",
        "--shm-size",
        "--ulimit",
        "--cgroup-parent",
        "--storage-opt",
        "--sysctl",
    ),
    "devices": ("--device", "--device-cgroup-rule"),
    "mounts": ("--volume", "--mount", "--tmpfs", "--volumes-from", "--volume-driver", "--read-only"),
    "runtime": ("--runtime", "--isolation"),
    "logging": ("--log-driver", "--log-opt"),
    "host-files": ("--cidfile",),
}
_CLASS_OF = {name: klass for klass, names in OPTION_CLASSES.items() for name in names}

DOCKER_RUN_OPTIONS: dict[str, DockerOption] = {
    name: DockerOption(name, short, bool(kind), kind in _REPEATABLE_TYPES, _CLASS_OF[name])
    for name, short, kind in _TABLE
}
_BY_SHORT: dict[str, DockerOption] = {opt.short: opt for opt in DOCKER_RUN_OPTIONS.values() if opt.short}

# Hidden aliases that mean the same option; `diff` and `check` compare by the canonical name.
CANONICAL_ALIASES = {"--net": "--network", "--net-alias": "--network-alias", "--dns-opt": "--dns-option"}


def lookup_long(name: str) -> DockerOption | None:
    """The option for `--name` (without any `=value`), or None if Docker has no such option."""
    return DOCKER_RUN_OPTIONS.get(name)


def lookup_short(letter: str) -> DockerOption | None:
    """The option for the one-letter alias `letter` (`d` for `--detach`), or None."""
    return _BY_SHORT.get(letter)


def canonical(name: str) -> str:
    """The name `docker run --help` lists for an option, resolving hidden aliases."""
    return CANONICAL_ALIASES.get(name, name)
