"""End-to-end: one recipe deployed two ways on one simulated node and compared, and an
engine's own published compose file and Kubernetes Deployment imported unedited and deployed.

1. Post 008 (vLLM's Llama-3.1-8B `docker run`), imported as pasted, is deployed with pyinfra
   (`deploys/reproduce.py`) and verified: a run archived under `node1/`.
2. The same recipe is exported `--to compose --bind 0.0.0.0` and started with Debian's `docker-compose up -d`,
   run on this machine against the node's own Docker daemon through an SSH-forwarded socket (`ssh -L
   SOCK:/var/run/docker.sock`, the node's key and port from `hgxkit sim`): the compose file's bind mounts, GPU
   reservations and ports are the node's. The image is the one the deploy pulled: the stand-in `hgxkit sim image
   build --tag vllm/vllm-openai:latest` published under the real name in the nodes' registry mirror, the same way
   every deploy gets it; the compose file names the real image and is not edited.
3. `hgxkit verify --endpoint http://NODE:8000 --recipe R` archives a run under `endpoint-NODE/`, and `hgxkit
   results compare` sets the two runs side by side; `docker-compose down` leaves no container or network.
4. SGLang's own docker/compose.yaml (formats corpus c01) and the vLLM docs' Kubernetes Deployment (m01), each
   imported unedited, deployed with `deploys/reproduce.py`, served, verified with their kind's client, archived;
   a re-run changes nothing.

CI runs 1-3 (about 2.5 min); 4 is two more deploys (HGXKIT_BENCH=1). Needs docker-compose, docker-registry and
the client store: without them these tests skip, except under CI=true where they fail.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from sim_steps import cluster_name, node_sh, out, require, run_deploy

from hgxkit.recipe.read import load_recipe
from hgxkit.sim.nodes import NodeInfo, ssh_argv
from hgxkit.sim.standin import client_store

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
POSTS = ROOT / "tests" / "fixtures" / "posts"
CLUSTER = cluster_name("export")
PROJECT = "hgxkit-export-e2e"
FAKE_HF_TOKEN = "hf_FAKE_exportE2e_NeverWritten"
IMAGES = ("vllm/vllm-openai:latest", "lmsysorg/sglang:latest")


def hgxkit(*args: str, results: Path | None = None) -> subprocess.CompletedProcess[str]:
    root = ["--root", str(results)] if results is not None else []
    argv = [sys.executable, "-m", "hgxkit", args[0], *root, *args[1:]]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)


def grand_total(result: subprocess.CompletedProcess[str]) -> tuple[int, ...]:
    match = re.search(r"Grand total\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)", out(result))
    assert match, out(result)[-3000:]
    return tuple(0 if v == "-" else int(v) for v in match.groups())


@pytest.fixture(scope="module")
def node(sim_nodes, tmp_path_factory) -> tuple[NodeInfo, Path]:
    """One simulated node with the stand-ins published under the engines' image names; the results directory."""
    require(
        shutil.which("docker-compose") is not None, "docker-compose is not installed (apt-get install docker-compose)"
    )
    require(shutil.which("docker-registry") is not None, "docker-registry is not installed")
    require(client_store.is_installed(), f"no benchmark clients in {client_store.store_path()}")
    (info,) = sim_nodes(1, cluster=CLUSTER)
    for ref in IMAGES:
        built = hgxkit("sim", "image", "build", "--tag", ref)
        assert built.returncode == 0, out(built)[-3000:]
    return info, tmp_path_factory.mktemp("export-results")


def deploy(recipe: Path, results: Path, *data: str) -> Path:
    """`deploys/reproduce.py` of `recipe` on the node (more `--data` in `data`); the run it archived."""
    before = {p.name for p in results.glob("node1/*")}
    result = run_deploy(
        CLUSTER,
        "deploys/reproduce.py",
        f"recipe={recipe}",
        f"results_dir={results}",
        *data,
        env={"HF_TOKEN": FAKE_HF_TOKEN, "HUGGING_FACE_HUB_TOKEN": FAKE_HF_TOKEN},
    )
    assert result.returncode == 0, out(result)[-6000:]
    assert FAKE_HF_TOKEN not in out(result)
    (run,) = [p for p in results.glob("node1/*") if p.is_dir() and p.name not in before]
    return run


