"""Render a recipe back into the exact `docker run` commands, one per GPU group — keeping their structure.

A `RenderedGroup` keeps the parts of the command apart (invocation, docker option entries, image, server
program and argument entries) with the group's placeholders filled, so the serving role takes small
overrides (`with_overrides`: bind published ports, name, labels, image by digest, extra server flags)
instead of slicing an argv or parsing options again.

Example:
    >>> from hgxkit.recipe.read import load_recipe
    >>> groups = render_recipe(load_recipe("recipes/deepseek-v4-flash-dspark-marlin.yaml"), total_gpus=8)
    >>> [(g.name, g.gpus, g.port) for g in groups]
    [('deepseek-v4-flash-0', [0, 1, 2, 3], 5000), ('deepseek-v4-flash-1', [4, 5, 6, 7], 5001)]
    >>> bound = groups[0].with_overrides(publish_address="127.0.0.1", labels={"hgxkit.group": "0"})
    >>> [e.words for e in bound.options if e.words[0] in ("-p", "--label")]
    [('--label', 'hgxkit.group=0'), ('-p', '127.0.0.1:5000:30000')]
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from hgxkit.errors import InputError
from hgxkit.kinds.base import RayCluster
from hgxkit.recipe.docker_options import canonical
from hgxkit.recipe.docker_parse import OptionEntry, OptionUse, parse_option_words
from hgxkit.recipe.groups import gpu_ids_from_spec, plan_groups
from hgxkit.recipe.nodes import dp_hosts, ray_cluster
from hgxkit.recipe.shellwords import LITERAL_DOLLAR, quote_word, shell_value
from hgxkit.recipe.spec import ENV_REF_RE, Recipe, parse_publish

SecretMode = Literal["reference", "resolve"]


@dataclass(frozen=True)
class RenderedGroup:
    """One container of a recipe: group index, name, GPUs, host port, and its command in parts."""

    group: int
    name: str | None
    gpus: list[int] | None
    port: int | None
    invocation: tuple[str, ...]
    options: tuple[OptionEntry, ...]
    image: str
    command: tuple[tuple[str, ...], ...]  # the server program's words first (may be empty), then its entries
    env_refs: list[str] = field(default_factory=list)
    rank: int | None = None  # the host's rank, for a server spanning nodes

    @property
    def lines(self) -> list[list[str]]:
        """The command as a person would lay it out: invocation, one option entry per line, image, server."""
        return [
            list(self.invocation),
            *(list(entry.words) for entry in self.options),
            [self.image],
            *(list(entry) for entry in self.command if entry),
        ]

    @property
    def argv(self) -> list[str]:
        """Every word in order, in the lexer's notation (a literal dollar sign is `$$`; see shellwords)."""
        return [word for line in self.lines for word in line]

    @property
    def shell_argv(self) -> list[str]:
        """Every word as a shell splitter shows it: `$NAME` unexpanded, literal dollar signs as one `$`."""
        return [shell_value(word) for word in self.argv]

    @property
    def server_argv(self) -> list[str]:
        """The container command: the server program and its arguments."""
        return [word for entry in self.command for word in entry]

    def option_values(self, name: str) -> list[str | None]:
        """Values of every use of docker option `name` (canonical long name, e.g. `--publish`)."""
        return [use.value for entry in self.options for use in entry.uses if canonical(use.option.name) == name]

    def to_json(self) -> dict[str, object]:
        return {"group": self.group, "name": self.name, "gpus": self.gpus, "port": self.port, "argv": self.shell_argv}

    def shell(self) -> str:
        """The command as a person would post it: one option per line, continued with backslashes."""
        return " \\\n    ".join(" ".join(quote_word(word) for word in line) for line in self.lines if line)

    def with_overrides(
        self,
        *,
        name: str | None = None,
        publish_address: str | None = None,
        detach: bool = False,
        labels: Mapping[str, str] | None = None,
        image: str | None = None,
        extra_options: Sequence[tuple[str, str]] = (),
        extra_args: Sequence[str] = (),
        keep_stopped: bool = False,
    ) -> RenderedGroup:
        """This command with hgxkit's overrides: `name` (replaces `--name` or adds it), every published port
        bound to `publish_address` (`-p 30000` too: `ADDR::30000`), `-d` added unless detached, `--label`s and
        `extra_options` (`("--env-file", path)` pairs) added, the image replaced (e.g. by a digest
        reference), `extra_args` appended to the server's; `keep_stopped` drops `--rm` (Docker would delete
        the container when it stops)."""
        options = list(self.options)
        if keep_stopped:
            options = [e for e in options if not all(canonical(u.option.name) == "--rm" for u in e.uses)]
        if name is not None:
            options = _set_name(options, name)
        if publish_address is not None:
            options = [_bind_entry(entry, publish_address) for entry in options]
        added = [OptionEntry.long("--label", f"{k}={v}") for k, v in (labels or {}).items()]
        added += [OptionEntry.long(option, value) for option, value in extra_options]
        if detach and not any(canonical(u.option.name) == "--detach" for e in options for u in e.uses):
            added.insert(0, OptionEntry(("-d",), OptionEntry.long("--detach").uses))
        command = self.command + ((tuple(extra_args),) if extra_args else ())
        return replace(
            self,
            name=name if name is not None else self.name,
            options=(*added, *options),
            image=image or self.image,
            command=command,
        )


