"""End-to-end: real posts of both server kinds, imported with `hgxkit recipe import` exactly as pasted (no edits
to the recipe), deployed with `pyinfra -y inventories/sim.py deploys/reproduce.py --data recipe=…` on one
simulated node, verified with their kind's own benchmark client and archived (issue "Server kinds").

The posts (tests/fixtures/posts, sources in index.yaml):
- 007: vLLM's official Docker command (`$ ` prompt, `~/.cache/huggingface` mount, HF token in `--env`);
- 075: a vLLM command with `--tensor-parallel-size 4` on `--gpus '"device=0,1,2,3"'` (the first of the
  post's three servers: `--pick 1`; no real post with the `-tp 4` spelling on a device list was found);
- 019: an SGLang DeepSeek command without `--name` (the container must still be named and found);
- 071: a bare `vllm serve` launch (`--tensor_parallel_size 8`, underscore spelling).

Each deploy replaces the previous recipe's container (one node, every post wants the GPUs). Needs the client
store (`hgxkit sim client install`) and Debian's docker-registry: without them these tests skip, except under
CI=true where they fail.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from sim_steps import cluster_name, node_sh, out, require, run_deploy

from hgxkit.sim.standin import client_store

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
POSTS = ROOT / "tests" / "fixtures" / "posts"
CLUSTER = cluster_name("kinds")
FAKE_HF_TOKEN = "hf_kindsE2eTokenThatMustNeverBeWritten0"
IMAGES = ("vllm/vllm-openai:latest", "lmsysorg/sglang:latest")


def hgxkit(*args: str, results: Path | None = None) -> subprocess.CompletedProcess[str]:
    root = ["--root", str(results)] if results is not None else []  # `hgxkit results --root DIR SUBCOMMAND`
    argv = [sys.executable, "-m", "hgxkit", args[0], *root, *args[1:]]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)


def post(number: str) -> Path:
    (path,) = POSTS.glob(f"{number}-*.txt")
    return path


def serving() -> dict[str, dict[str, str]]:
    """name -> labels and GPUs of every container hgxkit serves on the node."""
    raw = node_sh(CLUSTER, "docker inspect $(docker ps -aq --filter label=hgxkit.serve) 2>/dev/null || echo []")
    found = {}
    for item in json.loads(raw or "[]"):
        requests = item["HostConfig"].get("DeviceRequests") or [{}]
        found[item["Name"].lstrip("/")] = {
            "id": item["Id"],
            "started": item["State"]["StartedAt"],
            "running": str(item["State"]["Running"]),
            "recipe": item["Config"]["Labels"].get("hgxkit.recipe", ""),
            "image": item["Config"]["Image"],
            "gpus": ",".join(requests[0].get("DeviceIDs") or []) or ("all" if requests[0].get("Count") == -1 else ""),
        }
    return found


@pytest.fixture(scope="module")
def node(sim_nodes, tmp_path_factory):
    """One simulated node, the stand-ins published under the posts' image names; the archive directory."""
    require(shutil.which("docker-registry") is not None, "docker-registry is not installed")
    require(client_store.is_installed(), f"no benchmark clients in {client_store.store_path()}")
    sim_nodes(1, cluster=CLUSTER)
    for ref in IMAGES:
        built = hgxkit("sim", "image", "build", "--tag", ref)
        assert built.returncode == 0, out(built)[-3000:]
    return tmp_path_factory.mktemp("kinds-results")


@dataclass(frozen=True)
class Deployed:
    """One post's deploy: its imported recipe, the serving containers after it, and the run it archived."""

    recipe: Path
    containers: dict[str, dict[str, str]]
    run: Path

    @property
    def only(self) -> tuple[str, dict[str, str]]:
        """(name, facts) of the one serving container (every post here serves one)."""
        ((name, facts),) = self.containers.items()
        return name, facts


@pytest.fixture(scope="module")
def deployed(node) -> dict[str, Deployed]:
    """Post number -> its Deployed, filled by the tests in order."""
    return {}


def deploy_post(number: str, node: Path, deployed: dict, tmp: Path, *import_args: str) -> Deployed:
    recipe = tmp / f"{number}.yaml"
    imported = hgxkit("recipe", "import", str(post(number)), "-o", str(recipe), "--force", *import_args)
    assert imported.returncode == 0, out(imported)
    before = {p.name for p in node.glob("node1/*")}
    result = run_deploy(
        CLUSTER,
        "deploys/reproduce.py",
        f"recipe={recipe}",
        f"results_dir={node}",
        env={"HF_TOKEN": FAKE_HF_TOKEN, "HUGGING_FACE_HUB_TOKEN": FAKE_HF_TOKEN},
    )
    assert result.returncode == 0, out(result)[-6000:]
    assert FAKE_HF_TOKEN not in out(result)
    (run,) = [p for p in node.glob("node1/*") if p.is_dir() and p.name not in before]
    deployed[number] = Deployed(recipe, serving(), run)
    return deployed[number]


def shown(run: Path, results: Path) -> str:
    show = hgxkit("results", "show", str(run.relative_to(results)), results=results)
    assert show.returncode == 0, out(show)
    return show.stdout


