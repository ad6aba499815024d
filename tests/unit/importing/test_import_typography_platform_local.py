"""Posts imported wrong at exit 0 before: typographic dashes, quotes and spaces in commands; setups for other
accelerators; local model directories taken for Hub repositories. Each class by each of its spellings."""

from __future__ import annotations

from pathlib import Path

import pytest

from hgxkit.errors import InputError
from hgxkit.importing.importer import ImportOptions, import_post
from hgxkit.importing.outcome import ImportOutcome
from hgxkit.importing.platform import _SIGNS

POSTS = Path(__file__).resolve().parents[2] / "fixtures" / "posts"


def imported(text: str, **options: object) -> ImportOutcome:
    return import_post([("post.md", text)], ImportOptions(**options))  # type: ignore[arg-type]


def refused(text: str, **options: object) -> str:
    with pytest.raises(InputError) as caught:
        imported(text, **options)
    message = caught.value.message
    assert "\n" not in message and message.startswith("post.md")
    return message


# --- typography ---


@pytest.mark.parametrize(
    "dash", ["\u2014", "\u2013", "\u2014-", "\u2013-", "-\u2014", "\u2212\u2212", "\u2015"], ids=repr
)
def test_a_typographic_dash_before_an_option_is_read_as_its_dashes(dash: str) -> None:
    outcome = imported(f"vllm serve org/Model-7B {dash}tensor-parallel-size 4 --port 8001\n")
    assert outcome.recipe.server.flag("--tensor-parallel-size") == "4"
    assert any("post.md:1: typographic dash" in note for note in outcome.notes)


def test_the_ray_setup_keeps_its_32_gpus() -> None:
    post = (
        "# head\nray start --head --port=6379\n# every other node\nray start --address=10.0.0.1:6379\n# head\n"
        "vllm serve org/Big \u2014tensor_parallel_size 16 \u2014-pipeline_parallel_size 2\n"
    )
    outcome = imported(post)
    assert outcome.recipe.server.flag("--tensor-parallel-size") == "16"
    assert outcome.recipe.server.flag("--pipeline-parallel-size") == "2"
    assert outcome.recipe.node_count() == 4


def test_a_dash_inside_a_value_is_refused_naming_the_line() -> None:
    message = refused("\nvllm serve org/Llama\u20138B --port 8001\n")
    assert "line 2, column" in message and "- or --" in message


def test_a_lone_dash_word_is_refused() -> None:
    assert "line 1" in refused("vllm serve org/M \u2014 --port 8001\n")


def test_prose_keeps_its_dashes() -> None:
    outcome = imported("Serve it \u2014 like this:\n\n```\nvllm serve org/M --port 8001\n```\n")
    assert not any("dash" in note for note in outcome.notes)


@pytest.mark.parametrize("pair", ["\u201c\u201d", "\u201e\u201d", "\u2018\u2019"], ids=repr)
def test_paired_smart_quotes_are_plain_quotes(pair: str) -> None:
    post = f"docker run --gpus all -e {pair[0]}HF_TOKEN=x{pair[1]} vllm/vllm-openai:v0.33.0 --model org/M --served-model-name 'a'\n"
    outcome = imported(post)
    assert any("smart quotes read as plain" in note for note in outcome.notes)
    assert "HF_TOKEN" in " ".join(outcome.recipe.docker.words())


def test_a_smart_quote_that_does_not_pair_is_refused() -> None:
    message = refused("vllm serve org/M --served-model-name \u201cm --port 8001\n")
    assert "line 1, column 38" in message and "does not pair" in message


@pytest.mark.parametrize("space", ["\u00a0", "\u2009", "\u202f", "\u3000"], ids=repr)
def test_unicode_spaces_are_spaces(space: str) -> None:
    outcome = imported(f"vllm serve org/M{space}--tensor-parallel-size{space}2\n")
    assert outcome.recipe.server.flag("--tensor-parallel-size") == "2"
    assert any("Unicode space" in note for note in outcome.notes)


@pytest.mark.parametrize("mark", ["\u200b", "\u200d", "\u2060", "\ufeff"], ids=repr)
def test_zero_width_characters_are_removed(mark: str) -> None:
    outcome = imported(f"vllm serve org/M --tensor-parallel-size{mark} 2\n")
    assert outcome.recipe.server.flag("--tensor-parallel-size") == "2"


def test_a_backslash_space_comment_continues_the_command_with_a_note() -> None:
    outcome = imported("vllm serve org/M \\ # the model\n  --tensor-parallel-size 2\n")
    assert outcome.recipe.server.flag("--tensor-parallel-size") == "2"
    assert any("post.md:1:" in note and "continuation" in note for note in outcome.notes)


# --- other accelerators ---

