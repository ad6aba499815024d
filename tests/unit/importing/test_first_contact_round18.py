"""Classes of import failure found by reading held-out posts 299-306 first (round 18): a review's diff of a Markdown
page (its added lines hold fences) read as one fence of diff lines, so the page's prose was shell and its second,
cut block a whole launch (posts 291, 300); `hf jobs run … IMAGE LAUNCH` not read as the launch it runs (300); a
prose line's em dash checked as a command's beside its inline code (300); a Hugging Face cache mounted at its
`hub/` folder kept and refused for its `$HOME` (303); a format string's field (`{path_to_model}`) named as a bad
number, not a placeholder (306); a value outside what the engine accepts (`-q slimquant_marlin`) not refused (305);
a Kubernetes command written as one string (301)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from test_first_contact_round5 import _import, _refusal

from hgxkit.errors import InputError
from hgxkit.recipe.check import check_recipe

MARKDOWN_DIFF = """review thread
````diff
+Serve it:
+
+```bash
+vllm serve org/m \\
+  --tensor-parallel-size 8
+```
+
+With a draft:
+
+```bash
+vllm serve org/m \\
+  --tensor-parallel-size 8 \\
````
A reviewer's comment — with a dash.
"""


def test_a_diff_of_a_markdown_page_is_read_as_the_page_and_its_cut_block_is_set_aside() -> None:
    outcome = _import(MARKDOWN_DIFF, "review.md")
    assert outcome.recipe.server.flag("--tensor-parallel-size") == "8"
    assert any("a diff of a Markdown file" in note for note in outcome.notes)
    assert any(line.action == "skipped" and "copy stops inside it" in line.what for line in outcome.report)


def test_a_lone_command_whose_fence_ends_after_a_backslash_is_still_taken() -> None:
    outcome = _import("```\nvllm serve org/m \\\n  --port 8001 \\\n```\n", "post.md")
    assert outcome.recipe.server.flag("--port") == "8001"


def test_two_whole_commands_beside_a_cut_one_are_still_offered_to_pick() -> None:
    post = "```\nvllm serve org/a\n```\n```\nvllm serve org/b\n```\n```\nvllm serve org/c \\\n```\n"
    assert "--pick" in _refusal(post, "post.md")


HF_JOB = (
    "hf jobs run --flavor h200x2 --expose 8000 --timeout 2h -e VLLM_LOGGING_LEVEL=DEBUG -d \\\n"
    "  vllm/vllm-openai:v0.33.0 \\\n"
    "  vllm serve org/m --tensor-parallel-size 2\n"
)


def test_a_hugging_face_job_runs_its_launch_in_its_image_and_says_what_is_the_services() -> None:
    outcome = _import(HF_JOB)
    assert outcome.recipe.image.reference == "vllm/vllm-openai:v0.33.0"
    assert outcome.recipe.server.flag("--tensor-parallel-size") == "2"
    assert ("VLLM_LOGGING_LEVEL", "DEBUG") in [(e.name, e.value) for e in outcome.recipe.docker.env()]
    said = next(note for note in outcome.notes if "Hugging Face Jobs service" in note)
    assert "--flavor h200x2" in said and "--timeout 2h" in said and "-d" in said


def test_a_hugging_face_jobs_secret_values_never_reach_a_note() -> None:
    # made-up values of no real account's shape, so only this test's own words could show them
    post = "hf jobs run -s DB_URL=opensesame-123 --token not-a-real-token vllm/vllm-openai:v0.33.0 vllm serve org/m\n"
    said = " ".join(_import(post).notes)
    assert "-s DB_URL" in said and "--token ***" in said
    assert "opensesame-123" not in said and "not-a-real-token" not in said


def test_a_hugging_face_jobs_volume_is_refused_naming_it() -> None:
    message = _refusal("hf jobs run -v hf://org/m:/m vllm/vllm-openai:latest vllm serve /m\n")
    assert "hf://org/m:/m" in message and "line 1, column 13" in message


def test_a_hugging_face_job_that_runs_no_launch_is_no_server() -> None:
    assert "no serving command found" in _refusal("hf jobs run python:3.12 python -c 'print(1)'\n")


def test_prose_dashes_beside_inline_code_are_left_to_the_prose() -> None:
    post = "Serve it with `vllm serve org/m --port 8000` \u2014 then ask it.\n"
    assert _import(post, "post.md").recipe.server.flag("--port") == "8000"


def test_a_dash_inside_the_inline_command_is_still_refused() -> None:
    assert "typographic dash" in _refusal("Serve it with `vllm serve org/m \u2014port 80\u201400`.\n", "post.md")


def test_a_hugging_face_cache_mounted_at_its_hub_folder_is_dropped_for_a_placed_model() -> None:
    post = "docker run --gpus all -v $HOME/.cache/huggingface/hub:/root/.cache/huggingface/hub img:1 \\\n"
    post += "  sglang serve --model-path org/m\n"
    outcome = _import(post, kind="sglang")
    assert "hub" not in " ".join(outcome.recipe.docker.words())


@pytest.mark.parametrize("field", ["{path_to_model}", "{model}", "{node0_ip}"])
def test_a_format_strings_field_is_a_placeholder_that_fill_writes(field: str) -> None:
    post = f"python3 -m sglang.launch_server --model-path {field} --tp-size {{tp_size}}\n"
    message = _refusal(post)
    assert f"{field} is a placeholder" in message or "{tp_size} is a placeholder" in message
    filled = _import(post, fill=((field, "org/m"), ("{tp_size}", "2")))
    assert filled.recipe.server.flag("--tp-size") == "2"


def test_a_shell_or_template_brace_is_no_placeholder() -> None:
    outcome = _import("vllm serve org/m --port ${PORT:-8000}\n")
    assert outcome.recipe.server.flag("--port") == "8000"


@pytest.mark.parametrize(
    ("post", "named"),
    [
        ("vllm serve org/m -q int3_awq\n", "int3_awq is not a value of --quantization"),
        ("vllm serve org/m --dtype halff\n", "halff is not a value of --dtype"),
        ("python3 -m sglang.launch_server --model-path org/m --attention-backend fa9\n", "fa9 is not a value"),
    ],
)
def test_a_value_outside_what_the_engine_accepts_is_refused(post: str, named: str) -> None:
    assert named in _refusal(post)


@pytest.mark.parametrize(
    ("post", "flag", "value"),
    [
        ("vllm serve org/m -q fp8 --dtype=bfloat16 --load-format SafeTensors\n", "--load-format", "SafeTensors"),
        ("docker run --gpus all vllm/vllm-openai:v0.9.2 --model org/m -q slimquant\n", "-q", "slimquant"),  # unjudged
    ],
)
def test_values_the_engine_takes_or_cannot_be_judged_are_kept(post: str, flag: str, value: str) -> None:
    assert _import(post).recipe.server.flag(flag) == value


def test_a_value_the_shell_writes_in_is_refused_at_the_post_s_line() -> None:
    with pytest.raises(InputError) as caught:
        _import("vllm serve org/m -q $QUANT\n")  # Docker would get what the node's shell has for it
    assert caught.value.message.startswith("post.sh:1: $QUANT is not set by the post, so the server would get whatever")


def test_recipe_check_refuses_a_value_outside_the_engines_list_as_the_import_does() -> None:
    recipe = _import("vllm serve org/m -q fp8\n").recipe
    edited = replace(recipe.server, args=(*recipe.server.args, ("-q", "bogus")))
    found = check_recipe(replace(recipe, server=edited))
    assert [p.code for p in found if p.level == "error"] == ["engine"]


def test_a_kubernetes_command_written_as_one_string_is_refused_at_its_key() -> None:
    manifest = """apiVersion: apps/v1
kind: Deployment
metadata: {name: v}
spec:
  template:
    spec:
      containers:
      - name: v
        image: vllm/vllm-openai:latest
        command:
        - "python3 -m vllm.entrypoints.openai.api_server --model org/m"
        resources: {limits: {nvidia.com/gpu: "1"}}
"""
    message = _refusal(manifest, "deploy.yaml")
    assert "deploy.yaml:10" in message and "Kubernetes runs as the name of a program" in message


LAUNCH = "`python3 -m sglang.launch_server --model-path org/m --pp-size 3`\n\n"


def test_a_bare_launch_takes_the_one_image_its_post_names_in_prose() -> None:
    outcome = _import(LAUNCH + "using docker image lmsysorg/sglang:v0.5.9-cu129 on 3x B200.\n", "issue.md")
    assert outcome.recipe.image.reference == "lmsysorg/sglang:v0.5.9-cu129"
    assert any("the one the post names (line 3)" in note for note in outcome.notes)
    assert any("the server uses 3 of them" in note for note in outcome.notes)
    assert any("the post names B200 (Blackwell)" in note for note in outcome.notes)


@pytest.mark.parametrize(
    "prose",
    [
        "tried lmsysorg/sglang:v0.5.9 and lmsysorg/sglang:v0.5.8 alike.\n",  # which one ran is not said
        "the router runs in vllm/vllm-openai:v0.33.0.\n",  # another kind's image
    ],
)
def test_no_image_or_several_in_prose_leave_the_kinds_image(prose: str) -> None:
    outcome = _import(LAUNCH + prose, "issue.md")
    assert outcome.recipe.image.reference == "lmsysorg/sglang:latest"


def test_a_post_on_h200_gets_no_generation_note() -> None:
    outcome = _import(LAUNCH + "on 8x H200 (and H100 before).\n", "issue.md")
    assert not any("the post names" in note for note in outcome.notes)
