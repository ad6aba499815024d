"""Classes of import failure found by reading held-out posts 678-725 first (rounds 66-71): a launch under `pixi run`
or `conda run -n ENV` refused as an unknown program where `uv run` is read (683); a `user@host:/dir# ` prompt before
`source …` kept, so the line read as a lost continuation (693); a `docker run … serve --help=all` install check
counted as a serving command (695); a bind mount from `$HOME/…` passed to the recipe, which then did not load
(695); a Jetson's L4T-tagged image not named when the post also says `--gpus all` (691); a devcontainer.json not
named (681); inline code that only names a program (`vllm serve`, `ray start`) in a prose bullet read as a
command (627, 674, 710); a wrapper script for setup named before the one that starts the server (674); `vllm --model`
without `serve` not named (672); a page's `$ ` prompt on every continuation line kept as words (719)."""

from __future__ import annotations

import pytest
from test_first_contact_round5 import _import, _refusal


@pytest.mark.parametrize("runner", ["pixi run", "poetry run", "conda run -n vllm", "micromamba run -n vllm"])
def test_an_environment_runner_is_dropped_with_a_note(runner: str) -> None:
    outcome = _import(f"{runner} vllm serve org/m --port 8001\n")
    assert outcome.recipe.model.repo_id == "org/m"
    assert any(f"`{runner}` dropped" in note for note in outcome.notes)


def test_a_host_prompt_before_any_command_is_a_prompt() -> None:
    post = (
        "```\n$ docker run --rm -it --gpus all --entrypoint /bin/bash vllm/vllm-openai:v0.9.0\n"
        "root@2c312c3a8ce2:/workspace# source /opt/venv/bin/activate\n```\n"
    )
    refusal = _refusal(post, name="post.md")
    assert "the container runs `/bin/bash`" in refusal
    assert "continuation backslash" not in refusal


@pytest.mark.parametrize("flag", ["--help", "--help=all"])
def test_a_docker_run_asking_for_help_serves_nothing(flag: str) -> None:
    post = (
        f"docker run --rm --entrypoint vllm vllm/vllm-openai:v0.9.0 serve {flag}\n\n"
        "docker run --gpus all vllm/vllm-openai:v0.9.0 --model org/m --max-model-len 4096\n"
    )
    assert _import(post).recipe.server.flag("--max-model-len") == "4096"


@pytest.mark.parametrize("source", ["$HOME/adapters", "${HOME}/adapters", "$PWD/adapters"])
def test_a_mount_from_the_poster_s_home_or_folder_is_refused_at_its_line(source: str) -> None:
    refusal = _refusal(f"docker run --gpus all -v {source}:/adapters vllm/vllm-openai:v0.9.0 --model org/m\n")
    assert "line 1, column" in refusal and "is not a fixed directory" in refusal


def test_a_jetson_image_is_named_though_the_post_says_gpus_all() -> None:
    refusal = _refusal("docker run -it --gpus all vllm:r38.2.aarch64-cu130-24.04-vllm vllm serve org/m\n")
    assert "NVIDIA Jetson" in refusal


def test_a_word_that_holds_tegra_is_no_jetson() -> None:
    outcome = _import("vllm serve org/m --port 8001\npython tests/v1/kv_connector/nixl_integration/toy_proxy.py\n")
    assert outcome.recipe.model.repo_id == "org/m"


DEV_CONTAINER = '{\n  "build": {\n    "dockerfile": "Dockerfile"\n  },\n  "postStartCommand": "vllm serve org/m"\n}\n'


def test_a_dev_container_built_from_a_dockerfile_is_named() -> None:
    refusal = _refusal(DEV_CONTAINER, name="devcontainer.json")
    assert (
        "a Dev Container (devcontainer.json) whose image is built from Dockerfile" in refusal and "--image" in refusal
    )


@pytest.mark.parametrize("span", ["`vllm serve`", "`ray start`", "`python3 -m vllm.entrypoints.openai.api_server`"])
def test_inline_code_that_only_names_a_program_is_prose(span: str) -> None:
    post = f"# Changelog\n\n- The entrypoint now uses {span} to start the server.\n"
    assert "no serving command found" in _refusal(post, name="CHANGELOG.md")


def test_a_script_named_for_the_server_is_named_first() -> None:
    post = "```\n./container/run_in_container.sh --setup\n./container/run_vllm_server.sh org/m\n```\n"
    assert "runs the script `./container/run_vllm_server.sh`" in _refusal(post, name="README.md")


def test_vllm_given_options_and_no_subcommand_is_named() -> None:
    refusal = _refusal("vllm --model org/m \\\n     --port 8000\n")
    assert "line 1, column 1: `vllm` is given options but no subcommand" in refusal


def test_a_prompt_on_each_continuation_line_is_a_prompt() -> None:
    post = "```\n$ vllm serve org/m \\\n$     --max-model-len 4096 \\\n$     --port 8001\n```\n"
    outcome = _import(post, name="README.md")
    assert outcome.recipe.server.flag("--max-model-len") == "4096" and outcome.recipe.server.flag("--port") == "8001"


@pytest.mark.parametrize("image", ["nvcr.io/nvidia/sglang:xx.yy-py3", "my-registry/sglang:0.5.11"])
def test_an_image_left_for_the_reader_is_a_placeholder(image: str) -> None:
    assert "placeholder" in _refusal(
        f"docker run --gpus all {image} python3 -m sglang.launch_server --model-path org/m\n"
    )


def test_the_container_a_launch_runs_in_is_checked_for_placeholders() -> None:
    post = "```\ndocker run --gpus all -it --rm nvcr.io/nvidia/sglang:xx.yy-py3\n```\n\n```\npython3 -m sglang.launch_server --model-path org/m --tp 1\n```\n"
    refusal = _refusal(post, name="page.md")
    assert "whose image nvcr.io/nvidia/sglang:xx.yy-py3 holds the placeholder xx.yy" in refusal


def test_a_beam_app_is_named_as_modal_s_is() -> None:
    post = (
        "from beam import Image, Pod\n\nserver = Pod(\n    gpu='A100-80',\n    entrypoint=['python', '-m', "
        "'sglang.launch_server', '--model-path', 'org/m', '--port', '8080'],\n)\n"
    )
    assert "a Beam app (beam.cloud) builds its image and the engine's command" in _refusal(post, "app.py")


@pytest.mark.parametrize("runner", ["uv run -n", "uv run --no-cache", "conda run -n vllm -p /opt/env"])
def test_each_runner_s_options_are_its_own(runner: str) -> None:
    """uv's `-n` is a switch (--no-cache), conda's `-n` takes the environment's name."""
    assert _import(f"{runner} vllm serve org/m --port 8001\n").recipe.model.repo_id == "org/m"


def test_the_image_s_placeholder_version_can_be_filled() -> None:
    post = "docker run --gpus all nvcr.io/nvidia/sglang:xx.yy-py3 python3 -m sglang.launch_server --model-path org/m\n"
    assert _import(post, fill=(("xx.yy", "25.10"),)).recipe.image.reference == "nvcr.io/nvidia/sglang:25.10-py3"
