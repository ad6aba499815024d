"""A SkyPilot task YAML (`sky launch task.yaml`) as the `docker run` of its `run` command on rank 0.

A document is a SkyPilot task when it has a `run` script and `resources` (or `num_nodes`/`setup`) and is no
compose file or manifest. Its keys become the container:
- `resources.image_id: docker:IMAGE` is the image;
- `resources.accelerators: H200:N` the GPUs (the `CUDA_VISIBLE_DEVICES` the run script exports, where it does);
- `resources.ports` the published ports, `config.docker.run_options` the container's options; with `num_nodes`
  above 1, the host's network instead (SkyPilot starts every task's container with `--net=host`, which the ranks
  of a server spanning nodes need: they meet on ports nothing publishes);
- `envs` its environment (hgxkit's own `HGXKIT_*` provenance is read back as an export's `hgxkit.io/*` labels);
- `secrets` names taken from the environment.

A task without `image_id: docker:…` runs on the VM, its server installed by `setup`: it imports in the image
`--image` names (the run script's `conda activate`/PATH lines were the VM's and are set aside), or, with no
`image_id` and a setup that installs nothing or the engine alone (not a pinned release), in the engine's own image
with a note, as a bare launch does.

The `run` script is read line by line:
- `set -e…` and `export CUDA_VISIBLE_DEVICES=…` are read;
- `NAME=$(echo "$SKYPILOT_NODE_IPS" | head -n 1)` is the head: the first node, `skypilot-head`, which
  `nodes.join_ranks` replaces by each deploy's head;
- in `if [ "$SKYPILOT_NODE_RANK" = 0 ]; then A; else B; fi`, A is rank 0's command. B, the other ranks', is
  rendered by hgxkit from it. `$SKYPILOT_NODE_RANK` as a value is rank 0, `$SKYPILOT_NUM_GPUS_PER_NODE` the
  accelerator count;
- a Ray cluster: `ray start --head` on rank 0 and `ray start --address $HEAD:PORT` on the others (guarded by `ps
  aux | grep … ||` or not, SkyPilot's Ray template as the alternative) are the cluster's starts, which the Ray
  format reads (`vllm_multinode`); waits (`sleep`, `ray status`) and each host's own VLLM_HOST_IP are left out;
- one command is the server (`exec` dropped); several are refused.

`setup` (the model download) and a `service:` section (SkyPilot Serve's replicas and readiness probe, which
`sky launch` ignores) are set aside. A task without a Docker image (unless --image), and `file_mounts` from a
bucket are refused by name.

Example:
    >>> from hgxkit.importing.documents import load_documents, yaml_regions
    >>> from hgxkit.importing.post import read_post
    >>> post = read_post("task.yaml", "resources:\\n  accelerators: H200:8\\n"
    ...                  "  image_id: docker:lmsysorg/sglang:v0.5\\n  ports: [30000]\\n"
    ...                  "run: |\\n  python3 -m sglang.launch_server --model-path org/m --port 30000\\n")
    >>> [simple] = SKYPILOT.simples(load_documents(post, yaml_regions(post)[0]))
    >>> " ".join(simple.texts)
    'docker run --gpus all -p 30000:30000 lmsysorg/sglang:v0.5 python3 -m sglang.launch_server --model-path org/m \
--port 30000'
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from typing import Any

from hgxkit.errors import InputError
from hgxkit.importing.commands import Simple
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
from hgxkit.importing.model_placement import DEFAULT_MODELS_DIR
from hgxkit.importing.provenance import PREFIX, exported_by_hgxkit
from hgxkit.importing.reading import Reading
from hgxkit.kinds import KINDS, python_program
from hgxkit.recipe.nodes import HGX_GPUS
from hgxkit.recipe.shellwords import split_words

HEAD = "skypilot-head"  # the first node in the imported command; `join_ranks` replaces it by each deploy's head
_HEAD_LINE = re.compile(
    r"^(?:export\s+)?([A-Za-z_]\w*)=\"?(?:\$\(|`)\s*echo\s+\"?\$\{?SKYPILOT_NODE_IPS\}?\"?\s*\|\s*"
    r"head\s+(?:-n\s*1|-1)\s*(?:\)|`)\"?$"
)
# `ps aux | grep ray | grep 6379 &> /dev/null || ray start …`: start Ray unless this host runs it already
_RAY_START = re.compile(r"^(?:ps\s+aux\b.*?\|\|\s*)?(ray\s+start\b.*)$")
_RAY_TEMPLATE = re.compile(r"^(?:~|\$HOME|\$\{HOME\})/(?:sky_templates|skypilot_templates)/ray/start_cluster(?:\.sh)?$")
_TEMPLATE_TEST = re.compile(r"^if \[\[? -[fx] (\S+) \]\]?; then$")
_WAIT = re.compile(r"^(?:sleep\s+(?:\d+[smhd]?|infinity)|ray\s+status)$")
# each host's own address, which Ray finds itself on the host network (see vllm_multinode)
_PER_HOST = re.compile(r"^(?:export\s+)?(VLLM_HOST_IP|RAY_NODE_IP_ADDRESS)(?:=.*)?$")
# the VM's environment, which a task without a container sets up for its server: the image has its own
_VM_ENVIRONMENT = re.compile(
    r"^(?:conda\s+deactivate|conda\s+activate\s+\S+|source\s+\S*activate(?:\s+\S+)?|(?:export\s+)?PATH=\S*)$"
)
_INSTALL = re.compile(r"\b(?:pip3?|uv\s+pip|apt(?:-get)?|conda|mamba)\s+(?:install|create)\b")
_PERMISSIONS = re.compile(r"^(?:sudo\s+)?chmod\s+\S+(?:\s+-R)?\s+\S+$")
_RANK_TEST = re.compile(r"^if \[\[? \"?\$\{?SKYPILOT_NODE_RANK\}?\"? (?:=|==|-eq) \"?0\"? \]\]?; then$")
_ASSIGN = re.compile(r"^(?:export\s+)?([A-Za-z_]\w*)=(\S*)$")
# `TP=$(($SKYPILOT_NUM_GPUS_PER_NODE * $SKYPILOT_NUM_NODES))`: a value the shell computes from what the task says
_ARITHMETIC = re.compile(r"^(?:export\s+)?([A-Za-z_]\w*)=\$\(\((.+)\)\)$")
_DOWNLOAD = re.compile(
    r"\b(?:hf|huggingface-cli)\s+download\s+([\w.-]+/[\w.-]+)\b[^\n;]*?"
    r"--local-dir[=\s]+([^\s;]+)"
)
_TASK_KEYS = ("resources", "num_nodes", "setup")
_REFUSED = {
    "workdir": "a local directory synced to the node, which a recipe cannot carry; bake it into the image",
}


class SkyPilot:
    """A SkyPilot task: its `run` command as a `docker run` (see the module docstring)."""

    name = "SkyPilot task"

    def claims(self, simple: Simple) -> bool:
        return simple.kind in ("skypilot", _ON_RAY)

    def take(self, simple: Simple, reading: Reading) -> None:
        take_document(simple, reading)
        taken = reading.servers[-1] if reading.servers else None
        if simple.kind == _ON_RAY and taken is not None and taken.simple is simple:
            taken.on_ray = True  # the run script starts the Ray cluster its server runs on

    def claims_document(self, data: Any) -> bool:
        return (
            isinstance(data, dict)
            and "run" in data
            and any(k in data for k in _TASK_KEYS)
            and not any(k in data for k in ("services", "apiVersion", "kind"))
        )

    def simples(self, documents: Sequence[Document]) -> list[Simple]:
        out: list[Simple] = []
        for document in documents:
            task = _Task(document)
            try:
                words = task.run_words()
            except (InputError, *SHAPE_ERRORS) as err:
                error = as_input_error(err, document.where(), "SkyPilot task")
                out.append(refused(document, "skypilot", error, document.first, document.last))
                continue
            envs = {k: v for k, v in _pairs(document.data.get("envs")) if str(k).startswith("HGXKIT_")}
            labels = {PREFIX + k.removeprefix("HGXKIT_").lower().replace("_", "-"): v for k, v in envs.items()}
            kind = _ON_RAY if task.ray else "skypilot"
            out.append(
                document_simple(
                    document, kind, words, document.first, document.last, task.notes, exported_by_hgxkit(labels)
                )
            )
            out += [document_simple(document, "other", start, start[0][1], start[-1][1]) for start in task.ray]
            out += [document_simple(document, "skypilot", (), line, line, [why]) for line, why in _set_aside(task)]
        return out


SKYPILOT = SkyPilot()
_ON_RAY = "skypilot-ray"  # a task's server on the Ray cluster its run script starts


def _set_aside(task: _Task) -> list[tuple[int, str]]:
    """(line, why) of the task's parts that run nothing a recipe carries: the setup, SkyPilot Serve's section."""
    data = task.data
    out = []
    if data.get("setup"):
        what = "its installs, which the image is taken to have, and " if installs(data["setup"]) else ""
        why = (
            f"setup ({what}the model download): a deploy places the model itself (the recipe's model repo and revision)"
        )
        out.append((task.at("setup"), why))
    service = data.get("service")
    if service is not None:
        shown = _service(service)
        out.append(
            (
                task.at("service"),
                f"service: SkyPilot Serve's section ({shown}), which `sky launch` ignores; not carried: the "
                "recipe is one server, and hgxkit checks its health itself",
            )
        )
    return out


def _service(service: Any) -> str:
    """What a `service:` section asks for, in words: its replicas and its readiness probe's path."""
    if not isinstance(service, dict):
        return str(service)
    probe = service.get("readiness_probe")
    path = probe.get("path") if isinstance(probe, dict) else probe
    replicas = service.get("replicas") or (service.get("replica_policy") or {}).get("min_replicas")
    parts = [f"{replicas} replica(s)" if replicas is not None else "", f"readiness probe {path}" if path else ""]
    return ", ".join(p for p in parts if p) or "replicas behind a load balancer"


