"""Classes of import failure found by reading posts 235-244 first (round 10): a `# cmd` line in a post of nothing
but shell (a script without its `#!` line) taken for a root prompt, so a commented-out launch of another engine
refused the post; a Dockerfile whose exec-form `CMD` gives its arguments to a server image's own entrypoint
(`FROM vllm/vllm-openai` with `CMD ["--model", …]`) refused as leaving the command to an unknown entrypoint; a
`<placeholder>` written in a non-Latin script (`<모델>`, `<模型路径>`) read as two redirections and dropped, so the
command was refused for something after it; a bare `(` in a command (prose in parentheses) named a command
substitution; and (beside 240, a SkyServe template) a YAML file that does not parse because a line is only a
template's placeholder (`{region_block}`) told to drop merge-conflict markers or tabs."""

from __future__ import annotations

import pytest
from test_first_contact_round5 import _import, _refusal  # the same helpers: import a post, its one-line refusal

SCRIPT = """CUDA_VISIBLE_DEVICES=4,5,6,7 vllm serve /models/m \\
--tensor-parallel-size 4 \\
--port 8000

# CUDA_VISIBLE_DEVICES=0,1,2,3 lmdeploy serve api_server /models/n --tp 4 --server-port 8000
"""


def test_a_commented_launch_in_a_post_of_nothing_but_shell_is_a_comment() -> None:
    recipe = _import(SCRIPT, "deploy.txt").recipe
    assert recipe.server.flag("--tensor-parallel-size") == "4"


def test_a_root_prompt_beside_prose_is_still_read() -> None:
    post = "Run this as root:\n\n# vllm serve org/m --port 8000\n"
    assert _import(post, "post.md").recipe.server.flag("--port") == "8000"


def test_a_post_of_root_prompt_lines_only_is_still_read() -> None:
    assert _import("# vllm serve org/m --port 8000\n", "post.md").recipe.server.flag("--port") == "8000"


DOCKERFILE = """FROM  vllm/vllm-openai:latest
ENV HUGGING_FACE_HUB_TOKEN=hf_XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX
EXPOSE 8000
CMD ["--host", "0.0.0.0", "--model", "org/m", "--tensor_parallel_size", "4", "--max-model-len", "8128"]
"""


def test_an_exec_form_cmd_on_a_server_image_is_its_entrypoints_arguments() -> None:
    outcome = _import(DOCKERFILE, "Dockerfile")
    recipe = outcome.recipe
    assert recipe.image.reference == "vllm/vllm-openai:latest"
    assert recipe.server.flag("--max-model-len") == "8128"
    assert any("CMD read as the arguments of the FROM image's entrypoint" in note for note in outcome.notes)
    assert not any("hf_XXXX" in note for note in outcome.notes)


def test_a_cmd_on_an_image_whose_entrypoint_is_unknown_is_still_refused() -> None:
    post = 'FROM nvidia/cuda:12.4.0-runtime-ubuntu22.04\nCMD ["--model", "org/m"]\n'
    assert "gives no ENTRYPOINT" in _refusal(post, "Dockerfile")


def test_a_shell_form_cmd_on_a_server_image_is_still_refused() -> None:
    post = "FROM vllm/vllm-openai:latest\nCMD vllm serve org/m\n"
    assert "gives no ENTRYPOINT" in _refusal(post, "Dockerfile")


@pytest.mark.parametrize("placeholder", ["<모델>", "<模型路径>", "<モデル>", "<Modèle>"])
def test_a_placeholder_in_any_script_is_named(placeholder: str) -> None:
    refusal = _refusal(f"vllm serve {placeholder} --port 8000\n")
    assert f"{placeholder} is a placeholder" in refusal


def test_a_prose_definition_line_names_its_placeholder_before_its_parentheses() -> None:
    post = "vllm serve <모델>: 해당 모델을 서버로 띄웁니다. (기본 엔드포인트: /v1/completions)\n"
    assert "<모델> is a placeholder" in _refusal(post)


def test_a_bare_parenthesis_is_not_called_a_command_substitution() -> None:
    refusal = _refusal("vllm serve org/m --port 8000 (see below)\n")
    assert "command substitution" not in refusal
    assert "'('" in refusal


def test_a_command_substitution_is_still_named_as_written() -> None:
    assert "`$(pwd)` (the value of --x) is a command substitution" in _refusal("vllm serve org/m --x $(pwd)\n")


TEMPLATE = """resources:
  accelerators: "{gpu}:{gpu_count}"
  ports: {port}
{region_block}

run: |
  {vllm_cmd}
"""


def test_a_yaml_template_with_a_placeholder_line_is_named_as_a_template() -> None:
    refusal = _refusal(TEMPLATE, "task.yaml")
    assert "line 4: {region_block} is a template's placeholder on a line of its own" in refusal
    assert "merge-conflict" not in refusal
