"""Docker options that give a container power over its host, each with a stable name and a one-line reason.

A recipe is untrusted input that hgxkit runs as root on GPU nodes, so its judgement (hgxkit.recipe.judge, run
by `recipe check`, the node and every export) refuses each of these (code `docker-option`) and `recipe import`
notes it. A node lets one through only when the inventory lists its name, e.g. `allow_docker_options:
["--privileged"]`; the names are `DANGER_NAMES`, stable so that inventories keep matching.

Allowed on purpose: `--ipc=host`. SGLang and vLLM document it for tensor-parallel serving (NCCL and
PyTorch share memory between the ranks through /dev/shm) and the seed post uses it; it shares the host's
System V IPC and /dev/shm, not its processes, files or devices. `--gpus` and `--runtime nvidia` are how
the GPUs get in. `--network=host` is named: it exposes every port the server opens on every interface, and
lets the container reach everything the host keeps on loopback as private (other groups' keyless APIs,
Prometheus, the exporters, DCGM's host engine, Grafana). A server spanning nodes needs it (its ranks open
rendezvous, NCCL and Gloo ports no `-p` can predict), and still needs it allowed by name: the danger's reason
says so, and the exposure policy judges the server's own `--host` on top.

The judgement is typed, and an allowlist: every option of the table (`hgxkit.recipe.docker_options`) has a
class, and each class is safe by default only for the values named safe here; anything else is named, and
`allow_docker_options` takes the danger's name, its option's name or its class (`"mounts"`, `"resources"`…).
Mounts: sources under `models_dir` (and the other model directories the inventory allows), the model's
`local_dir`, named volumes and `/dev/shm` (the engine's shared memory) are fine; any other host path is
`host-mount`. A container can change what it mounts read-write, and Docker resolves every source again at each
start, so the mounts are also judged together (each allowed by its own name only): a source inside (or equal to)
another read-write source is `nested-mount` (the container swaps it for a symlink to `/`, and the next start binds
the host's root); a read-write source that holds a models root is `models-root-mount`, and one inside a models
root that is neither the recipe's `local_dir` nor inside it is `other-model-mount` (another recipe's model
directory, which root's model sync writes into); a named volume called `hgxkit…` is `hgxkit-volume` (hgxkit's
own containers' data). The node walks every source again just before a start (`host_paths`, hgxkit.nofollow).
Resource levers are named: `--oom-score-adj` below 0, `--shm-size` or a tmpfs `size=` of the host's
memory or more, `--pids-limit` 0 or -1 (no limit), `--oom-kill-disable`, `--cgroup-parent`. `--ulimit
memlock=-1` is allowed on purpose: NVIDIA's and the engines' container docs run with it (NCCL and GPUDirect pin
host memory for RDMA), and it only lets the container lock its own memory, which its cgroup still bounds.

`judge_argv` judges a literal argv, the words Docker receives (no shell in between): an option it does not know is
refused by name (`unknown-option`). The values a recipe holds are the same words once loading has refused every
shell expansion (`expansion_problems`): a `$NAME` would make what Docker receives differ from what was judged.

Example:
    >>> from hgxkit.importing.docker_run import import_docker_run
    >>> [d.name for d in dangerous_options(import_docker_run("docker run --privileged -v /:/host img"))]
    ['--privileged', 'host-system-mount']
    >>> [d.name for d in judge_argv(["docker", "run", "--pids-limit=-1", "-v", "/opt/hgxkit:/x", "img"])]
    ['--pids-limit', 'host-system-mount']
"""

from __future__ import annotations

import csv
import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from hgxkit.errors import InputError
from hgxkit.problems import Problem
from hgxkit.recipe.docker_options import DOCKER_RUN_OPTIONS, canonical
from hgxkit.recipe.shellwords import EXPANDING_TILDE, LITERAL_DOLLAR, Word, dollar_segments, shell_value

if TYPE_CHECKING:
    from hgxkit.recipe.docker_parse import OptionUse, ParsedRun
    from hgxkit.recipe.spec import Recipe

