"""Classes of import failure found by reading posts 199-208 first (round 7): a credential flag spelt with an
underscore written into the recipe, two notes for one backslash with a comment after it, a model under a mount
whose host side is relative called 'not inside a bind mount', a device list naming a GPU the node does not have
taken at exit 0, one command for all the hosts of a server over nodes refused for its rank variable, a launcher
run by its path (`$VENV/bin/vllm serve`) not found, and a YAML file pasted with no fence not read as its format."""

from __future__ import annotations

import pytest
from test_first_contact_round5 import _import, _refusal  # the same helpers: import a post, its one-line refusal

from hgxkit.recipe.render import render_recipe


@pytest.mark.parametrize("flag", ["--api_key", "--api-key"])
def test_a_credential_flag_spelt_with_underscores_becomes_a_reference(flag: str) -> None:
    outcome = _import(f"docker run --gpus all vllm/vllm-openai:v0.9.0 --model org/m {flag} sk-live-1234567890\n")
    words = " ".join(outcome.recipe.server.words())
    assert "sk-live-1234567890" not in words
    assert f"{flag} {{{{env:VLLM_API_KEY}}}}" in words
    assert f"a secret value removed from {flag}; it is taken from $VLLM_API_KEY at run time" in outcome.notes


def test_a_bare_launch_credential_flag_spelt_with_underscores_is_never_written() -> None:
    outcome = _import("vllm serve org/m --port 8000 --api_key sk-live-1234567890\n")
    assert "sk-live-1234567890" not in " ".join(outcome.recipe.server.words())


def test_a_backslash_with_a_comment_after_it_gets_one_note() -> None:
    text = "docker run --gpus all vllm/vllm-openai:v0.9.0 \\\n  --model org/m \\ # why\n  --port 8000\n"
    outcome = _import(text)
    assert [n for n in outcome.notes if ":2:" in n] == [
        "post.sh:2: `\\ # why` read as a line continuation (the comment dropped; a shell would read an escaped "
        "space, then end the command at the comment)"
    ]
    assert outcome.recipe.server.flag("--port") == "8000"


@pytest.mark.parametrize("source", ["./models", "models/", "../data"])
def test_a_model_under_a_mount_with_a_relative_host_side_names_that_mount(source: str) -> None:
    message = _refusal(f"docker run --gpus all -v {source}:/app/m vllm/vllm-openai:v0.9.0 --model /app/m/llama\n")
    assert (
        f"the model path /app/m/llama is in the mount {source}:/app/m, whose host directory {source} is relative"
        in (message)
    )
    assert "not inside a bind mount" not in message


@pytest.mark.parametrize(
    ("text", "shown", "column"),
    [
        ("CUDA_VISIBLE_DEVICES=5,6,7,8 vllm serve org/m -tp 4\n", "CUDA_VISIBLE_DEVICES=5,6,7,8", 1),
        ("docker run --gpus '\"device=7,8\"' vllm/vllm-openai:v0.9.0 --model org/m -tp 2\n", "device=7,8", 21),
        (
            "docker run --gpus all -e CUDA_VISIBLE_DEVICES=7,8 vllm/vllm-openai:v0.9.0 --model org/m -tp 2\n",
            "CUDA_VISIBLE_DEVICES=7,8",
            26,
        ),
    ],
)
def test_a_device_list_naming_a_gpu_past_the_nodes_eight_is_refused_where_the_post_writes_it(
    text: str, shown: str, column: int
) -> None:
    assert _refusal(text).startswith(f"post.sh: line 1, column {column}: {shown} names GPU 8, but an HGX-H200 node")


def test_a_device_list_on_the_nodes_gpus_is_kept() -> None:
    (group,) = render_recipe(_import("CUDA_VISIBLE_DEVICES=4,5,6,7 vllm serve org/m -tp 4\n").recipe)
    assert group.gpus == [4, 5, 6, 7]


TEMPLATE = "python3 -m sglang.launch_server --model-path org/m --tp 16 --nnodes 2 --node-rank {rank} --dist-init-addr {head}:5000\n"


