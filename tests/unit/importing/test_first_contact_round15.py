"""Classes of import failure found by reading posts 275-282 first (round 15): a report's prose label naming the
program, its subcommand and a word with a colon (`vllm serve command:` above the fence that holds the launch) read
as a launch of a model `command:`, so the post was refused as two setups; and a launch whose environment prefix
stands on lines of its own (`CUDA_VISIBLE_DEVICES=0,1 \\` above `vllm serve …`) reported and recorded from the
program's line, the prefix it was read with left out of the lines named; and such a prefix whose first lines lost
their backslash (`CUDA_VISIBLE_DEVICES=0,1 \\` / `NCCL_P2P_DISABLE=1` / `vllm serve …`), a shell variable the server
never sees, imported at exit 0 on every GPU, where the same variable alone on the line above is refused."""

from __future__ import annotations

import pytest
from test_first_contact_round5 import _import, _refusal  # the same helpers: import a post, its one-line refusal

FENCED = "```\nvllm serve org/m \\\n  --port 8000\n```\n"


@pytest.mark.parametrize("label", ["vllm serve command:", "docker run example:", "sglang serve - launch command:"])
def test_a_label_naming_the_program_is_prose(label: str) -> None:
    outcome = _import(f"{label}\n{FENCED}", "post.md")
    assert outcome.recipe.server.flag("--port") == "8000"
    assert any(line.action == "took" and line.where == "post.md:3-4" for line in outcome.report)


def test_a_launch_ending_in_a_word_with_a_colon_is_still_a_command() -> None:
    outcome = _import("vllm serve org/m --served-model-name m:\n", "post.md")
    assert outcome.recipe.model.repo_id == "org/m"


def test_an_environment_prefix_on_its_own_lines_is_part_of_the_command_reported() -> None:
    post = (
        "Working command:\n\nCUDA_VISIBLE_DEVICES=0,1 \\\nNCCL_P2P_DISABLE=1 \\\nvllm serve org/m \\\n  --port 8000\n"
    )
    outcome = _import(post, "post.md")
    assert any(line.action == "took" and line.where == "post.md:3-6" for line in outcome.report)
    assert "post.md:3-6" in (outcome.recipe.source.notes or "")


@pytest.mark.parametrize("lost", [1, 2])
def test_an_environment_line_that_lost_its_backslash_is_refused(lost: int) -> None:
    lines = ["CUDA_VISIBLE_DEVICES=0,1 \\", "NCCL_P2P_DISABLE=1 \\", "vllm serve org/m --port 8000"]
    lines[lost - 1] = lines[lost - 1].removesuffix(" \\")
    refusal = _refusal("\n".join(lines) + "\n")
    assert refusal.startswith("post.sh: line 1, column 1: CUDA_VISIBLE_DEVICES=0,1 is set without export")
    assert f"at line {lost + 1}" in refusal
    assert ("end the line with" if lost == 1 else "end line 2 with") in refusal
