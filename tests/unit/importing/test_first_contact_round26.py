"""Classes of import failure found by reading held-out posts 361-368 first (round 26): PowerShell's line
continuation (a backtick ending the line, post 363) read as a POSIX command substitution; a launch program a
sentence names with nothing after it (`using `vllm serve` works`, 364) counted as a serving command for --pick."""

from __future__ import annotations

from test_first_contact_round5 import _import, _refusal

PS1 = "docker run --gpus all -p 8000:8000 `\n    -e VLLM_LOGGING_LEVEL=DEBUG `\n    vllm/vllm-openai:v0.33.0 `\n    --model org/m\n"


def test_a_powershell_continuation_is_a_line_continuation() -> None:
    outcome = _import(PS1)
    assert outcome.recipe.image.reference == "vllm/vllm-openai:v0.33.0"
    assert "VLLM_LOGGING_LEVEL=DEBUG" in " ".join(outcome.recipe.docker.words())
    assert any("PowerShell's line continuation" in note for note in outcome.notes)


def test_a_windows_path_behind_powershell_continuations_is_named() -> None:
    post = PS1.replace("-p 8000:8000", "-v F:\\models:/models -p 8000:8000")
    assert "F:\\models is a Windows path" in _refusal(post)


def test_inline_code_with_a_backtick_at_its_end_stays_inline_code() -> None:
    post = "Run `vllm serve org/m --port 8000`\nthen wait.\n"
    assert _import(post).recipe.server.flag("--port") == "8000"


def test_a_launch_program_named_in_a_sentence_is_no_serving_command() -> None:
    post = "Using `vllm serve` works:\n\n```\nvllm serve org/m --port 8000\n```\n\n```\nvllm serve org/n --port 8001\n```\n"
    message = _refusal(post)
    assert "2 serving commands" in message and "(1: line 4, 2: line 8)" in message
    assert _import(post, pick=1).recipe.model.repo_id == "org/m"


def test_a_mention_alone_is_prose_too() -> None:
    """With nothing else in the post, inline code that only names the program is still prose about it."""
    assert "no serving command found" in _refusal("Try `vllm serve` here.\n")
