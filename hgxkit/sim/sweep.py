"""Imported means deployable: start each imported post's containers on simulated nodes and check their health.

For one post (`Case`): import it unedited (its `--pick` and `--model-repo` as the corpus index says), load the
recipe back as `deploys/reproduce.py` would, and for every rank and GPU group take the serving role's container
(`hgxkit.serving.containers.container_specs`: named, labelled, detached) with one change, the image: the
simulated stand-in of the recipe's kind (`STANDINS`) in place of the post's. Everything else is as deployed:
ulimits, shm size, ipc, network, environment (a secret gets a fake value through the role's root-only env
file), mounts, the program and its flags. The model is placed where the recipe says it lives on the host, the
way the model role leaves it (the Hub stand-in's files for the repo); any other host path a `--mount` binds
is created empty (`-v` creates its own, as Docker does). Rank R of a server over nodes runs on node R+1 with
node1's address as the head. Containers start one after another; each post's are removed before the next.

A failure names its cause in one line: the import's or the loader's refusal, the `docker run` error
(`error setting rlimit type 8: …`), the container's exit with its last log line, or a health endpoint that did
not answer in time with the server's last log line.

Example (what bench/deploy_sweep.py and tests/e2e/test_deploy_sweep.py do):
    >>> nodes = SweepNodes.up("sweep", count=2)          # doctest: +SKIP
    >>> deploy(nodes, Case("001-…txt", text, None)).line()  # doctest: +SKIP
    'ok     001-…txt: 1 container(s) answered health in 4.1 s'
"""

from __future__ import annotations

import io
import itertools
import os
import posixpath
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from pyinfra.api import StringCommand

from hgxkit.errors import HgxkitError, InputError
from hgxkit.hostcmd import argv, script
from hgxkit.importing.importer import ImportOptions, import_post
from hgxkit.recipe.dump import dump_recipe
from hgxkit.recipe.read import parse_recipe_text
from hgxkit.recipe.spec import Recipe
from hgxkit.serving.containers import MANAGED_LABEL, ContainerSpec, container_specs

STANDINS = {"sglang": "lmsysorg/sglang:hgxkit-sweep", "vllm": "vllm/vllm-openai:hgxkit-sweep"}
FAKE_SECRET = "hgxkit-sweep-not-a-secret"
HEALTH_TIMEOUT_S = 60.0
STATE_DIR = "/var/lib/hgxkit/serve"
MODEL_FILES = (".gguf", ".safetensors", ".bin")  # a model given as one file: left as the post has it


@dataclass(frozen=True)
class Case:
    """One corpus post: its file name, its text, and the `--pick`, `--model-repo` and `--image` its index gives."""

    name: str
    text: str
    pick: int | None = None
    model_repo: str | None = None
    image: str | None = None


@dataclass(frozen=True)
class Result:
    """What happened to one post: `ok`, or `fail` with the cause in one line."""

    name: str
    ok: bool
    cause: str
    containers: int = 0
    seconds: float = 0.0

    def line(self) -> str:
        if self.ok:
            return f"ok     {self.name}: {self.containers} container(s) answered health in {self.seconds:.1f} s"
        return f"FAIL   {self.name}: {self.cause}"


def load_case(case: Case) -> Recipe:
    """The recipe a node would get: imported unedited, then loaded back as `deploys/reproduce.py` loads it.
    Raises InputError with the import's or the loader's one-line refusal."""
    outcome = import_post(
        [(case.name, case.text)], ImportOptions(pick=case.pick, model_repo=case.model_repo, image=case.image)
    )
    try:
        return parse_recipe_text(dump_recipe(outcome.recipe))
    except InputError as err:
        raise InputError(f"imported, but the recipe does not load: {err.message}") from None


def placements(recipe: Recipe, nodes: int, head: str) -> list[tuple[int, list[ContainerSpec]]]:
    """(node index, the containers it starts) for every rank of `recipe`, with the stand-in image.
    A secret's value is `FAKE_SECRET`, written by the caller to the role's env file."""
    count = recipe.node_count()
    if count > nodes:
        raise InputError(f"the server spans {count} nodes; the sweep has {nodes}")
    image = STANDINS[recipe.server.kind]
    names = {*(e.name for e in recipe.docker.env() if e.value is None), *secret_names(recipe)}
    environ = dict.fromkeys(names, FAKE_SECRET)
    out = []
    for rank in range(count):
        specs = container_specs(
            recipe,
            total_gpus=8,
            bind_address="127.0.0.1",
            api_key=None,
            image=image,
            environ=environ,
            rank=rank if count > 1 else None,
            head=head if count > 1 else None,
            state_dir=STATE_DIR,
            env_allowlist=tuple(sorted(names)),
        )
        out.append((rank, specs))
    return out


