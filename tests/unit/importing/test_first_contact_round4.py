"""Classes of import failure found by reading posts 140-149 first (issue 41, round 4): PS2 prompts after an
unprompted first line, a host wrapper script before a launch, ranks that each listen on their own node's address,
a flag the engine refuses behind a split hgxkit does not deploy, vLLM's split whose sides both say kv_both, and an
image a node cannot pull named at its own word."""

from __future__ import annotations

import pytest

from hgxkit.errors import InputError
from hgxkit.importing.importer import ImportOptions, import_post
from hgxkit.importing.outcome import ImportOutcome


def _import(text: str, name: str = "post.md", **options: object) -> ImportOutcome:
    return import_post([(name, text)], ImportOptions(**options))  # type: ignore[arg-type]


def _refusal(text: str, name: str = "post.md", **options: object) -> str:
    with pytest.raises(InputError) as caught:
        _import(text, name, **options)
    assert "\n" not in caught.value.message
    return caught.value.message


def test_ps2_prompts_after_an_unprompted_first_line_are_removed_not_read_as_redirections() -> None:
    post = (
        "```\nCUDA_VISIBLE_DEVICES=0 \\\n> vllm serve \\\n> org/m \\\n> --port 8100 \\\n> --max-model-len 4096\n```\n"
    )
    outcome = _import(post)
    assert outcome.recipe.server.flag("--port") == "8100"
    assert outcome.recipe.server.flag("--max-model-len") == "4096"
    assert outcome.recipe.model is not None and outcome.recipe.model.repo_id == "org/m"
    assert sum("PS2 prompt '>' removed" in note for note in outcome.notes) == 4


def test_a_redirection_on_the_line_after_a_backslash_is_still_a_redirection() -> None:
    outcome = _import("vllm serve org/m --port 8100 \\\n  > serve.log 2>&1 &\n")
    assert outcome.recipe.server.flag("--port") == "8100"
    assert not any("PS2" in note for note in outcome.notes)


def test_a_host_wrapper_script_before_a_launch_is_dropped_with_a_note() -> None:
    post = "NCCL_DEBUG=WARN /opt/libs/run-with-new-libstdc.sh /app/venv/bin/python3 -m sglang.launch_server \\\n"
    outcome = _import(post + "  --model-path org/m --tp 2\n")
    assert outcome.recipe.server.flag("--tp") == "2"
    assert any("wrapper script /opt/libs/run-with-new-libstdc.sh dropped" in note for note in outcome.notes)


def test_a_script_whose_arguments_are_no_launch_is_not_a_server() -> None:
    message = _refusal("./setup.sh --model-path org/m --tp 2\n")
    assert "no serving command in post.md: it runs the script `./setup.sh`" in message


RANK = (
    "python3 -m sglang.launch_server --model-path org/m --tp 16 --host {host} --port 30000 "
    "--dist-init-addr 10.0.0.1:5000 --nnodes 2 --node-rank {rank}\n"
)


def test_ranks_that_each_listen_on_their_own_address_are_one_server_listening_everywhere() -> None:
    outcome = _import(RANK.format(host="10.0.0.1", rank=0) + RANK.format(host="10.0.0.2", rank=1))
    assert outcome.recipe.node_count() == 2
    assert outcome.recipe.server.flag("--host") == "0.0.0.0"
    assert any("the ranks listen on different addresses" in note for note in outcome.notes)


def test_ranks_whose_listen_names_differ_are_still_not_one_setup() -> None:
    post = RANK.format(host="node-a", rank=0) + RANK.format(host="node-b", rank=1)
    assert "not one setup" in _refusal(post)


PREFILL_RANK = (
    "python3 -m sglang.launch_server --model-path org/m --tp 16 --dist-init-addr 10.0.0.1:5000 --nnodes 2 "
    "--node-rank {rank} --disaggregation-mode prefill{extra}\n"
)


