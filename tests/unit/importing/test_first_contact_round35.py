"""Classes of import failure found by reading held-out posts 433-440 first (round 35): services of a compose file
refused for a local image set aside while a third imported at exit 0 (436); a Deployment's MIG slices not read
as GPUs, and its `imagePullPolicy: Never` (a local build) not named (437)."""

from __future__ import annotations

from test_first_contact_round5 import _import, _refusal

COMPOSE = """services:
  a:
    image: glm-sglang:1
    command: python3 -m sglang.launch_server --model-path org/a --tp 8
    deploy: {resources: {reservations: {devices: [{driver: nvidia, count: all, capabilities: [gpu]}]}}}
  b:
    image: lmsysorg/sglang:v0.5.6
    command: python3 -m sglang.launch_server --model-path org/b --tp 8
    deploy: {resources: {reservations: {devices: [{driver: nvidia, count: all, capabilities: [gpu]}]}}}
"""


def test_a_service_refused_for_its_image_is_another_setup_not_set_aside() -> None:
    message = _refusal(COMPOSE, "docker-compose.yml")
    assert "glm-sglang:1 names an engine but no registry" in message and "--pick N (2:" in message
    assert _import(COMPOSE, "docker-compose.yml", pick=2).recipe.model.repo_id == "org/b"


DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata: {name: m}
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.33.0
{policy}        args: ["--model", "org/m", "--tensor-parallel-size", "2"]
        resources:
          limits:
            nvidia.com/mig-4g.96gb: "2"
"""


def test_mig_slices_are_a_gpu_request_of_whole_gpus() -> None:
    outcome = _import(DEPLOYMENT.replace("{policy}", ""), "deploy.yaml")
    assert outcome.recipe.server.flag("--tensor-parallel-size") == "2"
    assert any("nvidia.com/mig-4g.96gb: 2 asks for MIG slices" in note for note in outcome.notes)


def test_an_image_the_nodes_already_hold_is_named() -> None:
    message = _refusal(DEPLOYMENT.replace("{policy}", "        imagePullPolicy: Never\n"), "deploy.yaml")
    assert (
        "imagePullPolicy: Never: the image vllm/vllm-openai:v0.33.0 is one the cluster's nodes already hold" in message
    )