def secret_names(recipe: Recipe) -> set[str]:
    """The `{{env:NAME}}` names a recipe's docker options and server flags use."""
    words = [w for e in recipe.docker.entries for w in e.words] + list(recipe.server.words())
    return {m.group(1) for w in words for m in re.finditer(r"\{\{env:([A-Za-z_][A-Za-z0-9_]*)\}\}", w)}


def mount_sources(words: list[str]) -> list[str]:
    """The host paths a literal `docker run` words binds with `--mount type=bind` (Docker refuses a missing one;
    `-v` creates its own)."""
    sources = []
    for word, value in itertools.pairwise(words):
        if word == "--mount":
            fields = dict(f.partition("=")[::2] for f in value.split(","))
            if fields.get("type", "volume") == "bind":
                sources.append(fields.get("source") or fields.get("src") or "")
    return [s for s in sources if s]


def model_files(repo_id: str) -> bytes:
    """A tar of the files the Hub stand-in serves for `repo_id` (config.json, tokenizer, shards): what the
    model role leaves in the recipe's `local_dir`."""
    from hgxkit.sim.hub.makerepo import auto_spec, make_repo

    with tempfile.TemporaryDirectory(prefix="hgxkit-sweep-model-") as tmp:
        repo = make_repo(Path(tmp), auto_spec(repo_id)) / "refs" / "main"
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for path in sorted(repo.rglob("*")):
                if path.is_file():
                    tar.add(path, arcname=str(path.relative_to(repo)))
        return buf.getvalue()


