"""What every export reads of a recipe: its groups and ranks as containers, taken from the structured render.

`export_groups` renders the recipe (hgxkit.recipe.render) and names each part of every `docker run` an engine
needs: GPUs, ports, environment (plain, or from the environment: secrets), mounts, shm/ipc/ulimits, the
image's entrypoint and the server's command, word for word. A group spanning nodes is rendered for every
rank with a stand-in head address; `Container.for_engine` puts the engine's head and rank expressions in
their place (over vLLM's data-parallel hosts also each worker's first DP rank, `ExportGroup.worker`), and
`export_groups` proves that the rank template gives every rank's own render. On a Ray cluster the head's
render (start Ray, then the server) is its own; the workers' is one template.

Example:
    >>> from hgxkit.recipe.read import load_recipe
    >>> groups = export_groups(load_recipe("recipes/deepseek-v4-flash-dspark-marlin.yaml"), ExportOptions())
    >>> [(c.name, c.gpus, c.host_port, c.container_port) for g in groups for c in g.containers]
    [('deepseek-v4-flash-0', [0, 1, 2, 3], 5000, 30000), ('deepseek-v4-flash-1', [4, 5, 6, 7], 5001, 30000)]
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

import yaml

from hgxkit.errors import InputError
from hgxkit.kinds.base import ServerKind
from hgxkit.recipe.check import parallel_size
from hgxkit.recipe.docker_options import canonical
from hgxkit.recipe.docker_parse import OptionEntry, OptionUse
from hgxkit.recipe.dump import recipe_hash
from hgxkit.recipe.judge import Judged
from hgxkit.recipe.nodes import ray_cluster
from hgxkit.recipe.render import RenderedGroup, render_recipe
from hgxkit.recipe.shellwords import dollar_segments
from hgxkit.recipe.spec import Mount, Recipe, parse_mount, parse_publish, parse_volume
from hgxkit.secrets import is_secret_name
from hgxkit.serving.containers import container_name

# A head address no host has (RFC 6761 `.invalid`), replaced by each engine's own head expression.
HEAD_STANDIN = "hgxkit-export-head.invalid"
LABEL_PREFIX = "hgxkit.io/"
DEFAULT_GPU_PRODUCT = "NVIDIA-H200"  # GPU feature discovery's `nvidia.com/gpu.product` of an HGX H200 node
SECRETS_FILE = "secrets.env"
# A kind that reads its key only from a flag (SGLang) gets it from its `--config` YAML (`api-key: KEY`), a file
# each engine fills from its own secret store: the flag would put the key on the server's command line, which
# every user of the node can read (/proc/PID/cmdline).
KEY_CONFIG_FILE = "api-key.yaml"
KEY_CONFIG_IN_CONTAINER = "/run/hgxkit/recipe-api-key.yaml"

# docker options an export does not need: the engine runs, names, restarts and logs the container itself.
_LIFECYCLE = {"--detach", "--rm", "--interactive", "--tty", "--name", "--gpus", "--publish", "--label"}


@dataclass(frozen=True)
class ExportOptions:
    """How an export places the recipe: where ports bind, the verifying run, the model volume, the node."""

    run_id: str | None = None
    model_pvc: str | None = None
    total_gpus: int = 8
    gpu_product: str = DEFAULT_GPU_PRODUCT
    time_limit: str = "7-00:00:00"  # Slurm: how long the job (the server) may run; a partition may allow less
    disk_gb: int = 1024  # SkyPilot: the node's disk (its default, 256 GB, holds no DeepSeek-class weights)
    model_gb: float | None = None  # Kubernetes: the weights' size on disk, in each pod's memory (not in the recipe)
    slurm_runtime: str = "docker"  # Slurm: what runs the containers (hgxkit.export.slurm.RUNTIMES)


@dataclass(frozen=True)
class Ulimit:
    name: str
    soft: int
    hard: int


@dataclass(frozen=True)
class Container:
    """One container of a group at one rank, as the render gives it, in parts."""

    group: int
    rank: int | None
    name: str
    gpus: list[int] | None  # None: every GPU of the node
    host_port: int | None  # None: the server's own port on the host network
    container_port: int
    image: str
    entrypoint: tuple[str, ...] | None  # `--entrypoint`, else the image's own
    command: tuple[tuple[str, ...], ...]  # the server program, then its argument entries (lexer notation)
    env: tuple[tuple[str, str], ...]  # settings with a value written in the recipe
    secret_env: tuple[str, ...]  # names whose value comes from the environment (never written into an export)
    env_files: tuple[str, ...]
    mounts: tuple[Mount, ...]
    shm_size: str | None
    ipc: str | None
    network_host: bool
    ulimits: tuple[Ulimit, ...]
    privileged: bool
    cap_add: tuple[str, ...]
    restart: str | None
    dropped: tuple[str, ...]  # docker options no engine export carries, as written
    model_mount: int | None = None  # index into `mounts` of the model directory
    rendered: RenderedGroup | None = None  # the whole `docker run`, for an engine that runs Docker itself
    image_entrypoint: tuple[str, ...] = ()  # the image's own ENTRYPOINT when the command is only its arguments
    key_config: str | None = None  # the variable whose value is the key in KEY_CONFIG_IN_CONTAINER (module doc)
    parallel_gpus: int | None = None  # with every GPU given (`--gpus all`): the GPUs its parallelism uses per node

    @property
    def shell_words(self) -> list[str]:
        """The process the container runs, for an engine that starts it without Docker (entrypoint first)."""
        return [*(self.entrypoint or self.image_entrypoint), *self.args]

    @property
    def args(self) -> list[str]:
        """The container command (the words after the image), in the lexer's notation."""
        return [word for entry in self.command for word in entry]

    @property
    def gpu_count(self) -> int | None:
        """The GPUs an engine that counts them (a Kubernetes limit, SkyPilot, Slurm) gives the container: its
        group's, else what its parallelism uses on one node (a TP1 server given `--gpus all` needs one)."""
        return len(self.gpus) if self.gpus is not None else self.parallel_gpus

    def for_engine(self, head: str, rank: str | None, kind: ServerKind, start: str | None = None) -> Container:
        """This container with the stand-in head replaced by `head`, (workers) the rank flag's value by `rank` and,
        given `start`, the first data-parallel rank of a host (vLLM's `--data-parallel-start-rank`) by it."""
        command = tuple(tuple(word.replace(HEAD_STANDIN, head) for word in entry) for entry in self.command)
        if rank is not None:
            command = tuple(_with_rank(entry, rank, kind) for entry in command)
        if start is not None and kind.dp_hosts is not None:
            command = tuple(_with_flag_value(entry, kind.dp_hosts.start_flag, start, kind) for entry in command)
        env = tuple((name, value.replace(HEAD_STANDIN, head)) for name, value in self.env)
        rendered = self.rendered
        if rendered is not None:
            options = tuple(_entry_with(entry, HEAD_STANDIN, head) for entry in rendered.options)
            rendered = replace(rendered, options=options, command=command)
        return replace(self, command=command, env=env, rendered=rendered)


