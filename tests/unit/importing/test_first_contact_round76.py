"""Classes of import failure found by reading held-out posts 551-757 again: a whole script file whose last byte is a
continuation backslash refused as a copy cut inside the command (551, 680, 683), vLLM's refusal of float16 for
Gemma 2 and 3 not told (683), and `/dev/dri` named where the same line's `/dev/kfd` is the AMD sign (756)."""

from __future__ import annotations

import pytest
from test_first_contact_round5 import _import, _refusal

from hgxkit.recipe.engine_start import engine_refusal


def test_a_file_whose_last_byte_is_a_backslash_is_whole() -> None:
    outcome = _import("vllm serve org/m \\\n    --max-model-len 8192 \\")
    assert outcome.recipe.server.flag("--max-model-len") == "8192"
    assert any("ends on a backslash with no newline after it" in note for note in outcome.notes)


def test_a_backslash_before_the_post_s_last_newline_is_still_a_cut() -> None:
    assert "the copy stops inside the command" in _refusal("vllm serve org/m \\\n    --max-model-len 8192 \\\n")


@pytest.mark.parametrize("model", ["google/gemma-2-9b-it", "google/gemma-3-27b-it", "google/gemma-3-1b-it"])
@pytest.mark.parametrize("dtype", ["half", "float16", "=half"])
def test_vllm_refuses_float16_for_gemma_2_and_3(model: str, dtype: str) -> None:
    flag = f"--dtype{dtype}" if dtype.startswith("=") else f"--dtype {dtype}"
    refusal = _refusal(f"vllm serve {model} {flag}\n")
    assert "vLLM refuses float16" in refusal and "--dtype bfloat16" in refusal


@pytest.mark.parametrize(
    "command",
    [
        "vllm serve google/gemma-3n-E4B-it --dtype half",  # another model type, which takes float16
        "vllm serve google/gemma-2-9b-it --dtype bfloat16",
        "vllm serve meta-llama/Llama-3.1-8B --dtype half",
        "python3 -m sglang.launch_server --model-path google/gemma-2-9b-it --dtype half",  # SGLang has no such check
    ],
)
def test_float16_is_refused_only_where_vllm_refuses_it(command: str) -> None:
    assert engine_refusal(_import(command + "\n").recipe) is None


def test_a_line_with_dri_and_kfd_names_kfd() -> None:
    refusal = _refusal("docker run --device /dev/dri --device /dev/kfd rocm/vllm:latest vllm serve org/m\n")
    assert "/dev/kfd is AMD ROCm" in refusal