# Host directories whose bind mount (or a mount of a directory above them) gives the container the host:
# its configuration, root's home, the kernel's interfaces, devices, programs, Docker's own state.
SYSTEM_DIRS = (
    "/etc",
    "/root",
    "/var/run",
    "/run",
    "/proc",
    "/sys",
    "/boot",
    "/dev",
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib64",
    "/var/lib/docker",
    "/var/lib/containerd",
    "/var/lib/kubelet",
    "/opt/hgxkit",
    "/var/spool",
    "/home",
    "/tmp",
    "/var/tmp",
)
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
    # The typed allowlist's names (module doc): each is allowed by its name, its option's name or its class.
    "host-mount",
    # Mounts a container could change between check and use (module doc): allowed by these names only.
    "nested-mount",
    "models-root-mount",
    "other-model-mount",
    "hgxkit-volume",
    "--publish-all",
    "--network=container",
    "--pid=container",
    "--ipc=container",
    "--security-opt",
    "--runtime",
    "--isolation",
    "--volume-driver",
    "--log-driver",
    "--oom-score-adj",
    "--oom-kill-disable",
    "--shm-size",
    "--tmpfs",
    "--pids-limit",
    "--cgroup-parent",
    "unknown-option",
)
DEFAULT_MODELS_DIR = "/data/models"
DEFAULT_HOST_MEMORY = 2 * 1024**4  # an HGX-H200 node's usual RAM (2 TiB); the node gives its own MemTotal