@dataclass(frozen=True)
class ExportGroup:
    """One GPU group: its containers (one; or one per rank, head first, for a group spanning nodes)."""

    index: int
    name: str
    containers: list[Container]
    nodes: int
    kind: ServerKind

    @property
    def head(self) -> Container:
        return self.containers[0]

    @property
    def dp_per_host(self) -> int | None:
        """The data-parallel ranks each host runs when the server spreads them over hosts (vLLM's
        `--data-parallel-size-local`), else None: a worker's first DP rank is its rank times this."""
        local = self.kind.dp_hosts.local_flag if self.kind.dp_hosts else None
        for entry in self.head.command if local else ():
            flag, equals, inline = entry[0].partition("=")
            value = inline if equals else (entry[1] if len(entry) > 1 else "")
            if self.kind.canonical_flag(flag) == local and value.isdigit():
                return int(value)
        return None

    def worker(self, head: str, rank: str | None, start: str | None = None) -> Container:
        """The template an engine starts every worker (rank >= 1) from: rank 1's container with `head`, the rank
        flag's value `rank` and, over data-parallel hosts, the first DP rank `start` (the engine's expression of
        rank x `dp_per_host`). Without `start` the template keeps rank 1's own first DP rank, which is right only
        when rank 1 is the one worker: `start_needed` says when an engine must give one."""
        return self.containers[1].for_engine(head, rank, self.kind, start)

    @property
    def start_needed(self) -> bool:
        """True when the workers' first DP ranks differ (more than one worker over data-parallel hosts)."""
        return self.dp_per_host is not None and self.nodes > 2


