"""A SkyPilot task as `sky launch` runs it: a disk that holds the image and the weights (SkyPilot's own default,
256 GB, does not hold a DeepSeek-class model, so the export asks for `--disk-size`, default 1024 GB), the secrets
the recipe reads and no others (`sky launch` refuses a task whose secrets it is not given), a port opened only for
a server that takes a key or whose inventory allows it without one, and every option SkyPilot does not carry named
in a line of its own."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from test_export import _export

from hgxkit.cli import main
from hgxkit.export.common import ExportOptions
from hgxkit.export.registry import export_recipe
from hgxkit.importing.docker_run import import_docker_run
from hgxkit.recipe.judge import Allowances, judge

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