def _pairs(value: Any) -> list[tuple[str, Any]]:
    if isinstance(value, dict):
        return [(str(k), v) for k, v in value.items() if k not in (LINE, LINES)]
    return []


class _Task:
    """One task's `docker run` words, each with its line; notes for what was read."""

    def __init__(self, document: Document) -> None:
        self.document = document
        self.data = document.data
        self.lines: dict[str, int] = self.data.get(LINES, {})
        self.notes: list[str] = []
        self.ray: list[list[WordAt]] = []  # the run script's Ray starts (head, workers), each its words
        self.computed: dict[str, tuple[int, str]] = {}  # NAME -> (line, EXPR) of `NAME=$((EXPR))`
        resources = self.data.get("resources")
        image = str(resources.get("image_id") or "") if isinstance(resources, dict) else ""
        self.has_image = image.startswith("docker:")

    def at(self, key: str) -> int:
        return self.lines.get(key, self.document.first)

    def where(self, key: str) -> str:
        return self.document.where(self.at(key))

    def run_words(self) -> list[WordAt]:
        data = self.data
        for target, source in _pairs(data.get("file_mounts")):
            text = source.get("source", "") if isinstance(source, dict) else str(source)
            if "://" in str(text):
                raise InputError(
                    f"{self.where('file_mounts')}: file_mounts {target}: {text} is a cloud bucket, "
                    "which a docker host does not mount; put its files on the node and mount them"
                )
        resources = data.get("resources") or {}
        if not isinstance(resources, dict):
            raise InputError(f"{self.where('resources')}: resources: one mapping is read (not a list of choices)")
        command, gpus = self._run()
        image = self._image(resources, [t for t, _ in command])
        line = self.at("resources")
        self._workdir([t for t, _ in command])
        top = self.document.first  # the task's head (its name, the export's comments) is the command's
        words: list[WordAt] = [("docker", top), ("run", top)]
        words += [("--gpus", line), (gpus or self._gpus(resources), line)]
        options = ((data.get("config") or {}).get("docker") or {}).get("run_options") or []
        options = [options] if isinstance(options, str) else options
        words += [(literal(o), self.at("config")) for o in options]
        exported = any(str(name).startswith("HGXKIT_") for name, _ in _pairs(data.get("envs")))
        if not exported and not any(re.match(r"--(?:ipc|shm-size)\b", str(o)) for o in options):
            # SkyPilot sizes the container's /dev/shm from the host's memory unless run_options give --shm-size
            # (sky/provision/docker_utils.py, _auto_configure_shm); the engines' ranks share memory through it,
            # which Docker's default 64 MB does not hold. An hgxkit export says its recipe's own options.
            words += [("--ipc=host", line)]
            self.notes.append(
                f"{self.where('resources')}: --ipc=host added: SkyPilot gives its container a /dev/shm sized from "
                "the host's memory, which tensor-parallel ranks share memory through"
            )
        group = self._exported_group(gpus or self._gpus(resources))
        if group is not None:
            index, devices = group
            words[3] = (f'"device={",".join(map(str, devices))}"', words[3][1])
        ports = resources.get("ports") or []
        if str(data.get("num_nodes") or 1) != "1":
            # SkyPilot starts every task's container with `--net=host`; a server over several nodes relies on it
            # (its ranks meet on ports nothing publishes)
            words += [("--network", line), ("host", line)]
            self.notes.append(
                f"{self.where('num_nodes')}: num_nodes {data['num_nodes']}: the task's container is on the "
                "host's network (SkyPilot runs it with --net=host), which a server spanning nodes needs"
            )
            ports = []
        for port in [ports] if isinstance(ports, (int, str)) else ports:
            host = int(port) + index if group is not None and str(port).isdigit() else port
            words += [("-p", line), (f"{host}:{port}", line)]
        words += self._model_mount()
        for name, value in _pairs(data.get("envs")):
            if not name.startswith("HGXKIT_"):  # hgxkit's own: the export's provenance, read as labels
                words += [
                    ("-e", self.at("envs")),
                    (literal(f"{name}={'' if value is None else value}"), self.at("envs")),
                ]
        for name, _ in _pairs(data.get("secrets")):
            words += [("-e", self.at("secrets")), (name, self.at("secrets"))]
        # SkyPilot runs the script in the container in place of the image's entrypoint: its first word is that
        texts = [t for t, _ in command]
        option, after, notes = container_command(image, texts[:1], texts[1:], self.where("run"))
        self.notes += notes
        if option is not None:
            words += [("--entrypoint", self.at("run")), (option, self.at("run"))]
        words.append((literal(image), line))
        tail = command[len(command) - len(after) :]
        if [t for t, _ in tail] != after:  # a `sh -c 'LAUNCH'` read as its launch: the words are new
            tail = [(w, self.at("run")) for w in after]
        return words + tail

    def _workdir(self, launch: list[str]) -> None:
        """Refuse the keys a recipe cannot carry (`workdir`: a local directory synced to the node) where the server
        reads from it: a relative path in its launch (the run script runs in the workdir); one the server does not
        read, for the script's other commands, is noted and left out."""
        for key, why in _REFUSED.items():
            if key not in self.data:
                continue
            relative = [w for w in launch if re.search(r"(?:^|=)\.\.?/", w)]
            if relative or key != "workdir":
                raise InputError(
                    f"{self.where(key)}: {key}: {why}" + (f" (the server reads {relative[0]})" * bool(relative))
                )
            self.notes.append(
                f"{self.where(key)}: workdir: {self.data[key]} (synced to the node, where the run script runs) is left "
                "out: the server's command reads no relative path, so only the script's other commands use it"
            )

    def _image(self, resources: dict, command: list[str]) -> str:
        """The container the server runs in: `image_id: docker:IMAGE`, else the one --image names, else (no image_id:
        the task runs on the VM, its setup installing the engine alone or nothing) the engine's own image, as for a
        bare launch; a VM image of its own (`ami-…`) or other installs are refused."""
        image = str(resources.get("image_id") or "")
        found = installs(self.data.get("setup"))
        if found and self.document.image is not None:
            self.notes.append(
                f"{self.where('setup')}: setup installs {'; '.join(found)}: --image {self.document.image} is "
                "taken to have them"
            )
        if image.startswith("docker:") and found and self.document.image is None:
            raise InputError(
                f"{self.where('setup')}: setup: `{found[0]}` installs into the task's container, which a recipe "
                f"runs as its image is; give --image REF of an image that has it (built from {image[7:]})"
            )
        if image.startswith("docker:"):
            return image.removeprefix("docker:")
        kind = next((k for k in KINDS.values() if k.launches(python_program(command))), None)
        if not image and self.document.image is None and kind is not None and all(map(_engine_install, found)):
            self.notes.append(
                f"{self.where('resources')}: resources.image_id: not given (the task runs on the VM"
                + (f", its setup installing the engine: {'; '.join(found)}" if found else "")
                + f"); the server runs in {kind.name}'s image {kind.default_image} (give --image REF to choose)"
            )
            return kind.default_image
        if self.document.image is None:
            raise InputError(
                f"{self.where('resources')}: resources.image_id: {image or 'not given'}: the task runs on the VM "
                "(its setup installs the server), not in a container; give --image REF of an image that has the "
                "server (or `image_id: docker:IMAGE`)"
            )
        self.notes.append(
            f"{self.where('resources')}: resources.image_id: {image or 'not given'} (the task runs on the VM); the "
            f"server runs in --image {self.document.image}"
        )
        return self.document.image

    def _exported_group(self, gpus: str) -> tuple[int, list[int]] | None:
        """(group index, its GPUs on the node) of a task hgxkit exported for one GPU group of several: the export
        names it `<recipe>-<group>` and gives it GPUs 0..n-1 of its own node; on one HGX node the groups sit on
        consecutive GPUs, so that the tasks imported together are the recipe's groups again."""
        envs = dict(_pairs(self.data.get("envs")))
        match = re.search(r"-(\d+)$", str(self.data.get("name") or ""))
        count = re.fullmatch(r'"device=([\d,]+)"', gpus)
        if "HGXKIT_RECIPE" not in envs or match is None or count is None:
            return None
        size = len(count.group(1).split(","))
        index = int(match.group(1))
        if size >= HGX_GPUS or (index + 1) * size > HGX_GPUS:
            return None
        self.notes.append(
            f"{self.where('name')}: task {self.data['name']} is group {index} of the exported recipe: "
            f"GPUs {index * size}..{(index + 1) * size - 1} of the node"
        )
        return index, list(range(index * size, (index + 1) * size))

    def _model_mount(self) -> list[WordAt]:
        """`-v` of the directory `setup` downloads the model into (`hf download REPO … --local-dir DIR`): the
        host's copy of the model, placed under the models directory like any mounted model."""
        setup = self.data.get("setup")
        if not isinstance(setup, str):
            return []
        match = _DOWNLOAD.search(setup)
        if match is None:
            return []
        repo, target = match.group(1), match.group(2).strip("'\"")
        line = self.at("setup")
        self.notes.append(f"{self.where('setup')}: setup downloads {repo} into {target}: the model the server reads")
        return [("-v", line), (literal(f"{DEFAULT_MODELS_DIR}/{repo.split('/')[-1]}:{target}:ro"), line)]

    def _gpus(self, resources: dict) -> str:
        choices = resources.get("accelerators")
        count = _count(resources)
        if isinstance(choices, dict) and count is not None:  # any one of several: the count is what a recipe keeps
            self.notes.append(
                f"{self.where('resources')}: resources.accelerators: any of several; the GPU "
                "count is kept, the node is an HGX-H200"
            )
        if count is None:
            names = [str(k) for k in choices if k not in (LINE, LINES)] if isinstance(choices, dict) else []
            accelerators = ", ".join(names) if names else str(choices or "")
            if not names and ":" not in accelerators:
                return "all"
            raise InputError(
                f"{self.where('resources')}: resources.accelerators: {accelerators}; give one "
                "accelerator and its count (H200:8)"
            )
        return "all" if int(count) >= HGX_GPUS else f'"device={",".join(str(i) for i in range(int(count)))}"'

    def _run(self) -> tuple[list[tuple[str, int]], str | None]:
        """(the rank-0 command's words with their lines, the `--gpus` value the script's CUDA_VISIBLE_DEVICES
        gives or None)."""
        script = self.data["run"]
        if not isinstance(script, str):
            raise InputError(f"{self.where('run')}: run: a shell script (a string) is read")
        first = self.at("run") + 1  # a block scalar's first line
        where = self.document.post.name
        logical, ends = logical_lines(script, first)
        commands, heads, gpus = self._read_script(logical)
        if len(commands) != 1:
            found = (
                "no command"
                if not commands
                else f"{len(commands)} commands (lines {', '.join(str(n) for n, _ in commands)})"
            )
            raise InputError(f"{where}:{first}: run: {found}; hgxkit imports one server command")
        number, text = commands[0]
        text = self._resolve_variables(re.sub(r"^exec\s+", "", text), number, heads)
        words = split_words(text, source=where, first_line=number)
        if any(w.is_operator for w in words):
            raise InputError(
                f"{where}:{number}: run: the command is a pipeline or a list; give the server command alone"
            )
        lines = [number] * (len(words) - 1) + [ends[number]]
        return [(w.text, line) for w, line in zip(words, lines, strict=True)], gpus

    def _read_script(self, logical: list[tuple[int, str]]) -> tuple[list[tuple[int, str]], set[str], str | None]:
        """(rank 0's commands with their lines, the variables that hold the head, the `--gpus` value of the
        script's CUDA_VISIBLE_DEVICES or None). Shell options, messages, waits and the other ranks' branch are left
        out; the Ray starts are kept apart (`self.ray`)."""
        where = self.document.post.name
        heads: set[str] = set()
        gpus = None
        blocks: list[list[str]] = []  # the `if`s the script is in: [rank|template, then|else]
        commands: list[tuple[int, str]] = []
        for number, text in logical:
            if not text or text.startswith("#") or self._left_out(number, text):
                continue
            if (match := _HEAD_LINE.match(text)) is not None:
                heads.add(match.group(1))
                self.notes.append(
                    f"{where}:{number}: ${match.group(1)} is the first of $SKYPILOT_NODE_IPS: the group's head"
                )
            elif _RANK_TEST.match(text) or _template_test(text):
                blocks.append(["rank" if _RANK_TEST.match(text) else "template", "then"])
            elif text in ("else", "fi") and blocks:
                if text == "fi":
                    blocks.pop()
                else:
                    blocks[-1][1] = "else"
            elif (arithmetic := _ARITHMETIC.match(text)) is not None:
                self.computed[arithmetic.group(1)] = (number, arithmetic.group(2))
            elif (ray := _RAY_START.match(text)) is not None:
                self._ray_start(number, ray.group(1), ray.group(0) != ray.group(1), heads)
            elif (match := _ASSIGN.match(text)) is not None and "$(" not in text and "`" not in text:
                name, value = match.groups()
                if name != "CUDA_VISIBLE_DEVICES":
                    raise InputError(f"{where}:{number}: {text}: a variable of the run script; give it in `envs`")
                gpus = f'"device={value.strip(chr(34) + chr(39))}"'
            elif ["rank", "else"] in blocks:
                self.notes.append(f"{where}:{number}: the other ranks' command; hgxkit renders each rank from rank 0's")
            elif _RAY_TEMPLATE.match(text) and ["template", "then"] in blocks:
                self.notes.append(
                    f"{where}:{number}: {text} is SkyPilot's Ray template, run where the image has it; the `ray "
                    "start` commands the script falls back to start the same cluster, and are read"
                )
            elif _RAY_TEMPLATE.match(text):
                raise InputError(
                    f"{where}:{number}: {text}: SkyPilot's Ray template starts the cluster with options the task "
                    "does not show; write its `ray start` commands (--head on rank 0, --address HEAD:PORT on the "
                    "others)"
                )
            else:
                commands.append((number, text))
        return commands, heads, gpus

    def _left_out(self, number: int, text: str) -> bool:
        """True for a line that runs nothing the server's container needs (each noted where it changes something
        on the host): shell options, messages, waits, each host's own address, the VM's environment."""
        where = f"{self.document.post.name}:{number}"
        if re.match(r"^set(?:\s+[-+]?\w+)+$", text) or re.match(r"^echo\s[^|;&>]*$", text) or _WAIT.match(text):
            return True
        if (match := _PER_HOST.match(text)) is not None:
            if "=" in text:
                self.notes.append(
                    f"{where}: {match.group(1)} is this host's own address (its line of $SKYPILOT_NODE_IPS); left "
                    "out: Ray uses each host's address on the host network"
                )
            return True
        if _PERMISSIONS.match(text):
            self.notes.append(f"{where}: `{text}` changes the task machine's file permissions; not carried")
            return True
        if not self.has_image and _VM_ENVIRONMENT.match(text):
            self.notes.append(f"{where}: `{text}` sets up the VM's environment for its server; the image has its own")
            return True
        return False

    def _ray_start(self, number: int, text: str, guarded: bool, heads: set[str]) -> None:
        """A host's `ray start` (the head's or a worker's), its head variables written as the head."""
        where = self.document.post.name
        for name in heads:
            text = re.sub(rf"\$\{{{name}\}}|\${name}\b", HEAD, text)
        words = split_words(text, source=where, first_line=number)
        if any(w.is_operator for w in words):
            raise InputError(f"{where}:{number}: {text}: a `ray start` in a pipeline or list; give it alone")
        if guarded:
            self.notes.append(f"{where}:{number}: `ps aux | grep … ||`: Ray is started unless the host runs it already")
        self.ray.append([(w.text, number) for w in words])

    def _computed(self, text: str, number: int) -> str:
        """The command with each `$NAME` of a `NAME=$((EXPR))` line written as its value, where EXPR is whole
        numbers and the node and GPU counts the task gives; anything else is left for the refusal of `$NAME`."""
        where = self.document.post.name
        known = {"SKYPILOT_NUM_NODES": str(self.data.get("num_nodes", 1))}
        count = _count(self.data.get("resources"))
        if count is not None:
            known["SKYPILOT_NUM_GPUS_PER_NODE"] = count
        for name, (line, expression) in self.computed.items():
            if not re.search(rf"\$\{{{name}\}}|\${name}\b", text):
                continue
            written = re.sub(r"\$\{?([A-Za-z_]\w*)\}?", lambda m: known.get(m.group(1), m.group(0)), expression)
            value = whole_number(written)
            if value is None:
                raise InputError(
                    f"{where}:{line}: ${name} is $(({expression})), which hgxkit cannot work out from the task "
                    "(whole numbers, the node count and resources.accelerators' count); write its value"
                )
            text = re.sub(rf"\$\{{{name}\}}|\${name}\b", str(value), text)
            self.notes.append(
                f"{where}:{number}: ${name} is $(({expression})) (line {line}): {written.strip()} = {value}"
            )
        return text

    def _resolve_variables(self, text: str, number: int, heads: set[str]) -> str:
        """Rank 0's command with the head, the task's `envs` and SkyPilot's rank and node count written in.

        Any other SkyPilot variable is refused by name.
        """
        where = self.document.post.name
        for name in heads:
            text = re.sub(rf"\$\{{{name}\}}|\${name}\b", HEAD, text)
        for name, value in _pairs(self.data.get("envs")):  # the task's envs are the run script's variables
            if value is not None and not isinstance(value, (dict, list)) and re.search(rf"\$\{{?{name}\b", text):
                text = re.sub(rf"\$\{{{name}\}}|\${name}\b", str(value), text)
                self.notes.append(f"{where}:{number}: ${name} is the task's envs value {value}")
        text = self._computed(text, number)
        text = re.sub(r"\$\{SKYPILOT_NODE_RANK\}|\$SKYPILOT_NODE_RANK\b", "0", text)
        text = re.sub(r"\$\{SKYPILOT_NUM_NODES\}|\$SKYPILOT_NUM_NODES\b", str(self.data.get("num_nodes", 1)), text)
        count = _count(self.data.get("resources"))
        if count is not None and re.search(r"\$\{?SKYPILOT_NUM_GPUS_PER_NODE\b", text):
            text = re.sub(r"\$\{SKYPILOT_NUM_GPUS_PER_NODE\}|\$SKYPILOT_NUM_GPUS_PER_NODE\b", count, text)
            self.notes.append(
                f"{where}:{number}: $SKYPILOT_NUM_GPUS_PER_NODE is {count}, resources.accelerators' count"
            )
        if "SKYPILOT_NODE_RANK" in self.data["run"]:
            self.notes.append(
                f"{where}:{number}: $SKYPILOT_NODE_RANK is the rank (rank 0 is the command taken; "
                "hgxkit gives each host its own rank)"
            )
        if (left := re.search(r"\$\{?(SKYPILOT_\w+)", text)) is not None:
            raise InputError(
                f"{where}:{number}: ${left.group(1)}: a SkyPilot variable hgxkit does not read; write its value"
            )
        return text