@dataclass(frozen=True)
class Provenance:
    """What proves the recipe: its hash, image, model commit and the run that verified it."""

    recipe: str
    recipe_hash: str
    image: str
    image_reference: str  # the tag the digest was taken from (the image runs by digest)
    image_digest: str | None
    model_repo: str | None
    model_revision: str | None
    run_id: str | None
    kind: str
    allowed: tuple[str, ...] = ()  # what the judgement's allowances let through (hgxkit.recipe.judge)

    def labels(self) -> dict[str, str]:
        """`hgxkit.io/…` labels (values as Kubernetes allows: 63 characters; the full hash is a comment)."""
        pairs = {
            "recipe": self.recipe,
            "recipe-hash": self.recipe_hash.removeprefix("sha256:")[:16],
            "kind": self.kind,
            "run": self.run_id,
        }
        return {LABEL_PREFIX + k: _label_value(v) for k, v in pairs.items() if v}

    def annotations(self) -> dict[str, str]:
        """Everything, unabbreviated (Kubernetes annotations and compose labels take any text)."""
        pairs = {
            "recipe": self.recipe,
            "recipe-hash": self.recipe_hash,
            "image": self.image,
            "image-reference": self.image_reference,
            "image-digest": self.image_digest,
            "model-repo": self.model_repo,
            "model-revision": self.model_revision,
            "verified-by-run": self.run_id,
            "kind": self.kind,
            "allowed": "; ".join(self.allowed),
        }
        return {LABEL_PREFIX + k: v for k, v in pairs.items() if v}

    def comment(self) -> list[str]:
        """The same as comment lines (without the `#`)."""
        lines = [f"exported by hgxkit from recipe {self.recipe} ({self.recipe_hash})", f"image: {self.image}"]
        if self.model_repo:
            lines.append(f"model: {self.model_repo} at {self.model_revision or 'main'}")
        lines.append(f"verified by run: {self.run_id}" if self.run_id else "verified by run: none given (--run)")
        if not self.image_digest:
            lines.append(f"image by tag: {self.image_reference} moves; --run RUN pins the digest the run ran")
        return lines + [f"ALLOWED ON PURPOSE, {line}" for line in self.allowed]


def _label_value(value: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9._-]", "-", value)[:63]
    return re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", cleaned)


def provenance(judged: Judged, options: ExportOptions) -> Provenance:
    recipe = judged.recipe
    return Provenance(
        recipe=recipe.name,
        recipe_hash=recipe_hash(recipe),
        image=recipe.image.pinned(),
        image_reference=recipe.image.reference,
        image_digest=recipe.image.digest,
        model_repo=recipe.model.repo_id,
        model_revision=recipe.model.revision if recipe.model.repo_id else None,
        run_id=options.run_id,
        kind=recipe.server.server_kind.name,
        allowed=tuple(judged.allowed_lines()),
    )


