"""Classes of import failure found by reading held-out posts 449-472 first (rounds 37-39): a KV cache connector
with kv_both taken for a prefill/decode side (457, 464) and one vLLM does not register kept (464); the poster's
own address as `--host` and a container that asks for no GPU kept (459); vLLM's demo server not named (451); a
one-host `ray start --head` refused as half a cluster (449); a size left to an unset variable called no number; a
secret's `<placeholder>` read as redirections (465), a TP-4 container left
Docker's 64 MB of /dev/shm (467)."""

from __future__ import annotations

import pytest
from test_first_contact_round5 import _import, _refusal

from hgxkit.kinds.options import VLLM_OPTIONS

LMCACHE = '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'
NIXL = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'


def test_a_kv_both_cache_connector_is_a_server_that_does_both() -> None:
    outcome = _import(f"vllm serve org/m --port 8000 --kv-transfer-config '{LMCACHE}'\n")
    words = outcome.recipe.docker.words()
    assert "-p" in words and "--network=host" not in words
    assert not any("a prefill/decode side" in note for note in outcome.notes)


def test_a_kv_both_nixl_server_is_still_a_side() -> None:
    outcome = _import(f"vllm serve org/m --port 8000 --kv-transfer-config '{NIXL}'\n")
    assert "--network=host" in outcome.recipe.docker.words()


def test_a_kv_connector_vllm_does_not_register_is_refused_by_name() -> None:
    config = '{"kv_connector":"AIBrixOffloadingConnectorV1Type1","kv_role":"kv_both"}'
    message = _refusal(f"vllm serve org/m --port 8000 --kv-transfer-config '{config}'\n")
    assert "kv_connector AIBrixOffloadingConnectorV1Type1 is not registered in vLLM 0.33" in message
    assert "--image REF" in message and "kv_connector_module_path" in message


def test_a_connector_value_nested_past_the_json_parser_s_depth_is_no_traceback() -> None:
    nested = '{"a":' * 50_000 + "1" + "}" * 50_000
    assert VLLM_OPTIONS.value_choice([("--kv-transfer-config", nested)], "vllm/vllm-openai:latest") is None


def test_a_connector_from_a_module_of_its_own_is_left_to_it() -> None:
    config = '{"kv_connector":"MyConnector","kv_connector_module_path":"my.module","kv_role":"kv_both"}'
    outcome = _import(f"vllm serve org/m --port 8000 --kv-transfer-config '{config}'\n")
    assert outcome.recipe.server.flag("--kv-transfer-config") == config


COMPOSE = """services:
  s:
    image: lmsysorg/sglang:v0.5.0rc1-cu126
    network_mode: host
    environment:
      - CUDA_VISIBLE_DEVICES=4,5,6,7
    entrypoint: python3 -m sglang.launch_server
    command: |
      --model-path org/m
      --host 192.168.10.87
      --port 8012
      --tp-size 4
"""


def test_the_poster_s_address_and_a_container_without_gpus() -> None:
    outcome = _import(COMPOSE, "compose.yaml")
    assert outcome.recipe.server.flag("--host") == "0.0.0.0"
    assert outcome.recipe.docker.last("--gpus") == "all"
    assert any("--host 192.168.10.87 became 0.0.0.0" in note for note in outcome.notes)
    assert any("asks for no GPU" in note for note in outcome.notes)


@pytest.mark.parametrize("request_", ["--gpus all", "--runtime nvidia", "--gpus '\"device=0,1\"'"])
def test_a_container_that_asks_for_gpus_is_left_as_it_asks(request_: str) -> None:
    outcome = _import(f"docker run {request_} -p 8000:8000 vllm/vllm-openai:v0.33.0 --model org/m\n")
    assert not any("asks for no GPU" in note for note in outcome.notes)


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0", "node-a"])
def test_a_host_that_is_no_machine_s_address_is_kept(host: str) -> None:
    post = (
        f"docker run --gpus all --network host lmsysorg/sglang:v0.5.23 sglang serve --model-path org/m --host {host}\n"
    )
    assert _import(post).recipe.server.flag("--host") == host


def test_vllm_s_demo_server_is_named() -> None:
    message = _refusal("python3 -m vllm.entrypoints.api_server --model org/m --tensor-parallel-size 2\n")
    assert "vLLM's demo API server" in message and "vllm serve" in message


def test_a_one_host_ray_head_is_set_aside() -> None:
    post = "ray start --head\nvllm serve org/m --data-parallel-size 8 --distributed-executor-backend ray\n"
    outcome = _import(post)
    assert "--network=host" not in outcome.recipe.docker.words()
    assert any("with no worker is one host's Ray; set aside" in note for note in outcome.notes)


def test_a_size_left_to_an_unset_variable_is_named_as_one() -> None:
    message = _refusal("vllm serve org/m --port 8000 --tensor-parallel-size $TP\n")
    assert "--tensor-parallel-size $TP: a variable the post does not set" in message


def test_a_secret_s_angled_placeholder_is_taken_from_the_environment() -> None:
    post = "docker run --gpus all -p 8000:8000 -e HF_TOKEN=<your_hf_token> vllm/vllm-openai:v0.33.0 --model org/m\n"
    words = " ".join(_import(post).recipe.docker.words())
    assert "your_hf_token" not in words and "HF_TOKEN" in words


def test_several_gpus_get_shared_memory() -> None:
    post = "docker run --gpus all -p 8000:8000 vllm/vllm-openai:v0.33.0 --model org/m --tensor-parallel-size 4\n"
    outcome = _import(post)
    assert "--ipc=host" in outcome.recipe.docker.words()
    assert any("--ipc=host added: 4 GPUs' ranks" in note for note in outcome.notes)
    sized = post.replace("--gpus all", "--gpus all --shm-size 16g")
    assert "--ipc=host" not in _import(sized).recipe.docker.words()