# What an engine's image already holds: the engine and its kernels, and pip's own tools.
_ENGINE_PACKAGE = re.compile(
    r"^[\"']?(?:sglang|vllm|flashinfer[\w-]*|sgl[-_]kernel|pip|uv|setuptools|wheel|hf[-_]transfer|"
    r"huggingface[-_]hub)(?:\[[\w,]+\])?(?:[=<>~!]=?[\w.*+-]+(?:,[=<>~!]=?[\w.*+-]+)*)?[\"']?$"
)
_INSTALLER_WORDS = {"pip", "pip3", "uv", "install", "-U", "--upgrade", "--pre", "-q", "--quiet", "--system"}
_VALUED = {"--find-links", "-f", "--extra-index-url", "--index-url", "-i", "--torch-backend"}


def _engine_install(line: str) -> bool:
    """True for an install line of pip or uv that installs the engine alone (`pip install "sglang[all]>=0.4.5"`,
    with `--find-links URL`), which the engine's image already holds; not for a release pinned (`vllm==0.6.3`),
    which today's image is not."""
    words = line.split()
    if not words or words[0] not in ("pip", "pip3", "uv") or "install" not in words:
        return False
    at = 0
    while at < len(words):
        word = words[at]
        if word in _VALUED:
            at += 2
            continue
        named = word in _INSTALLER_WORDS or word.startswith(("--find-links=", "--extra-index-url="))
        if not named and (not _ENGINE_PACKAGE.match(word) or "==" in word):  # a pinned release: not today's image
            return False
        at += 1
    return True


