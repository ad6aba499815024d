"""The recipe: one serving setup captured exactly, as typed dataclasses (schema v2).

Words in `docker.options` and `server.args` keep their original spelling. Per-group values are
placeholders that `render` fills in: `{{name}}`, `{{gpus}}`, `{{port}}`, `{{group}}`; a group spanning
several hosts (`groups.nodes`) also has `{{rank}}`, `{{head}}` and `{{dist_port}}`, filled per host; a
secret is `{{env:NAME}}`, taken from the environment when the command runs and never stored. What to
benchmark and the poster's numbers are in `hgxkit.recipe.matrix`.

Example:
    >>> from hgxkit.recipe.read import load_recipe
    >>> recipe = load_recipe("recipes/deepseek-v4-flash-dspark-marlin.yaml")
    >>> recipe.server.flag("--tp-size"), recipe.groups.size
    ('4', 4)
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from hgxkit.imageref import repository
from hgxkit.recipe.docker_options import canonical
from hgxkit.recipe.docker_parse import OptionEntry, OptionUse
from hgxkit.recipe.matrix import BenchmarkMatrix, Reference
from hgxkit.recipe.server_args import ServerCommand
from hgxkit.secrets import is_secret_name

SCHEMA_VERSION = 2
# Per-group placeholders, per-host ones of a group spanning nodes, and secret references.
PLACEHOLDER_RE = re.compile(r"\{\{(name|gpus|port|group|rank|head|dist_port|env:[A-Za-z_][A-Za-z0-9_]*)\}\}")
NODE_PLACEHOLDERS = ("{{rank}}", "{{head}}", "{{dist_port}}")
ENV_REF_RE = re.compile(r"\{\{env:([A-Za-z_][A-Za-z0-9_]*)\}\}")


@dataclass(frozen=True)
class Source:
    """Where the setup was posted."""

    url: str | None = None
    author: str | None = None
    date: str | None = None
    notes: str | None = None


@dataclass(frozen=True)
class ImageRef:
    """The container image, by tag, optionally pinned to a repository digest (`sha256:…`)."""

    reference: str
    digest: str | None = None

    @property
    def repository(self) -> str:
        """The reference without tag or digest: `lmsysorg/sglang:dev-dspark` -> `lmsysorg/sglang`
        (a registry port, `host:5000/x`, is kept)."""
        return repository(self.reference)

    def at_digest(self, digest: str) -> str:
        """`repo@sha256:…`: the image by content (the tag is dropped: it can move)."""
        return f"{self.repository}@{digest}"

    def pinned(self) -> str:
        """`repo@sha256:…` when a digest is pinned, else the tag reference."""
        return self.at_digest(self.digest) if self.digest else self.reference


@dataclass(frozen=True)
class ModelSpec:
    """The weights: Hugging Face repo and revision, where they live on the host and in the container."""

    repo_id: str | None
    revision: str = "main"
    local_dir: str | None = None
    mount_point: str | None = None
    allow_patterns: tuple[str, ...] = ()


@dataclass(frozen=True)
class EnvSetting:
    """One `-e`/`--env` setting; `value` None means "taken from the host environment at run time"."""

    name: str
    value: str | None

    @property
    def secret(self) -> bool:
        return is_secret_name(self.name)


@dataclass(frozen=True)
class PortMapping:
    """One `-p` publication: host address (may be empty), host port (may be a placeholder), container port."""

    host_ip: str
    host_port: str
    container_port: str


@dataclass(frozen=True)
class Mount:
    """A bind mount or volume: host source (or volume name) and container target."""

    source: str
    target: str
    read_only: bool


@dataclass(frozen=True)
class DockerSpec:
    """`docker run` and its options, each entry as the words it was written as."""

    invocation: tuple[str, ...]
    entries: tuple[OptionEntry, ...]

    def words(self) -> list[str]:
        out: list[str] = []
        for entry in self.entries:
            out.extend(entry.words)
        return out

    def uses(self) -> Iterator[OptionUse]:
        for entry in self.entries:
            yield from entry.uses

    def values(self, name: str) -> list[str | None]:
        """Values of every use of option `name` (canonical long name, e.g. `--env`), in order."""
        return [use.value for use in self.uses() if canonical(use.option.name) == name]

    def last(self, name: str) -> str | None:
        values = self.values(name)
        return values[-1] if values else None

    def env(self) -> list[EnvSetting]:
        settings = []
        for value in self.values("--env"):
            name, has_equals, rest = (value or "").partition("=")
            settings.append(EnvSetting(name, rest if has_equals else None))
        return settings

    def ports(self) -> list[PortMapping]:
        return [parse_publish(value or "") for value in self.values("--publish")]

    def mounts(self) -> list[Mount]:
        mounts = [parse_volume(value or "") for value in self.values("--volume")]
        mounts += [parse_mount(value or "") for value in self.values("--mount")]
        return mounts


@dataclass(frozen=True)
class Grouping:
    """How GPUs are split into containers: fixed-size groups, or explicit lists of GPU ids."""

    size: int | None = None
    explicit: tuple[tuple[int, ...], ...] | None = None
    gpus_per_node: int | None = None
    port_base: int | None = None
    name_template: str | None = None
    nodes: int | None = None  # hosts one group spans (tp x pp x dp = size x nodes); None: one
    dist_port: int | None = None  # rendezvous port on the head node (`{{dist_port}}`)
    # Hosts the groups are laid over in turn (each runs the groups planned on its GPUs, numbered on from the
    # previous host's), so a split's prefill and decode groups run on different nodes; None: every host runs them all.
    hosts: int | None = None
    # Server argument entries of each group in turn, after the server's own (a prefill group and a decode group
    # differ in these); None: every group runs the same command.
    server_args: tuple[tuple[tuple[str, ...], ...], ...] | None = None

    @property
    def node_count(self) -> int:
        return self.nodes or 1

    @property
    def host_count(self) -> int:
        return self.hosts or 1


@dataclass(frozen=True)
class Recipe:
    """One serving setup, exactly."""

    name: str
    image: ImageRef
    docker: DockerSpec
    server: ServerCommand
    model: ModelSpec
    description: str | None = None
    source: Source = field(default_factory=Source)
    groups: Grouping | None = None
    reference: Reference | None = None
    matrix: BenchmarkMatrix | None = None
    schema_version: int = SCHEMA_VERSION
    path: str | None = None

    def node_count(self) -> int:
        """Hosts one server spans: `groups.nodes`, else the server's own `--nnodes`, else 1."""
        if self.groups is not None and self.groups.nodes is not None:
            return self.groups.nodes
        nnodes = self.server.flag("--nnodes")
        return int(nnodes) if nnodes is not None and nnodes.isascii() and nnodes.isdigit() and int(nnodes) > 0 else 1

    def env_refs(self) -> list[str]:
        """Names of `{{env:NAME}}` references (secrets supplied from the environment at run time)."""
        names: list[str] = []
        for word in self.docker.words() + self.server.words():
            for name in ENV_REF_RE.findall(word):
                if name not in names:
                    names.append(name)
        return names

    def host_inputs(self) -> list[str]:
        """What the recipe alone cannot reproduce: values read from the host when the command runs."""
        notes = []
        for setting in self.docker.env():
            if setting.value is None and setting.secret:
                notes.append(f"-e {setting.name}: secret, taken from the environment at run time")
            elif setting.value is None:
                notes.append(f"-e {setting.name}: value taken from the host environment; not in the recipe")
        for path in self.docker.values("--env-file"):
            notes.append(f"--env-file {path}: read on the host; its contents are not in the recipe")
        for name in self.env_refs():
            notes.append(f"{{{{env:{name}}}}}: secret, taken from the environment at run time")
        return notes


