"""Classes of import failure found by reading held-out posts 331-338 first (round 22), both imported wrong at exit 0:
a model id the server downloads from ModelScope (`VLLM_USE_MODELSCOPE=True`) placed as a Hugging Face repo (post
333); an image named after an engine with no registry or namespace, a local build's name, pulled as it is (334)."""

from __future__ import annotations

import pytest
from test_first_contact_round5 import _import, _refusal

RUN = "docker run --gpus all {env}vllm/vllm-openai:v0.33.0 --model {model}\n"


@pytest.mark.parametrize("value", ["True", "true", "1"])
def test_a_modelscope_model_id_is_refused_with_the_way_out(value: str) -> None:
    message = _refusal(RUN.format(env=f"-e VLLM_USE_MODELSCOPE={value} ", model="swift/Qwen3-30B-A3B-AWQ"))
    assert "downloads swift/Qwen3-30B-A3B-AWQ from ModelScope" in message and "--model-repo" in message


def test_a_bare_sglang_launch_with_modelscope_is_refused_too() -> None:
    message = _refusal("SGLANG_USE_MODELSCOPE=true python -m sglang.launch_server --model-path qwen/Qwen3-8B\n")
    assert "SGLANG_USE_MODELSCOPE=true" in message


def test_modelscope_off_a_folder_or_a_hub_repo_given_imports() -> None:
    assert _import(RUN.format(env="-e VLLM_USE_MODELSCOPE=False ", model="org/m")).recipe.model.repo_id == "org/m"
    post = "docker run --gpus all -e VLLM_USE_MODELSCOPE=1 -v /srv/m:/m vllm/vllm-openai:v0.33.0 --model /m\n"
    assert _import(post).recipe.server.flag("--model") == "/m"
    given = _import(RUN.format(env="-e VLLM_USE_MODELSCOPE=1 ", model="swift/Q"), model_repo="Qwen/Qwen3-8B")
    assert given.recipe.model.repo_id == "Qwen/Qwen3-8B"


@pytest.mark.parametrize("image", ["vllm-node-tf5:latest", "sglang:latest", "my_vllm"])
def test_an_engine_named_image_with_no_registry_is_a_local_build(image: str) -> None:
    message = _refusal(f"docker run --gpus all {image} vllm serve org/m\n")
    assert "the name of a local build" in message and "--image" in message


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.33.0", "localhost:5000/vllm:1", "registry.local/team/vllm:2"])
def test_an_image_with_a_registry_or_namespace_is_pulled_as_it_is(image: str) -> None:
    outcome = _import(f"docker run --gpus all {image} vllm serve org/m\n", kind="vllm")
    assert outcome.recipe.image.reference == image


@pytest.mark.parametrize("folder", ["[模型目录]", "[model_dir]", "[your-models]"])
def test_a_bracketed_folder_of_a_path_is_a_placeholder_fill_writes(folder: str) -> None:
    post = f"vllm serve /{folder}/Qwen3-32B --port 8001\n"
    assert f"{folder} is a placeholder" in _refusal(post)
    filled = _import(post, fill=((folder, "/data/models"),))
    assert "/data/models/Qwen3-32B" in " ".join(filled.recipe.docker.words())


@pytest.mark.parametrize("value", ["/srv/m/[1,2]/x", "/srv/[0-9]/m", "'[1, 2]'"])
def test_brackets_that_are_not_a_named_folder_are_no_placeholder(value: str) -> None:
    from hgxkit.importing.fill import FILL_IN

    assert FILL_IN.search(value) is None
