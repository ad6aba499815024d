"""Classes of import failure found by reading held-out posts 574-589 first (rounds 53 and 54): a folder's word
where a Hub id's org goes (`mypath/DeepSeek-V3.2`) placed as a Hub repository (574, imported wrong at exit 0); a
misspelt vLLM flag refused without its nearest option (577); a block of numbers matched to the benchmark command
just before it although its requests are another's, and one printed under a server `--pick` set aside taken
(579); compose's `pull_policy:` refused (582); `--gpus 0`, a count of no GPU, kept without a word (584)."""

from __future__ import annotations

import pytest
from test_first_contact_round5 import _import, _refusal


@pytest.mark.parametrize("model", ["mypath/DeepSeek-V3.2", "models/Qwen3-8B", "checkpoints/run-1"])
def test_a_folder_s_word_where_the_org_goes_is_a_local_path(model: str) -> None:
    message = _refusal(f"vllm serve {model} --tensor-parallel-size 8\n")
    assert f"the model '{model}' is a local path ({model.split('/')[0]}/ is a folder's name, not a Hub org)" in message
    assert "--model-repo ORG/NAME" in message


def test_a_misspelt_vllm_flag_names_the_nearest_option() -> None:
    message = _refusal("vllm serve org/m --enable-chuncked-prefill\n")
    assert "the nearest option is `--enable-chunked-prefill`" in message


def test_the_image_s_entrypoint_is_named_where_two_launches_differ_in_program() -> None:
    message = _refusal("vllm serve org/m\n\npython3 -m sglang.launch_server --model-path org/m\n")
    assert "server (program): (the image's entrypoint) (line 1) vs python3 -m sglang.launch_server" in message


BLOCK = """============ Serving Benchmark Result ============
Successful requests:                     {n}
Benchmark duration (s):                  10.0
Total input tokens:                      {tokens}
Request throughput (req/s):              {rate}
==================================================
"""
BENCHES = (
    "vllm bench serve --model org/m --dataset-name sharegpt --dataset-path s.json --num-prompts 1000\n\n"
    "vllm bench serve --model org/m --dataset-name random --random-input-len 4000 --random-output-len 200 "
    "--num-prompts 500\n\n"
)


def test_a_block_whose_requests_are_the_other_command_s_is_taken_for_that_cell() -> None:
    post = BENCHES + "vllm serve org/m\n\n" + BLOCK.format(n=1000, tokens=217393, rate=15.7)
    outcome = _import(post)
    (cell,) = outcome.recipe.reference.cells
    assert cell.cell.id == "sharegpt@inf" and cell.request_throughput == 15.7
    assert any("not of the one just before it" in note for note in outcome.notes)


def test_a_block_under_a_server_the_pick_set_aside_is_set_aside() -> None:
    post = (
        BENCHES
        + "vllm serve org/m\n\n"
        + BLOCK.format(n=1000, tokens=217393, rate=15.7)
        + "\npython3 -m sglang.launch_server --model-path org/m\n\n"
        + BLOCK.format(n=1000, tokens=217393, rate=20.1)
    )
    outcome = _import(post, pick=1)
    (cell,) = outcome.recipe.reference.cells
    assert cell.request_throughput == 15.7
    assert any("printed under the server at post.sh:" in note for note in outcome.notes)


def test_compose_s_pull_policy_is_a_note() -> None:
    post = (
        "services:\n  vllm:\n    image: vllm/vllm-openai:v0.33.0\n    pull_policy: always\n"
        "    command: --model org/m\n    ports:\n      - 8000:8000\n"
    )
    assert _import(post, "compose.yaml").recipe.image.reference == "vllm/vllm-openai:v0.33.0"


def test_gpus_0_is_named_as_a_count_of_no_gpu() -> None:
    post = (
        "CUDA_VISIBLE_DEVICES=0\ndocker run --gpus $CUDA_VISIBLE_DEVICES -p 8000:8000 vllm/vllm-openai:v0.33.0 org/m\n"
    )
    assert "--gpus 0 gives the container no GPU" in _refusal(post)