@pytest.mark.parametrize("rank", ["$NODE_RANK", "${RANK}"])
def test_one_command_for_every_host_with_its_rank_left_to_each_host_is_rank_zeros(rank: str) -> None:
    outcome = _import(TEMPLATE.format(rank=rank, head="$HEAD"))
    recipe = outcome.recipe
    assert recipe.groups is not None and recipe.groups.nodes == 2
    assert "--node-rank {{rank}}" in " ".join(recipe.server.words())
    assert any(
        f"--node-rank {rank} is the rank each host is given (one command for 2 hosts)" in n for n in outcome.notes
    )
    assert "post.sh:1: the head address $HEAD is a value the post leaves to whoever runs it; it is given per " in (
        " ".join(outcome.notes)
    )


def test_a_slurm_jobs_rank_variable_it_does_not_set_is_still_refused() -> None:
    text = "#!/bin/bash\n#SBATCH --nodes=2\nsrun " + TEMPLATE.format(rank="$RANK", head="10.0.0.1")
    assert "the rank is a variable the post does not set" in _refusal(text, "job.sbatch")


@pytest.mark.parametrize(
    ("program", "kind"),
    [
        ("$VENV/bin/vllm serve org/m", "vllm"),
        ("/opt/venv/bin/vllm serve org/m", "vllm"),
        ("~/.local/bin/sglang serve --model-path org/m", "sglang"),
    ],
)
def test_a_launcher_run_by_its_path_is_the_kinds_launch(program: str, kind: str) -> None:
    outcome = _import(f"{program} --port 8000\n")
    assert outcome.recipe.server.kind == kind
    assert any(f"{program.split()[0]} became the image's {kind}" in note for note in outcome.notes)
    assert not any("prompt" in note for note in outcome.notes)


SKY = """name: m
resources:
  accelerators: H200:8
  ports: 8000
setup: |
  pip install vllm
run: |
  vllm serve org/m --port 8000 --tensor-parallel-size 8
"""


def test_a_yaml_file_pasted_with_no_fence_is_read_as_the_format_it_is() -> None:
    # a task on the VM whose setup installs the engine alone runs in the engine's image, as a bare launch does
    assert _import(SKY, "post.txt").recipe.image.reference == "vllm/vllm-openai:latest"
    outcome = _import(SKY, "post.txt", image="vllm/vllm-openai:v0.9.0")
    assert outcome.recipe.image.reference == "vllm/vllm-openai:v0.9.0"
    assert outcome.recipe.server.flag("--tensor-parallel-size") == "8"


def test_prose_that_starts_like_a_key_is_still_read_as_text() -> None:
    outcome = _import("Note: this is how I run it\n\nvllm serve org/m --port 8000\n", "post.txt")
    assert outcome.recipe.server.flag("--port") == "8000"


TWO_NODES = """resources:
  accelerators: H200:8
  image_id: docker:lmsysorg/sglang:v0.5.3
num_nodes: 2
run: |
  HEAD=$(echo "$SKYPILOT_NODE_IPS" | head -n1)
  TP={tp}
  python3 -m sglang.launch_server --model-path org/m --tp $TP --dist-init-addr $HEAD:5000 \\
    --nnodes $SKYPILOT_NUM_NODES --node-rank $SKYPILOT_NODE_RANK
"""


def test_a_skypilot_run_scripts_arithmetic_over_the_tasks_counts_is_worked_out() -> None:
    outcome = _import(TWO_NODES.format(tp="$(($SKYPILOT_NUM_GPUS_PER_NODE * $SKYPILOT_NUM_NODES))"), "task.yaml")
    assert outcome.recipe.server.flag("--tp") == "16"
    assert outcome.recipe.groups is not None and outcome.recipe.groups.nodes == 2
    assert any(
        "$TP is $(($SKYPILOT_NUM_GPUS_PER_NODE * $SKYPILOT_NUM_NODES)) (line 7): 8 * 2 = 16" in n for n in outcome.notes
    )


def test_a_skypilot_run_scripts_arithmetic_over_what_the_task_does_not_say_is_named() -> None:
    message = _refusal(TWO_NODES.format(tp="$(($GPUS * 2))"), "task.yaml")
    assert message.startswith("task.yaml:7: $TP is $(($GPUS * 2)), which hgxkit cannot work out from the task")
