"""Classes of import failure found by reading held-out posts 377-384 first (round 28): an image that rebuilds a
kind's own (lmcache/vllm-openai, named as vllm/vllm-openai) refused as an unknown server (377); the ranks of one SGLang
server over two nodes offered to --pick because only rank 0's command gives --host and --port (378)."""

from __future__ import annotations

import pytest
from test_first_contact_round5 import _import, _refusal

RANKS = """```
# node 1
python3 -m sglang.launch_server --model-path org/m --tp 16 --dist-init-addr 10.0.0.1:5000 --nnodes 2 --node-rank 0 \\
  --host 0.0.0.0 --port 3000
# node 2
python3 -m sglang.launch_server --model-path org/m --tp 16 --dist-init-addr 10.0.0.1:5000 --nnodes 2 --node-rank 1
```
"""


@pytest.mark.parametrize(("image", "kind"), [("lmcache/vllm-openai:latest", "vllm"), ("acme/sglang:v1", "sglang")])
def test_an_image_named_as_a_kind_s_own_is_read_as_that_kind(image: str, kind: str) -> None:
    outcome = _import(f"docker run --gpus all {image} --model org/m\n")
    assert outcome.recipe.server.kind == kind
    assert any(f"{image} is named as" in note and "pass --kind" in note for note in outcome.notes)


def test_an_image_named_otherwise_still_asks_for_the_kind() -> None:
    assert "pass --kind sglang or --kind vllm" in _refusal("docker run --gpus all acme/llm-server:1 --model org/m\n")


def test_rank_0_alone_giving_host_and_port_is_still_one_server() -> None:
    outcome = _import(RANKS)
    assert outcome.recipe.node_count() == 2 and outcome.recipe.server.flag("--port") == "3000"
    assert any("rank 1 (line 6) gives no --host or --port: only rank 0 serves HTTP" in n for n in outcome.notes)


def test_a_later_rank_giving_another_port_is_still_a_difference() -> None:
    post = RANKS.replace("--nnodes 2 --node-rank 1\n", "--nnodes 2 --node-rank 1 --port 4000\n")
    assert "--pick" in _refusal(post)
