"""Classes of import failure found by reading held-out posts 409-416 first (round 32): a quoted default
(`${MODEL_PATH:-"org/m"}`) set aside as an operator (409); a Slurm job's host cache folders (HF_HOME=$HOME/…) passed
into the container, and its InfiniBand devices (NCCL_IB_HCA=mlx5_0) giving a one-node server the host's network
(409); a SkyPilot task on the VM whose setup installs the engine alone refused for its missing image (415)."""

from __future__ import annotations

import pytest
from test_first_contact_round5 import _import, _refusal

from hgxkit.recipe.network_env import host_interface_settings

LAUNCH = "python3 -m sglang.launch_server --model-path $MODEL_PATH --tp 8\n"


@pytest.mark.parametrize("written", ['"org/m"', "'org/m'", "org/m"])
def test_a_quoted_default_is_the_value_without_its_quotes(written: str) -> None:
    outcome = _import(f"MODEL_PATH=${{MODEL_PATH:-{written}}}\n" + LAUNCH)
    assert outcome.recipe.model.repo_id == "org/m"


@pytest.mark.parametrize("value", ["$HOME/.cache/huggingface", "/scratch/me/hf", "~/.cache"])
def test_a_host_cache_folder_is_left_out_of_the_container(value: str) -> None:
    outcome = _import(f"export HF_HOME={value}\nexport NCCL_DEBUG=INFO\nMODEL_PATH=org/m\n" + LAUNCH)
    words = " ".join(outcome.recipe.docker.words())
    assert "HF_HOME" not in words and "NCCL_DEBUG=INFO" in words
    assert any("names a cache folder of the host" in note for note in outcome.notes)


def test_a_one_node_server_keeps_its_rdma_devices_without_the_host_network() -> None:
    outcome = _import("export NCCL_IB_HCA=mlx5_0,mlx5_1\nexport UCX_NET_DEVICES=mlx5_0:1\nMODEL_PATH=org/m\n" + LAUNCH)
    words = outcome.recipe.docker.words()
    assert "--network=host" not in words and "NCCL_IB_HCA=mlx5_0,mlx5_1" in " ".join(words)


def test_an_interface_name_still_needs_the_host_network() -> None:
    outcome = _import("export NCCL_SOCKET_IFNAME=bond0\nMODEL_PATH=org/m\n" + LAUNCH)
    assert "--network=host" in outcome.recipe.docker.words()


def test_rdma_devices_count_for_a_server_spanning_nodes() -> None:
    settings = [("NCCL_IB_HCA", "mlx5_0,mlx5_1"), ("UCX_NET_DEVICES", "mlx5_0:1")]
    assert host_interface_settings(settings, spanning=False) == []
    assert host_interface_settings(settings, spanning=True) == settings


TASK = """resources:
  accelerators: H100:8
  ports: 8000
setup: |
  {setup}
run: |
  python -m sglang.launch_server --model-path org/m --tp-size $SKYPILOT_NUM_GPUS_PER_NODE --port 8000
"""


def test_a_task_whose_setup_installs_the_engine_alone_runs_in_the_engine_s_image() -> None:
    setup = (
        'uv pip install "sglang[all]>=0.4.5" --find-links https://flashinfer.ai/whl/cu124/torch2.5/flashinfer-python'
    )
    outcome = _import(TASK.format(setup=setup), "task.yaml")
    assert outcome.recipe.image.reference == "lmsysorg/sglang:latest"
    assert any("the server runs in sglang's image lmsysorg/sglang:latest" in note for note in outcome.notes)


def test_a_task_whose_setup_installs_more_is_still_refused() -> None:
    message = _refusal(TASK.format(setup="pip install sglang flash-attn"), "task.yaml")
    assert "resources.image_id: not given: the task runs on the VM" in message


def test_a_chart_s_values_kept_under_one_key_are_named_as_values() -> None:
    post = (
        "vllm:\n  image:\n    repository: ghcr.io/acme/vllm\n    tag: v1\n  model: org/m\n  extraArgs:\n"
        '    - "--tensor-parallel-size=8"\n  resources:\n    limits:\n      nvidia.com/gpu: "8"\n'
    )
    message = _refusal(post, "values.yaml")
    assert "a Helm values file of a chart hgxkit has no reader for (vllm.model, resources)" in message


def test_a_template_s_token_is_a_placeholder() -> None:
    assert "__MODEL__ is a placeholder" in _refusal("vllm serve __MODEL__ --port 8000\n")