def _set_name(options: list[OptionEntry], name: str) -> list[OptionEntry]:
    out, found = [], False
    for entry in options:
        for index, use in enumerate(entry.uses):
            if canonical(use.option.name) == "--name":
                entry, found = entry.with_value(index, name), True
        out.append(entry)
    return out if found else [OptionEntry.long("--name", name), *out]


def _bind_entry(entry: OptionEntry, address: str) -> OptionEntry:
    for index, use in enumerate(entry.uses):
        if canonical(use.option.name) != "--publish" or not use.value:
            continue
        mapping = parse_publish(use.value)
        host = f"[{address}]" if ":" in address else address
        entry = entry.with_value(index, f"{host}:{mapping.host_port}:{mapping.container_port}")
    return entry


def resolve_groups(
    recipe: Recipe, *, total_gpus: int | None = None, groups: list[tuple[int, ...]] | None = None
) -> list[tuple[int, ...]] | None:
    """The GPU groups to render (see `hgxkit.recipe.groups.plan_groups`, the one planner)."""
    return plan_groups(recipe, total_gpus=total_gpus, groups=groups)


def render_recipe(
    recipe: Recipe,
    *,
    total_gpus: int | None = None,
    groups: list[tuple[int, ...]] | None = None,
    secrets: SecretMode = "reference",
    environ: Mapping[str, str] | None = None,
    rank: int | None = None,
    head: str | None = None,
    first_group: int = 0,
) -> list[RenderedGroup]:
    """Render one `RenderedGroup` per GPU group (one in all for a recipe without grouping).

    `first_group` numbers the groups from there (`{{group}}`, the port, the name, the group's own arguments): a
    recipe laid over several hosts (`groups.hosts`) renders each host's groups after the previous host's
    (hgxkit.serving.pdhosts).

    `secrets="reference"` leaves `${NAME}` in place of each `{{env:NAME}}` (safe to print);
    `secrets="resolve"` substitutes the value from `environ` (for running the command, never for output).
    A server spanning nodes (`groups.nodes`) is rendered for one host: `rank` (0 is the head) and `head`
    (the head node's address) fill `{{rank}}`, `{{head}}` and `{{dist_port}}`; ranks >= 1 get the kind's
    worker flags (vLLM's `--headless`, and over data-parallel hosts the host's start rank); on a Ray cluster
    the head runs `ray start --head` and then the server, the other hosts only join the cluster.
    """
    planned = plan_groups(recipe, total_gpus=total_gpus, groups=groups)
    env = os.environ if environ is None else environ
    fill = _Filler(recipe, secrets, env, _node_values(recipe, rank, head))
    if planned is None:
        return [_group(recipe, fill, 0, {}, None, None, None)]
    assert recipe.groups is not None
    rendered = []
    for index, gpu_ids in enumerate(planned, start=first_group):
        name = (recipe.groups.name_template or "").replace("{{group}}", str(index)) or None
        port = recipe.groups.port_base + index if recipe.groups.port_base is not None else None
        values = {
            "{{group}}": str(index),
            "{{gpus}}": ",".join(str(gpu) for gpu in gpu_ids),
            "{{name}}": name or "",
            "{{port}}": str(port) if port is not None else "",
        }
        rendered.append(_group(recipe, fill, index, values, name, list(gpu_ids), port))
    return rendered


def _group(
    recipe: Recipe,
    fill: _Filler,
    index: int,
    values: dict[str, str],
    name: str | None,
    gpus: list[int] | None,
    port: int | None,
) -> RenderedGroup:
    options = tuple(fill.entry(entry, values) for entry in recipe.docker.entries)
    command: tuple[tuple[str, ...], ...] = (
        tuple(fill.word(w, values) for w in recipe.server.program),
        *(tuple(fill.word(w, values) for w in entry) for entry in recipe.server.args),
        *(tuple(fill.word(w, values) for w in entry) for entry in _own_args(recipe, index)),
        *fill.worker_entries(),
    )
    ray = ray_cluster(recipe)
    if ray is not None:
        options, command = _on_ray(ray, recipe, fill, options, command)
    group = RenderedGroup(
        group=index,
        name=name,
        gpus=gpus,
        port=port,
        invocation=tuple(recipe.docker.invocation),
        options=options,
        image=recipe.image.pinned(),
        command=command,
        env_refs=recipe.env_refs(),
        rank=fill.rank,
    )
    if recipe.groups is not None:
        return group
    # No grouping: name, GPUs and port are what the command itself says.
    names = group.option_values("--name")
    gpu_values = group.option_values("--gpus")
    published = [parse_publish(v or "").host_port for v in group.option_values("--publish")]
    return replace(
        group,
        name=names[-1] if names else None,
        gpus=gpu_ids_from_spec(gpu_values[-1]) if gpu_values else None,
        port=next((int(p) for p in published if p.isdigit()), None),
    )


