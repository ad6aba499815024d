"""A dstack run configuration (`type: service` or `task`, `dstack apply -f FILE`) as the `docker run` of its one
serving command, read as a SkyPilot task's `run` is.

dstack runs `commands` in a shell in the container of `image:` (its own Python image when the file gives
`python:` or no image). The file's keys become the container:
- `image` is the image; without one the server is what `commands` install into dstack's image, so the file
  imports only in the image `--image` names (the installs noted as the image's to have);
- `resources.gpu` (`H100:4`, `24GB`, `A100:40GB:2`; dstack's count is 1 unless given) is `--gpus`, `shm_size`
  `--shm-size`, `port`/`ports` `-p`, `env` (`NAME=value`, or `NAME` from the environment) `-e`, a volume with
  `instance_path` a bind mount;
- `$NAME`s of `env` and `$DSTACK_GPUS_NUM` (the GPU count) are written into the command;
- `nodes: N` is a server spanning N nodes on the host's network, as dstack runs a task's nodes: the command is
  rank 0's (`$DSTACK_NODE_RANK` 0, `$DSTACK_MASTER_NODE_IP` the head, given per deploy, `$DSTACK_NODES_NUM` N,
  `$DSTACK_GPUS_PER_NODE` the count, `$DSTACK_GPUS_NUM` N times it), the ranks joined as any post's are.

One command serves: installs (`pip install …`) and messages are left out, an install into an image of the file's
own is refused (the recipe runs the image as it is). A service's replica groups are each read (a group that runs
only the router, `sglang_router.launch_router`, is set aside), so a prefill/decode split is refused by the
import's own rule; a task's node `groups` (each on its own nodes, running its own commands) are refused, a split
over them by name. What changes nothing the container runs with (`model`, `probes`, `replicas`, `scaling`, a
gateway) is set aside with a note; what a recipe cannot hold (local `files`/`repos`, a network volume, a range
of nodes, a dev environment) is refused by name, and so are, before the commands are counted, another accelerator
(`gpu: v5litepod-4`, `VLLM_TARGET_DEVICE=tpu`) and an engine hgxkit does not serve (`trtllm-serve`, its image).

Example:
    >>> from hgxkit.importing.documents import load_documents, yaml_regions
    >>> from hgxkit.importing.post import read_post
    >>> post = read_post("svc.dstack.yml", "type: service\\nimage: lmsysorg/sglang:v0.5.6\\n"
    ...                  "commands:\\n  - python3 -m sglang.launch_server --model-path org/m --port 8000\\n"
    ...                  "port: 8000\\nresources:\\n  gpu: H200:2\\n")
    >>> [simple] = DSTACK.simples(load_documents(post, yaml_regions(post)[0]))
    >>> " ".join(simple.texts)
    'docker run --gpus "device=0,1" -p 8000:8000 lmsysorg/sglang:v0.5.6 python3 -m sglang.launch_server \
--model-path org/m --port 8000'
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from hgxkit.errors import InputError
from hgxkit.importing.commands import Simple, unsupported_program
from hgxkit.importing.documents import (
    LINE,
    LINES,
    SHAPE_ERRORS,
    Document,
    WordAt,
    as_input_error,
    container_command,
    document_simple,
    literal,
    refused,
    take_document,
)
from hgxkit.importing.platform import ForeignSetup, foreign_in, message, shows_nvidia
from hgxkit.importing.reading import Reading
from hgxkit.importing.skypilot import installs, logical_lines
from hgxkit.kinds import KINDS, UNSUPPORTED, python_program
from hgxkit.recipe.nodes import HGX_GPUS
from hgxkit.recipe.shellwords import split_words

_TYPES = ("service", "task", "dev-environment")
_REFUSED = {
    "files": "local files copied into the run, which a recipe cannot carry; bake them into the image",
    "repos": "a local repository mounted into the run, which a recipe cannot carry; bake it into the image",
    "working_dir": "a working directory of the run's repository; give the command with absolute paths",
}
_NOTED = {
    "model": "registers the model with dstack's gateway; the server's own name is kept",
    "probes": "dstack's readiness probes; hgxkit checks the server's health itself",
    "replicas": "dstack's replicas behind its proxy; the recipe is one server",
    "scaling": "dstack's autoscaling; the recipe is one server",
    "gateway": "dstack's gateway; the recipe's server is reached on its own port",
    "auth": "dstack's proxy authentication; give the server an API key to ask for one",
    "https": "dstack's proxy TLS; the recipe's server is reached on its own port",
    "registry_auth": "credentials to pull the image: the node must be able to pull it",
    "spot_policy": "where dstack places the run; hgxkit deploys on the nodes it is given",
    "retry": "dstack's restarts; hgxkit starts and watches the container itself",
    "max_duration": "dstack's time limit; hgxkit starts and stops the container itself",
}
_ROUTER = re.compile(r"\bsglang_router\.launch_router\b")
HEAD = "dstack-head"  # the master node in the imported command; `join_ranks` replaces it by each deploy's head
_DSTACK_VARIABLE = re.compile(r"\$\{?(DSTACK_\w+)")


class Dstack:
    """A dstack service or task file: its serving command as a `docker run` (see the module docstring)."""

    name = "dstack run configuration"

    def claims(self, simple: Simple) -> bool:
        return simple.kind == "dstack"

    def take(self, simple: Simple, reading: Reading) -> None:
        take_document(simple, reading)

    def claims_document(self, data: Any) -> bool:
        return (
            isinstance(data, dict)
            and data.get("type") in _TYPES
            and any(k in data for k in ("commands", "image", "replicas", "groups"))
            and not any(k in data for k in ("services", "apiVersion", "kind", "run"))
        )

    def simples(self, documents: Sequence[Document]) -> list[Simple]:
        out: list[Simple] = []
        for document in documents:
            run = _Run(document)
            try:
                out += run.simples()
            except (InputError, *SHAPE_ERRORS) as err:
                error = as_input_error(err, document.where(), "dstack run configuration")
                out.append(refused(document, "dstack", error, document.first, document.last))
                continue
            lines = document.data.get(LINES, {})
            for key, why in _NOTED.items():
                if key in document.data:
                    out.append(document_simple(document, "dstack", (), lines[key], lines[key], [f"{key}: {why}"]))
        return out


DSTACK = Dstack()


class _Run:
    """One configuration's `docker run` words per serving command (a replica group's each), with notes."""

    def __init__(self, document: Document) -> None:
        self.document = document
        self.data: dict = document.data
        self.lines: dict[str, int] = self.data.get(LINES, {})
        self.notes: list[str] = []

    def where(self, key: str, within: dict | None = None) -> str:
        lines = (within or self.data).get(LINES, {})
        return self.document.where(lines.get(key, (within or self.data).get(LINE)))

    def simples(self) -> list[Simple]:
        data = self.data
        if data["type"] == "dev-environment":
            raise InputError(f"{self.where('type')}: type: dev-environment: a dstack IDE, not a server")
        self._named()
        for key, why in _REFUSED.items():
            if key in data:
                raise InputError(f"{self.where(key)}: {key}: {why}")
        if not re.fullmatch(r"[1-9]\d*", str(data.get("nodes") or 1)):
            raise InputError(
                f"{self.where('nodes')}: nodes: {data['nodes']}: a range of nodes; give the number the server spans"
            )
        self._node_groups()
        groups = data.get("replicas")
        if not isinstance(groups, list):  # one group: the file itself
            return [self._simple(data, self.notes)]
        out = []
        for group in groups:
            commands = "\n".join(str(c) for c in group.get("commands") or [])
            line = group.get(LINE, self.document.first)
            if _ROUTER.search(commands):
                why = "the replica group that runs the router (sglang_router.launch_router); hgxkit serves the server"
                out.append(document_simple(self.document, "dstack", (), line, line, [why]))
            else:
                out.append(self._simple({**data, **group}, list(self.notes)))
        return out

    def _node_groups(self) -> None:
        """Refuse a task's node `groups` (each its own nodes, each running its own commands): a prefill/decode
        split whose sides run on separate node groups by name, any other by what it is; hgxkit deploys one
        server, on one node or spanning `nodes: N`."""
        groups = self.data.get("groups")
        if not isinstance(groups, list):
            return
        commands = "\n".join(str(c) for group in groups if isinstance(group, dict) for c in group.get("commands") or [])
        split = next(
            (k.disaggregation[0] for k in KINDS.values() if k.disaggregation and k.disaggregation[0] in commands), None
        )
        if split is not None:
            raise InputError(
                f"{self.where('groups')}: groups: a prefill/decode split ({split}) whose sides run on separate node "
                "groups, with its router on another, which dstack wires together: import the prefill and decode "
                "commands themselves (one node's groups, or one side per host; the router from `--data router=true`)"
            )
        raise InputError(
            f"{self.where('groups')}: groups: {len(groups)} node groups, each running its own commands on its own "
            "nodes: hgxkit deploys one server (on one node, or over `nodes: N`); give the group that serves"
        )

    def _named(self) -> None:
        """Refuse by name a file for another accelerator (its resources, environment or installs) or an engine
        hgxkit does not serve (its image or program), before its commands are counted: setup steps around such a
        server would otherwise be refused as several commands, which says nothing of why it cannot be served."""
        first = self.document.first
        lines = list(self.document.post.lines[first - 1 : self.document.last])
        code = [(n, line) for n, line in enumerate(lines, first) if not line.lstrip().startswith("#")]
        if not shows_nvidia(lines):
            for number, line in code:
                if (found := foreign_in(line)) is not None:
                    raise ForeignSetup(message(self.document.where(number), found))
        served = " and ".join(k.title for k in KINDS.values())
        for number, line in code:
            launched = unsupported_program(python_program(re.sub(r"^\s*-\s+", "", line).split()))
            hinted = next((o for o in UNSUPPORTED if o.hinted_by(line)), None)
            other = launched or hinted
            if other is not None and not other.hardware:
                raise InputError(
                    f"{self.document.where(number)}: {other.title} ({other.name}) is not supported: "
                    f"{other.remedy or f'hgxkit serves {served}; import a post that launches one of them'}"
                )

    def _simple(self, spec: dict, notes: list[str]) -> Simple:
        words = self._words(spec, notes)
        return document_simple(self.document, "dstack", words, self.document.first, self.document.last, notes)

    def _words(self, spec: dict, notes: list[str]) -> list[WordAt]:
        command = self._command(spec, notes)
        image, at = self._image(spec, notes)
        resources = spec.get("resources") or {}
        line = self.lines.get("resources", self.document.first)
        words: list[WordAt] = [("docker", at), ("run", at), ("--gpus", line), (_gpus(resources), line)]
        if not re.fullmatch(r"\d+", str(resources.get("gpu", "1"))):
            notes.append(
                f"{self.where('resources')}: resources.gpu: {resources.get('gpu')}: any GPU that fits; the count "
                f"({_count(resources)}) is kept, the node is an HGX-H200"
            )
        if resources.get("shm_size"):
            size = re.sub(
                r"(?i)^(\d+)\s*([kmgt])i?b?$", lambda m: m.group(1) + m.group(2).lower(), str(resources["shm_size"])
            )
            words += [("--shm-size", line), (literal(size), line)]
        if _nodes(spec) > 1:
            # dstack runs each node's container on the host's network (a multi-node task's nodes reach each other on
            # it); a server spanning nodes needs it: its ranks meet on ports nothing publishes
            nodes = self.lines.get("nodes", at)
            words += [("--network", nodes), ("host", nodes)]
            notes.append(
                f"{self.where('nodes')}: nodes: {_nodes(spec)}: the container is on the host's network, as dstack runs "
                "a task's nodes, which a server spanning nodes needs"
            )
        for port in _ports(spec) if _nodes(spec) == 1 else []:
            words += [("-p", self.lines.get("port", self.lines.get("ports", at))), (port, self.lines.get("port", at))]
        for name, value in _env(spec.get("env")):
            text = name if value is None else f"{name}={value}"
            words += [("-e", self.lines["env"]), (literal(text), self.lines["env"])]
        words += self._volumes(spec.get("volumes") or [])
        if not command:  # the image's own entrypoint serves
            return [*words, (literal(image), at)]
        texts = [t for t, _ in command]
        option, after, more = container_command(image, texts[:1], texts[1:], self.where("commands", spec))
        notes += more
        if option is not None:
            words += [("--entrypoint", command[0][1]), (option, command[0][1])]
        words.append((literal(image), at))
        tail = command[len(command) - len(after) :]
        if [t for t, _ in tail] != after:  # a `sh -c 'LAUNCH'` read as its launch: the words are new
            tail = [(w, command[0][1]) for w in after]
        return words + tail

    def _image(self, spec: dict, notes: list[str]) -> tuple[str, int]:
        """The image the commands run in and its line: `image:`, else --image (dstack's own Python image holds
        what the commands install)."""
        found = installs("\n".join(str(c) for c in spec.get("commands") or []))
        given = self.document.image
        if spec.get("image") and not found:
            return str(spec["image"]), self.lines.get("image", self.document.first)
        if spec.get("image") and given is None:
            raise InputError(
                f"{self.where('commands', spec)}: commands: `{found[0]}` installs into the run's container, which "
                f"a recipe runs as its image is; give --image REF of an image that has it (built from {spec['image']})"
            )
        if given is None:
            base = f"python: {spec['python']}" if "python" in spec else "image: not given"
            key = "python" if "python" in spec else "type"
            raise InputError(
                f"{self.where(key)}: {base}: the commands run in dstack's own Python image"
                f"{' and install the server' if found else ''}, not in an image of the file's; give --image REF of "
                "an image that has the server (or `image:`)"
            )
        base = f"image {spec['image']}" if spec.get("image") else "dstack's own Python image"
        notes.append(
            f"{self.where('image' if spec.get('image') else 'type')}: the server runs in --image {given}, not {base}"
        )
        if found:
            notes.append(
                f"{self.where('commands', spec)}: commands install {'; '.join(found)}: --image {given} is taken to "
                "have them"
            )
        return given, self.lines.get("image", self.lines.get("python", self.document.first))

    def _command(self, spec: dict, notes: list[str]) -> list[WordAt]:
        """The one serving command of `commands` with the `env` values and dstack's GPU count written in; none
        when the file gives no `commands` (the image's own entrypoint serves)."""
        where = self.document.post.name
        commands = spec.get("commands") or []
        starts = getattr(commands, "lines", [self.document.first] * len(commands))
        found: list[tuple[int, str]] = []  # (first line, the command's text as written, continuations kept)
        for item, start in zip(commands, starts, strict=False):
            block = self.document.post.lines[start - 1].rstrip().endswith(("|", ">", "|-", ">-"))
            first = start + 1 if block else start
            written = str(item).split("\n")
            logical, ends = logical_lines(str(item), first)
            for number, text in logical:
                if not text or text.startswith("#") or installs(text) or re.match(r"^echo\s[^|;&>]*$", text):
                    continue
                found.append((number, "\n".join(written[number - first : ends[number] - first + 1])))
        if not commands:
            return []
        if len(found) != 1:
            shown = (
                "no command" if not found else f"{len(found)} commands (lines {', '.join(str(n) for n, _ in found)})"
            )
            raise InputError(f"{self.where('commands', spec)}: commands: {shown}; hgxkit imports one server command")
        number, text = found[0]
        text = self._resolve(text, number, spec, notes)
        words = split_words(text, source=where, first_line=number)
        if any(w.is_operator for w in words):
            raise InputError(f"{where}:{number}: commands: a pipeline or a list; give the server command alone")
        return [(w.text, w.line) for w in words]

    def _resolve(self, text: str, number: int, spec: dict, notes: list[str]) -> str:
        where = f"{self.document.post.name}:{number}"
        for name, value in _env(spec.get("env")):
            if value is not None and re.search(rf"\$\{{?{name}\b", text):
                text = re.sub(rf"\$\{{{name}\}}|\${name}\b", value, text)
                notes.append(f"{where}: ${name} is the file's env value {value}")
        count, nodes = _count(spec.get("resources") or {}), _nodes(spec)
        written = {
            "DSTACK_GPUS_NUM": (str(count * nodes), f"resources.gpu's count{f' x nodes {nodes}' if nodes > 1 else ''}"),
            "DSTACK_GPUS_PER_NODE": (str(count), "resources.gpu's count"),
            "DSTACK_NODES_NUM": (str(nodes), "nodes"),
            "DSTACK_NODE_RANK": ("0", "the rank: the command taken is rank 0's, hgxkit gives each host its own"),
            "DSTACK_MASTER_NODE_IP": (HEAD, "the head: hgxkit writes each deploy's head"),
        }
        for name, (value, why) in written.items():
            if re.search(rf"\$\{{?{name}\b", text):
                text = re.sub(rf"\$\{{{name}\}}|\${name}\b", value, text)
                notes.append(f"{where}: ${name} is {value}, {why}")
        if (left := _DSTACK_VARIABLE.search(text)) is not None:
            raise InputError(f"{where}: ${left.group(1)}: a dstack variable hgxkit does not read; write its value")
        return text

    def _volumes(self, volumes: list) -> list[WordAt]:
        words: list[WordAt] = []
        for volume, line in zip(volumes, getattr(volumes, "lines", []), strict=False):
            if isinstance(volume, dict) and volume.get("instance_path"):
                words += [("-v", line), (literal(f"{volume['instance_path']}:{volume['path']}"), line)]
            elif isinstance(volume, str) and volume.startswith("/"):
                words += [("-v", line), (literal(volume), line)]
            else:
                name = volume.get("name") if isinstance(volume, dict) else str(volume).split(":")[0]
                raise InputError(
                    f"{self.document.where(line)}: volume {name}: a dstack network volume, which a node does not "
                    "have; mount a host directory (`instance_path`)"
                )
        return words


def _nodes(spec: dict) -> int:
    """The number of nodes a task spans (`nodes: N`; 1 when not given)."""
    return int(spec.get("nodes") or 1)


def _count(resources: dict) -> int:
    """The GPU count of `resources.gpu` (`H100:4`, `24GB`, `A100:40GB:2`, `2`): dstack's default is 1."""
    gpu = resources.get("gpu")
    if isinstance(gpu, dict):
        gpu = gpu.get("count", 1)
    parts = str(gpu if gpu is not None else 1).split(":")
    counts = [p for p in parts if re.fullmatch(r"\d+(?:\.\.\d*)?", p)]
    return int(counts[-1].split("..")[0]) if counts else 1


def _gpus(resources: dict) -> str:
    count = _count(resources)
    if count >= HGX_GPUS:
        return "all"
    return f'"device={",".join(str(i) for i in range(count))}"'


def _ports(spec: dict) -> list[str]:
    ports = spec.get("ports") or ([spec["port"]] if spec.get("port") else [])
    return [p if ":" in str(p) else f"{p}:{p}" for p in map(str, ports)]


def _env(env: Any) -> list[tuple[str, str | None]]:
    """`env` as (NAME, value) pairs; a NAME without a value is taken from the environment (None)."""
    if isinstance(env, dict):
        return [(str(k), None if v is None else str(v)) for k, v in env.items() if k not in (LINE, LINES)]
    pairs = []
    for item in env or []:
        name, equals, value = str(item).partition("=")
        pairs.append((name, value if equals else None))
    return pairs