def installs(setup: Any) -> list[str]:
    """The setup's lines that install software (pip, uv, apt, conda): into the container, or the VM."""
    lines = setup.split("\n") if isinstance(setup, str) else []
    return [line.strip() for line in lines if _INSTALL.search(line) and not line.strip().startswith("#")]


def _template_test(text: str) -> bool:
    """True for `if [ -f ~/…/ray/start_cluster.sh ]; then`: SkyPilot's Ray template where the image has it."""
    match = _TEMPLATE_TEST.match(text)
    return match is not None and _RAY_TEMPLATE.match(match.group(1)) is not None


def whole_number(expression: str) -> int | None:
    """The value of a shell arithmetic expression of whole numbers, `+ - * /` and parentheses, or None.

    Example:
        >>> whole_number("8 * 2"), whole_number("(8 + 8) / 4"), whole_number("-7 / 2"), whole_number("8 * $X")
        (16, 4, -3, None)
    """
    if not re.fullmatch(r"[\d\s+*/()-]+", expression):
        return None
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, RecursionError, MemoryError):
        return None

    def value(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub | ast.Mult | ast.Div):
            left, right = value(node.left), value(node.right)
            if isinstance(node.op, ast.Div):
                if right == 0:
                    raise ValueError(expression)
                quotient = abs(left) // abs(right)  # the shell's division truncates toward zero
                return quotient if (left < 0) == (right < 0) else -quotient
            return {ast.Add: left + right, ast.Sub: left - right, ast.Mult: left * right}[type(node.op)]
        raise ValueError(expression)

    try:
        return value(tree.body)
    except (ValueError, RecursionError):
        return None


