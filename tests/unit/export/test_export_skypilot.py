"""A SkyPilot task as `sky launch` runs it: a disk that holds the image and the weights (SkyPilot's own default,
256 GB, does not hold a DeepSeek-class model, so the export asks for `--disk-size`, default 1024 GB), the secrets
the recipe reads and no others (`sky launch` refuses a task whose secrets it is not given), a port opened only for
a server that takes a key or whose inventory allows it without one, and every option SkyPilot does not carry named
in a line of its own."""

from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from test_export import _export

from hgxkit.cli import main
from hgxkit.export.common import ExportOptions
from hgxkit.export.registry import export_recipe
from hgxkit.importing.docker_run import import_docker_run
from hgxkit.recipe.judge import Allowances, judge
from hgxkit.recipe.read import load_recipe

RECIPE = str(Path(__file__).resolve().parents[3] / "recipes" / "deepseek-v4-flash-dspark-marlin.yaml")
# a post that asks SkyPilot for what it has no word for: a restart policy, an env file, a host directory
POST = (
    "docker run --gpus all --restart unless-stopped --env-file /etc/hgx/hf.env -v /data/x:/x "
    "lmsysorg/sglang:v0.5.23-cu129 python3 -m sglang.launch_server --model-path org/m --tp 8"
)
HOST_FILES = ("host-file-read", "host-mount")


@pytest.mark.parametrize(("flags", "disk"), [([], 1024), (["--disk-size", "2048"], 2048)])
def test_every_task_asks_for_the_disk(flags: list[str], disk: int, tmp_path: Path) -> None:
    assert main(["recipe", "export", RECIPE, "--to", "skypilot", "-o", str(tmp_path), *flags]) == 0
    tasks = [yaml.safe_load(path.read_text()) for path in sorted(tmp_path.glob("skypilot-*.yaml"))]
    assert len(tasks) == 2 and {task["resources"]["disk_size"] for task in tasks} == {disk}


@pytest.mark.parametrize(
    ("key", "secrets"),
    [
        ("sglang-two-node", {"HF_TOKEN"}),
        ("vllm-two-node", {"HF_TOKEN", "VLLM_API_KEY"}),
        ("vllm-ray-two-node", {"VLLM_API_KEY"}),
    ],
)
def test_a_task_asks_at_launch_for_the_recipes_secrets_and_not_for_skypilots_or_hgxkits_variables(
    key: str, secrets: set[str], tmp_path: Path
) -> None:
    """The head's address and the node rank come from SkyPilot at run time: a task that listed them as secrets
    would not launch without a value nobody has."""
    tasks = [yaml.safe_load(path.read_text()) for path in sorted(_export(key, "skypilot", tmp_path).glob("*.yaml"))]
    assert [set(task["secrets"]) for task in tasks] == [secrets] * len(tasks)
    assert all("${HGXKIT_HEAD}" in task["run"] and "SKYPILOT_NODE_RANK" in task["run"] for task in tasks)


def _not_carried(allowances: Allowances) -> list[str]:
    judged = judge(import_docker_run(POST), allowances)
    return export_recipe(judged, "skypilot", ExportOptions(run_id="r1")).not_carried


NOT_CARRIED = [
    "--restart: SkyPilot restarts nothing in a task; a `sky serve` service replaces replicas",
    "--env-file: give its values as --secret NAME at launch",
    "the mount /data/x:/x: a task's node has no such host directory (`file_mounts` copies files in)",
]


def test_each_option_skypilot_does_not_carry_is_named_and_a_keyless_server_opens_no_port() -> None:
    assert _not_carried(Allowances(docker_options=HOST_FILES)) == [
        "ports: the server takes no API key, so the task opens no port to the world; reach it with "
        "`ssh -L PORT:localhost:PORT <cluster>`, or give it a key (the recipe's --api-key) to open it",
        *NOT_CARRIED,
    ]


@pytest.mark.parametrize(
    "allowances",
    [
        Allowances(docker_options=HOST_FILES, bind_address="10.0.0.1", api_key="auto"),
        Allowances(docker_options=HOST_FILES, bind_address="10.0.0.1", unauthenticated=True),
    ],
    ids=["keyed", "allowed-without-a-key"],
)
def test_a_task_opens_its_port_for_a_keyed_server_or_one_allowed_without_a_key(allowances: Allowances) -> None:
    opened = "GPU ids and the host port: each task has its own node's GPUs and opens the server's own port"
    bound = "--bind 10.0.0.1: a task's port is open to all or not opened"
    assert _not_carried(allowances) == [opened, NOT_CARRIED[0], bound, *NOT_CARRIED[1:]]
    task = yaml.safe_load(
        next(
            iter(export_recipe(judge(import_docker_run(POST), allowances), "skypilot", ExportOptions()).files.values())
        )
    )
    assert task["resources"]["ports"] == [30000]


def _stubs(where: Path, *names: str) -> dict[str, str]:
    """Programs that write the words they were given (one per line, a blank line after) to `where/calls` and the
    GPUs they were left, in place of the real ones: the task's bash runs as SkyPilot runs it, nothing else does."""
    bin_dir = where / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name in names:
        stub = bin_dir / name
        stub.write_text(
            f'#!/bin/sh\n{{ printf "%s\\n" {name} "$@"; echo "CUDA_VISIBLE_DEVICES=${{CUDA_VISIBLE_DEVICES-}}"; echo; }}'
            f' >> "{where}/calls"\n'
        )
        stub.chmod(0o755)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin"}


