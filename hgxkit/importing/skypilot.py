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

The `run` script is read line by line:
- `set -e…` and `export CUDA_VISIBLE_DEVICES=…` are read;
- `NAME=$(echo "$SKYPILOT_NODE_IPS" | head -n 1)` is the head: the first node, `skypilot-head`, which
  `nodes.join_ranks` replaces by each deploy's head;
- in `if [ "$SKYPILOT_NODE_RANK" = 0 ]; then A; else B; fi`, A is rank 0's command. B, the other ranks', is
  rendered by hgxkit from it. `$SKYPILOT_NODE_RANK` as a value is rank 0;
- one command is the server (`exec` dropped); several are refused.

`setup` (the model download) is set aside: a deploy places the model itself. A task without a Docker image, a
`service:` section (SkyPilot Serve) and `file_mounts` from a bucket are refused by name.

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
from hgxkit.recipe.nodes import HGX_GPUS
from hgxkit.recipe.shellwords import split_words

HEAD = "skypilot-head"  # the first node in the imported command; `join_ranks` replaces it by each deploy's head
_HEAD_LINE = re.compile(
    r"^(?:export\s+)?([A-Za-z_]\w*)=\"?\$\(\s*echo\s+\"?\$\{?SKYPILOT_NODE_IPS\}?\"?\s*\|\s*"
    r"head\s+(?:-n\s*1|-1)\s*\)\"?$"
)
_RANK_TEST = re.compile(r"^if \[\[? \"?\$\{?SKYPILOT_NODE_RANK\}?\"? (?:=|==|-eq) \"?0\"? \]\]?; then$")
_ASSIGN = re.compile(r"^(?:export\s+)?([A-Za-z_]\w*)=(\S*)$")
_DOWNLOAD = re.compile(
    r"\b(?:hf|huggingface-cli)\s+download\s+([\w.-]+/[\w.-]+)\b[^\n;]*?"
    r"--local-dir[=\s]+([^\s;]+)"
)
_TASK_KEYS = ("resources", "num_nodes", "setup")
_REFUSED = {
    "service": "a SkyPilot Serve section (replicas behind a load balancer); give the task without `service:`",
    "workdir": "a local directory synced to the node, which a recipe cannot carry; bake it into the image",
}


class SkyPilot:
    """A SkyPilot task: its `run` command as a `docker run` (see the module docstring)."""

    name = "SkyPilot task"

    def claims(self, simple: Simple) -> bool:
        return simple.kind == "skypilot"

    def take(self, simple: Simple, reading: Reading) -> None:
        take_document(simple, reading)

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
            out.append(
                document_simple(
                    document, "skypilot", words, document.first, document.last, task.notes, exported_by_hgxkit(labels)
                )
            )
            if document.data.get("setup"):
                line = document.data[LINES].get("setup", document.first)
                why = (
                    "setup (the model download): a deploy places the model itself (the recipe's model repo and "
                    "revision)"
                )
                out.append(document_simple(document, "skypilot", (), line, line, [why]))
        return out


SKYPILOT = SkyPilot()


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

    def at(self, key: str) -> int:
        return self.lines.get(key, self.document.first)

    def where(self, key: str) -> str:
        return self.document.where(self.at(key))

    def run_words(self) -> list[WordAt]:
        data = self.data
        for key, why in _REFUSED.items():
            if key in data:
                raise InputError(f"{self.where(key)}: {key}: {why}")
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
        image = str(resources.get("image_id") or "")
        if not image.startswith("docker:"):
            raise InputError(
                f"{self.where('resources')}: resources.image_id: {image or 'not given'}; hgxkit runs "
                "the server in a container: give `image_id: docker:IMAGE` (or --image)"
            )
        image = image.removeprefix("docker:")
        line = self.at("resources")
        command, gpus = self._run()
        top = self.document.first  # the task's head (its name, the export's comments) is the command's
        words: list[WordAt] = [("docker", top), ("run", top)]
        words += [("--gpus", line), (gpus or self._gpus(resources), line)]
        options = ((data.get("config") or {}).get("docker") or {}).get("run_options") or []
        words += [(literal(o), self.at("config")) for o in ([options] if isinstance(options, str) else options)]
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
        if isinstance(choices, dict):  # any one of several accelerators: the count is what a recipe keeps
            # `{L4:1, A100:1}` in flow style is keys `L4:1` with no value: the count is in the key
            names = [str(k) for k in choices if k not in (LINE, LINES)]
            counts = {str(choices[k]) if choices[k] is not None else k.partition(":")[2] or "1" for k in names}
            choices = ", ".join(names)
            if len(counts) == 1 and next(iter(counts)).isdigit():
                choices = f"any:{counts.pop()}"
                self.notes.append(
                    f"{self.where('resources')}: resources.accelerators: any of several; the GPU "
                    "count is kept, the node is an HGX-H200"
                )
        accelerators = str(choices or "")
        _, _, count = accelerators.partition(":")
        if not count:
            return "all"
        if not count.isdigit():
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
        logical, ends = _logical_lines(script, first)
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
        script's CUDA_VISIBLE_DEVICES or None). Shell options, messages and the other ranks' branch are left out."""
        where = self.document.post.name
        heads: set[str] = set()
        gpus = None
        branch: int | None = None  # None: outside a rank test; else the rank whose branch this is
        commands: list[tuple[int, str]] = []
        for number, text in logical:
            if not text or text.startswith("#"):
                continue
            if re.match(r"^set(?:\s+[-+]?\w+)+$", text) or re.match(r"^echo\s[^|;&>]*$", text):
                continue  # shell options and messages: nothing the server runs with
            if (match := _HEAD_LINE.match(text)) is not None:
                heads.add(match.group(1))
                self.notes.append(
                    f"{where}:{number}: ${match.group(1)} is the first of $SKYPILOT_NODE_IPS: the group's head"
                )
                continue
            if _RANK_TEST.match(text):
                branch = 0
                continue
            if text == "else" and branch is not None:
                branch = 1
                continue
            if text == "fi" and branch is not None:
                branch = None
                continue
            if (match := _ASSIGN.match(text)) is not None and "$(" not in text and "`" not in text:
                name, value = match.groups()
                if name == "CUDA_VISIBLE_DEVICES":
                    gpus = f'"device={value.strip(chr(34) + chr(39))}"'
                    continue
                raise InputError(f"{where}:{number}: {text}: a variable of the run script; give it in `envs`")
            if branch == 1:
                self.notes.append(f"{where}:{number}: the other ranks' command; hgxkit renders each rank from rank 0's")
                continue
            commands.append((number, text))
        return commands, heads, gpus

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
        text = re.sub(r"\$\{SKYPILOT_NODE_RANK\}|\$SKYPILOT_NODE_RANK\b", "0", text)
        text = re.sub(r"\$\{SKYPILOT_NUM_NODES\}|\$SKYPILOT_NUM_NODES\b", str(self.data.get("num_nodes", 1)), text)
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


def _logical_lines(script: str, first: int) -> tuple[list[tuple[int, str]], dict[int, int]]:
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
