"""dstack run configurations imported (hgxkit.importing.dstack): the one serving command of `commands` as the
`docker run` of `image` (or --image), `resources`, `port`, `env` and instance volumes as its options, replica groups
read one by one, and what a recipe cannot hold refused by name. Helm values files are refused naming the chart.

The real published files (dstack's own examples, production-stack and llm-d values) are in
tests/fixtures/posts/formats (e01-e03, h01-h02), checked by test_post_formats.py.
"""

from __future__ import annotations

import pytest

from hgxkit.errors import InputError
from hgxkit.importing.importer import ImportOptions, import_post
from hgxkit.importing.outcome import ImportOutcome

SERVICE = """type: service
name: qwen
image: lmsysorg/sglang:v0.5.6
env:
  MODEL: Qwen/Qwen3-8B
  HF_TOKEN:
commands:
  - |
    python3 -m sglang.launch_server \\
      --model-path $MODEL \\
      --tp $DSTACK_GPUS_NUM --host 0.0.0.0 --port 8000
port: 8000
volumes:
  - instance_path: /root/.cache
    path: /root/.cache
resources:
  gpu: H200:2
  shm_size: 16GB
"""


def imported(text: str, image: str | None = None) -> ImportOutcome:
    return import_post([("svc.dstack.yml", text)], ImportOptions(image=image))


def refusal(text: str, image: str | None = None) -> str:
    with pytest.raises(InputError) as caught:
        imported(text, image)
    return caught.value.message


def test_a_service_is_its_command_in_its_image() -> None:
    outcome = imported(SERVICE)
    recipe = outcome.recipe
    assert recipe.image.reference == "lmsysorg/sglang:v0.5.6"
    assert " ".join(w for e in recipe.docker.entries for w in e.words) == (
        '--gpus "device=0,1" --shm-size 16g -p 8000:8000 -e MODEL=Qwen/Qwen3-8B -e HF_TOKEN '
        "-v /data/models/Qwen3-8B:/models/Qwen3-8B:ro"
    )  # the instance's /root/.cache volume is dropped: the model is served from its verified copy
    assert " ".join(recipe.server.words()) == (
        "python3 -m sglang.launch_server --model-path /models/Qwen3-8B --tp 2 --host 0.0.0.0 --port 8000 "
        "--served-model-name Qwen/Qwen3-8B"
    )
    assert "svc.dstack.yml:9: $DSTACK_GPUS_NUM is 2, resources.gpu's count" in outcome.notes


def test_a_replica_group_that_runs_the_router_is_set_aside() -> None:
    text = SERVICE.replace(
        "commands:\n",
        "replicas:\n  - count: 1\n    commands:\n      - python -m sglang_router.launch_router --port 8000\n"
        "  - count: 1..2\n    commands:\n",
    ).replace("  - |\n    python3", "      - |\n        python3")
    text = text.replace("\n      --model-path", "\n          --model-path").replace("\n      --tp", "\n          --tp")
    outcome = imported(text)
    assert outcome.recipe.server.flag("--tp") == "2"
    assert [r.what for r in outcome.report if r.action == "skipped" and "router" in r.what] == [
        "the replica group that runs the router (sglang_router.launch_router); hgxkit serves the server"
    ]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda t: t.replace("image: lmsysorg/sglang:v0.5.6\n", 'python: "3.12"\n'),
            "svc.dstack.yml:3: python: 3.12: the commands run in dstack's own Python image, not in an image of the "
            "file's; give --image REF of an image that has the server (or `image:`)",
        ),
        (
            lambda t: t.replace("  - |\n", "  - pip install sglang-router\n  - |\n"),
            "svc.dstack.yml:7: commands: `pip install sglang-router` installs into the run's container, which a "
            "recipe runs as its image is; give --image REF of an image that has it (built from lmsysorg/sglang:v0.5.6)",
        ),
        (
            lambda t: t.replace("--port 8000\n", "--port 8000 --host $DSTACK_NODES_IPS\n"),
            "svc.dstack.yml:9: $DSTACK_NODES_IPS: a dstack variable hgxkit does not read; write its value",
        ),
        (
            lambda t: t.replace(
                "  - instance_path: /root/.cache\n    path: /root/.cache\n", "  - my-cache:/root/.cache\n"
            ),
            "svc.dstack.yml:14: volume my-cache: a dstack network volume, which a node does not have; mount a host "
            "directory (`instance_path`)",
        ),
        (
            lambda t: t.replace("type: service", "type: task\nnodes: 1..2"),
            "svc.dstack.yml:2: nodes: 1..2: a range of nodes; give the number the server spans",
        ),
        (
            lambda t: t + "files:\n  - .:/workflow\n",
            "svc.dstack.yml:19: files: local files copied into the run, which a recipe cannot carry; bake them into "
            "the image",
        ),
    ],
    ids=["no-image", "install-into-the-image", "other-variable", "network-volume", "nodes-range", "local-files"],
)
def test_what_a_recipe_cannot_hold_is_refused_by_name(edit, message: str) -> None:
    assert refusal(edit(SERVICE)) == message