def _calls(where: Path) -> list[list[str]]:
    text = (where / "calls").read_text() if (where / "calls").exists() else ""
    return [block.splitlines() for block in text.split("\n\n") if block]


def _bash(script: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("hub_cli", ["hf", "huggingface-cli"])
def test_a_tasks_setup_downloads_the_model_at_the_recipes_revision(hub_cli: str, tmp_path: Path) -> None:
    """With huggingface_hub's `hf`, or on an older image its `huggingface-cli`, into the directory the server reads,
    only the files the recipe takes."""
    assert not any(Path(d, "hf").exists() for d in ("/usr/bin", "/bin"))
    (task,) = (yaml.safe_load(p.read_text()) for p in _export("marlin", "skypilot", tmp_path).glob("*-0.yaml"))
    done = _bash(task["setup"], _stubs(tmp_path, "mkdir", hub_cli))
    assert done.returncode == 0, done.stderr
    patterns = ["*.json", "*.safetensors", "*.py", "*.model", "*.tiktoken", "*.txt"]
    download = [hub_cli, "download", "deepseek-ai/DeepSeek-V4-Flash-DSpark", "--revision", "main"]
    download += ["--local-dir", "/model", *(word for p in patterns for word in ("--include", p))]
    assert _calls(tmp_path) == [
        ["mkdir", "-p", "/model", "CUDA_VISIBLE_DEVICES="],
        [*download, "CUDA_VISIBLE_DEVICES="],
    ]
    assert task["setup"].splitlines()[2] == (
        "# the model at the recipe's revision (hf is huggingface_hub's CLI; older images have huggingface-cli)"
    )


@pytest.mark.parametrize(
    ("mount_point", "local_dir", "target"),
    [
        (None, "/data/models/deepseek-v4-flash-dspark", "/model"),  # where the recipe mounts its directory
        ("/srv/m", None, "/srv/m"),  # where the recipe says the server reads it
        (None, None, "/model"),
    ],
)
def test_a_task_downloads_the_model_where_the_server_reads_it(
    mount_point: str | None, local_dir: str | None, target: str
) -> None:
    recipe = load_recipe(RECIPE)
    recipe = replace(recipe, model=replace(recipe.model, mount_point=mount_point, local_dir=local_dir))
    judged = judge(recipe, Allowances(api_key="auto"))
    setup = yaml.safe_load(next(iter(export_recipe(judged, "skypilot", ExportOptions()).files.values())))["setup"]
    assert setup.startswith(f"set -euo pipefail\nmkdir -p {target}\n") and f"--local-dir {target} " in setup


def test_a_task_without_a_model_repository_downloads_nothing(tmp_path: Path) -> None:
    post = "docker run --gpus all -v /data/models/m:/m:ro lmsysorg/sglang:v0.5.23 python3 -m sglang.launch_server --model-path /m"
    judged = judge(import_docker_run(post), Allowances())
    task = yaml.safe_load(next(iter(export_recipe(judged, "skypilot", ExportOptions()).files.values())))
    assert task["setup"] == "# the recipe names no model repository: put the weights where the server's flags say\n"
    assert _bash(task["setup"], _stubs(tmp_path, "mkdir")).returncode == 0 and _calls(tmp_path) == []


@pytest.mark.parametrize("key", ["sglang-two-node", "vllm-dp-two-node"])
def test_a_tasks_run_starts_the_leader_on_the_first_node_and_a_worker_on_every_other(key: str, tmp_path: Path) -> None:
    """SkyPilot gives each node its rank and every node's address, the first the head's: the leader runs the
    recipe's rank 0, each worker its own rank (vLLM's data-parallel workers their first DP rank too)."""
    (task,) = (yaml.safe_load(p.read_text()) for p in _export(key, "skypilot", tmp_path).glob("*.yaml"))
    # the head is read before pipefail: `echo | head -n 1` may end echo with SIGPIPE, which pipefail makes exit 141
    assert task["run"].startswith(
        "# the group's head: the first of the task's nodes\n"
        'HGXKIT_HEAD=$(echo "$SKYPILOT_NODE_IPS" | head -n 1)\n'
        "set -euo pipefail\n"
        "export CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7\n"
        'if [ "$SKYPILOT_NODE_RANK" = 0 ]; then\n'
    )
    program = task["run"].split("exec ", 1)[1].split()[0]
    for rank in ("0", "1"):
        env = {**_stubs(tmp_path, program), "SKYPILOT_NODE_RANK": rank, "SKYPILOT_NODE_IPS": "10.0.0.1\n10.0.0.2\n"}
        done = _bash(task["run"], env)
        assert done.returncode == 0, done.stderr
    leader, worker = _calls(tmp_path)
    assert leader[-1] == worker[-1] == "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7"
    if key == "sglang-two-node":
        assert leader[leader.index("--dist-init-addr") + 1] == worker[worker.index("--dist-init-addr") + 1]
        assert leader[leader.index("--dist-init-addr") + 1] == "10.0.0.1:20000"
        assert (leader[leader.index("--node-rank") + 1], worker[worker.index("--node-rank") + 1]) == ("0", "1")
    else:
        assert leader[leader.index("--data-parallel-address") + 1] == "10.0.0.1"
        assert worker[-5:-1]
        assert worker[: len(leader) - 1] == leader[:-1]
        assert worker[len(leader) - 1 :] == ["--headless", "--data-parallel-start-rank", "8", leader[-1]]