def _count(resources: Any) -> str | None:
    """The accelerator count `resources.accelerators` asks for (`H200:8`, or one count for several choices)."""
    choices = resources.get("accelerators") if isinstance(resources, dict) else None
    if isinstance(choices, dict):
        # `{L4:1, A100:1}` in flow style is keys `L4:1` with no value: the count is in the key
        names = [str(k) for k in choices if k not in (LINE, LINES)]
        counts = {str(choices[k]) if choices[k] is not None else k.partition(":")[2] or "1" for k in names}
        return counts.pop() if len(counts) == 1 and next(iter(counts)).isdigit() else None
    count = str(choices or "").partition(":")[2]
    return count if count.isdigit() else None


def logical_lines(script: str, first: int) -> tuple[list[tuple[int, str]], dict[int, int]]:
    """The script's lines with continuation backslashes joined, each with its first file line; and each logical
    line's first file line -> its last."""
    logical: list[tuple[int, str]] = []
    ends: dict[int, int] = {}
    pending = ""
    start = first
    for number, raw in enumerate(script.split("\n"), first):
        text = raw.strip()
        if not pending:
            start = number
        if text.endswith("\\"):
            pending += text[:-1] + " "
            continue
        logical.append((start, pending + text))
        ends[start] = number
        pending = ""
    return logical, ends
