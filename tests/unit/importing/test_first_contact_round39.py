"""Classes of import failure found by reading held-out posts 465-480 first (rounds 39 and 40): a launch whose post
ends on its continuation backslash refused for what its words hold before the cut is named (480), a Kubernetes
manifest pasted between a docs page's prose with no fence never found (466), and a Dockerfile on vLLM's image cut
before its launch not named (472)."""

from __future__ import annotations

from test_first_contact_round5 import _import, _refusal


def test_a_launch_cut_on_its_last_line_is_named_as_cut_first() -> None:
    post = "export CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7,8,9\n\npython3 -m sglang.launch_server \\\n"
    message = _refusal(post)
    assert "the copy stops inside the command" in message and "GPU 8" not in message


def test_a_launch_cut_before_blank_lines_is_named_as_cut_too() -> None:
    message = _refusal("vllm serve org/m \\\n  --tensor-parallel-size 2 \\\n\n\n")
    assert "line 2" in message and "the copy stops inside the command" in message


PAGE = """EKS Deployment

The container works with Kubernetes manifests.

apiVersion: apps/v1
kind: Deployment
metadata: {name: vllm-server}
spec:
  template:
    spec:
      containers: [{name: vllm, image: "vllm/vllm-openai:v0.33.0", args: ["--model", "org/m"],
                    resources: {limits: {nvidia.com/gpu: "1"}}}]

Key Requirements

  - Request GPU resources via resources.limits
"""


def test_a_manifest_between_a_page_s_prose_is_read() -> None:
    outcome = _import(PAGE, "page.md")
    assert outcome.recipe.server.kind == "vllm"
    assert outcome.recipe.docker.last("--gpus") is not None


def test_a_dockerfile_on_an_engine_s_image_without_its_launch_is_named() -> None:
    post = "The app:\n\n```docker\nFROM vllm/vllm-openai:v0.28.0\nENV MODEL=org/m\nEXPOSE 8080\n"
    message = _refusal(post, "page.md")
    assert message.startswith("page.md:4: a Dockerfile on an engine's image that is no launch as the post holds it")