def imported(source: Path, tmp: Path, name: str) -> Path:
    recipe = tmp / f"{name}.yaml"
    result = hgxkit("recipe", "import", str(source), "-o", str(recipe), "--force")
    assert result.returncode == 0, out(result)
    return recipe


def node_ip(info: NodeInfo) -> str:
    raw = subprocess.run(
        ["docker", "inspect", info.container, "--format", "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return raw.split()[0]


class NodeDocker:
    """The node's Docker daemon on a local socket, forwarded over the node's SSH (`ssh -N -L SOCK:…`)."""

    def __init__(self, info: NodeInfo, directory: Path) -> None:
        self.socket = directory / "docker.sock"
        argv = ssh_argv(info, [])
        forward = [
            "-N",
            "-o",
            "ExitOnForwardFailure=yes",
            "-o",
            "StreamLocalBindUnlink=yes",
            "-L",
            f"{self.socket}:/var/run/docker.sock",
        ]
        self.process = subprocess.Popen([argv[0], *forward, *argv[1:]], stderr=subprocess.PIPE, text=True)
        for _ in range(100):
            if self.socket.exists() or self.process.poll() is not None:
                break
            time.sleep(0.1)
        assert self.socket.exists(), self.process.stderr.read() if self.process.stderr else "no socket"

    def compose(self, directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "DOCKER_HOST": f"unix://{self.socket}"}
        return subprocess.run(
            ["docker-compose", "-p", PROJECT, "-f", "compose.yaml", *args],
            cwd=directory,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


def tokenizer_copy(model_dir: str, into: Path) -> Path:
    """The model directory's small files (config, tokenizer; no weights) from the node, in `into`."""
    packed = node_sh(
        CLUSTER,
        f"cd {model_dir} && tar cz --exclude='*.safetensors' --exclude='*.bin' "
        "--exclude='*.pt' --exclude='.cache' . | base64 -w0",
    )
    into.mkdir()
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(packed))) as archive:
        archive.extractall(into, filter="data")
    assert (into / "config.json").is_file(), sorted(p.name for p in into.iterdir())
    return into


def wait_healthy(url: str, seconds: int = 120) -> None:
    import urllib.request

    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        assert time.monotonic() < deadline, f"{url} did not answer in {seconds}s"
        time.sleep(2)


def test_a_compose_export_runs_on_the_node_and_compares_with_the_pyinfra_run(node, tmp_path) -> None:
    info, results = node
    (post,) = POSTS.glob("008-*.txt")
    recipe = imported(post, tmp_path, "vllm-008")
    deployed = deploy(recipe, results)
    summary = json.loads((deployed / "summary.json").read_text())
    assert summary["tool"] == "vllm bench serve" and all(c["failed"] == 0 for c in summary["cells"])
    # The GPUs and the port are the deployed container's: it stops while the compose export serves.
    node_sh(CLUSTER, "docker stop $(docker ps -q --filter label=hgxkit.serve)")

    exported = tmp_path / "compose"
    made = hgxkit(
        "recipe",
        "export",
        str(recipe),
        "--to",
        "compose",
        "--bind",
        "0.0.0.0",
        "--run",
        summary["run_id"],
        "--results-dir",
        str(results),
        "-o",
        str(exported),
    )
    assert made.returncode == 0, out(made)
    digest = json.loads((deployed / "fingerprint.json").read_text())["serving"]["image_digest"]
    assert f"image: vllm/vllm-openai@{digest}" in (exported / "compose.yaml").read_text()
    docker = NodeDocker(info, tmp_path)
    try:
        config = docker.compose(exported, "config")
        assert config.returncode == 0, out(config)
        up = docker.compose(exported, "up", "-d")
        assert up.returncode == 0, out(up)
        ip = node_ip(info)
        wait_healthy(f"http://{ip}:8000/health")
        running = node_sh(
            CLUSTER,
            f"docker ps --filter label=com.docker.compose.project={PROJECT} "
            "--format '{{.Names}} {{.Image}} {{.Label \"hgxkit.io/verified-by-run\"}}'",
        )
        # the image runs by the digest the run archived (docker ps names a digest reference by its repository)
        assert running.split() == [f"{PROJECT}_llama-3-1-8b-instruct-0_1", "vllm/vllm-openai", summary["run_id"]]

        # vLLM's client tokenizes its prompts: the model's tokenizer files, copied from the node
        tokenizer = tokenizer_copy(load_recipe(str(recipe)).model.local_dir or "", tmp_path / "tokenizer")
        verified = hgxkit(
            "verify",
            "--endpoint",
            f"http://{ip}:8000",
            "--recipe",
            str(recipe),
            "--results-dir",
            str(results),
            "--tokenizer",
            str(tokenizer),
        )
        assert verified.returncode == 0, out(verified)
        (endpoint_run,) = [p for p in results.glob(f"endpoint-{ip}/*") if p.is_dir()]
        fingerprint = json.loads((endpoint_run / "fingerprint.json").read_text())
        assert fingerprint["serving"]["endpoint"] == f"http://{ip}:8000"
        endpoint_summary = json.loads((endpoint_run / "summary.json").read_text())
        assert all(c["failed"] == 0 for c in endpoint_summary["cells"]) and endpoint_summary["cells"]

        compared = hgxkit(
            "results",
            "compare",
            str(deployed.relative_to(results)),
            str(endpoint_run.relative_to(results)),
            results=results,
        )
        assert compared.returncode == 0, out(compared)
        text = compared.stdout
        name = summary["recipe"]
        assert f"## A:{name} vs B:{name}" in text, text
        assert f"- ran at node1 (deployed by hgxkit) vs http://{ip}:8000" in text, text
        # one cell (the smoke cell), one row per metric, each with a verdict (4 requests: too small to judge)
        verdicts = re.findall(r"^\| 512 \| 1 \| [^|]+ \| [^|]+ \| ([^|]+) \|", text, re.MULTILINE)
        assert len(verdicts) == 6 and all(v.strip() for v in verdicts), text

        down = docker.compose(exported, "down")
        assert down.returncode == 0, out(down)
        left = node_sh(
            CLUSTER,
            f"docker ps -aq --filter label=com.docker.compose.project={PROJECT}; "
            f"docker network ls -q --filter label=com.docker.compose.project={PROJECT}",
        )
        assert left.strip() == ""
    finally:
        docker.compose(exported, "down")
        docker.close()


# What the deploy must allow, by name, as a user would (`--data allow_docker_options='["--network=host"]'`): c01
# asks for the host's network (`network_mode: host`); both posts serve on every interface without an API key,
# which the exposure policy refuses unless told (`allow_unauthenticated=true`: the posts' own choice).
# c01's `ulimits: memlock: -1` is what every verify `docker exec` into its container inherits: the simulated
# node's runc fits exec'd processes as it fits containers. Otherwise runc refuses the client's exec ("error
# setting rlimit type 8") and verify can say only "the client wrote no result".
ALLOWED = {
    "c01-sglang-docker-compose.yaml": ('allow_docker_options=["--network=host"]', "allow_unauthenticated=true"),
    "m01-vllm-docs-k8s-gpu.md": ("allow_unauthenticated=true",),
}


@pytest.mark.skipif(
    os.environ.get("HGXKIT_BENCH") != "1", reason="two more deploys (~6 min): opt in with HGXKIT_BENCH=1"
)
@pytest.mark.parametrize("file", sorted(ALLOWED))
def test_a_published_engine_file_imported_unedited_serves_and_reruns_unchanged(node, tmp_path, file) -> None:
    _, results = node
    source = POSTS / "formats" / file
    recipe = imported(source, tmp_path, file.split("-")[0])
    run = deploy(recipe, results, *ALLOWED[file])
    summary = json.loads((run / "summary.json").read_text())
    kind = "sglang" if file.startswith("c01") else "vllm"
    assert summary["tool"].startswith(kind) and summary["cells"]
    assert all(c["failed"] == 0 for c in summary["cells"]) and summary["gates"] == []
    assert json.loads((run / "fingerprint.json").read_text())["serving"]["kind"] == kind
    again = run_deploy(CLUSTER, "deploys/reproduce.py", f"recipe={recipe}", "verify=false", *ALLOWED[file])
    assert again.returncode == 0, out(again)[-4000:]
    ops, changed, errors, unchanged = grand_total(again)
    assert (changed, errors) == (0, 0) and unchanged == ops