class SweepNodes:
    """The simulated nodes of one cluster, brought up once for serving (driver, container toolkit), reached
    through the host's Docker engine (`docker exec` into the node container)."""

    def __init__(self, cluster: str, containers: list) -> None:  # type: ignore[type-arg]
        self.cluster = cluster
        self.containers = containers

    @classmethod
    def up(cls, cluster: str, count: int) -> SweepNodes:
        """Start `count` nodes of `cluster` (reusing running ones) and publish the stand-ins to their mirror."""
        from hgxkit.sim import nodes as simnodes
        from hgxkit.sim.standin import image as standin_image
        from hgxkit.sim.standin import registry

        simnodes.up(count, cluster=cluster)
        client = simnodes.client()
        for kind, ref in STANDINS.items():
            standin_image.ensure_image(client, [ref], kind=kind)
        registry.publish(client, list(STANDINS.values()))
        containers = [client.containers.get(simnodes._container_name(cluster, f"node{i}")) for i in range(1, count + 1)]
        return cls(cluster, containers)

    def sh(self, index: int, command: StringCommand, stdin: bytes | None = None) -> tuple[int, str]:
        """(exit code, output) of `command` (hgxkit.hostcmd's argv/script) in node `index` (0-based)."""
        node = self.containers[index]
        if stdin is not None:
            node.put_archive("/tmp", _tar({"hgxkit-sweep-stdin": stdin}))
            command = script("{cmd} < /tmp/hgxkit-sweep-stdin", cmd=command)
        code, out = node.exec_run(["sh", "-c", str(command)])
        return int(code), out.decode(errors="replace")

    def address(self, index: int) -> str:
        node = self.containers[index]
        node.reload()
        return str(node.attrs["NetworkSettings"]["Networks"][f"hgxkit-sim-{self.cluster}"]["IPAddress"])

    def ready(self) -> bool:
        """True when every node has its GPUs, the container toolkit and the stand-ins."""
        check = script("nvidia-smi -L >/dev/null && docker info 2>/dev/null | grep -q nvidia")
        return all(self.sh(i, check)[0] == 0 for i in range(len(self.containers)))

    def bring_up(self) -> None:
        """Driver and container toolkit on every node, the way a real node gets them (`pyinfra -y
        inventories/sim.py deploys/bringup.py`); nothing when they are there."""
        if self.ready():
            return
        root = Path(__file__).resolve().parents[2]
        env = {**os.environ, "HGXKIT_SIM_CLUSTER": self.cluster, "PYINFRA_PROGRESS": "off"}
        pyinfra = str(Path(sys.executable).parent / "pyinfra")
        done = subprocess.run(
            [pyinfra, "-y", "inventories/sim.py", "deploys/bringup.py"],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0 or not self.ready():
            tail = (done.stdout + done.stderr).strip().splitlines()[-5:]
            raise HgxkitError(f"bring-up of cluster {self.cluster} failed: {' | '.join(tail)}")

    def pull_standins(self) -> None:
        for index in range(len(self.containers)):
            for ref in STANDINS.values():
                code, out = self.sh(index, argv("docker", "pull", "-q", ref))
                if code != 0:
                    raise InputError(f"node{index + 1}: docker pull {ref} failed: {out.strip()[-200:]}")

    def clean(self) -> None:
        for index in range(len(self.containers)):
            gone = script(
                "docker rm -f $(docker ps -aq --filter {label}) >/dev/null 2>&1; true", label=f"label={MANAGED_LABEL}"
            )
            self.sh(index, gone)


def deploy(nodes: SweepNodes, case: Case, timeout_s: float = HEALTH_TIMEOUT_S) -> Result:
    """Import `case`, start its containers on `nodes` one after another, and wait for each one's health."""
    started = time.monotonic()
    try:
        recipe = load_case(case)
        placed = placements(recipe, len(nodes.containers), nodes.address(0))
    except InputError as err:
        return Result(case.name, False, err.message.replace("\n", " "))
    nodes.clean()
    try:
        count = 0
        for index, specs in placed:
            for spec in specs:
                cause = _start(nodes, index, recipe, spec)
                if cause:
                    return Result(case.name, False, _cause(cause))
                count += 1
        for index, specs in placed:
            for spec in specs:
                cause = _wait_health(nodes, index, spec, started + timeout_s)
                if cause:
                    return Result(case.name, False, _cause(cause))
        return Result(case.name, True, "", count, time.monotonic() - started)
    finally:
        nodes.clean()


def _start(nodes: SweepNodes, index: int, recipe: Recipe, spec: ContainerSpec) -> str:
    words = spec.final_argv()
    model = recipe.model
    if model.local_dir and not model.local_dir.endswith(MODEL_FILES):
        # A model the post keeps in its own host directory (no Hub id) gets the files of one named after it.
        repo = model.repo_id or f"local/{posixpath.basename(model.local_dir.rstrip('/'))}"
        unpack = script("mkdir -p {dir} && tar -xf - -C {dir}", dir=model.local_dir)  # the archive API misses tmpfs
        code, out = nodes.sh(index, unpack, stdin=model_files(repo))
        if code != 0:
            return f"placing the model in {model.local_dir} on node{index + 1} failed: {out.strip()[-200:]}"
    for path in mount_sources(words):
        nodes.sh(index, argv("mkdir", "-p", path))
    folder = f"{STATE_DIR}/replace/{spec.name}"
    for name, text in spec.secret_files().items():
        write = script("mkdir -p {folder} && umask 077 && cat > {file}", folder=folder, file=f"{folder}/{name}")
        code, out = nodes.sh(index, write, stdin=text.encode())
        if code != 0:
            return f"writing {folder}/{name} on node{index + 1} failed: {out.strip()[-200:]}"
    code, out = nodes.sh(index, script("{cmd} 2>&1", cmd=argv(*words)))
    if code != 0:
        lines = [line for line in out.strip().splitlines() if line.strip() and not line.startswith("See 'docker")]
        said = next((line for line in lines if line.startswith("docker: ")), lines[-1] if lines else f"exit {code}")
        return f"node{index + 1}: docker run {spec.name}: {said[-300:]}"
    return ""


def _wait_health(nodes: SweepNodes, index: int, spec: ContainerSpec, deadline: float) -> str:
    name = spec.name
    url = spec.health_url
    if spec.labels.get("hgxkit.rank", "0") != "0":
        url = ""  # a rank >= 1 answers through the head
    while True:
        code, out = nodes.sh(index, argv("docker", "inspect", "-f", "{{.State.Status}} {{.State.ExitCode}}", name))
        state = out.split()
        # An inspect that printed no state is the node's docker not answering this once (seen under load), not a
        # container gone: ask again until the deadline.
        if not state and time.monotonic() <= deadline:
            time.sleep(1.0)
            continue
        if state[:1] != ["running"]:
            said = " ".join(state) or f"is gone (docker inspect exit {code})"
            return f"node{index + 1}: {spec.name} {said}: {_last_log(nodes, index, name)}"
        if not url or nodes.sh(index, argv("curl", "-fsS", "-m", "5", "-o", "/dev/null", url))[0] == 0:
            return ""
        if time.monotonic() > deadline:
            return f"node{index + 1}: {url} did not answer in time: {_last_log(nodes, index, name)}"
        time.sleep(1.0)


def _cause(text: str) -> str:
    """A failure's cause, marked when it is the stand-in's own simulated check rather than what the real engine
    would say (a gap of the simulation, not of the post)."""
    return f"stand-in's simulated check, not the engine's: {text}" if "simulated check" in text else text


def _last_log(nodes: SweepNodes, index: int, name: str) -> str:
    from hgxkit.runfailure import escape_control

    out = nodes.sh(index, script("{cmd} 2>&1", cmd=argv("docker", "logs", "--tail", "5", name)))[1]
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    return escape_control(lines[-1][-300:]) if lines else "(no log)"


def _tar(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(posixpath.basename(name))
            info.size, info.mode = len(data), 0o600
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()