def _own_args(recipe: Recipe, index: int) -> tuple[tuple[str, ...], ...]:
    """The server argument entries of group `index` alone (`groups.server_args`)."""
    own = recipe.groups.server_args if recipe.groups is not None else None
    return own[index] if own is not None and index < len(own) else ()


def _on_ray(
    ray: RayCluster,
    recipe: Recipe,
    fill: _Filler,
    options: tuple[OptionEntry, ...],
    command: tuple[tuple[str, ...], ...],
) -> tuple[tuple[OptionEntry, ...], tuple[tuple[str, ...], ...]]:
    """A host of a server on a Ray cluster: the head starts Ray and then the server, the others join its cluster
    (the kind's `RayCluster` commands, run by its shell as the entrypoint)."""
    head = fill.nodes["{{head}}"]
    port = int(fill.nodes.get("{{dist_port}}") or ray.port)
    if not any(canonical(u.option.name) == "--entrypoint" for entry in options for u in entry.uses):
        options = (*options, *parse_option_words(["--entrypoint", ray.shell], source=recipe.path or recipe.name))
    if fill.rank:
        return options, (ray.worker_command(head, port),)
    program = command[0] or recipe.server.server_kind.image_entrypoint
    started = tuple(w.replace("$", LITERAL_DOLLAR) for w in ray.head_command(head, port, program))
    return options, (started, *command[1:])


# A host address to fill `{{head}}` with: a name or an IPv4/IPv6 address, never shell syntax.
_HOST = re.compile(r"[A-Za-z0-9_.-]{1,253}|\[?[0-9A-Fa-f:.]{2,45}\]?")


def _node_values(recipe: Recipe, rank: int | None, head: str | None) -> dict[str, str]:
    """`{{rank}}`, `{{head}}`, `{{dist_port}}` for one host of a server spanning nodes (none for one node)."""
    nodes = recipe.node_count()
    where = recipe.path or recipe.name
    if nodes < 2:
        if rank not in (None, 0):
            raise InputError(f"{where}: rank {rank}: the recipe runs on one node; drop the rank")
        return {}
    if rank is None or head is None:
        raise InputError(
            f"{where}: the server spans {nodes} nodes: render it per host with a rank (0-{nodes - 1}; 0 is the head) "
            "and the head node's address (e.g. --rank 0 --head 10.0.0.1)"
        )
    if not 0 <= rank < nodes:
        raise InputError(f"{where}: rank {rank} is not one of the recipe's {nodes} nodes (0-{nodes - 1})")
    if not _HOST.fullmatch(head):
        raise InputError(f"{where}: head {head!r} is not a host name or address")
    port = recipe.groups.dist_port if recipe.groups is not None else None
    values = {"{{rank}}": str(rank), "{{head}}": head}
    if port is not None:
        values["{{dist_port}}"] = str(port)
    return values


class _Filler:
    """Fills a group's placeholders, a host's node placeholders and `{{env:NAME}}` references into words."""

    def __init__(self, recipe: Recipe, secrets: SecretMode, env: Mapping[str, str], nodes: dict[str, str]) -> None:
        self.recipe, self.secrets, self.env, self.nodes = recipe, secrets, env, nodes
        self.rank = int(nodes["{{rank}}"]) if nodes else None

    def worker_entries(self) -> list[tuple[str, ...]]:
        """The kind's worker flags on hosts of rank >= 1, unless the recipe writes them itself; over DP hosts
        also the host's first DP rank (rank x DP ranks per host)."""
        if not self.rank:
            return []
        server = self.recipe.server
        entries = [(flag,) for flag in server.server_kind.worker_flags if not server.has(flag)]
        spread = dp_hosts(server)
        form = server.server_kind.dp_hosts
        if spread is not None and form is not None and not server.has(form.start_flag):
            entries.append((form.start_flag, str(self.rank * spread[1])))
        return entries

    def entry(self, entry: OptionEntry, values: dict[str, str]) -> OptionEntry:
        return OptionEntry(
            tuple(self.word(w, values) for w in entry.words),
            tuple(OptionUse(u.option, None if u.value is None else self.word(u.value, values)) for u in entry.uses),
        )

    def word(self, word: str, values: dict[str, str]) -> str:
        for placeholder, value in {**values, **self.nodes}.items():
            word = word.replace(placeholder, value)
        return ENV_REF_RE.sub(self._env_value, word)

    def _env_value(self, match: re.Match[str]) -> str:
        name = match.group(1)
        if self.secrets == "reference":
            return "${" + name + "}"
        if name not in self.env:
            where = self.recipe.path or self.recipe.name
            raise InputError(f"{where}: {{{{env:{name}}}}} needs ${name}; export it first")
        return self.env[name].replace("$", LITERAL_DOLLAR)  # a value is passed as it is, never expanded