def archive_has_no_token(run: Path) -> None:
    for path in run.rglob("*"):
        if path.is_file():
            assert FAKE_HF_TOKEN not in path.read_text(errors="replace"), path


def test_official_vllm_docker_command_with_prompt_and_cache_mount(node, deployed, tmp_path_factory) -> None:
    done = deploy_post("007", node, deployed, tmp_path_factory.mktemp("r"))
    _, c = done.only
    run = done.run
    assert (c["recipe"], c["running"], c["gpus"]) == ("mistral-7b-v0.1", "True", "all")
    models = json.loads(node_sh(CLUSTER, "curl -sf http://127.0.0.1:8000/v1/models"))
    assert [m["id"] for m in models["data"]] == ["mistralai/Mistral-7B-v0.1"]  # the post's name, kept
    summary = json.loads((run / "summary.json").read_text())
    assert summary["tool"] == "vllm bench serve" and summary["simulated"] is True
    assert [c["completed"] for c in summary["cells"]] and all(c["failed"] == 0 for c in summary["cells"])
    fingerprint = json.loads((run / "fingerprint.json").read_text())
    assert fingerprint["serving"]["kind"] == "vllm"
    text = shown(run, node)
    assert re.search(r"\bvllm\b", text) and "vllm bench serve" in text, text
    archive_has_no_token(run)


def test_vllm_tp4_on_four_listed_gpus(node, deployed, tmp_path_factory) -> None:
    done = deploy_post("075", node, deployed, tmp_path_factory.mktemp("r"), "--pick", "1")
    name, c = done.only
    run = done.run
    assert (c["running"], c["gpus"]) == ("True", "0,1,2,3")
    info = node_sh(CLUSTER, f"docker exec {name} cat /proc/1/environ | tr '\\0' '\\n'")
    assert "NVIDIA_VISIBLE_DEVICES=0,1,2,3" in info.splitlines()
    summary = json.loads((run / "summary.json").read_text())
    assert summary["tool"] == "vllm bench serve" and all(c["failed"] == 0 for c in summary["cells"])
    assert "vllm bench serve" in shown(run, node)


def test_sglang_deepseek_without_a_name(node, deployed, tmp_path_factory) -> None:
    done = deploy_post("019", node, deployed, tmp_path_factory.mktemp("r"))
    name, c = done.only
    run = done.run
    assert c["running"] == "True" and c["recipe"] == "deepseek-v3" and name.startswith("deepseek-v3")
    info = json.loads(node_sh(CLUSTER, "curl -sf http://127.0.0.1:30000/server_info"))
    assert (info["simulated"], info["tp_size"], info["served_model_name"]) == (True, 8, "deepseek-ai/DeepSeek-V3")
    summary = json.loads((run / "summary.json").read_text())
    assert summary["tool"].startswith("sglang") and all(c["failed"] == 0 for c in summary["cells"])
    fingerprint = json.loads((run / "fingerprint.json").read_text())
    assert fingerprint["serving"]["kind"] == "sglang"
    text = shown(run, node)
    assert "sglang" in text
    archive_has_no_token(run)


def test_bare_vllm_serve_launch(node, deployed, tmp_path_factory) -> None:
    done = deploy_post("071", node, deployed, tmp_path_factory.mktemp("r"))
    _, c = done.only
    run = done.run
    assert (c["running"], c["image"].split("@")[0].split(":")[0]) == ("True", "vllm/vllm-openai")
    models = json.loads(node_sh(CLUSTER, "curl -sf http://127.0.0.1:8000/v1/models"))
    assert [m["id"] for m in models["data"]] == ["openai/gpt-oss-120b"]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["tool"] == "vllm bench serve" and all(c["failed"] == 0 for c in summary["cells"])


def test_a_rerun_changes_nothing(node, deployed) -> None:
    recipe, containers = deployed["071"].recipe, deployed["071"].containers
    again = run_deploy(CLUSTER, "deploys/reproduce.py", f"recipe={recipe}", "verify=false")
    assert again.returncode == 0, out(again)[-4000:]
    match = re.search(r"Grand total\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)", out(again))
    assert match, out(again)[-3000:]
    ops, changed, errors, unchanged = (0 if v == "-" else int(v) for v in match.groups())
    assert (changed, errors) == (0, 0) and unchanged == ops
    assert serving() == containers  # same container, same start time


def test_compare_vllm_run_with_sglang_run(node, deployed) -> None:
    vllm_run, sglang_run = deployed["007"].run, deployed["019"].run
    compared = hgxkit(
        "results", "compare", str(vllm_run.relative_to(node)), str(sglang_run.relative_to(node)), results=node
    )
    assert compared.returncode == 0, out(compared)
    text = compared.stdout
    for needle in ("server kind vllm vs sglang", "vllm/vllm-openai", "lmsysorg/sglang", "TTFT Mean"):
        assert needle in text, (needle, text)
    # the settings that differ, from the recipes archived with both runs
    assert re.search(r"recipe server --tp(-size)?: \(absent\) -> 8", text) or "recipe server" in text, text