_VOLUME_NAME_RE = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.-]*")
# Docker reads a boolean field with Go's strconv.ParseBool (a bare `readonly` is true)
_TRUE = frozenset({"", "1", "t", "T", "true", "True", "TRUE"})
_HOST_NAMESPACES = {
    "--pid": "shares the host's processes: the container sees, signals and traces every process on the host",
    "--userns": "turns off user-namespace remapping: root in the container is root on the host",
    "--uts": "shares the host's hostname, which the container can change",
    "--network": "shares the host's network stack: every port the server opens is open on every interface, and the "
    "container reaches what the host keeps on loopback",
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
    klass: str = ""  # the option's class (docker_options.OPTION_CLASSES)
    by_name_only: bool = False  # allowed only by its own name, never by its option's name or class

    def allowed_by(self, allowed: Sequence[str]) -> bool:
        """True when `allowed` (the inventory's `allow_docker_options`) names this danger, its option or class."""
        if self.by_name_only:
            return self.name in allowed
        option = canonical(self.option.partition("=")[0])
        return self.name in allowed or option in allowed or bool(self.klass and self.klass in allowed)


@dataclass(frozen=True)
class PolicyContext:
    """What the judgement needs besides the words: the directories mounts may come from, the host's memory, and
    whether the server spans nodes (its ranks run with the host's network; see the module doc)."""

    mount_roots: tuple[str, ...] = (DEFAULT_MODELS_DIR,)
    host_memory_bytes: int = DEFAULT_HOST_MEMORY
    spans_nodes: bool = False
    own_files: tuple[str, ...] = ()  # files hgxkit itself wrote for this container (its env file, key files)
    local_dir: str = ""  # the recipe's own model directory (a mount root too); the other roots are models roots

    @property
    def models_roots(self) -> tuple[str, ...]:
        """The mount roots that hold every recipe's models (`models_dir`, `model_dirs_allowed`)."""
        return tuple(root for root in self.mount_roots if root and root != self.local_dir)


def context_for(
    recipe: Recipe, *, models_dirs: Sequence[str] = (DEFAULT_MODELS_DIR,), host_memory_bytes: int | None = None
) -> PolicyContext:
    """The context of `recipe` on a node: `models_dirs` (the `models_dir` knob and `model_dirs_allowed`) and the
    model's own `local_dir` are mount roots."""
    roots = tuple(dict.fromkeys([*models_dirs, *([recipe.model.local_dir] if recipe.model.local_dir else [])]))
    memory = host_memory_bytes or DEFAULT_HOST_MEMORY
    local_dir = recipe.model.local_dir or ""
    if local_dir in models_dirs:  # a local_dir that is a models root is judged as one
        local_dir = ""
    return PolicyContext(roots, memory, recipe.node_count() > 1, local_dir=local_dir)


def dangerous_options(recipe: Recipe, context: PolicyContext | None = None) -> list[Danger]:
    """Every dangerous docker option of `recipe`, in option order (pure: reads nothing but the recipe)."""
    ctx = context or context_for(recipe)
    return _judge_entries([entry.uses for entry in recipe.docker.entries], ctx)


def _judge_entries(entries: Sequence[Sequence[OptionUse]], ctx: PolicyContext) -> list[Danger]:
    """The dangers of option entries (each a list of option uses): each use alone, then the mounts together."""
    found: list[Danger] = []
    mounts: list[_Mount] = []
    for index, uses in enumerate(entries):
        for use in uses:
            value = shell_value(use.value) if use.value is not None else None
            found += _use_dangers(use.option.name, value, index, ctx)
            mounts += _mounts_of(use.option.name, value, index)
    found += _mount_set_dangers(mounts, ctx)
    return sorted(found, key=lambda danger: danger.entry)


def judge_argv(argv: Sequence[str], context: PolicyContext | None = None) -> list[Danger]:
    """The dangers of a literal `docker run` argv, the words Docker receives (`docker`, `run`, options, image…).

    An option Docker has but hgxkit's table does not, or a word that is no option, is `unknown-option`."""
    ctx = context or PolicyContext()
    try:
        run = _parsed_argv(argv)
    except InputError as err:
        return [Danger("unknown-option", err.message, "an option hgxkit does not know is refused by name", -1)]
    return _judge_entries([entry.uses for entry in run.entries], ctx)


def _parsed_argv(argv: Sequence[str]) -> ParsedRun:
    """A literal argv read as the parser reads a post's words, every `$` a literal one (Docker receives it as is)."""
    from hgxkit.recipe.docker_parse import parse_run_words

    words = [Word(word.replace("$", LITERAL_DOLLAR), 1, i + 1, True) for i, word in enumerate(argv)]
    return parse_run_words(words, source="argv")


def host_paths(argv: Sequence[str]) -> list[str]:
    """Every absolute host path a literal `docker run` argv binds into the container or has the client read (bind
    sources, a bind volume's device, env and label files), as written: what the node walks with no symlink
    followed just before it starts the container (hgxkit.nofollow). [] for an argv that does not parse."""
    try:
        run = _parsed_argv(argv)
    except InputError:
        return []
    paths: list[str] = []
    for entry in run.entries:
        for use in entry.uses:
            value = shell_value(use.value) if use.value is not None else None
            name = canonical(use.option.name)
            found = _mount_sources(name, value) + ([value] if name in _HOST_FILE_OPTIONS and value else [])
            paths += [path for path in found if path.startswith("/")]
    return list(dict.fromkeys(paths))


def _use_dangers(option_name: str, value: str | None, index: int, ctx: PolicyContext) -> list[Danger]:
    name = canonical(option_name)
    if value is not None and ctx.own_files and _own_file(name, value, ctx.own_files):
        return []
    option = DOCKER_RUN_OPTIONS.get(name)
    klass = option.klass if option is not None else "unknown"
    written = f"{option_name}={value}" if value is not None else option_name
    found: list[Danger] = []
    danger = _option_danger(name, value, ctx)
    if danger is not None:
        reason = danger[1]
        if ctx.spans_nodes and danger[0] == "--network=host":
            reason += " (a server spanning nodes needs it: allow it knowing the container reaches the host's loopback)"
        found.append(Danger(danger[0], written, reason, index, klass))
    for mount_source in _mount_sources(name, value):
        mount = _mount_danger(mount_source) if not _is_shm(mount_source) else None
        if mount is None and not _is_shm(mount_source):
            mount = _outside_roots(mount_source, ctx.mount_roots)
        if mount is not None:
            found.append(Danger(mount[0], written, mount[1], index, klass))
    if name in _HOST_FILE_OPTIONS and value and (_mount_danger(value) is not None or not value.startswith("/")):
        found.append(
            Danger(
                "host-file-read",
                written,
                f"reads the host file {value} into the container; keep such files outside system "
                "directories and give an absolute path",
                index,
                klass,
            )
        )
    return found


def _own_file(name: str, value: str, own: Sequence[str]) -> bool:
    """`--env-file F` or a read-only `-v F:…:ro` of a file hgxkit wrote itself for this container."""
    if name == "--env-file":
        return value in own
    if name == "--volume":
        parts = value.split(":")
        return len(parts) == 3 and parts[0] in own and parts[2] == "ro"
    return False


def with_own_files(context: PolicyContext, files: Sequence[str]) -> PolicyContext:
    """`context` that knows the files hgxkit wrote for the container (its argv names them; they are fine)."""
    return replace(context, own_files=tuple(files))


def _is_shm(source: str) -> bool:
    return posixpath.normpath(source) == "/dev/shm"


def _outside_roots(source: str, roots: Sequence[str]) -> tuple[str, str] | None:
    """`host-mount` for an absolute host path outside every allowed root (a named volume is not a path)."""
    if not source.startswith("/"):
        return None  # a named volume (a relative path is named by _mount_danger)
    path = posixpath.normpath("/" + source.lstrip("/"))
    if any(_at_or_under(path, posixpath.normpath(root)) for root in roots if root):
        return None
    return (
        "host-mount",
        f"mounts the host directory {source}, outside the model directories ({', '.join(roots)}); move the "
        "files there, or allow it",
    )


def _option_danger(name: str, value: str | None, ctx: PolicyContext | None = None) -> tuple[str, str] | None:
    """The (name, reason) of an option that is dangerous by itself, whatever it mounts."""
    switched_on = value is None or value in _TRUE
    memory = (ctx or PolicyContext()).host_memory_bytes
    if name == "--privileged" and switched_on:
        return "--privileged", "gives the container every device and capability of the host"
    if name == "--use-api-socket" and switched_on:
        return "--use-api-socket", "gives the container the Docker API and its credentials: root on the host"
    if name in _HOST_NAMESPACES and value == "host":
        return f"{name}=host", _HOST_NAMESPACES[name]
    if name in ("--network", "--pid", "--ipc") and value is not None and value.startswith("container:"):
        return f"{name}=container", f"joins the namespace of another container ({value}), whatever it runs"
    if name == "--security-opt" and value is not None:
        setting = value.replace(":", "=", 1) if "=" not in value else value  # the old `seccomp:unconfined`
        if setting in _SECURITY_OPTS:
            return f"--security-opt={setting}", _SECURITY_OPTS[setting]
        if setting in ("no-new-privileges", "no-new-privileges=true"):
            return None
        return "--security-opt", f"changes the container's confinement ({value}), which hgxkit cannot judge"
    if name in _PLAIN_OPTIONS:
        return name, _PLAIN_OPTIONS[name]
    if name == "--publish-all" and switched_on:
        return "--publish-all", "publishes every exposed port on every interface, whatever bind_address says"
    return _lever_danger(name, value, switched_on, memory)


_SAFE_VALUES = {
    "--runtime": ("nvidia", "runc", ""),
    "--isolation": ("default", ""),
    "--log-driver": ("json-file", "local", "none", "journald"),
}


def _lever_danger(name: str, value: str | None, switched_on: bool, memory: int) -> tuple[str, str] | None:
    """Runtime, plugins and resource levers (module doc)."""
    if name in _SAFE_VALUES and value not in _SAFE_VALUES[name]:
        return name, f"{value!r} is not one of {', '.join(v for v in _SAFE_VALUES[name] if v)}"
    if name == "--volume-driver":
        return name, "mounts through a volume plugin, which decides what the container gets"
    if name == "--oom-score-adj" and flag_number(value) < 0:
        return name, "makes the host's OOM killer spare the container and kill host processes first"
    if name == "--oom-kill-disable" and switched_on:
        return name, "keeps the OOM killer off the container: the host runs out of memory instead"
    if name == "--pids-limit" and value is not None and flag_number(value) <= 0:
        return name, "removes the limit on processes: a fork bomb takes the host"
    if name == "--cgroup-parent":
        return name, "places the container in a cgroup of the recipe's choosing, outside Docker's limits"
    if name == "--shm-size" and value is not None and docker_size_bytes(value) >= memory:
        return name, f"a /dev/shm of {value}: the host's memory ({memory >> 30} GiB) or more"
    if name in ("--tmpfs", "--mount") and value is not None:
        size = _tmpfs_size(name, value)
        if size is not None and size >= memory:
            return "--tmpfs", f"a tmpfs of {size >> 30} GiB: the host's memory ({memory >> 30} GiB) or more"
    return None


def flag_number(value: str | None) -> float:
    """A flag's numeric value; 0 when it is not given or not a number (the program would refuse it)."""
    try:
        return float(value or 0)
    except ValueError:
        return 0.0


_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4, "p": 1024**5}


