"""Classes of import failure found by reading held-out posts 497-504 first (round 43): a fenced compose service
pasted without `services:`, a commented key at the margin and a copy cut inside its command list, read as no YAML at
all (503); a launch glued to a flattened page's prose never mentioned (501); an arithmetic expansion called a
command substitution (502)."""

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
