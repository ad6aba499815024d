"""Classes of import failure found by reading held-out posts 345-352 first (round 24): a post cut inside its last
flag word where that word starts several options (`--kv-c`, post 348, imported wrong at exit 0 on an image whose
version the table cannot judge); a wrapper written twice, `sh -c "sh -c "…"`, whose unbalanced quote was refused
with a way out that does not mend it (346); a mount's `~` refused before the engine's refusal the post itself meets
(352); a Kubernetes container's `google.com/tpu` taken for no accelerator at all (347)."""

from __future__ import annotations

import pytest
from test_first_contact_round5 import _import, _refusal
from test_post_formats import POD, refusal

CUT = "docker run --gpus all lmsysorg/sglang:dev-cu13 \\\n  python3 -m sglang.launch_server --model-path org/m \\\n  {last}"


def test_a_last_word_that_starts_several_options_is_a_cut_copy_on_any_image() -> None:
    message = _refusal(CUT.format(last="--kv-c\n"))
    assert "`--kv-c` ends the post and is only the start of an option" in message
    assert "`--kv-cache-dtype`" in message and "the copy is cut inside it" in message


def test_the_same_word_before_more_of_the_command_is_no_cut() -> None:
    outcome = _import(CUT.format(last="--kv-c fp8_e4m3 --port 30000\n"))
    assert "--kv-c" in outcome.recipe.server.words()  # kept as written: the image's options are not known


def test_a_word_that_starts_no_option_ends_the_post_as_it_is() -> None:
    outcome = _import(CUT.format(last="--no-such-thing-at-all\n"))
    assert "--no-such-thing-at-all" in outcome.recipe.server.words()


def test_a_wrapper_written_twice_is_named_at_its_unbalanced_quote() -> None:
    post = 'sh -c "sh -c "python3 -m sglang.launch_server --model-path org/m --tp 2"\n'
    message = _refusal(post)
    assert "unbalanced double quote opened at line 1, column 72" in message
    assert "the quote after `sh -c` at column 1 is closed by the one after the `sh -c` inside it" in message


@pytest.mark.parametrize(
    "post",
    [
        'python3 -m sglang.launch_server --model-path org/m --served-model-name "m\n',
        "sh -c 'sh -c 'python3 -m sglang.launch_server --model-path org/m'\n",
    ],
)
def test_another_unbalanced_quote_keeps_its_way_out(post: str) -> None:
    message = _refusal(post)
    assert message.endswith("close it or remove it") and "written twice" not in message


def test_the_engine_refusal_comes_before_a_home_relative_mount() -> None:
    run = "docker run --gpus all -v ~/work:/work vllm/vllm-openai:latest --model org/m {flags}\n"
    assert "`--swap_space` is not an option" in _refusal(run.format(flags="--swap_space 16"))
    assert "the host side ~/work is not a fixed directory" in _refusal(run.format(flags="--port 8000"))


@pytest.mark.parametrize(
    ("resource", "platform"),
    [("google.com/tpu", "Google TPU"), ("aws.amazon.com/neuron", "AWS Neuron"), ("huawei.com/npu", "Huawei Ascend")],
)
def test_a_container_asking_for_another_accelerator_names_it(resource: str, platform: str) -> None:
    text = POD.replace("{extra}", "").replace("nvidia.com/gpu: 4", f"{resource}: 4")
    message = refusal("pod.yaml", text)
    assert message.startswith(f"pod.yaml:22: {resource}: 4 asks for {platform}")
    assert message.endswith("accelerators; hgxkit serves NVIDIA HGX-H200 nodes")


def test_a_fenced_command_piece_that_starts_at_the_image_is_named() -> None:
    """Post 344's class (round 23): a diff hunk's added lines begin at the image, the `docker run` above the hunk."""
    message = _refusal(
        "```diff\n+  vllm/vllm-openai:glm51 zai-org/GLM-5.1-FP8 \\\n+    --tensor-parallel-size 8\n```\n"
    )
    assert message.startswith("post.sh: line 2, column 4: the command starts at the image vllm/vllm-openai:glm51")
    assert "the `docker run` and its options before it are not in the post" in message


@pytest.mark.parametrize(
    "post",
    [
        "```\nvllm/vllm-openai:v0.33.0\n```\n",
        "Pull vllm/vllm-openai:v0.33.0 org/m first.\n",
        "```\nmyorg/app:1 --x\n```\n",
    ],
)
def test_an_image_alone_in_prose_or_another_image_is_no_command_piece(post: str) -> None:
    assert "no serving command found" in _refusal(post)


def test_a_bracketed_folder_with_a_space_is_a_placeholder_fill_writes() -> None:
    """Post 342's class with a space in the brackets: a shell splits `/[model dir]/m` into two words."""
    post = "vllm serve /[model dir]/Qwen3-32B --tensor-parallel-size 1\n"
    assert "line 1, column 13: [model dir] is a placeholder" in _refusal(post)
    filled = _import(post, fill=(("[model dir]", "/data/models"),))
    assert filled.recipe.model.local_dir == "/data/models/Qwen3-32B"