def docker_size_bytes(text: str) -> int:
    """Docker's RAM size (`32g`, `2T`, `512mb`, `1048576`); 0 when it is no size (Docker refuses it then)."""
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([kmgtpKMGTP]?)[iI]?[bB]?\s*", text)
    if match is None:
        return 0
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


def _tmpfs_size(name: str, value: str) -> int | None:
    if name == "--tmpfs":
        options = value.partition(":")[2].split(",")
    else:
        fields = _mount_fields(value)
        if fields.get("type") != "tmpfs":
            return None
        options = [f"size={fields['tmpfs-size']}"] if fields.get("tmpfs-size") else []
    for item in options:
        key, _, size = item.partition("=")
        if key.strip() == "size" and size:
            return docker_size_bytes(size)
    return None


def expansions(word: str) -> list[str]:
    """Every shell expansion left in `word` (lexer notation): `$NAME`, `${NAME}`, `$1`, a leading `~`.

    >>> expansions("/${NOPE}var/run/docker.so${NOPE}ck"), expansions("$~/x"), expansions("a$$b")
    (['${NOPE}', '${NOPE}'], ['~'], [])
    """
    found = ["~"] if word.startswith(EXPANDING_TILDE) else []
    text = word[len(EXPANDING_TILDE) :] if found else word
    if "$" in text:
        found += [value for value, expands in dollar_segments(text) if expands]
    return found


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


