"""Classes of import failure found by reading held-out posts 606-621 first (rounds 57 and 58): a paste site's line
numbers before each line (`  1. `), which hid the launch (610); a GGUF repository (a file per quantization, none
chosen) placed whole as a model (613, imported wrong at exit 0)."""

from __future__ import annotations

import pytest
from test_first_contact_round5 import _import, _refusal


@pytest.mark.parametrize("gutter", ["{n}. ", "{n}: ", "{n} | ", "{n}\t"])
def test_a_paste_site_s_line_numbers_are_blanked(gutter: str) -> None:
    lines = ["$ vllm serve org/m \\", "    --port 8123 \\", "    --tensor-parallel-size 2", "INFO ready"]
    post = "\n".join(gutter.format(n=n) + line for n, line in enumerate(lines, 1)) + "\n"
    outcome = _import(post)
    assert outcome.recipe.server.flag("--port") == "8123"
    assert any("the line numbers a paste site or an editor's copy put before each line" in n for n in outcome.notes)


def test_a_numbered_list_of_two_items_is_left_as_it_is() -> None:
    post = "1. vllm serve org/m --port 8001\n2. curl localhost:8001/v1/models\n"  # a list, not a numbered copy
    assert "no serving command found" in _refusal(post)
    assert _import(post.replace("2.", "2. x\n3.")).recipe.server.flag("--port") == "8001"


@pytest.mark.parametrize("model", ["unsloth/DeepSeek-R1-GGUF", "bartowski/Qwen3-8B-gguf"])
def test_a_gguf_repository_is_named(model: str) -> None:
    message = _refusal(f"docker run --gpus all -p 8000:8000 vllm/vllm-openai:latest --model {model}\n")
    assert f"the model {model} is a GGUF repository" in message and "--model-repo ORG/NAME" in message


def test_an_exec_form_entrypoint_that_runs_a_shell_string_is_that_string() -> None:
    post = (
        "FROM vllm/vllm-openai:latest\nENV MODEL_NAME=org/m\nENV PORT=8123\n"
        'ENTRYPOINT ["bash","-lc","python3 -m vllm.entrypoints.openai.api_server --model ${MODEL_NAME} --port ${PORT}"]\n'
    )
    outcome = _import(post, "Dockerfile")
    assert outcome.recipe.model.repo_id == "org/m" and outcome.recipe.server.flag("--port") == "8123"