def parse_publish(value: str) -> PortMapping:
    """Split a `-p` value: `80`, `8080:80`, `127.0.0.1:8080:80`, `[::1]:8080:80/tcp`."""
    if value.startswith("["):
        end = value.find("]")
        host_ip, rest = value[1:end], value[end + 2 :]
        host_port, _, container = rest.partition(":")
        return PortMapping(host_ip, host_port, container)
    parts = value.split(":")
    if len(parts) == 1:
        return PortMapping("", "", parts[0])
    if len(parts) == 2:
        return PortMapping("", parts[0], parts[1])
    return PortMapping(":".join(parts[:-2]), parts[-2], parts[-1])


def parse_volume(value: str) -> Mount:
    """Split a `-v` value: `src:dst[:opts]`; an anonymous volume `dst` has an empty source."""
    parts = value.split(":")
    if len(parts) == 1:
        return Mount("", parts[0], False)
    options = parts[2].split(",") if len(parts) > 2 else []
    return Mount(parts[0], parts[1], "ro" in options)


def parse_mount(value: str) -> Mount:
    """Split a `--mount` value: `type=bind,source=…,target=…,readonly`."""
    fields: dict[str, str] = {}
    flags: set[str] = set()
    for item in value.split(","):
        key, has_equals, val = item.partition("=")
        if has_equals:
            fields[key.strip()] = val
        else:
            flags.add(key.strip())
    source = fields.get("source") or fields.get("src") or ""
    target = fields.get("target") or fields.get("destination") or fields.get("dst") or ""
    read_only = bool(flags & {"readonly", "ro"}) or fields.get("readonly") in ("true", "1")
    return Mount(source, target, read_only)
