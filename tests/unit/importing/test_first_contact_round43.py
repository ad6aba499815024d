"""Classes of import failure found by reading held-out posts 497-520 first (rounds 43 and 45): a fenced compose service
pasted without `services:`, a commented key at the margin and a copy cut inside its command list, read as no YAML at
all (503); a launch glued to a flattened page's prose never mentioned (501); an arithmetic expansion called a
command substitution (502); a launch in a comment line of a flattened page not named (514); 16 GPUs on the
Ray backend answered with "start a Ray cluster" (520)."""

from __future__ import annotations

from test_first_contact_round5 import _refusal

FRAGMENT = """Here is my compose:

```docker-compose
  vllm:
    image: vllm/vllm-openai:v0.8.5
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
#              count: all
              capabilities: [gpu]
    command: [
      "--model", "org/m",
"""


def test_a_compose_fragment_cut_in_its_fence_is_named_as_cut() -> None:
    message = _refusal(FRAGMENT, "post.md")
    assert "the post ends inside it where it is not valid YAML: the copy is cut" in message


def test_a_launch_glued_to_prose_is_named() -> None:
    message = _refusal("Replace 2 with the GPU count.vllm serve <model-repo> --tensor-parallel-size 2\n", "page.md")
    assert "`vllm serve` stands glued to the text before it" in message


def test_an_arithmetic_expansion_is_named_as_one() -> None:
    message = _refusal("TP=$(($GPUS * 2))\nvllm serve org/m --port 8000 --tensor-parallel-size $TP\n")
    assert "the arithmetic expansion `$(($GPUS * 2))`" in message


def test_a_launch_inside_a_comment_is_named_where_nothing_serves() -> None:
    post = "# Student A (slice 1)CUDA_VISIBLE_DEVICES=0 python -m vllm.entrypoints.openai.api_server --model org/m\n"
    assert "stands inside a comment" in _refusal(post, "page.md")


def test_a_ray_backend_over_more_gpus_than_a_node_names_the_missing_cluster() -> None:
    post = "vllm serve org/m --tensor-parallel-size 8 --pipeline-parallel-size 2 --distributed-executor-backend ray\n"
    assert "16 GPUs on the Ray backend" in _refusal(post)