@dataclass(frozen=True)
class _Mount:
    """One mount of the container: a host path (normalised) or a named volume, and whether it is read-only."""

    source: str
    bind: bool
    read_only: bool
    written: str
    entry: int
    klass: str


def _mounts_of(option_name: str, value: str | None, index: int) -> list[_Mount]:
    """The mounts one option use makes (`-v SRC:DST[:OPTS]`, `--mount …`); none for an anonymous volume."""
    name = canonical(option_name)
    if value is None or name not in ("--volume", "--mount"):
        return []
    written = f"{option_name}={value}"
    klass = DOCKER_RUN_OPTIONS[name].klass
    if name == "--volume":
        parts = value.split(":")
        modes = parts[2].split(",") if len(parts) > 2 else []
        sources, read_only = _mount_sources(name, value), "ro" in modes
    else:
        fields = _mount_fields(value)
        flag = fields.get("readonly", fields.get("ro"))
        sources, read_only = _mount_sources(name, value), flag is not None and flag.strip() in _TRUE
    return [
        _Mount(_normal(src) if src.startswith("/") else src, src.startswith("/"), read_only, written, index, klass)
        for src in sources
    ]


def _normal(path: str) -> str:
    """`path` as one absolute spelling: no `.`, `..`, repeated or trailing slash."""
    return posixpath.normpath("/" + path.lstrip("/"))


