"""Classes of import failure found by reading posts 215-224 first (round 8): the ranks of one server over hosts
offered as separate setups (and named as what the setups differ in) when the post shows another setup beside
them, an exported command substitution carried into a launch's container and refused only by the recipe's
validator, a launch run inside an interactive container whose bind mounts were not applied to the paths it
reads (a container path taken for the host's at exit 0), a compose file whose indentation a copy lost read as
having no serving command, a program's name followed by a bullet's label read as a launch, a Dockerfile with an
ARG before its FROM (or a comment line inside a continued instruction) not read as a Dockerfile, and a SkyPilot
task refused for a `workdir` its server never reads before the missing image was said."""

from __future__ import annotations

import pytest
from test_first_contact_round5 import _import, _refusal  # the same helpers: import a post, its one-line refusal

RANKS = """# node 0
python3 -m sglang.launch_server --model-path org/big --tp 16 --dist-init-addr 10.0.0.1:5000 --nnodes 2 --node-rank 0
# node 1
python3 -m sglang.launch_server --model-path org/big --tp 16 --dist-init-addr 10.0.0.1:5000 --nnodes 2 --node-rank 1
# one node
python3 -m sglang.launch_server --model-path org/small --tp 8
"""


def test_the_ranks_of_one_server_are_one_choice_beside_another_setup() -> None:
    message = _refusal(RANKS)
    assert "3 serving commands (2 setups) that are not one setup" in message
    assert "--node-rank" not in message.split("; import")[0]  # the ranks are not what the setups differ in
    assert message.startswith("post.sh:2: 3 serving commands (2 setups) that are not one setup: they differ in server")
    assert "(1 or 2: line 2, line 4, the ranks of one server over 2 hosts, 3: line 6)" in message


@pytest.mark.parametrize("pick", [1, 2])
def test_either_rank_picks_the_server_over_hosts(pick: int) -> None:
    recipe = _import(RANKS, pick=pick).recipe
    assert recipe.groups is not None and recipe.groups.nodes == 2
    assert recipe.server.flag("--tp") == "16"


SHELL = """docker run -itd --gpus all --name box -v /ssd1/models:/mnt/models vllm/vllm-openai:v0.9.0 /bin/bash
docker exec -it box bash
{export}python3 -m vllm.entrypoints.openai.api_server --model /mnt/models/m --port 8000
"""


def test_an_exported_command_substitution_reaching_a_launch_is_refused_at_its_line() -> None:
    message = _refusal(SHELL.format(export="export VLLM_HOST_IP=$(hostname -I | awk '{print $1}')\n"))
    assert message.startswith(
        "post.sh: line 3, column 21: `$(hostname -I | awk '{print $1}')` (the value of VLLM_HOST_IP, exported, so in "
        "the environment of the launch at post.sh:4) is a command substitution"
    )
    assert "docker.options" not in message


def test_a_launch_in_an_interactive_container_reads_its_paths_through_the_containers_mounts() -> None:
    outcome = _import(SHELL.format(export=""))
    model = outcome.recipe.model
    assert (model.local_dir, model.mount_point) == ("/ssd1/models/m", "/mnt/models/m")
    assert "-v /ssd1/models/m:/mnt/models/m:ro" in [" ".join(e.words) for e in outcome.recipe.docker.entries]
    assert any("is in the mount -v /ssd1/models:/mnt/models (post.sh:1)" in n for n in outcome.notes)


def test_a_path_outside_the_containers_mounts_stays_the_same_path() -> None:
    outcome = _import(SHELL.format(export="").replace("/mnt/models/m", "/data/m"))
    assert outcome.recipe.model.local_dir == "/data/m"


FLAT = """Here is the compose file:
services:
vllm:
image: vllm/vllm-openai:v0.9.0
ports:
- "8000:8000"
command: >
--model org/m
"""


def test_a_compose_file_that_lost_its_indentation_is_refused_at_services() -> None:
    message = _refusal(FLAT, "post.md")
    assert message.startswith("post.md: line 2, column 1: `services:` has nothing indented under it")
    assert "lost its indentation" in message


def test_an_indented_compose_file_is_still_read() -> None:
    text = "services:\n  vllm:\n    image: vllm/vllm-openai:v0.9.0\n    command: --model org/m\n"
    assert _import(text, "compose.yaml").recipe.server.kind == "vllm"


def test_a_programs_name_followed_by_a_label_is_prose() -> None:
    post = "- Entry command:\nvllm serve - Execution command template:\n{{model_path}} --port {{port}}\n"
    assert "post.md:3: `{{model_path}}` is a template's placeholder" in _refusal(post, "post.md")


def test_a_label_naming_another_accelerators_image_refuses_by_it() -> None:
    post = (
        "Image URL:\nquay.io/ascend/vllm-ascend:v0.18.0rc1(mirror) - Entry command:\nvllm serve - Execution command:\n"
    )
    message = _refusal(post, "post.md")
    assert message.startswith("post.md:2: quay.io/ascend/vllm-ascend:v0.18.0rc1 is Huawei Ascend (NPU)")


DOCKERFILE = """ARG CUDA_VERSION=12.6.1
FROM nvidia/cuda:${CUDA_VERSION}-cudnn-devel-ubuntu22.04
RUN pip install "sglang[all]"
CMD python -m sglang.launch_server \\
    --model-path org/m \\
    # --json-model-override-args '{}'
    --port 8000
"""


def test_a_dockerfile_with_an_arg_before_from_is_refused_naming_its_base_image() -> None:
    message = _refusal(DOCKERFILE, "Dockerfile")
    assert message.startswith(
        "Dockerfile:3: the Dockerfile changes its base image (RUN), nvidia/cuda:12.6.1-cudnn-devel-ubuntu22.04, so"
    )


def test_a_comment_line_inside_a_continued_instruction_keeps_the_instruction_going() -> None:
    post = "FROM vllm/vllm-openai:v0.9.0\nENTRYPOINT vllm serve org/m \\\n    # --enforce-eager\n    --port 8001\n"
    outcome = _import(post, "Dockerfile")
    assert outcome.recipe.server.flag("--port") == "8001"
    assert not outcome.recipe.server.has("--enforce-eager")


TASK = """resources:
  accelerators: H200:8
{image}workdir: ./app

run: |
  vllm serve org/m --port 8000 {extra}
"""


def test_a_task_with_a_vm_image_says_so_before_its_workdir() -> None:
    message = _refusal(TASK.format(image="  image_id: ami-0123\n", extra=""), "task.yaml")
    assert "resources.image_id: ami-0123: the task runs on the VM" in message


def test_a_workdir_the_server_does_not_read_is_noted_and_left_out() -> None:
    outcome = _import(TASK.format(image="  image_id: docker:vllm/vllm-openai:v0.9.0\n", extra=""), "task.yaml")
    assert outcome.recipe.server.flag("--port") == "8000"
    assert any("workdir: ./app (synced to the node, where the run script runs) is left out" in n for n in outcome.notes)


def test_a_workdir_the_server_reads_is_refused() -> None:
    task = TASK.format(image="  image_id: docker:vllm/vllm-openai:v0.9.0\n", extra="--chat-template ./t.jinja")
    message = _refusal(task, "task.yaml")
    assert "workdir: a local directory synced to the node" in message
    assert "(the server reads ./t.jinja)" in message
