"""Classes of import failure found by reading held-out posts 521-528 first (round 46): custom resources whose
controller writes the pod (KubeAI's Model, NVIDIA Dynamo's DynamoGraphDeployment) not named (524, 525); a
`kubectl apply -f FILE` line typed inside a manifest's fence keeping it from being read (522); a manifest cut on a
key with no value where its open fence meets the post's end read as whole (521). Round 48: a rank over nodes left
on SGLang's loopback default without a word (538)."""

from __future__ import annotations

import pytest
from test_first_contact_round5 import _import, _refusal

KUBEAI = (
    "```yaml\napiVersion: kubeai.org/v1\nkind: Model\nmetadata: {name: m}\nspec: {url: hf://org/m, engine: VLLM}\n```\n"
)
DYNAMO = "```yaml\napiVersion: nvidia.com/v1alpha1\nkind: DynamoGraphDeployment\nmetadata: {name: d}\nspec: {}\n```\n"


@pytest.mark.parametrize(("post", "named"), [(KUBEAI, "KubeAI's Model"), (DYNAMO, "NVIDIA Dynamo's")])
def test_a_resource_whose_controller_writes_the_pod_is_named(post: str, named: str) -> None:
    assert named in _refusal(post, "post.md")


DEPLOYMENT = """Mine:

```
kubectl apply -f app.yaml
apiVersion: apps/v1
kind: Deployment
metadata: {name: m}
spec: {template: {spec: {containers: [{name: vllm, image: "vllm/vllm-openai:v0.33.0", args: ["--model", "org/m"]}]}}}
status:
"""


def test_a_manifest_cut_on_an_empty_key_under_an_apply_line_is_named_as_cut() -> None:
    message = _refusal(DEPLOYMENT, "post.md")
    assert "the post ends on a key with no value: the copy is cut" in message


def test_a_closed_fence_that_ends_on_an_empty_key_is_not_called_cut() -> None:
    assert "the copy is cut" not in _refusal(DEPLOYMENT + "```\n\nThe pod waits.\n", "post.md")


def test_a_rank_over_nodes_on_the_engine_s_loopback_default_says_so() -> None:
    rank = "python3 -m sglang.launch_server --model-path org/m --tp 16 --dist-init-addr 10.0.0.1:5000 --nnodes 2"
    outcome = _import(f"{rank} --node-rank 0\n{rank} --node-rank 1\n")
    assert any("(SGLang's default 127.0.0.1: the head node's own clients only)" in n for n in outcome.notes)
