"""Classes of import failure found by reading held-out posts 481-496 first (rounds 41 and 42): a `docker run` of a
build for NVIDIA Jetson (an arm64 module) imported as an HGX server (487), and a diff page's hunk header read as a
command broken by a wrap (485)."""

from __future__ import annotations

import pytest
from test_first_contact_round5 import _import, _refusal


@pytest.mark.parametrize(
    "image", ["embedl/vllm:latest-jetson-orin-flashhead", "dustynv/vllm:0.8.6-r36.4-cu128", "org/vllm:l4t-r36.2"]
)
def test_a_build_for_jetson_is_refused_as_that_platform(image: str) -> None:
    message = _refusal(f"docker run --runtime=nvidia {image} vllm serve org/m --max-model-len 8192\n")
    assert "NVIDIA Jetson" in message


def test_an_hgx_image_is_no_jetson() -> None:
    assert _import("docker run --gpus all vllm/vllm-openai:v0.33.0 --model org/m\n").recipe.server.kind == "vllm"


def test_a_diff_s_hunk_header_is_no_command() -> None:
    post = "| 37 |\n@@ -56,7 +56,7 @@ python -m sglang.launch_server \\\n|\n| 56 |\n--host 0.0.0.0 \\\n"
    assert "no serving command found" in _refusal(post, "page.md")
