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


def test_a_benchmark_whose_line_wrapped_is_set_aside_and_the_server_imported() -> None:
    post = (
        "vllm serve org/m --port 8806\n\nbenchmark:\n"
        "vllm bench serve --port 8806 --dataset-name random --num-prompts 32 --model /models/Qwen3-2\n"
        "35B-A22B --ignore-eos\n"
    )
    outcome = _import(post)
    assert outcome.recipe.server.flag("--port") == "8806" and outcome.recipe.matrix is None
    assert any("'35B-A22B' at line 5 reads as its continuation" in part for part in outcome.set_aside)


COMPOSE = """services:
  ocr:
    image: vllm/vllm-openai:v0.33.0
    environment:
      - PYTHONPATH=/workspace/weights:$PYTHONPATH
    ports:
      - 8000:8000
    command: {command}
"""


def test_a_variable_that_appends_to_itself_is_the_empty_shell_value_compose_reads() -> None:
    outcome = _import(COMPOSE.format(command="--model org/m"), "compose.yaml")
    assert "PYTHONPATH=/workspace/weights:" in outcome.recipe.docker.words()
    assert any("in PYTHONPATH's own value is the PYTHONPATH of the shell that runs compose" in n for n in outcome.notes)


def test_a_script_that_patches_the_engine_names_its_first_step() -> None:
    script = '["-c", "set -ex\\nsed -i s/a/b/ $(which vllm)\\nexec vllm serve org/m"]'
    post = COMPOSE.format(command=script).replace("    command:", "    entrypoint: /bin/bash\n    command:")
    assert "runs a script, not one server command: it runs `sed -i s/a/b/ $(which vllm)` besides" in _refusal(
        post, "compose.yaml"
    )


def test_a_mount_of_root_s_whole_cache_is_dropped_for_a_placed_model() -> None:
    post = "docker run --gpus all -v ./cache:/root/.cache -p 8000:8000 vllm/vllm-openai:v0.33.0 --model org/m\n"
    outcome = _import(post)
    assert "./cache:/root/.cache" not in outcome.recipe.docker.words()
    assert any("the mount ./cache:/root/.cache is dropped" in note for note in outcome.notes)
