"""Import of large hostile posts ends, imported or refused in one line, in linear time: measured in CPU time (the
import runs in this process), which a busy machine does not stretch as it stretches the wall clock."""

from __future__ import annotations

import time

import pytest

from hgxkit.errors import InputError
from hgxkit.importing.importer import ImportOptions, import_post
from hgxkit.recipe.read import MAX_RECIPE_BYTES

SERVE = "```\nvllm serve org/Tiny-1B --port 8001 -tp 1\n```\n"
PIPELINE = "cat /tmp/x" + "".join(f" | grep -v s{n}" for n in range(300)) + "\n"


def _refusal(text: str) -> tuple[str, float]:
    start = time.process_time()
    with pytest.raises(InputError) as refused:
        import_post([("post.md", text)], ImportOptions(image="vllm/vllm-openai:v0.33.0"))
    return refused.value.message, time.process_time() - start


@pytest.mark.parametrize(
    "unit",
    [PIPELINE, "V1=$V0x; V2=$V1x; V3=$V2x; V4=$V3x\n", "```\necho a\n```\n", "docker run vllm/vllm-openai:v0.33.0\n"],
    ids=["pipes", "variable-chain", "fences", "docker-run"],
)
def test_a_1_mib_hostile_post_is_refused_within_5_cpu_seconds(unit: str) -> None:
    text = SERVE + "```\n" + unit * (1024 * 1024 // len(unit) + 1)
    message, seconds = _refusal(text)
    assert message == f"post.md: longer than {MAX_RECIPE_BYTES >> 10} KiB; give the post, not a log"
    assert seconds < 5


def test_the_largest_read_post_of_pipelines_is_refused_by_counting_each_stage_within_5_cpu_seconds() -> None:
    # 830 lines of 301 stages: under the 1000 command lines a post may hold; the 4th (file line 8) passes 1000
    text = SERVE + "```\n" + PIPELINE * ((MAX_RECIPE_BYTES - 100) // len(PIPELINE)) + "```\n"
    assert len(text) <= MAX_RECIPE_BYTES
    message, seconds = _refusal(text)
    assert message == (
        "post.md:8: more than 1000 commands (each stage of a pipeline `a | b` counts); give the part of the post "
        "with a setup"
    )
    assert seconds < 5


def test_a_post_with_a_few_pipelines_still_imports() -> None:
    text = SERVE + "```\n" + "cat a | grep b | sort | uniq -c\n" * 200 + "```\n"
    outcome = import_post([("post.md", text)], ImportOptions(image="vllm/vllm-openai:v0.33.0"))
    assert outcome.recipe.model.repo_id == "org/Tiny-1B"


def test_990_different_docker_run_servers_are_refused_within_5_cpu_seconds() -> None:
    # Linear, not quadratic: a serving command that looked back at every command before it (scope, directory,
    # skipped list) would not finish 990 of them within 5 s of CPU.
    lines = "".join(f"docker run -p {8000 + n}:8000 vllm/vllm-openai:v0.33.0 --model org/M{n}\n" for n in range(990))
    message, seconds = _refusal("```\n" + lines + "```\n")
    assert message.startswith("post.md:2: 990 serving commands that are not one setup: they differ in server --model")
    assert seconds < 5


@pytest.mark.parametrize(
    "line",
    [" " * 200_000 + "x", "-" * 200_000 + "1", "# " + " " * 200_000 + "x"],
    ids=["spaces", "dashes", "comment"],
)
def test_a_long_line_where_nothing_serves_is_refused_within_5_cpu_seconds(line: str) -> None:
    message, seconds = _refusal(f"Mine:\n\n{line}\n")
    assert "no serving command found" in message
    assert seconds < 5