def _mount_set_dangers(mounts: Sequence[_Mount], ctx: PolicyContext) -> list[Danger]:
    """What the mounts allow together (module doc): a source a read-write mount can change, a models root or
    another recipe's directory under the container's control, and hgxkit's own volumes."""
    host = {(m.entry, m.source) for m in mounts if m.bind and _mount_danger(m.source) is not None}
    judged = [m for m in mounts if (m.entry, m.source) not in host]  # the host's own paths are refused already
    found = []
    for i, mount in enumerate(judged):
        why = _hgxkit_volume(mount) if not mount.bind else _nested(mount, judged, i) or _covers_models(mount, ctx)
        if why is not None:
            found.append(Danger(why[0], mount.written, why[1], mount.entry, mount.klass, by_name_only=True))
    return found


def _hgxkit_volume(mount: _Mount) -> tuple[str, str] | None:
    if not mount.source.lower().startswith("hgxkit"):
        return None
    return (
        "hgxkit-volume",
        f"mounts the named volume {mount.source}, which belongs to hgxkit's own containers (monitoring, image "
        "cache); use a volume of another name",
    )


def _nested(mount: _Mount, mounts: Sequence[_Mount], at: int) -> tuple[str, str] | None:
    """A bind source at or below another read-write bind source of the same container (a source mounted twice
    read-write counts once, at its second mount)."""
    for j, outer in enumerate(mounts):
        if j == at or not outer.bind or outer.read_only or not _at_or_under(mount.source, outer.source):
            continue
        if mount.source == outer.source and not mount.read_only and j > at:
            continue
        return (
            "nested-mount",
            f"mounts {mount.source}, which lies inside the read-write mount of {outer.source}: the container can "
            "replace it with a symlink that the next start mounts; mount the outer directory read-only (:ro), or "
            "only one of the two",
        )
    return None


def _covers_models(mount: _Mount, ctx: PolicyContext) -> tuple[str, str] | None:
    """A read-write bind source that holds a models root, or (for a recipe with a local_dir) a directory of one
    that is neither its local_dir nor inside it: where other recipes' models live, which root syncs and other
    containers use."""
    if mount.read_only:
        return None
    for root in (_normal(r) for r in ctx.models_roots):
        if _at_or_under(root, mount.source):
            return (
                "models-root-mount",
                f"mounts {mount.source} read-write, which holds the models root {root}: the container can swap any "
                "recipe's model directory for a symlink; mount it read-only (:ro), or mount only model.local_dir",
            )
    if not ctx.local_dir or _at_or_under(mount.source, _normal(ctx.local_dir)):
        return None  # without a local_dir no directory of the roots is known as this recipe's own
    for root in (_normal(r) for r in ctx.models_roots):
        if _at_or_under(mount.source, root):
            return (
                "other-model-mount",
                f"mounts {mount.source} read-write, a directory of the models root {root} that is not this "
                f"recipe's model.local_dir ({ctx.local_dir}): another recipe's model may live there; "
                "mount it read-only (:ro), or keep the files in model.local_dir",
            )
    return None


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


def expansion_problems(recipe: Recipe) -> list[Problem]:
    """A shell expansion left in the image, a docker option, the server program or a server flag (module doc):
    one `expansion` error each, `where` its key path. Secrets are `{{env:NAME}}`, which is no shell syntax."""
    places: list[tuple[tuple[str | int, ...], list[str]]] = [(("image", "reference"), [recipe.image.reference])]
    places += [(("docker", "options", i), list(entry.words)) for i, entry in enumerate(recipe.docker.entries)]
    places.append((("server", "command"), list(recipe.server.program)))
    places += [(("server", "args", i), list(entry)) for i, entry in enumerate(recipe.server.args)]
    own = recipe.groups.server_args if recipe.groups is not None else None
    places += [(("groups", "server_args", i), [w for e in entries for w in e]) for i, entries in enumerate(own or ())]
    problems = []
    for where, words in places:
        for word in words:
            found = expansions(word)
            if found:
                problems.append(
                    Problem(
                        "expansion",
                        f"{found[0]} in {shell_value(word)!r} is left for the node's shell to expand, so Docker "
                        "would receive other words than hgxkit checked",
                        "resolve it in the post, or declare it a secret ({{env:NAME}}, passed as -e NAME)",
                        where=where,
                    )
                )
                break
    return problems