def test_a_flag_the_engine_refuses_comes_before_a_split_hgxkit_does_not_deploy() -> None:
    ranks = "".join(PREFILL_RANK.format(rank=r, extra=" --disaggregation-decode-url http://d:30001") for r in (0, 1))
    message = _refusal(ranks)
    assert "`--disaggregation-decode-url` is not an option of SGLang 0.5.23" in message
    plain = "".join(PREFILL_RANK.format(rank=r, extra="") for r in (0, 1))
    assert "a prefill/decode split whose sides each span nodes" in _refusal(plain)


VLLM_SIDE = (
    "docker run --gpus '\"device={gpus}\"' --network host -e VLLM_NIXL_SIDE_CHANNEL_PORT={channel} "
    "vllm/vllm-openai:latest org/m --port {port} --tensor-parallel-size 4 --max-num-seqs {seqs} "
    """--kv-transfer-config '{{"kv_connector":"NixlConnector","kv_role":"kv_both"}}'\n"""
)


def test_vllms_split_whose_sides_both_say_kv_both_and_no_router_tells_apart_is_refused_naming_why() -> None:
    post = VLLM_SIDE.format(gpus="0,1,2,3", channel=5557, port=8000, seqs=8) + VLLM_SIDE.format(
        gpus="4,5,6,7", channel=5558, port=8001, seqs=512
    )
    message = _refusal(post)
    assert "each say --kv-transfer-config kv_role kv_both" in message
    assert "no router or proxy command of the post names which is the prefill and which the decode" in message
    assert "kv_producer on the prefill and kv_consumer on the decode" in message


@pytest.mark.parametrize(
    ("post", "where"),
    [
        (
            "docker run -d --gpus all --entrypoint sleep 65be730e0d41 infinity\n"
            "python3 -m sglang.launch_server --model-path org/m --tp 2\n",
            "post.md: line 1, column 45: the image 65be730e0d41 is a local image ID",
        ),
        (
            "docker build . --tag me/vllm\ndocker run --gpus all me/vllm --model org/m\n",
            "post.md: line 2, column 23: the image me/vllm is built by `docker build`",
        ),
    ],
)
def test_an_image_a_node_cannot_pull_is_named_at_its_own_word(post: str, where: str) -> None:
    assert _refusal(post).startswith(where)


@pytest.mark.parametrize(
    "post",
    [
        "env NCCL_DEBUG=INFO vllm serve org/m --port 8001\n",
        "nohup env \\\nNCCL_DEBUG=INFO \\\nvllm serve org/m \\\n  --port 8001 \\\n> serve.log 2>&1 &\n",
    ],
)
def test_env_before_a_launch_gives_the_launch_its_variables(post: str) -> None:
    outcome = _import(post)
    assert outcome.recipe.server.flag("--port") == "8001"
    assert "-e NCCL_DEBUG=INFO" in [" ".join(e.words) for e in outcome.recipe.docker.entries]
    assert any("`env` dropped" in note for note in outcome.notes)


def test_env_with_its_own_options_is_read_as_the_prefix_it_is() -> None:
    # `env -i` (round 5), `env -u NAME` and `env -C DIR` (round 6): test_first_contact_round6.py says how
    assert _import("env -u NCCL_DEBUG -C /opt vllm serve org/m\n").recipe.server.kind == "vllm"


def test_an_assignment_with_a_comment_after_it_is_read_as_the_shell_reads_it() -> None:
    post = (
        'BACKEND="mooncake" # nixl | mooncake\n'
        "python3 -m sglang.launch_server --model-path org/m --tp 4 --disaggregation-mode decode "
        "--disaggregation-transfer-backend ${BACKEND}\n"
    )
    message = _refusal(post)  # the decode side alone: the backend was read, mooncake, a backend hgxkit deploys
    assert "the post runs the decode side of a prefill/decode split alone" in message


def test_a_transfer_backend_the_post_never_sets_is_named_as_an_unset_variable() -> None:
    post = (
        "python3 -m sglang.launch_server --model-path org/m --tp 4 --disaggregation-mode decode "
        "--disaggregation-transfer-backend ${BACKEND}\n"
    )
    assert "${BACKEND}: a variable the post does not set" in _refusal(post)


