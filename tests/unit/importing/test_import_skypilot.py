"""SkyPilot task YAMLs imported (hgxkit.importing.skypilot): the `run` command as rank 0's `docker run` in
`resources.image_id` (or --image for a task on the VM), the rank and the head read from SkyPilot's variables, a
Ray cluster its script starts read as one, `setup` and SkyPilot Serve's `service:` set aside, and what a recipe
cannot hold (bucket mounts, a script of several commands, no container image, installs into the container)
refused by name.

The round trip of hgxkit's own SkyPilot export is in test_export.py (test_an_export_imports_back_to_the_same_render).
"""

from __future__ import annotations

from pathlib import Path

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


def imported(text: str, image: str | None = None) -> ImportOutcome:
    return import_post([("task.yaml", text)], ImportOptions(image=image))


def refusal(text: str, image: str | None = None) -> str:
    with pytest.raises(InputError) as caught:
        imported(text, image)
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
        ("--ipc=host",),  # SkyPilot sizes the container's /dev/shm from the host's memory
        ("-p", "30000:30000"),
        ("-v", "/data/models/m:/models/m:ro"),
        ("-e", "MODEL=org/m"),
    ]
    assert "task.yaml:8: setup downloads org/m into /models/m: the model the server reads" in outcome.notes
    fates = {a.line: a.fate for a in outcome.lines}
    # line 1 and the setup (line 8) are named by notes: the model's mount comes from the setup's download target
    assert [fates[n] for n in range(1, 15)] == ["changed"] * 2 + ["taken"] * 5 + ["changed"] + ["taken"] * 5 + [
        "set aside"
    ]
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
    assert [e.words for e in outcome.recipe.docker.entries][:3] == [
        ("--gpus", "all"),
        ("--ipc=host",),
        ("--network", "host"),
    ]
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
            "task.yaml:2: resources.image_id: ami-0123: the task runs on the VM (its setup installs the server), not "
            "in a container; give --image REF of an image that has the server (or `image_id: docker:IMAGE`)",
        ),
        (
            lambda t: t.replace("  set -e\n", "  PORT=30000\n"),
            "task.yaml:11: PORT=30000: a variable of the run script; give it in `envs`",
        ),
        (
            lambda t: t.replace("--tp 8", "--tp 8 --nnodes $SKYPILOT_TASK_ID"),
            "task.yaml:12: $SKYPILOT_TASK_ID: a SkyPilot variable hgxkit does not read; write its value",
        ),
        (
            lambda t: t.replace("  hf download", "  pip install blobfile\n  hf download"),
            "task.yaml:8: setup: `pip install blobfile` installs into the task's container, which a recipe runs as its "
            "image is; give --image REF of an image that has it (built from lmsysorg/sglang:v0.5.6)",
        ),
        (
            lambda t: t + "  ~/sky_templates/ray/start_cluster\n",
            "task.yaml:14: ~/sky_templates/ray/start_cluster: SkyPilot's Ray template starts the cluster with options "
            "the task does not show; write its `ray start` commands (--head on rank 0, --address HEAD:PORT on the "
            "others)",
        ),
    ],
    ids=[
        "bucket",
        "several-commands",
        "no-docker-image",
        "script-variable",
        "other-variable",
        "install-into-the-image",
        "ray-template-alone",
    ],
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


def test_a_serve_section_is_set_aside_saying_what_it_asked_for() -> None:
    outcome = imported(SINGLE + "service:\n  readiness_probe: /health\n  replicas: 2\n")
    assert " ".join(outcome.recipe.server.words()).startswith("python3 -m sglang.launch_server --model-path /models/m")
    assert [r.line() for r in outcome.report if r.what.startswith("service")] == [
        "task.yaml:14: skipped service: SkyPilot Serve's section (2 replica(s), readiness probe /health), which `sky "
        "launch` ignores; not carried: the recipe is one server, and hgxkit checks its health itself"
    ]


VM_TASK = """resources:
  accelerators: {L4:1, A100:1}
  ports: [8000]
setup: |
  conda create -n sglang python=3.10 -y
  pip install "sglang[all]"
run: |
  conda activate sglang
  export PATH=$PATH:/sbin/
  python -m sglang.launch_server --model-path org/m --port 8000 --tp $SKYPILOT_NUM_GPUS_PER_NODE
"""


