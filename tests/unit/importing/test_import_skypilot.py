"""SkyPilot task YAMLs imported (hgxkit.importing.skypilot): the `run` command as rank 0's `docker run` in
`resources.image_id`, the rank and the head read from SkyPilot's variables, `setup` set aside, and what a
recipe cannot hold (SkyPilot Serve, bucket mounts, a script of several commands, no Docker image) refused by name.

The round trip of hgxkit's own SkyPilot export is in test_export.py (test_an_export_imports_back_to_the_same_render).
"""

from __future__ import annotations

import pytest

from hgxkit.errors import InputError
from hgxkit.importing.importer import ImportOptions, import_post
from hgxkit.importing.outcome import ImportOutcome

SINGLE = """name: serve
resources:
  accelerators: H200:8
  image_id: docker:lmsysorg/sglang:v0.5.6
  ports: [30000]
envs:
  MODEL: org/m
setup: |
  hf download org/m --local-dir /models/m
run: |
  set -e
  exec python3 -m sglang.launch_server --model-path /models/m \\
    --tp 8 --host 0.0.0.0 --port 30000
"""

TWO_NODE = """resources:
  accelerators: H200:8
  image_id: docker:lmsysorg/sglang:v0.5.6
num_nodes: 2
run: |
  HEAD=$(echo "$SKYPILOT_NODE_IPS" | head -n1)
  if [ "$SKYPILOT_NODE_RANK" = 0 ]; then
    python3 -m sglang.launch_server --model-path org/m --tp 16 --nnodes 2 --node-rank 0 --dist-init-addr "$HEAD:5000"
  else
    python3 -m sglang.launch_server --model-path org/m --tp 16 --nnodes 2 --node-rank "$SKYPILOT_NODE_RANK" \\
      --dist-init-addr "$HEAD:5000"
  fi
"""


def imported(text: str) -> ImportOutcome:
    return import_post([("task.yaml", text)], ImportOptions())


def refusal(text: str) -> str:
    with pytest.raises(InputError) as caught:
        imported(text)
    return caught.value.message


def test_a_single_node_task_is_its_run_command_in_its_image() -> None:
    outcome = imported(SINGLE)
    recipe = outcome.recipe
    assert recipe.image.reference == "lmsysorg/sglang:v0.5.6"
    assert " ".join(recipe.server.words()) == (
        "python3 -m sglang.launch_server --model-path /models/m --tp 8 --host 0.0.0.0 --port 30000"
    )
    assert [e.words for e in recipe.docker.entries] == [
        ("--gpus", "all"),
        ("-p", "30000:30000"),
        ("-v", "/data/models/m:/models/m:ro"),
        ("-e", "MODEL=org/m"),
    ]
    assert "task.yaml:8: setup downloads org/m into /models/m: the model the server reads" in outcome.notes
    fates = {a.line: a.fate for a in outcome.lines}
    # line 1 and the setup (line 8) are named by notes: the model's mount comes from the setup's download target
    assert [fates[n] for n in range(1, 15)] == ["changed"] + ["taken"] * 6 + ["changed"] + ["taken"] * 5 + ["set aside"]
    assert any(r.action == "skipped" and r.what.startswith("setup (the model download)") for r in outcome.report)


def test_two_nodes_take_rank_0s_command_with_the_head_from_skypilot_node_ips() -> None:
    outcome = imported(TWO_NODE)
    groups = outcome.recipe.groups
    assert " ".join(outcome.recipe.server.words()) == (
        "python3 -m sglang.launch_server --model-path /models/m --tp 16 --nnodes 2 --node-rank {{rank}} "
        "--dist-init-addr {{head}}:{{dist_port}} --served-model-name org/m"
    )
    assert (groups.size, groups.nodes, groups.dist_port) == (8, 2, 5000)
    # SkyPilot runs the container on the host's network, where the ranks meet
    assert [e.words for e in outcome.recipe.docker.entries][:2] == [("--gpus", "all"), ("--network", "host")]
    assert outcome.notes[:3] == (
        "task.yaml:6: $HEAD is the first of $SKYPILOT_NODE_IPS: the group's head",
        "task.yaml:10: the other ranks' command; hgxkit renders each rank from rank 0's",
        "task.yaml:8: $SKYPILOT_NODE_RANK is the rank (rank 0 is the command taken; hgxkit gives each host its own "
        "rank)",
    )


def test_a_gpu_count_below_the_node_is_the_first_gpus() -> None:
    outcome = imported(SINGLE.replace("H200:8", "H200:2").replace("--tp 8", "--tp 2"))
    assert outcome.recipe.docker.entries[0].words == ("--gpus", '"device=0,1"')


@pytest.mark.parametrize(
    "edit,message",
    [
        (
            lambda t: t + "service:\n  readiness_probe: /health\n",
            "task.yaml:14: service: a SkyPilot Serve section (replicas behind a load balancer); give the task without "
            "`service:`",
        ),
        (
            lambda t: t + "file_mounts:\n  /models: s3://bucket/models\n",
            "task.yaml:14: file_mounts /models: s3://bucket/models is a cloud bucket, which a docker host does not "
            "mount; put its files on the node and mount them",
        ),
        (
            lambda t: t.replace("  set -e\n", "  nvidia-smi\n"),
            "task.yaml:11: run: 2 commands (lines 11, 12); hgxkit imports one server command",
        ),
        (
            lambda t: t.replace("docker:lmsysorg/sglang:v0.5.6", "ami-0123"),
            "task.yaml:2: resources.image_id: ami-0123; hgxkit runs the server in a container: give `image_id: "
            "docker:IMAGE` (or --image)",
        ),
        (
            lambda t: t.replace("  set -e\n", "  PORT=30000\n"),
            "task.yaml:11: PORT=30000: a variable of the run script; give it in `envs`",
        ),
        (
            lambda t: t.replace("--tp 8", "--tp 8 --nnodes $SKYPILOT_NUM_GPUS_PER_NODE"),
            "task.yaml:12: $SKYPILOT_NUM_GPUS_PER_NODE: a SkyPilot variable hgxkit does not read; write its value",
        ),
    ],
    ids=["service", "bucket", "several-commands", "no-docker-image", "script-variable", "other-variable"],
)
def test_what_a_recipe_cannot_hold_is_refused_by_name(edit, message: str) -> None:
    assert refusal(edit(SINGLE)) == message


def test_envs_are_the_run_scripts_variables_and_an_accelerator_choice_keeps_its_count() -> None:
    task = (
        SINGLE.replace("H200:8", "{L4:1, A100:1}")
        .replace("--model-path /models/m", "--model-path $MODEL")
        .replace("  set -e\n", "  echo 'Starting server...'\n")
        .replace("--tp 8", "--tp 1")
    )
    outcome = imported(task)
    assert " ".join(outcome.recipe.server.words()) == (
        "python3 -m sglang.launch_server --model-path /models/m --tp 1 --host 0.0.0.0 --port 30000 "
        "--served-model-name org/m"
    )  # $MODEL is the Hub id org/m, placed under the models directory
    assert outcome.recipe.docker.entries[0].words == ("--gpus", '"device=0"')
    assert "task.yaml:12: $MODEL is the task's envs value org/m" in outcome.notes
    assert (
        "task.yaml:2: resources.accelerators: any of several; the GPU count is kept, the node is an HGX-H200"
        in outcome.notes
    )
