"""Classes of import failure found by reading posts 245-252 first (round 11, GitHub issue posts): a `docker run`
of an engine's image whose program is a script the post does not show (`--entrypoint /bin/bash IMAGE
/root/run.sh`) refused as 'no serving command found', never naming what the container runs; a terminal container
whose shell is its `--entrypoint` said to run `its entrypoint`; the commands of one server over N hosts posted
once per host but all with one `--node-rank`, imported at exit 0 as rank 0 with the other ranks made up; and an
engine's image pulled through a registry mirror that keeps Docker Hub's path (`swr.…/ddn-k8s/docker.io/vllm/
vllm-openai:v0.10.2`) refused as an image whose server is unknown."""

from __future__ import annotations

from test_first_contact_round5 import _import, _refusal  # the same helpers: import a post, its one-line refusal

SCRIPTED = """docker run -dti --network=host --gpus all \\
  --entrypoint /bin/bash \\
  lmsysorg/sglang:v0.4.4.post1-cu124-srt /root/run_sglang.sh
"""


def test_an_engine_image_running_a_script_names_the_script() -> None:
    refusal = _refusal(SCRIPTED)
    assert "runs `/bin/bash /root/run_sglang.sh`" in refusal
    assert "lmsysorg/sglang:v0.4.4.post1-cu124-srt" in refusal


def test_a_script_on_an_image_of_no_engine_is_still_no_serving_command() -> None:
    post = "docker run --gpus all --entrypoint /bin/bash ubuntu:22.04 /root/run.sh\n"
    assert "no serving command found" in _refusal(post)


def test_a_terminal_container_names_its_entrypoint_shell() -> None:
    post = "docker run -itd --gpus=all --entrypoint /bin/bash lmsysorg/sglang:v0.4.3.post2-cu125\n"
    refusal = _refusal(post)
    assert "the container runs `/bin/bash`" in refusal
    assert "entrypoint" not in refusal


RANK = (
    "python3 -m sglang.launch_server --model-path org/m --tp 16 --dist-init-addr 10.0.0.15:5000 --nnodes 2 "
    "--node-rank 0 --port 8011\n"
)


def test_one_command_per_host_all_on_one_rank_is_refused_naming_the_rank() -> None:
    refusal = _refusal(f"# node 1\n{RANK}# node 2\n{RANK}")
    assert "all give --node-rank 0" in refusal and "each host needs its own rank" in refusal


def test_a_rank_command_shown_once_is_still_rank_0_of_the_hosts() -> None:
    outcome = _import(f"# node 1\n{RANK}")
    assert outcome.recipe.groups.nodes == 2


def test_distinct_ranks_are_still_joined() -> None:
    second = RANK.replace("--node-rank 0", "--node-rank 1")
    assert _import(f"{RANK}{second}").recipe.groups.nodes == 2


def test_a_mirror_keeping_docker_hubs_path_is_the_upstream_engine() -> None:
    post = (
        "docker run --gpus all swr.cn-north-4.myhuaweicloud.com/ddn-k8s/docker.io/vllm/vllm-openai:v0.10.2 "
        "--model org/m --port 8081\n"
    )
    recipe = _import(post).recipe
    assert recipe.server.kind == "vllm"
    assert recipe.image.reference == "swr.cn-north-4.myhuaweicloud.com/ddn-k8s/docker.io/vllm/vllm-openai:v0.10.2"


def test_an_unknown_image_on_a_mirror_still_asks_for_the_kind() -> None:
    post = "docker run --gpus all swr.cn-north-4.myhuaweicloud.com/ddn-k8s/docker.io/acme/llm:1 --model org/m\n"
    assert "pass --kind" in _refusal(post)
