"""Prefill/decode posts of the fourth round (corpus 209-214): what each promise says a user gets."""

from __future__ import annotations

from pathlib import Path

import pytest

from hgxkit.errors import InputError
from hgxkit.importing.importer import ImportOptions, import_post
from hgxkit.importing.post import find_commands, read_post

POSTS = Path(__file__).resolve().parents[2] / "fixtures" / "posts"


def refusal(text: str, name: str = "p.md", **options: str) -> str:
    with pytest.raises(InputError) as caught:
        import_post([(name, text)], ImportOptions(**options))
    return caught.value.message


def corpus(number: int) -> tuple[str, str]:
    path = next(POSTS.glob(f"{number}-*.txt"))
    return path.name, path.read_text()


SOURCED = (
    "#!/usr/bin/env bash\n"
    'source "$(dirname "$0")/00_common.sh"\n'
    'docker run -d --gpus all -p 30000:30000 "${SGLANG_IMAGE}" python3 -m sglang.launch_server '
    '--model-path "${MODEL_PATH}" --host 0.0.0.0 --port 30000\n'
)


def test_an_image_the_post_does_not_set_names_the_file_the_post_sources_that_may_set_it() -> None:
    message = refusal(SOURCED, "run.sh")
    assert "the image ${SGLANG_IMAGE} is a variable the post does not set" in message
    assert "(the post sources 00_common.sh at line 2, which it does not include)" in message


def test_a_model_the_post_does_not_set_names_the_sourced_file_too() -> None:
    message = refusal(SOURCED, "run.sh", image="lmsysorg/sglang:latest")
    assert "the model '${MODEL_PATH}' is a variable the post does not set (the post sources 00_common.sh" in message


def test_a_variable_in_a_post_that_sources_nothing_is_refused_as_before() -> None:
    message = refusal(SOURCED.replace('source "$(dirname "$0")/00_common.sh"\n', ""), "run.sh")
    assert message.endswith("is a variable the post does not set; give --image REF")


def test_a_prefill_only_script_refuses_naming_its_sourced_file() -> None:
    name, text = corpus(214)
    with pytest.raises(InputError) as caught:
        import_post([(name, text)], ImportOptions())
    assert "sources 00_common.sh at line 3" in caught.value.message


@pytest.mark.parametrize("tp", ["8", "32"])
def test_a_host_count_left_to_a_variable_is_refused_at_its_word_not_read_as_one_node(tp: str) -> None:
    post = (
        "```bash\npython -m sglang.launch_server --model-path Qwen/Qwen3-8B --tp "
        f"{tp} --nnodes $node_num --node-rank $node_rank --dist-init-addr 10.0.0.1:5000\n```\n"
    )
    message = refusal(post)
    assert "line 2, column" in message
    assert "--nnodes $node_num: the number of hosts is a variable the post does not set" in message
    assert f"(of tp x pp x dp = {tp})" in message
    assert "runs on one node" not in message and "left for the node's shell" not in message


def test_the_host_count_is_pointed_at_its_own_word_not_one_that_starts_alike() -> None:
    post = "```bash\npython -m sglang.launch_server --model-path Qwen/Qwen3-8B --api-key $NK --tp 16 --nnodes=$N\n```\n"
    assert "line 2, column 81: --nnodes $N:" in refusal(post)


def test_a_tp32_prefill_over_a_variable_host_count_names_the_variable() -> None:
    name, text = corpus(211)
    with pytest.raises(InputError) as caught:
        import_post([(name, text)], ImportOptions())
    assert "line 31, column 16: --nnodes $node_num" in caught.value.message


DIFF = (
    "Review thread on run.sh\n"
    "```diff\n"
    "@@ -1,3 +1,3 @@\n"
    " docker run --gpus all -p 8000:8000 vllm/vllm-openai:v0.10.0 \\\n"
    "-    --model Qwen/Qwen3-8B --tensor-parallel-size 4\n"
    "+    --model Qwen/Qwen3-8B --tensor-parallel-size 8\n"
    "```\n"
)


def test_a_diff_fence_is_read_as_the_file_after_the_change() -> None:
    post = read_post("p.md", DIFF)
    assert [[w.text for w in c.words][-2:] for c in find_commands(post)] == [["--tensor-parallel-size", "8"]]
    assert any("a diff's added lines are read" in note for _, note in post.notes)
    recipe = import_post([("p.md", DIFF)], ImportOptions()).recipe
    assert recipe.server.flag("--tensor-parallel-size") == "8"


def test_plus_signs_outside_a_diff_fence_stay_what_they_are() -> None:
    clean = read_post("p.md", DIFF.replace("```diff", "```bash")).clean
    assert clean[2:6] == tuple(DIFF.split("\n")[2:6])


def test_a_srun_pyxis_script_shown_as_a_review_diff_is_read_and_its_lone_prefill_refused() -> None:
    name, text = corpus(212)  # the excerpt cuts the decode step before its launch
    with pytest.raises(InputError) as caught:
        import_post([(name, text)], ImportOptions())
    assert "the post runs the prefill side of a prefill/decode split alone" in caught.value.message
