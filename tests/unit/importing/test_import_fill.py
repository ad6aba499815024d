"""`recipe import --fill PLACEHOLDER=VALUE` (hgxkit.importing.fill): the value a post leaves to its reader.

The real post is formats/r01, vLLM's examples/online_serving/run_deepseek.sh, refused as published for its
`/path/to/…` placeholders (index.yaml); given them as its reader would, it imports as a Ray group over two nodes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hgxkit.errors import InputError
from hgxkit.importing.fill import fill_posts, parse_fill
from hgxkit.importing.importer import ImportOptions, import_post

R01 = Path(__file__).resolve().parents[2] / "fixtures" / "posts" / "formats" / "r01-vllm-run-deepseek-ray-docker.sh"
# The SGLang docs' Slurm script (corpus 105): `model=MODEL_PATH`, then `srun … --model-path "$model"`.
SLURM = (
    Path(__file__).resolve().parents[2]
    / "fixtures"
    / "posts"
    / "105-sglang-docs-slurm-sbatch-model-path-placeholder.txt"
)
HF_HOME = "/path/to/the/huggingface/home/on/this/node"
IN_CONTAINER = "/path/to/the/model/in/the/container"
FILLS = ((HF_HOME, "/data/models/DeepSeek-V3"), (IN_CONTAINER, "/models/DeepSeek-V3"))


def test_vllms_ray_example_imports_with_its_placeholders_given() -> None:
    outcome = import_post(
        [(R01.name, R01.read_text())],
        ImportOptions(fill=FILLS, model_repo="deepseek-ai/DeepSeek-V3", image="vllm/vllm-openai:latest"),
    )
    recipe = outcome.recipe
    assert recipe.model.repo_id == "deepseek-ai/DeepSeek-V3"
    assert (recipe.model.local_dir, recipe.model.mount_point) == ("/data/models/DeepSeek-V3", "/models/DeepSeek-V3")
    assert " ".join(w for e in recipe.docker.entries for w in e.words) == (
        "-d --gpus all --privileged --ipc=host --network=host --shm-size 10.24g "
        "-v /var/run/nvidia-topologyd:/var/run/nvidia-topologyd -v /data/models/DeepSeek-V3:/models/DeepSeek-V3 "
        "-e GLOO_SOCKET_IFNAME=eth0 -e NCCL_SOCKET_IFNAME=eth0 -e NCCL_IB_HCA=mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1 "
        "-e NCCL_IB_DISABLE=0 -e NCCL_IB_GID_INDEX=3 -e CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 "
        "-e RAY_CGRAPH_submit_timeout=600 -e RAY_CGRAPH_get_timeout=600 --entrypoint /bin/bash --name ray_head "
        "-e VLLM_USE_V1=1"
    )
    assert " ".join(recipe.server.words()) == (
        "--model /models/DeepSeek-V3 --tensor-parallel-size 8 --pipeline-parallel-size 2 --gpu-memory-utilization "
        "0.92 --dtype auto --distributed-executor-backend ray --served-model-name deepseekv3 --max-num-seqs 40 "
        "--max-model-len 16384 --enable-chunked-prefill --enable-prefix-caching --trust-remote-code"
    )
    assert (recipe.groups.size, recipe.groups.nodes, recipe.groups.dist_port) == (8, 2, 6379)
    assert outcome.notes[:2] == (
        f"{R01.name}:21: {HF_HOME} is /data/models/DeepSeek-V3 (--fill), at line(s) 21, 36, 54",
        f"{R01.name}:36: {IN_CONTAINER} is /models/DeepSeek-V3 (--fill), at line(s) 36, 54, 74",
    )
    assert f"{R01.name}:73: -e VLLM_USE_V1=1 (the launch's environment) added to the container on every host" in (
        outcome.notes
    )
    assert (
        f"{R01.name}:34: `ray start` --include-dashboard=True not kept: every host runs hgxkit's own Ray start "
        "(`ray start --head --port=6379`, `ray start --block --address=HEAD:6379`)" in outcome.notes
    )
    assert len(outcome.lines) == len(R01.read_text().split("\n"))  # every line accounted for, filled or not


def test_one_placeholder_given_the_other_is_still_refused_by_name() -> None:
    with pytest.raises(InputError) as caught:
        import_post([(R01.name, R01.read_text())], ImportOptions(fill=FILLS[:1]))
    assert caught.value.message == (
        f"{R01.name}: line 36, column 8: {IN_CONTAINER} is a placeholder (the value of -v); write its value, or give it: "
        f"--fill '{IN_CONTAINER}=VALUE'"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "/data/models/M=/x",
            "--fill /data/models/M=/x: give PLACEHOLDER=VALUE, the placeholder as the post writes it "
            "(/path/to/…, <NAME>, YOUR_…, {your …}, MODEL_PATH) and its value",
        ),
        (
            "/path/to/m",
            "--fill /path/to/m: give PLACEHOLDER=VALUE, the placeholder as the post writes it (/path/to/…, "
            "<NAME>, YOUR_…, {your …}, MODEL_PATH) and its value",
        ),
        (
            "<HEAD_IP>=$(hostname)",
            "--fill <HEAD_IP>=$(hostname): the value '$(hostname)' must be one word of letters, "
            "digits and ./:@%+,=-_ (no spaces, quotes, $ or shell operators), not starting with -",
        ),
        (
            "YOUR_MODEL=a b",
            "--fill YOUR_MODEL=a b: the value 'a b' must be one word of letters, digits and ./:@%+,=-_ "
            "(no spaces, quotes, $ or shell operators), not starting with -",
        ),
        (
            "YOUR_MODEL=",
            "--fill YOUR_MODEL=: the value '' must be one word of letters, digits and ./:@%+,=-_ (no spaces, "
            "quotes, $ or shell operators), not starting with -",
        ),
    ],
)
def test_parse_fill_refuses_what_is_not_a_placeholder_or_not_one_plain_word(text: str, message: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_fill(text)
    assert caught.value.message == message


def test_fill_ends_where_the_path_or_name_ends_and_a_missing_placeholder_is_refused() -> None:
    post = "vllm serve /path/to/m --x /path/to/mm -v /path/to/m/sub:/c -e A=<HEAD_IP> YOUR_MODEL_DIR YOUR_MODEL\n"
    fills = (parse_fill("/path/to/m=/w"), parse_fill("<HEAD_IP>=10.0.0.1"), parse_fill("YOUR_MODEL=org/M"))
    ((_, text),), _notes = fill_posts([("p.md", post)], fills)
    assert text == "vllm serve /w --x /path/to/mm -v /w/sub:/c -e A=10.0.0.1 YOUR_MODEL_DIR org/M\n"
    with pytest.raises(InputError) as caught:
        fill_posts([("p.md", post)], (parse_fill("/path/to/other=/w"),))
    assert caught.value.message == (
        "--fill /path/to/other=…: p.md has no /path/to/other; give the placeholder as the "
        "post writes it (the import's refusal names it)"
    )
    with pytest.raises(InputError) as caught:
        fill_posts([("p.md", post)], (parse_fill("/path/to/m=/a"), parse_fill("/path/to/m=/b")))
    assert caught.value.message == "--fill /path/to/m=…: given twice; give each placeholder once"


def test_a_slurm_scripts_model_name_placeholder_is_refused_naming_fill_and_imports_with_it() -> None:
    with pytest.raises(InputError) as caught:
        import_post([(SLURM.name, SLURM.read_text())])
    assert caught.value.message == (
        f"{SLURM.name}:42: --model-path MODEL_PATH is a placeholder (a name to fill in, not a model; the post writes "
        "it at line 27); write the model's repository or path there, or give it: --fill 'MODEL_PATH=VALUE'"
    )
    fill = (parse_fill("MODEL_PATH=meta-llama/Meta-Llama-3.1-405B-Instruct"),)
    outcome = import_post([(SLURM.name, SLURM.read_text())], ImportOptions(fill=fill))
    recipe = outcome.recipe
    assert recipe.model.repo_id == "meta-llama/Meta-Llama-3.1-405B-Instruct"
    assert (recipe.groups.size, recipe.groups.nodes) == (8, 2)
    assert outcome.notes[0] == (
        f"{SLURM.name}:27: MODEL_PATH is meta-llama/Meta-Llama-3.1-405B-Instruct (--fill), at line(s) 27"
    )


def test_a_name_placeholder_is_filled_where_it_is_a_value_not_where_it_is_a_variable() -> None:
    post = "MODEL_PATH=x\nvllm serve MODEL_PATH --a=MODEL_PATH --b $MODEL_PATH --c ${MODEL_PATH} MODEL_PATH_2\n"
    ((_, text),), _notes = fill_posts([("p.md", post)], (parse_fill("MODEL_PATH=org/m"),))
    assert text == "MODEL_PATH=x\nvllm serve org/m --a=org/m --b $MODEL_PATH --c ${MODEL_PATH} MODEL_PATH_2\n"