GROUP = "docker run --gpus all {network}-e CUDA_VISIBLE_DEVICES={gpus} vllm/vllm-openai:latest org/m {port}-tp 4\n"


def test_groups_chosen_by_cuda_visible_devices_under_gpus_all_are_gpu_groups() -> None:
    post = GROUP.format(network="", gpus="0,1,2,3", port="") + GROUP.format(network="", gpus="4,5,6,7", port="")
    outcome = _import(post)
    groups = outcome.recipe.groups
    assert groups is not None and groups.explicit == ((0, 1, 2, 3), (4, 5, 6, 7))
    assert "-e CUDA_VISIBLE_DEVICES" not in " ".join(outcome.recipe.docker.words())
    assert any("is --gpus '\"device=…\"' of each list" in note for note in outcome.notes)


def test_groups_on_the_hosts_network_listen_on_ports_of_their_own() -> None:
    post = "".join(
        GROUP.format(network="--network host ", gpus=gpus, port=f"--port {port} ")
        for gpus, port in (("0,1,2,3", 8000), ("4,5,6,7", 8001))
    )
    recipe = _import(post).recipe
    assert recipe.server.flag("--port") == "{{port}}"
    assert recipe.groups is not None and recipe.groups.port_base == 8000


def test_the_same_gpu_list_twice_is_not_two_groups() -> None:
    post = GROUP.format(network="", gpus="0,1", port="--port 8000 ") + GROUP.format(
        network="", gpus="0,1", port="--port 8001 "
    )
    assert "not one setup" in _refusal(post)


RAY = "ray start --head --port=6379\n{worker}\nvllm serve org/m --tensor-parallel-size 8 --pipeline-parallel-size 2\n"


def test_a_placeholder_for_the_head_a_ray_worker_joins_is_written_per_deploy() -> None:
    outcome = _import(RAY.format(worker="ray start --address=<HEAD_IP>:6379"))
    assert outcome.recipe.node_count() == 2
    assert any("<HEAD_IP> is the head's address the worker joins" in note for note in outcome.notes)


def test_another_placeholder_in_a_ray_worker_is_still_refused_with_fill() -> None:
    message = _refusal(RAY.format(worker="ray start --address=<HEAD_IP>:6379 --num-gpus=<N>"))
    assert "is a placeholder" in message and "--fill" in message


def test_ray_hosts_of_part_of_a_node_are_refused_past_a_placeholder_head() -> None:
    post = "ray start --head --port=6379 --num-gpus=4\nray start --address=<HEAD_IP>:6379 --num-gpus=4\n"
    assert "--num-gpus" in _refusal(post + "vllm serve org/m -tp 4 -pp 2\n")


APPTAINER = (
    "#!/bin/bash\n#SBATCH --gres=gpu:4\nmodule load apptainer\n"
    "apptainer exec --nv --bind /scratch/models:/models {image} vllm serve /models/Llama-3.1-70B-Instruct "
    "--tensor-parallel-size 4 --port 8000\n"
)


def test_an_apptainer_image_file_is_refused_naming_it_and_image() -> None:
    message = _refusal(APPTAINER.format(image="vllm-openai_latest.sif"), "job.sh")
    assert message.startswith("job.sh: line 4, column 52: the image vllm-openai_latest.sif is a local apptainer image")
    assert "--image REF" in message


def test_an_apptainer_exec_of_a_registry_image_is_its_launch_with_the_binds_written_as_the_hosts() -> None:
    outcome = _import(APPTAINER.format(image="docker://vllm/vllm-openai:v0.33.0"), "job.sh")
    recipe = outcome.recipe
    assert recipe.image.reference == "vllm/vllm-openai:v0.33.0"
    assert recipe.server.flag("--model") == "/scratch/models/Llama-3.1-70B-Instruct"
    assert recipe.server.flag("--tensor-parallel-size") == "4"
    assert any("(--bind /scratch/models:/models)" in note for note in outcome.notes)


def test_an_apptainer_exec_of_something_else_is_not_a_server() -> None:
    assert "no serving command found" in _refusal("apptainer exec --nv x.sif python3 train.py\n")