def test_dstack_python_image_with_image_given() -> None:
    text = SERVICE.replace("image: lmsysorg/sglang:v0.5.6\n", 'python: "3.12"\n').replace(
        "  - |\n", "  - pip install 'sglang[all]'\n  - |\n"
    )
    outcome = imported(text, image="lmsysorg/sglang:v0.5.6")
    assert outcome.recipe.image.reference == "lmsysorg/sglang:v0.5.6"
    assert "svc.dstack.yml:1: the server runs in --image lmsysorg/sglang:v0.5.6, not dstack's own Python image" in (
        outcome.notes
    )
    assert (
        "svc.dstack.yml:7: commands install pip install 'sglang[all]': --image lmsysorg/sglang:v0.5.6 is taken to "
        "have them" in outcome.notes
    )


def test_a_helm_values_fence_in_a_post_is_refused_naming_the_chart() -> None:
    post = (
        "Install the stack:\n\n```yaml\nservingEngineSpec:\n  modelSpec:\n  - name: llama\n    modelURL: org/m\n```\n"
    )
    with pytest.raises(InputError) as caught:
        import_post([("post.md", post)], ImportOptions())
    assert caught.value.message == (
        "post.md:4: a Helm values file of the vLLM production-stack chart (servingEngineSpec.modelSpec): the chart "
        "writes the server command, not this file; render it (helm template RELEASE vllm/vllm-stack -f post.md) and "
        "import the manifests"
    )


TWO_NODES = """type: task
name: r1
nodes: 2
image: lmsysorg/sglang:v0.5.4
env:
  - MODEL_ID=deepseek-ai/DeepSeek-R1
commands:
  - python3 -m sglang.launch_server
      --model-path $MODEL_ID
      --tp $DSTACK_GPUS_NUM
      --dist-init-addr $DSTACK_MASTER_NODE_IP:5000
      --nnodes $DSTACK_NODES_NUM
      --node-rank $DSTACK_NODE_RANK
      --host 0.0.0.0
      --port 8000
resources:
  gpu: H200:8
"""


def test_a_task_over_two_nodes_is_one_server_whose_ranks_dstack_numbers() -> None:
    outcome = imported(TWO_NODES)
    recipe = outcome.recipe
    assert recipe.node_count() == 2
    assert recipe.server.flag("--tp") == "16"  # $DSTACK_GPUS_NUM: every node's GPUs
    assert recipe.server.flag("--node-rank") == "{{rank}}"
    assert recipe.server.flag("--dist-init-addr") == "{{head}}:{{dist_port}}"
    assert recipe.docker.last("--network") == "host"
    assert not any(w == "-p" for e in recipe.docker.entries for w in e.words)  # ranks meet on the host's network
    assert "svc.dstack.yml:8: $DSTACK_GPUS_NUM is 16, resources.gpu's count x nodes 2" in outcome.notes


NODE_GROUPS = """type: task
image: lmsysorg/sglang:v0.5.10.post1
groups:
  - nodes: 1
    commands:
      - smg launch --pd-disaggregation --prefill http://p:8000 --decode http://d:8000
    resources:
      cpu: 4
  - nodes: 1
    commands:
      - python -m sglang.launch_server --model-path org/m {flags}
    resources:
      gpu: H200
"""


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ("--disaggregation-mode prefill", "groups: a prefill/decode split (--disaggregation-mode)"),
        ("--port 8000", "groups: 2 node groups, each running its own commands on its own nodes"),
    ],
)
def test_a_tasks_node_groups_are_refused_by_what_they_run(flags: str, message: str) -> None:
    said = refusal(NODE_GROUPS.format(flags=flags))
    assert message in said and ":3: " in said and "\n" not in said, said