def export_groups(recipe: Recipe, options: ExportOptions) -> list[ExportGroup]:
    """Every GPU group as containers (module doc)."""
    nodes = recipe.node_count()
    if nodes < 2:
        rendered = render_recipe(recipe, total_gpus=options.total_gpus)
        return [_group(recipe, [g], nodes) for g in rendered]
    ranks = [render_recipe(recipe, total_gpus=options.total_gpus, rank=r, head=HEAD_STANDIN) for r in range(nodes)]
    groups = []
    for index in range(len(ranks[0])):
        group = _group(recipe, [per_rank[index] for per_rank in ranks], nodes)
        _check_rank_template(recipe, group)
        groups.append(group)
    return groups


def _group(recipe: Recipe, ranks: list[RenderedGroup], nodes: int) -> ExportGroup:
    containers = [_container(recipe, g) for g in ranks]
    return ExportGroup(
        index=ranks[0].group,
        name=containers[0].name,
        containers=containers,
        nodes=nodes,
        kind=recipe.server.server_kind,
    )


def _container(recipe: Recipe, group: RenderedGroup) -> Container:
    kind = recipe.server.server_kind
    env: list[tuple[str, str]] = []
    secret_env: list[str] = []
    env_files: list[str] = []
    mounts: list[Mount] = []
    ulimits: list[Ulimit] = []
    cap_add: list[str] = []
    dropped: list[str] = []
    values: dict[str, str | None] = {}
    for entry in group.options:
        for use in entry.uses:
            name, value = canonical(use.option.name), use.value
            if name == "--env":
                key, has_value, text = (value or "").partition("=")
                if not has_value or is_secret_name(key) or any(x for _, x in dollar_segments(text)):
                    secret_env.append(key)  # from the environment: a secret, never written into the export
                else:
                    env.append((key, text))
            elif name == "--env-file":
                env_files.append(value or "")
            elif name == "--volume":
                mounts.append(_model_read_only(recipe, parse_volume(value or "")))
            elif name == "--mount":
                mounts.append(_model_read_only(recipe, parse_mount(value or "")))
            elif name == "--ulimit":
                ulimits.append(_ulimit(recipe, value or ""))
            elif name == "--cap-add":
                cap_add.append(value or "")
            elif name in ("--shm-size", "--ipc", "--network", "--restart", "--entrypoint", "--privileged"):
                values[name] = value
            elif name not in _LIFECYCLE:
                dropped.append(" ".join(entry.words))
    if kind.api_key_env and kind.api_key_env not in secret_env:
        secret_env.append(kind.api_key_env)  # hgxkit's own key, read the way the kind reads one
    network_host = values.get("--network") == "host"
    command, key_name = _key_in_config(tuple(entry for entry in group.command if entry), kind)
    published = [parse_publish(v or "") for v in group.option_values("--publish")]
    port_flag = recipe.server.flag("--port") or str(kind.default_port)
    server_port = int(port_flag) if port_flag.isdigit() else group.port  # `{{port}}`: each group's own
    container_port = int(published[0].container_port.split("/")[0]) if published else server_port
    host_port = group.port if not network_host else None
    if host_port is None and not network_host:
        host_port = int(published[0].host_port) if published and published[0].host_port.isdigit() else server_port
    return Container(
        group=group.group,
        rank=group.rank,
        name=dns_name(container_name(recipe, group)),
        gpus=group.gpus,
        host_port=host_port,
        container_port=server_port if network_host else container_port,
        image=recipe.image.pinned(),
        entrypoint=(values["--entrypoint"] or "",) if values.get("--entrypoint") is not None else None,
        command=command,
        env=tuple(env),
        secret_env=tuple(dict.fromkeys(secret_env)),
        env_files=tuple(env_files),
        mounts=tuple(mounts),
        shm_size=values.get("--shm-size"),
        ipc=values.get("--ipc"),
        network_host=network_host,
        ulimits=tuple(ulimits),
        privileged="--privileged" in values,
        cap_add=tuple(cap_add),
        restart=values.get("--restart"),
        dropped=tuple(dropped),
        model_mount=next((i for i, m in enumerate(mounts) if _is_model(recipe, m)), None),
        rendered=replace(group, command=command) if key_name else group,
        image_entrypoint=kind.image_entrypoint if not group.command or not group.command[0] else (),
        key_config=key_name,
        parallel_gpus=max(parallel_size(recipe) // max(recipe.node_count(), 1), 1),
    )


def _key_in_config(
    command: tuple[tuple[str, ...], ...], kind: ServerKind
) -> tuple[tuple[tuple[str, ...], ...], str | None]:
    """The command with a flag-only kind's `--api-key ${NAME}` turned into `--config` of the key file, and NAME
    (module doc: KEY_CONFIG_FILE); as it is for any other kind or key."""
    if kind.api_key_env is not None or any(entry[0].partition("=")[0] == "--config" for entry in command):
        return command, None
    for index, entry in enumerate(command):
        flag, has_equals, inline = entry[0].partition("=")
        value = inline if has_equals else (entry[1] if len(entry) == 2 else "")
        names = expansion_names([value]) if flag == "--api-key" else []
        if len(names) == 1 and value.strip("\"'") in (f"${names[0]}", f"${{{names[0]}}}"):
            return (*command[:index], ("--config", KEY_CONFIG_IN_CONTAINER), *command[index + 1 :]), names[0]
    return command, None


def key_file_line(name: str, path: str) -> str:
    """Shell that writes the key file at `path` (0600) from `$name` with builtins only, so the key is on no
    command line: YAML single quotes, each quote in the key doubled."""
    value = "${" + name + "//\\'/\\'\\'}"
    return f'(umask 077 && printf "api-key: \'%s\'\\n" "{value}" > {path})'


def _entry_with(entry: OptionEntry, old: str, new: str) -> OptionEntry:
    return OptionEntry(
        tuple(w.replace(old, new) for w in entry.words),
        tuple(OptionUse(u.option, None if u.value is None else u.value.replace(old, new)) for u in entry.uses),
    )


def model_entry_read_only(recipe: Recipe, entry: OptionEntry) -> OptionEntry:
    """A `-v`/`--mount` entry of the model directory made read-only (`:ro`, `,readonly`); others unchanged."""
    for index, use in enumerate(entry.uses):
        name, value = canonical(use.option.name), use.value or ""
        if name == "--volume" and _is_model(recipe, mount := parse_volume(value)) and not mount.read_only:
            entry = entry.with_value(index, value + (",ro" if value.count(":") >= 2 else ":ro"))
        elif name == "--mount" and _is_model(recipe, mount := parse_mount(value)) and not mount.read_only:
            entry = entry.with_value(index, value + ",readonly")
    return entry


def _is_model(recipe: Recipe, mount: Mount) -> bool:
    return bool(recipe.model.local_dir) and mount.source.rstrip("/") == (recipe.model.local_dir or "").rstrip("/")


def _model_read_only(recipe: Recipe, mount: Mount) -> Mount:
    """The model directory is mounted read-only (the export serves weights, it never writes them)."""
    return replace(mount, read_only=True) if _is_model(recipe, mount) else mount


def _ulimit(recipe: Recipe, value: str) -> Ulimit:
    name, _, limits = value.partition("=")
    soft, _, hard = limits.partition(":")
    try:
        return Ulimit(name, int(soft), int(hard or soft))
    except ValueError:
        raise InputError(
            f"{recipe.path or recipe.name}: docker option --ulimit {value}: write NAME=SOFT[:HARD]"
        ) from None


def dns_name(name: str) -> str:
    """A name every engine takes (Kubernetes: DNS-1035 label, 63 characters)."""
    cleaned = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")
    cleaned = re.sub(r"^[^a-z]+", "", cleaned)
    return cleaned[:63].rstrip("-") or "server"


RANK_STANDIN = "@HGXKIT_RANK@"
# A worker's first data-parallel rank in the template: a shell engine writes `$((RANK * N))` in its place.
START_STANDIN = "@HGXKIT_DP_START@"


def _with_rank(entry: tuple[str, ...], rank: str, kind: ServerKind) -> tuple[str, ...]:
    return _with_flag_value(entry, kind.rank_flag, rank, kind)


def _with_flag_value(entry: tuple[str, ...], canonical_flag: str, value: str, kind: ServerKind) -> tuple[str, ...]:
    flag, equals, _ = entry[0].partition("=")
    if kind.canonical_flag(flag) != canonical_flag:
        return entry
    return (f"{flag}={value}",) if equals else (entry[0], value, *entry[2:])


def _check_rank_template(recipe: Recipe, group: ExportGroup) -> None:
    """Every worker's render is the rank-1 template with its own rank (over data-parallel hosts also its own first
    DP rank); rank 0's is the template less the kind's worker flags and that first DP rank, except on a Ray cluster,
    where the head starts Ray and then the server (the render's own command, which every engine runs as it is).
    Else the rank is somewhere no engine sets it per node."""
    kind = group.kind
    template = group.worker(HEAD_STANDIN, RANK_STANDIN, START_STANDIN)
    per_host = group.dp_per_host or 0
    workers_only = {(flag,) for flag in kind.worker_flags}
    start_flag = kind.dp_hosts.start_flag if kind.dp_hosts else None
    for container in group.containers:
        rank = container.rank or 0
        if rank == 0 and ray_cluster(recipe) is not None:
            continue
        entries = [e for e in template.command if rank or (e not in workers_only and _flag(e, kind) != start_flag)]
        expected = [
            w.replace(RANK_STANDIN, str(rank)).replace(START_STANDIN, str(rank * per_host))
            for entry in entries
            for w in entry
        ]
        if expected != container.args or container.env != template.env:
            raise InputError(
                f"{recipe.path or recipe.name}: group {group.index}: the ranks' commands differ other than in "
                f"{kind.rank_flag}; an engine starts every worker from one template: write the rank only as "
                f"{kind.rank_flag} {{{{rank}}}}"
            )


def _flag(entry: tuple[str, ...], kind: ServerKind) -> str:
    return kind.canonical_flag(entry[0].partition("=")[0]) if entry and entry[0].startswith("-") else ""


def expansion_names(words: list[str]) -> list[str]:
    """The variables the words expand (`$NAME`, `${NAME}`), in order."""
    names: list[str] = []
    for word in words:
        for text, expands in dollar_segments(word) if "$" in word else []:
            name = text.strip("${}")
            if expands and name not in names:
                names.append(name)
    return names


@dataclass(frozen=True)
class Exported:
    """One export: file name -> text, what the engine's format does not carry, and what it carries only where the
    cluster grants more than its defaults (a Pod Security level, a node that large)."""

    files: dict[str, str]
    not_carried: list[str] = field(default_factory=list)
    needs: list[str] = field(default_factory=list)


def not_carried(groups: list[ExportGroup]) -> list[str]:
    """The recipe's docker options no export carries, once each."""
    seen = dict.fromkeys(d for g in groups for c in g.containers for d in c.dropped)
    return [f"the docker option {d}" for d in seen]


class _Dumper(yaml.SafeDumper):
    """YAML people read and edit: no `&id001` anchors for a shared mapping, scripts as `|` blocks."""

    def ignore_aliases(self, data: object) -> bool:
        return True


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    block = "\n" in value and not any(line != line.rstrip() for line in value.splitlines())
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if block else None)


_Dumper.add_representer(str, _text)


def dump_yaml(documents: Iterable[object], header: list[str]) -> str:
    """`documents` as one YAML stream, after `header` as `#` comment lines."""
    body = yaml.dump_all(list(documents), Dumper=_Dumper, sort_keys=False, width=1000)
    return "".join(f"# {line}\n" for line in header) + body
