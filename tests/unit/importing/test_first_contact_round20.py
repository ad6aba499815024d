"""Classes of import failure found by reading held-out posts 315-322 first (round 20): a launch after `exec` not
read as a launch (post 321); a flag's value that is the option's own name (`--model-path path`, `--port port`)
taken as a local model, not named as a placeholder (320); a served model name starting with `/` refused although
vLLM takes any string, and a command cut inside its last flag where the post ends imported (322)."""

from __future__ import annotations

import pytest
from test_first_contact_round5 import _import, _refusal


def test_a_launch_after_exec_is_the_launch() -> None:
    outcome = _import("exec vllm serve org/m --port 8001\n")
    assert outcome.recipe.server.flag("--port") == "8001"
    assert any("`exec` dropped" in note for note in outcome.notes)


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        ("--model-path path --port 30000", "path is a placeholder"),
        ("--model-path org/m --port port", "port is a placeholder"),
        ("--model-path org/m --served-model-name model_name", "model_name is a placeholder"),
    ],
)
def test_a_value_that_is_its_options_own_name_is_a_placeholder(flags: str, named: str) -> None:
    message = _refusal(f"python -m sglang.launch_server {flags}\n")
    assert named in message and "write its value" in message


@pytest.mark.parametrize("flags", ["--served-model-name model", "--dtype auto", "--load-format safetensors"])
def test_a_value_that_only_shares_a_word_with_its_option_is_kept(flags: str) -> None:
    flag, value = flags.split()
    assert _import(f"vllm serve org/m {flags}\n").recipe.server.flag(flag) == value


def test_a_served_model_name_may_be_a_path() -> None:
    outcome = _import("vllm serve org/m --served-model-name /models/m\n")
    assert outcome.recipe.server.flag("--served-model-name") == "/models/m"


def test_a_flag_cut_where_the_post_ends_is_refused_naming_the_option_it_starts() -> None:
    message = _refusal("```\ndocker run --gpus all vllm/vllm-openai:nightly --model org/m --disable-hybr\n")
    assert "`--disable-hybr` ends the post" in message and "--disable-hybrid-kv-cache-manager" in message


def test_a_flag_start_followed_by_more_of_the_post_is_left_to_the_engine_judgement() -> None:
    post = "docker run --gpus all vllm/vllm-openai:nightly --model org/m --disable-hybr\n\nIt crashes.\n"
    assert "--disable-hybr" in _import(post).recipe.server.words()  # an image of another version: not judged


DSTACK_PAGE = """Define a configuration

type: service
name: llama

image: vllm/vllm-openai:v0.33.0
commands:
  - vllm serve org/m
    --max-model-len 4096
port: 8000

resources:
  gpu: H200:1

Run it with dstack apply.
"""


def test_a_dstack_configuration_pasted_without_a_fence_is_read() -> None:
    outcome = _import(DSTACK_PAGE, "page.md")
    assert outcome.recipe.image.reference == "vllm/vllm-openai:v0.33.0"
    assert outcome.recipe.server.flag("--max-model-len") == "4096"


def test_prose_with_a_type_line_is_no_dstack_file() -> None:
    assert "no serving command found" in _refusal("type: service\nname: x\n\nThe rest is prose.\n", "page.md")


def test_a_manifest_cut_where_the_post_ends_is_refused_as_cut() -> None:
    post = 'Mine:\n```\napiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: v\n    image: "vllm/vllm\n'
    message = _refusal(post, "issue.md")
    assert "the copy is cut" in message and "line 8, column" in message


def test_a_closed_fence_that_is_not_yaml_is_still_read_as_text() -> None:
    post = "```\napiVersion: v1\nkind: [\n```\n\nvllm serve org/m\n"
    assert _import(post, "issue.md").recipe.server.words()[0] == "--model"
