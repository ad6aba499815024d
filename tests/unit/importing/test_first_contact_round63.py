"""Classes of import failure found by reading held-out posts 654-677 first (rounds 63-65): a script argument's
default (`MODEL=${1:-org/m}`) said to be a variable the post does not set (658, 669, 670); an assignment of a
quoted value of several words (`EXTRA_ARGS="--a --b 1"`) set aside as prose, so an `if` that sets it was not seen
and an empty earlier value went to the server as an empty argument (669)."""

from __future__ import annotations

import pytest
from test_first_contact_round5 import _import, _refusal


@pytest.mark.parametrize("default", ['${2:-"org/m"}', "${1:-org/m}", "${1-org/m}"])
def test_a_script_argument_s_default_is_the_value_the_script_runs_with(default: str) -> None:
    outcome = _import(f"MODEL={default}\nvllm serve $MODEL --port 8001\n")
    assert outcome.recipe.model.repo_id == "org/m"
    assert any("the default of the script's argument $" in n for n in outcome.notes)


def test_a_script_argument_without_a_default_is_still_not_set() -> None:
    assert "the model '$1' is argument 1 of the script, which the post does not give" in _refusal(
        "MODEL=$1\nvllm serve $MODEL\n"
    )


def test_an_unquoted_variable_of_several_flags_is_those_flags() -> None:
    outcome = _import('EXTRA="--enforce-eager --max-model-len 4096"\nvllm serve org/m $EXTRA\n')
    assert outcome.recipe.server.flag("--max-model-len") == "4096"
    assert ("--enforce-eager",) in outcome.recipe.server.args


def test_an_unquoted_empty_variable_gives_no_argument() -> None:
    outcome = _import('EXTRA=""\nvllm serve org/m $EXTRA --port 8001\n')
    assert "" not in [word for arg in outcome.recipe.server.args for word in arg]
    assert outcome.recipe.server.flag("--port") == "8001"


def test_an_if_that_sets_a_variable_of_several_flags_is_seen() -> None:
    post = 'EXTRA=""\nif [ -n "$Q" ]; then\n    EXTRA="--enable-reasoning --reasoning-parser qwen3"\nfi\nvllm serve org/m $EXTRA\n'
    assert "$EXTRA is set inside an `if` block" in _refusal(post)


@pytest.mark.parametrize(
    ("post", "named"),
    [
        ("CUDA_VISIBLE_DEVICES=0,1 swift deploy --model Qwen/Qwen2.5-7B --infer_backend vllm\n", "swift deploy"),
        (
            "API_PORT=8000 llamafactory-cli api examples/inference/qwen3.yaml infer_backend=vllm\n",
            "llamafactory-cli api",
        ),
        ("CUDA_VISIBLE_DEVICES=0 axolotl vllm-serve config.yaml\n", "axolotl vllm-serve"),
    ],
)
def test_a_fine_tuning_toolkit_s_own_server_is_named(post: str, named: str) -> None:
    message = _refusal(post)
    assert f"`{named}`" in message and "is not supported yet" in message and "vllm serve" in message


@pytest.mark.parametrize("launch", ["vllm serve --help", "python3 -m vllm.entrypoints.api_server --help || true"])
def test_a_launch_that_asks_for_its_help_serves_nothing(launch: str) -> None:
    assert "no serving command found" in _refusal(f"pip install vllm\n{launch}\n")


def test_an_empty_model_is_said_to_be_empty() -> None:
    message = _refusal('MODEL_NAME=\nvllm serve --model "$MODEL_NAME" --port 8000\n')
    assert "the server command's model (--model) is empty: the post sets it to nothing" in message


def test_a_quoted_value_of_several_words_may_use_the_post_s_variables() -> None:
    outcome = _import('M=org/m\nARGS="--model $M --port 8001"\nvllm serve $ARGS\n')
    assert outcome.recipe.model.repo_id == "org/m" and outcome.recipe.server.flag("--port") == "8001"


@pytest.mark.parametrize("prefix", ["HF_TOKEN=$HF_TOKEN", "TOKEN=$HF_TOKEN"])
def test_a_secret_passed_on_in_a_launch_s_prefix_stays_as_written(prefix: str) -> None:
    # as written, so `recipe import` refuses it for the node's shell to expand (its check of the recipe), never a
    # value written in, and no traceback
    outcome = _import(f"{prefix} vllm serve org/m\n")
    assert f"-e {prefix}" in [" ".join(e.words) for e in outcome.recipe.docker.entries]
