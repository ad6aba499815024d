"""Classes of import failure found by reading held-out posts 505-512 first (round 44): a framework's own server
around vLLM or SGLang (TRL's `vllm-serve`, SkyRL's module) not named (505, 512), `uv run -m MODULE` not read as
`python -m MODULE`, and a script's commented-out launches read as a root shell's commands because a builtin
(`set -x`) made it look like no script (506)."""

from __future__ import annotations

import pytest
from test_first_contact_round5 import _import, _refusal


@pytest.mark.parametrize(
    ("launch", "named"),
    [
        ("python -m trl.cli vllm-serve --model /mnt/m --tensor_parallel_size 1", "TRL's vLLM server"),
        ("trl vllm-serve --model org/m", "TRL's vLLM server"),
        ("uv run -m skyrl_train.inference_engines.sglang.sglang_server --model-path org/m", "SkyRL's"),
    ],
)
def test_a_framework_s_own_server_is_named(launch: str, named: str) -> None:
    assert named in _refusal(launch + "\n")


def test_uv_run_m_is_python_m() -> None:
    outcome = _import("uv run --isolated --extra sglang -m sglang.launch_server --model-path org/m --tp 2\n")
    assert outcome.recipe.server.kind == "sglang" and outcome.recipe.server.flag("--tp") == "2"


def test_a_script_s_commented_launches_stay_comments() -> None:
    post = "# server\n# vllm serve org/m --port 8000\n\nset -x\n\npython3 -m verl.trainer.main_ppo a=1\n"
    assert "`vllm serve` stands inside a comment (commented out" in _refusal(post)