SIGNS = {
    "Intel Gaudi": [
        "docker run --runtime=habana -it vllm/vllm-openai:v0.33.0 --model org/M",
        "docker run --gpus all -e HABANA_VISIBLE_DEVICES=all vllm/vllm-openai:v0.33.0 --model org/M",
        "PT_HPU_LAZY_MODE=1 vllm serve org/M",
        "vllm serve org/M --device hpu",
        "docker run -it vault.habana.ai/gaudi-docker/1.23.0/vllm:latest vllm serve org/M",
    ],
    "Google TPU": [
        "vllm serve org/M --device tpu",
        "TPU_CHIPS_PER_HOST_BOUNDS=2,2,1 vllm serve org/M",
        "docker run --privileged vllm/vllm-tpu:nightly vllm serve org/M",
    ],
    "Intel GPU (XPU)": [
        "vllm serve org/M --device xpu",
        "ZE_AFFINITY_MASK=0,1 vllm serve org/M",
        "docker run --privileged intel/vllm:0.10.2-xpu --model org/M",
    ],
    "Hygon DCU": [
        "docker run --device=/dev/mkfd --gpus all vllm/vllm-openai:v0.33.0 --model org/M",
        "vllm serve hygon/M -q slimquant_marlin",
        "docker run image.sourcefind.cn:5000/dcu/admin/base/vllm:0.9.2-dtk25.04 vllm serve org/M",
    ],
    "AMD ROCm": [
        "docker run --device /dev/kfd --device /dev/dri vllm/vllm-openai:v0.33.0 --model org/M",
        "HIP_VISIBLE_DEVICES=0,1 vllm serve org/M",
        "ROCR_VISIBLE_DEVICES=0 vllm serve org/M",
        "docker run -it rocm/vllm:latest vllm serve org/M",
    ],
    "Huawei Ascend": [
        "ASCEND_RT_VISIBLE_DEVICES=0 vllm serve org/M",
        "docker run --device /dev/davinci0 quay.io/ascend/vllm-ascend:v0.9 vllm serve org/M",
    ],
    "AWS Neuron": ["vllm serve org/M --device neuron"],
    "CPU only": [
        "vllm serve org/M --device cpu",
        "docker run -p 8000:8000 public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo:v0.9 --model org/M",
    ],
    "Apple silicon": ["vllm serve org/M --device mps"],
}
CASES = [(title, post) for title, posts in SIGNS.items() for post in posts]


@pytest.mark.parametrize("image", [None, "vllm/vllm-openai:v0.33.0"])
@pytest.mark.parametrize(("title", "post"), CASES)
def test_another_accelerator_is_refused_by_name_whatever_the_image(title: str, post: str, image: str | None) -> None:
    message = refused(post + "\n", image=image)
    assert title in message and "NVIDIA GPUs" in message, message


def test_an_nvidia_alternative_beside_a_rocm_one_is_taken() -> None:
    post = "docker run -it rocm/vllm:latest vllm serve org/M\n\ndocker run --gpus all vllm/vllm-openai:v0.33.0 --model org/M\n"
    outcome = imported(post)
    assert outcome.recipe.image.reference == "vllm/vllm-openai:v0.33.0"


# --- local models ---


@pytest.mark.parametrize(
    "model", ["gpt-oss-120b", "./llama", "llama/", "../models/x"], ids=["bare", "dot-slash", "trailing", "parent"]
)
def test_a_local_model_is_refused_with_model_repo_advice(model: str) -> None:
    message = refused(f"vllm serve {model} --tensor-parallel-size 8\n")
    assert "--model-repo ORG/NAME" in message


def test_model_path_flag_with_a_bare_name_is_refused() -> None:
    assert "--model-repo" in refused("python3 -m sglang.launch_server --model-path llama --tp 8\n")


def test_a_bare_name_the_post_downloads_is_that_repo() -> None:
    post = "huggingface-cli download openai/gpt-oss-120b --local-dir gpt-oss-120b\nvllm serve gpt-oss-120b -tp 8\n"
    outcome = imported(post)
    assert outcome.recipe.model.repo_id == "openai/gpt-oss-120b"
    assert outcome.recipe.server.flag("--served-model-name") == "gpt-oss-120b"


def test_model_repo_places_a_local_model() -> None:
    outcome = imported("vllm serve gpt-oss-120b -tp 8\n", model_repo="openai/gpt-oss-120b")
    assert outcome.recipe.model.repo_id == "openai/gpt-oss-120b"


# --- a launch program after an image whose entrypoint runs it ---


@pytest.mark.parametrize("launch", ["vllm serve", "python -m vllm.entrypoints.openai.api_server --model"])
def test_a_launch_repeating_the_image_entrypoint_gives_the_entrypoint_its_arguments(launch: str) -> None:
    outcome = imported(f"docker run --gpus all -p 8000:8000 vllm/vllm-openai:v0.33.0 {launch} org/Model-7B\n")
    assert outcome.recipe.server.program == ()
    assert any("dropped: the image's entrypoint is already `vllm serve`" in note for note in outcome.notes)


def test_a_launch_after_an_image_without_that_entrypoint_is_kept() -> None:
    outcome = imported("docker run --gpus all -p 8000:8000 nvcr.io/nvidia/vllm:25.09-py3 vllm serve org/Model-7B\n")
    assert outcome.recipe.server.program == ("vllm", "serve")


def test_no_sign_of_another_accelerator_starts_inside_a_word() -> None:
    # A sign that may start with any non-space character is searched from every position of a long word, each
    # search scanning the rest of it: quadratic (a 200,000-character line took minutes). Such a sign must start at
    # the word's start. Judged on the patterns, so a busy machine cannot decide it.
    for title, sign in _SIGNS:
        for alternative in sign.pattern.split("|"):
            assert not alternative.startswith(("\\S", "[^\\s")), (title, alternative)
