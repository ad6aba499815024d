"""A Ray cluster a post starts over its hosts (`run_cluster.sh … --head|--worker`, `ray start --head|--address=…`),
and the server it then runs on it: one multi-node group.

vLLM's examples/online_serving/run_cluster.sh starts one container per host (`docker run --entrypoint /bin/bash
--network host --shm-size 10.24g --gpus all -v HF_HOME:/root/.cache/huggingface EXTRA… IMAGE -c "ray start
--block --head --port=6379"`, workers `--address=HEAD:6379`); `vllm serve … --tensor-parallel-size T
--pipeline-parallel-size P` in the head's container then spreads T x P GPUs over the cluster. The Ray format
(`RAY_START`) reads those commands into the `Reading` (`cluster`); when the post's server is a bare launch of
a kind that has a Ray cluster (`ServerKind.ray`), the importer gives it the head container's options
(`ray_run`) and makes it a group over the cluster's hosts (`ray_group`): `groups.nodes`, the GPUs each host
gives, the Ray port as `groups.dist_port`, and the kind's backend flag (`--distributed-executor-backend ray`).
Render then starts Ray on every host (hgxkit/recipe/render.py). A container that runs that render's own head command
(`bash -c 'ray start --head … && exec "$@"' ray-head LAUNCH`, as every export carries it) is read back the same way
(`rendered_head`), its workers counted from the server's GPUs.

Refused by name: workers without a head, two heads, a head address that is an expression, T x P that is not
the GPUs of the cluster's hosts (Ray would place the workers where it likes), a worker count that does not
match T x P.

Example:
    >>> from hgxkit.importing.post import find_commands, read_post
    >>> from hgxkit.importing.commands import simple_commands
    >>> post = read_post("p", "bash run_cluster.sh vllm/vllm-openai 10.0.0.1 --head /data/hf -e VLLM_HOST_IP=10.0.0.1")
    >>> node = ray_node(simple_commands(find_commands(post))[0])
    >>> node.role, node.head, node.run.image, [e.words for e in node.run.entries][:2]
    ('head', '10.0.0.1', 'vllm/vllm-openai', [('--entrypoint', '/bin/bash'), ('--network', 'host')])
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from hgxkit.errors import InputError
from hgxkit.imageref import normalized
from hgxkit.importing.commands import PLACEHOLDER, Simple
from hgxkit.importing.fill import fill_hint
from hgxkit.importing.reading import Reading
from hgxkit.kinds.base import RayCluster
from hgxkit.recipe.docker_options import canonical
from hgxkit.recipe.docker_parse import OptionEntry, ParsedRun, parse_option_words
from hgxkit.recipe.nodes import HGX_GPUS, parallel_size, readable_address, span_grouping
from hgxkit.recipe.server_args import ServerCommand
from hgxkit.recipe.shellwords import Word, shell_value, split_words
from hgxkit.recipe.spec import Recipe

_SCRIPT = re.compile(r"^(?:\S*/)?run_cluster\.sh$")
# `ray start` options the group's own Ray start carries (role, port, head address, per-deploy node address, whole
# nodes, staying up); any other is noted as not kept (render writes `ray start --head --port=P` itself).
_RAY_READ = frozenset({"--head", "--port", "--address", "--node-ip-address", "--num-gpus", "--block"})
# Set per host by the poster (this host's own address): not one value for every host of a group.
_PER_HOST_ENV = ("VLLM_HOST_IP", "RAY_NODE_IP_ADDRESS", "RAY_OVERRIDE_NODE_IP_ADDRESS")


@dataclass(frozen=True)
class RayNode:
    """One host's start of the Ray cluster: head or worker, the head's address and port as written, the
    container it runs in (run_cluster.sh; None for a bare `ray start`), the GPUs it gives Ray (`--num-gpus`)."""

    simple: Simple
    role: str  # head | worker
    head: str | None
    port: int
    run: ParsedRun | None = None
    gpus: int | None = None
    dropped: tuple[str, ...] = ()  # per-host `-e NAME=…` of run_cluster.sh, not kept
    unkept: tuple[str, ...] = ()  # `ray start` options hgxkit's own Ray start does not carry (`_RAY_READ`)
    rendered: bool = False  # hgxkit's own head (`rendered_head`): its workers are hgxkit's too

    def where(self) -> str:
        return self.simple.where()


def _words(simple: Simple) -> list[str]:
    texts = simple.texts
    return texts[1:] if texts[:1] and texts[0] in ("bash", "sh") else texts


def _script(simple: Simple) -> bool:
    words = _words(simple)
    return bool(words) and _SCRIPT.match(words[0]) is not None


def _ray_start(simple: Simple) -> bool:
    return simple.texts[:2] == ["ray", "start"]


def ray_node(simple: Simple, words: Sequence[str] | None = None) -> RayNode:
    """The Ray start `simple` is (`words`: its words with the post's variables written out)."""
    texts = list(words) if words is not None else [w for w in simple.texts]
    if texts[:1] in (["bash"], ["sh"]):
        texts = texts[1:]
    where = simple.where()
    if _SCRIPT.match(texts[0]):
        return _cluster_script(simple, texts[1:], where)
    return _bare_start(simple, texts[2:], where)


def _cluster_script(simple: Simple, args: list[str], where: str) -> RayNode:
    """run_cluster.sh IMAGE HEAD_IP --head|--worker HF_HOME [docker options…] (its usage line)."""
    if len(args) < 4 or args[2] not in ("--head", "--worker"):
        raise InputError(
            f"{where}: run_cluster.sh takes IMAGE HEAD_IP --head|--worker PATH_TO_HF_HOME [docker "
            f"options]; the post gives {' '.join(args[:4]) or 'nothing'}"
        )
    image, head, role, hf_home, extra = args[0], args[1], args[2][2:], args[3], args[4:]
    kept: list[str] = []
    dropped: list[str] = []
    index = 0
    while index < len(extra):
        word = extra[index]
        value = extra[index + 1] if word in ("-e", "--env") and index + 1 < len(extra) else None
        if value is not None and value.split("=", 1)[0] in _PER_HOST_ENV:
            dropped.append(value)
            index += 2
            continue
        kept += [word] if value is None else [word, value]
        index += 1 if value is None else 2
    # examples/online_serving/run_cluster.sh (vLLM, 0c37e23): the container it starts on every host
    options = [
        "--entrypoint",
        "/bin/bash",
        "--network",
        "host",
        "--shm-size",
        "10.24g",
        "--gpus",
        "all",
        "-v",
        f"{hf_home}:/root/.cache/huggingface",
        *kept,
    ]
    entries = parse_option_words(options, source=where)
    run = ParsedRun(("docker", "run"), entries, image, ())
    return RayNode(simple, role, head, 6379, run, None, tuple(dropped))


def _bare_start(simple: Simple, args: list[str], where: str) -> RayNode:
    """`ray start --head [--port=P] [--num-gpus=N]` or `ray start --address=HEAD:PORT [--num-gpus=N]`."""
    values: dict[str, str] = {}
    head_role = False
    unkept: list[str] = []
    index = 0
    while index < len(args):
        word = args[index]
        name, equals, value = word.partition("=")
        shown = word
        if name == "--head":
            head_role = True
        elif name.startswith("--") and not equals and index + 1 < len(args) and not args[index + 1].startswith("-"):
            value = args[index + 1]
            shown = f"{word} {value}"
            index += 1
            values[name] = value
        elif name.startswith("--"):
            values[name] = value
        if name not in _RAY_READ:
            unkept.append(shown)
        index += 1
    gpus = values.get("--num-gpus")
    count = int(gpus) if gpus and gpus.isdigit() else None
    if head_role:
        port = values.get("--port", "6379")
        return RayNode(
            simple,
            "head",
            values.get("--node-ip-address"),
            _port(port, "--port", where),
            None,
            count,
            unkept=tuple(unkept),
        )
    address = shell_value(values.get("--address", "")).strip("'\"")
    host, _, port = address.rpartition(":")
    if not host:
        raise InputError(f"{where}: `ray start` without --head or --address=HEAD:PORT; write which it is")
    return RayNode(simple, "worker", host, _port(port, "--address", where), None, count, unkept=tuple(unkept))


def _port(text: str, flag: str, where: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise InputError(f"{where}: {flag} port {text!r} is not a port number; write the Ray head's port")
    return int(text)


# The head's container command as hgxkit renders it (`RayCluster.head_command`): start Ray, then exec the server.
_RENDERED_HEAD = re.compile(r'ray start --head --node-ip-address=(\S+) --port=(\d+) && exec "\$@"')


def runs_rendered_head(words: Sequence[str]) -> bool:
    """True when a container's command (in the lexer's notation) is hgxkit's own Ray head (`rendered_head`)."""
    return (
        len(words) >= 5
        and words[0].rsplit("/", 1)[-1] in ("sh", "bash")
        and words[1] == "-c"
        and words[3] == "ray-head"
        and _RENDERED_HEAD.fullmatch(shell_value(words[2])) is not None
    )


def rendered_head(simple: Simple, run: ParsedRun, words: Sequence[str]) -> tuple[RayNode, list[str]] | None:
    """The Ray head and the server launch of a container that runs hgxkit's own head command (`bash -c 'ray start
    --head … && exec "$@"' ray-head LAUNCH…`, as an export carries the render), else None. Its workers are
    hgxkit's own Ray start (`ray_group` counts them from the server's GPUs)."""
    if not runs_rendered_head(words):
        return None
    match = _RENDERED_HEAD.fullmatch(shell_value(words[2]))
    assert match is not None
    head = shell_value(match.group(1)).strip("'\"")
    container = replace(run, command=())
    return RayNode(simple, "head", head, int(match.group(2)), container, rendered=True), list(words[4:])


def ray_container(simple: Simple, run: ParsedRun, words: Sequence[str]) -> RayNode | None:
    """The Ray start a `docker run … --entrypoint /bin/bash IMAGE -c "ray start …"` runs (`words`: its container
    command), or None when it runs something else."""
    if len(words) != 3 or words[1] != "-c":
        return None
    try:
        inner = split_words(shell_value(words[2]))
    except InputError:
        return None
    texts = [w.text for w in inner]
    texts = texts[1:] if texts[:1] == ["exec"] else texts  # hgxkit's own worker: `exec ray start --block …`
    if texts[:2] != ["ray", "start"] or any(w.is_operator for w in inner):
        return None
    node = _bare_start(simple, texts[2:], simple.where())
    envs = [u.value or "" for e in run.entries for u in e.uses if canonical(u.option.name) == "--env"]
    per_host = [value for value in envs if value.split("=", 1)[0] in _PER_HOST_ENV]
    entries = tuple(
        e
        for e in run.entries
        if not any(canonical(u.option.name) == "--env" and (u.value or "") in per_host for u in e.uses)
    )
    return replace(node, run=replace(run, entries=entries, command=()), dropped=tuple(per_host))


_PLACEHOLDER_HEAD = "ray-head"  # a worker's head address the post left as a placeholder; each deploy writes its own


def _glued(words: Sequence[Word]) -> list[str]:
    """The words' texts with the pieces a shell splits `--address=<HEAD_IP>:6379` into (`<` and `>` read as
    redirections) glued back where they touch in the post."""
    texts: list[str] = []
    previous: Word | None = None
    for word in words:
        if previous is not None and previous.line == word.line and previous.column + len(previous.text) == word.column:
            texts[-1] += word.text
        else:
            texts.append(word.text)
        previous = word
    return texts


def joins_a_placeholder_head(simple: Simple) -> bool:
    """True for a bare `ray start --address=<HEAD_IP>:PORT` whose one placeholder is the head's address (a worker's
    only use of it: hgxkit writes each deploy's head there)."""
    if simple.placeholder is None or _words(simple)[:2] != ["ray", "start"]:
        return False
    text = simple.placeholder[2]
    lines = simple.command.post.clean[simple.command.first - 1 : simple.command.last]
    if sum(len(PLACEHOLDER.findall(line)) for line in lines) != 1:
        return False
    return any(re.search(rf"--address[= ]{re.escape(text)}:\d+(?:\s|$)", line) for line in lines)


class RayStart:
    """A Ray cluster's start on one host (run_cluster.sh or `ray start`): read, for the server that runs on it."""

    name = "Ray cluster"

    def claims(self, simple: Simple) -> bool:
        return simple.kind == "other" and (_script(simple) or _ray_start(simple))

    def take(self, simple: Simple, reading: Reading) -> None:
        try:
            if simple.substitution is not None:
                word = simple.substitution
                at = f"{simple.command.post.name}: line {word.line}, column {word.column}"
                raise InputError(
                    f"{at}: {word.text!r} (a command substitution) in a Ray start is not imported; write "
                    "the head's address: hgxkit gives it again per deploy"
                )
            if simple.placeholder is not None and not joins_a_placeholder_head(simple):
                line, column, text = simple.placeholder
                raise InputError(
                    f"{simple.command.post.name}: line {line}, column {column}: {text} is a placeholder "
                    f"(an argument of {' '.join(_words(simple)[:1])}); {fill_hint(text)}"
                )
            words = reading.resolved(simple)
            texts = _glued(words) if simple.placeholder is not None else [w.text for w in words]
            node = ray_node(simple, texts)
            if simple.placeholder is not None:  # the head's address, which render writes per deploy
                node = replace(node, head=_PLACEHOLDER_HEAD)
                reading.notes.append(
                    f"{simple.where()}: {simple.placeholder[2]} is the head's address the worker joins, which "
                    "hgxkit writes per deploy from the inventory: nothing to fill"
                )
        except InputError as err:
            reading.cluster.append(err)
            reading.said(simple, "skipped", f"a Ray start that cannot be read ({err.message.split(': ', 1)[-1]})")
            return
        reading.cluster.append(node)
        where = f" (the head at {node.head}:{node.port})" if node.role == "worker" else f" (port {node.port})"
        reading.said(simple, "read", f"Ray {node.role}{where}", "groups, docker" if node.run else "groups")


RAY_START = RayStart()


def cluster_nodes(found: Sequence[RayNode | InputError]) -> tuple[RayNode, list[RayNode]]:
    """The cluster's head and its distinct workers; refused: a Ray start that cannot be read, no head, two heads."""
    errors = [f for f in found if isinstance(f, InputError)]
    if errors:
        raise errors[0]
    nodes = [f for f in found if isinstance(f, RayNode)]
    heads = [n for n in nodes if n.role == "head"]
    workers = [n for n in nodes if n.role == "worker"]
    if not heads:
        shown = ", ".join(w.where() for w in workers)
        raise InputError(f"{shown}: the post starts Ray worker(s) but no head (`--head`); give the head's command")
    if len({" ".join(h.simple.texts) for h in heads}) > 1:
        raise InputError(f"{heads[1].where()}: a second Ray head (the first at {heads[0].where()}); a group has one")
    distinct = list({" ".join(w.simple.texts): w for w in workers}.values())
    return heads[0], distinct


def ray_run(run: ParsedRun, head: RayNode, where: str, notes: list[str]) -> ParsedRun:
    """The container of a server started on the cluster: the head's (run_cluster.sh) with the server as its
    command, or the bare launch's own with the host's network and a shell entrypoint (Ray's ports are not
    published: every host reaches the others on its own network)."""
    if head.run is not None:
        shown = " ".join(w for e in head.run.entries for w in e.words)
        notes.append(
            f"{where}: runs on the Ray cluster started at {head.where()}: its container ({head.run.image} "
            f"{shown}) on every host; the head starts Ray, then the server"
        )
        for value in head.dropped:
            notes.append(
                f"{head.where()}: -e {value} is this host's own address; dropped (Ray uses each host's "
                "address on the host network)"
            )
        # The launch's own `NAME=value` prefix (made -e by bare_run) is the server's environment: kept, or the
        # container would run the server without it. vLLM hands its VLLM_* variables to the Ray workers.
        if normalized(run.image) != normalized(head.run.image):
            notes.append(
                f"{where}: the server runs in the head's container, so its image is {head.run.image} (as "
                f"{head.where()} runs it), not {run.image}"
            )
        launch_env = [e for e in run.entries if any(canonical(u.option.name) == "--env" for u in e.uses)]
        if launch_env:
            shown = ", ".join(" ".join(e.words) for e in launch_env)
            notes.append(f"{where}: {shown} (the launch's environment) added to the container on every host")
        return replace(head.run, entries=(*head.run.entries, *launch_env), command=run.command)
    kept: list[OptionEntry] = [
        e for e in run.entries if not any(canonical(u.option.name) in ("--publish", "--network") for u in e.uses)
    ]
    notes.append(
        f"{where}: runs on the Ray cluster started at {head.where()}: --network host and --entrypoint "
        "/bin/bash on every host (the head starts Ray, then the server; no port is published)"
    )
    extra = parse_option_words(["--entrypoint", "/bin/bash", "--network", "host"], source=where)
    return replace(run, entries=(*extra, *kept))


def ray_group(
    recipe: Recipe, ray: RayCluster, head: RayNode, workers: Sequence[RayNode], where: str, notes: list[str]
) -> Recipe:
    """The recipe as a group over the Ray cluster's hosts (module doc), or a refusal naming what does not fit."""
    if head.head is not None and not readable_address(head.head):
        raise InputError(
            f"{head.where()}: the Ray head address {head.head!r} is not a host name or address (a shell "
            "expression the import cannot read); write it: hgxkit gives it again per deploy"
        )
    bad = next((w for w in workers if w.head is not None and not readable_address(w.head)), None)
    if bad is not None:
        raise InputError(
            f"{bad.where()}: the Ray head address {bad.head!r} is not a host name or address (a shell "
            "expression the import cannot read); write it: hgxkit gives it again per deploy"
        )
    _heads_agree(head, workers, where, notes)
    total = parallel_size(recipe.server, where)
    per_host = head.gpus or HGX_GPUS
    if per_host != HGX_GPUS:
        raise InputError(
            f"{head.where()}: the Ray head gives {per_host} GPU(s) (--num-gpus); a Ray cluster here takes "
            f"whole HGX-H200 nodes ({HGX_GPUS} GPUs each, one Ray node per host): drop --num-gpus, or "
            "serve a smaller group without Ray"
        )
    posted = 1 + len(workers)
    nodes = posted
    if len(workers) == 1 and total > 2 * per_host and total % per_host == 0:
        nodes = total // per_host
        notes.append(
            f"{workers[0].where()}: the worker command stands for every worker: {nodes - 1} workers, as tp x "
            f"pp = {total} GPUs over hosts of {per_host}"
        )
    if not workers and head.rendered and total % per_host == 0 and total > per_host:
        nodes = total // per_host
        notes.append(
            f"{head.where()}: hgxkit's own Ray head; its {nodes - 1} worker(s) are hgxkit's Ray start on every "
            f"other host, as tp x pp = {total} GPUs over hosts of {per_host}"
        )
    elif not workers:
        raise InputError(
            f"{head.where()}: a Ray head but no worker (`--worker`, `ray start --address=…`); a group "
            "over one host needs no Ray cluster: import the server alone"
        )
    if total != nodes * per_host:
        remedy = (
            f"tp x pp = {total} fits one host: serve it there without a Ray cluster"
            if total <= per_host
            else f"start {-(-total // per_host)} hosts"
        )
        raise InputError(
            f"{where}: tp x pp x dp = {total} GPUs, but the post's Ray cluster is {posted} host(s) (1 head, "
            f"{len(workers)} worker(s)) of {per_host} GPUs = {nodes * per_host}; Ray would place the workers where it "
            f"likes: make tp x pp = {nodes * per_host}, or {remedy}"
        )
    server = recipe.server
    flag, value = ray.backend
    if server.flag(flag) is None:
        server = ServerCommand(server.program, (*server.args, (flag, value)), server.kind)
        notes.append(
            f"{where}: {flag} {value} added: the server spans the Ray cluster's {nodes} hosts (vLLM picks "
            "Ray there anyway; said so that every host's part is known)"
        )
    elif server.flag(flag) != value:
        raise InputError(f"{where}: {flag} {server.flag(flag)} on a Ray cluster; a group over hosts runs on Ray here")
    for node in (head, *workers):
        if node.unkept:
            notes.append(
                f"{node.where()}: `ray start` {' '.join(node.unkept)} not kept: every host runs hgxkit's own "
                f"Ray start (`ray start --head --port={head.port}`, `ray start --block --address=HEAD:"
                f"{head.port}`)"
            )
    notes.append(
        f"{where}: a Ray cluster of {nodes} hosts ({per_host} GPUs each, port {head.port}); the head address "
        f"{head.head or 'of the head'} is the poster's network; it is given per deploy"
    )
    groups = span_grouping(per_host, nodes, head.port, notes, where)
    return replace(recipe, server=server, groups=groups)


def _heads_agree(head: RayNode, workers: Sequence[RayNode], where: str, notes: list[str]) -> None:
    """Refuse a worker that joins another port than the head's; note hosts that name the head by different
    addresses (each host's command is written with its own reading of the head; hgxkit gives the head per deploy)."""
    for worker in workers:
        if worker.port != head.port:
            raise InputError(
                f"{worker.where()}: the Ray worker joins port {worker.port}, but the head ({head.where()}) listens "
                f"on {head.port}; write the head's port in both"
            )
    post = head.simple.command.post
    named = list(
        dict.fromkeys(
            (node.head, f"line {node.simple.first_line}" if node.simple.command.post is post else node.where())
            for node in (head, *workers)
            if node.head is not None
        )
    )
    if len({address for address, _ in named}) > 1:
        shown = ", ".join(f"{address} at {at}" for address, at in named)
        notes.append(
            f"{where}: the Ray hosts name different head addresses ({shown}); hgxkit writes the head's address "
            "per deploy from the inventory, so they are one cluster"
        )