def test_a_task_on_the_vm_imports_in_the_image_given_and_leaves_the_vms_environment() -> None:
    assert refusal(VM_TASK).startswith("task.yaml:1: resources.image_id: not given: the task runs on the VM")
    outcome = imported(VM_TASK, image="lmsysorg/sglang:v0.5.6")
    assert outcome.recipe.image.reference == "lmsysorg/sglang:v0.5.6"
    assert " ".join(outcome.recipe.server.words()) == (
        "python -m sglang.launch_server --model-path /models/m --port 8000 --tp 1 --served-model-name org/m --host 0.0.0.0"
    )
    for note in (
        "task.yaml:1: resources.image_id: not given (the task runs on the VM); the server runs in --image "
        "lmsysorg/sglang:v0.5.6",
        'task.yaml:4: setup installs conda create -n sglang python=3.10 -y; pip install "sglang[all]": --image '
        "lmsysorg/sglang:v0.5.6 is taken to have them",
        "task.yaml:8: `conda activate sglang` sets up the VM's environment for its server; the image has its own",
        "task.yaml:9: `export PATH=$PATH:/sbin/` sets up the VM's environment for its server; the image has its own",
        "task.yaml:10: $SKYPILOT_NUM_GPUS_PER_NODE is 1, resources.accelerators' count",
    ):
        assert note in outcome.notes


RAY_TASK = """resources:
  accelerators: H200:8
  image_id: docker:vllm/vllm-openai:v0.10.0
  ports: 8081
num_nodes: 2
run: |
  HEAD_IP=`echo "$SKYPILOT_NODE_IPS" | head -n1`
  if [ "$SKYPILOT_NODE_RANK" == "0" ]; then
    ps aux | grep ray | grep 6379 &> /dev/null || ray start --head --disable-usage-stats --port 6379
    sleep 5
  else
    ray start --address $HEAD_IP:6379
  fi
  ray status
  VLLM_HOST_IP=`echo "$SKYPILOT_NODE_IPS" | sed -n "$((SKYPILOT_NODE_RANK + 1))p"`
  export VLLM_HOST_IP
  if [ "$SKYPILOT_NODE_RANK" == "0" ]; then
    vllm serve org/m --port 8081 --tensor-parallel-size $SKYPILOT_NUM_GPUS_PER_NODE \\
      --pipeline-parallel-size $SKYPILOT_NUM_NODES
  else
    sleep infinity
  fi
"""


def test_a_ray_cluster_the_run_script_starts_is_read_as_one() -> None:
    outcome = imported(RAY_TASK)
    recipe = outcome.recipe
    assert " ".join(recipe.server.words()) == (
        "/models/m --port 8081 --tensor-parallel-size 8 --pipeline-parallel-size 2 --distributed-executor-backend "
        "ray --served-model-name org/m"
    )
    assert (recipe.groups.size, recipe.groups.nodes, recipe.groups.dist_port) == (8, 2, 6379)
    assert [w for e in recipe.docker.entries for w in e.words][:5] == [
        "--entrypoint",
        "/bin/bash",
        "--network",
        "host",
        "--gpus",
    ]
    read = [(r.where, r.what) for r in outcome.report if r.action == "read"]
    assert read == [
        ("task.yaml:9", "Ray head (port 6379)"),
        ("task.yaml:12", "Ray worker (the head at skypilot-head:6379)"),
    ]
    assert (
        "task.yaml:15: VLLM_HOST_IP is this host's own address (its line of $SKYPILOT_NODE_IPS); left out: Ray uses "
        "each host's address on the host network" in outcome.notes
    )


def test_skypilots_ray_template_with_its_fallback_reads_the_fallback() -> None:
    text = (Path(__file__).parents[2] / "fixtures/posts/formats/y05-skypilot-kimi-k2-ray-template.yaml").read_text()
    outcome = import_post([("y05.yaml", text)], ImportOptions(image="registry.example/kimi-vllm:v0.10.0-blobfile"))
    assert (outcome.recipe.groups.nodes, outcome.recipe.groups.dist_port) == (2, 6379)
    assert (
        "y05.yaml:32: ~/skypilot_templates/ray/start_cluster.sh is SkyPilot's Ray template, run where the image has "
        "it; the `ray start` commands the script falls back to start the same cluster, and are read" in outcome.notes
    )
    assert (
        "y05.yaml:24: setup installs pip install blobfile: --image registry.example/kimi-vllm:v0.10.0-blobfile is taken to have them"
        in outcome.notes
    )


def test_run_options_that_size_shared_memory_keep_theirs() -> None:
    task = SINGLE.replace("resources:", "config:\n  docker:\n    run_options: [--shm-size=32g]\nresources:", 1)
    words = [e.words for e in import_post([("task.yaml", task)]).recipe.docker.entries]
    assert ("--shm-size=32g",) in words and ("--ipc=host",) not in words
