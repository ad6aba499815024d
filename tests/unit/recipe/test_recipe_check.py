"""`recipe check` errors and pitfall warnings, and `recipe diff` by meaning."""

from __future__ import annotations

from pathlib import Path

import pytest

from hgxkit.errors import InputError
from hgxkit.importing.docker_run import import_docker_run
from hgxkit.recipe.check import check_recipe, parallel_size
from hgxkit.recipe.diff import diff_recipes
from hgxkit.recipe.read import load_recipe, parse_recipe_text

ROOT = Path(__file__).resolve().parents[3]
MARLIN = ROOT / "recipes" / "deepseek-v4-flash-dspark-marlin.yaml"
SEED = (ROOT / "tests" / "fixtures" / "seed-docker-run.txt").read_text()


def codes(findings: list, level: str) -> list[str]:
    return [f.code for f in findings if f.level == level]


def test_the_post_recipe_has_no_errors_and_its_known_pitfalls_as_warnings() -> None:
    findings = check_recipe(load_recipe(MARLIN), 8)
    assert codes(findings, "error") == []
    # its `-p 5000:30000` binds bind_address on a node (loopback by default): no exposure to warn of
    assert codes(findings, "warning") == [
        "shm-size-ignored",
        "hicache-host-ram",
        "moving-tag",
    ]


def test_gpu_count_not_divisible_by_group_size() -> None:
    findings = check_recipe(load_recipe(MARLIN), 6)
    assert codes(findings, "error") == ["gpu-count"]
    assert "6 GPUs do not divide into groups of 4" in findings[0].message


def test_group_size_must_equal_tp_times_dp() -> None:
    recipe = import_docker_run(SEED.replace("--tp 4", "--tp 2"))
    findings = check_recipe(recipe, 8)
    assert codes(findings, "error") == ["group-size"]
    assert "a group has 4 GPUs but the server runs on 2 (tp x pp x dp)" in findings[0].message


def test_parallel_size_counts_dp_unless_dp_attention() -> None:
    base = "docker run img sglang serve --model-path m --tp-size 4 --dp-size 2"
    assert parallel_size(import_docker_run(base)) == 8
    assert parallel_size(import_docker_run(base + " --enable-dp-attention")) == 4
    assert parallel_size(import_docker_run("docker run img sglang serve --tensor-parallel-size 2 --pp 2")) == 4


def _with_groups(explicit: str) -> str:
    text = MARLIN.read_text()
    return text.replace("groups:\n  size: 4\n", f"groups:\n  explicit: {explicit}\n")


def test_overlapping_and_out_of_range_groups_are_errors() -> None:
    recipe = parse_recipe_text(_with_groups("[[0, 1, 2, 3], [3, 4, 5, 8]]"))
    messages = [f.message for f in check_recipe(recipe, 8) if f.level == "error"]
    assert "groups 0 and 1 overlap on GPU 3" in messages
    assert "group 1 uses GPU 8, but the node has GPUs 0-7" in messages


@pytest.mark.parametrize("gpus", ["'\"device=5,6,7,8\"'", "all -e CUDA_VISIBLE_DEVICES=5,6,7,8"])
def test_a_container_naming_a_gpu_the_node_lacks_is_an_error(gpus: str) -> None:
    """The one-container recipe a hand edit (or another box's post) gives: check says what import refuses."""
    run = (
        f"docker run --gpus {gpus} -v /m:/model -p 5000:30000 lmsysorg/sglang:v0.5.9 "
        "python3 -m sglang.launch_server --model-path /model --tp 4 --host 0.0.0.0 --port 30000"
    )
    errors = [f.message for f in check_recipe(import_docker_run(run), None) if f.level == "error"]
    assert errors == ["the container names GPU 8, but the node has GPUs 0-7"]
    assert not [f for f in check_recipe(import_docker_run(run.replace("5,6,7,8", "4,5,6,7")), 8) if f.level == "error"]


def test_two_groups_on_one_host_port_is_an_error() -> None:
    text = MARLIN.read_text().replace("- -p '{{port}}:30000'", "- -p 5000:30000")
    findings = check_recipe(parse_recipe_text(text), 8)
    assert codes(findings, "error") == ["port-clash"]
    assert "groups 0 and 1 publish host port 5000" in findings[0].message


def test_model_path_outside_every_mount_is_an_error() -> None:
    recipe = import_docker_run(SEED.replace("--model-path /model", "--model-path /models/x"))
    findings = check_recipe(recipe, 8)
    assert "model-mount" in codes(findings, "error")
    assert any("--model-path /models/x is not inside any mount" in f.message for f in findings)


def test_gpus_all_with_several_groups_is_an_error() -> None:
    text = MARLIN.read_text().replace("""- --gpus '"device={{gpus}}"'""", "- --gpus all")
    assert "gpus-all" in codes(check_recipe(parse_recipe_text(text), 8), "error")


@pytest.mark.parametrize(
    ("cmd", "code", "reason"),
    [
        ("--cuda-graph-max-bs 24", "cuda-graph-max-bs", "ambiguous in SGLang >= 0.5.23"),
        ("--speculative-algorithm EAGLE3", "wrong-spec-algorithm", "serves with accept length 1.0"),
        ("--speculative-num-steps 3", "dspark-shape", "ignored with DSPARK"),
        ("--api-key {{env:SGLANG_API_KEY}}", None, None),
    ],
)
def test_server_pitfalls_warn_with_reason(cmd: str, code: str | None, reason: str | None) -> None:
    text = MARLIN.read_text().replace("  - --trust-remote-code\n", f"  - --trust-remote-code\n  - {cmd}\n")
    if "EAGLE" in cmd:  # the last use of a flag wins, as in argparse; drop the recipe's own DSPARK
        text = text.replace("  - --speculative-algorithm DSPARK\n", "")
    findings = check_recipe(parse_recipe_text(text), 8)
    if code is None:  # with an API key the unauthenticated warning goes away
        assert "unauthenticated" not in codes(findings, "warning")
        return
    warning = next(f for f in findings if f.code == code)
    assert warning.level == "warning"
    assert reason in warning.message


def test_server_bound_to_loopback_inside_container_is_unreachable() -> None:
    recipe = import_docker_run("docker run -p 8000:30000 img sglang serve --model-path org/m")
    findings = check_recipe(recipe)
    # an error: the deploy would wait for an answer that can never come (the importer adds --host 0.0.0.0)
    assert codes(findings, "error") == ["unreachable"] and codes(findings, "warning") == ["moving-tag"]


def test_loopback_publish_is_not_unauthenticated() -> None:
    recipe = import_docker_run("docker run -p 127.0.0.1:8000:30000 img:1 sglang serve --host 0.0.0.0")
    assert codes(check_recipe(recipe), "warning") == []


def test_compact_verify_without_sps_table_warns() -> None:
    recipe = import_docker_run(SEED.replace("VERIFY_MODE=static", "VERIFY_MODE=compact"))
    assert "compact-without-sps" in codes(check_recipe(recipe, 8), "warning")


def test_diff_compares_meaning_not_spelling() -> None:
    a = import_docker_run("docker run --ipc=host -e A=1 img:1 sglang serve --tp 4 --model-path /m")
    b = import_docker_run("docker run -e A=1 --ipc host img:1 sglang serve --model-path=/m --tp-size=4")
    assert diff_recipes(a, b) == []


def test_diff_names_each_area() -> None:
    a = import_docker_run("docker run -e A=1 --shm-size 1g img:1 sglang serve --tp 4")
    b = import_docker_run("docker run -e A=2 -e B=3 img:2 sglang serve --tp 8 --enable-metrics")
    assert [d.line() for d in diff_recipes(a, b)] == [
        "image reference: img:1 -> img:2",
        "env A: 1 -> 2",
        "env B: (absent) -> 3",
        "docker --shm-size: 1g -> (absent)",
        "server --tp-size: 4 -> 8",
        "server --enable-metrics: (absent) -> (set)",
    ]


def test_a_bridge_container_naming_a_host_interface_is_an_error() -> None:
    base = (
        "docker run --gpus all --ipc=host -p 30000:30000 -e NCCL_SOCKET_IFNAME=bond0 -e GLOO_SOCKET_IFNAME=eth0 "
        "lmsysorg/sglang:v0.5.0 python3 -m sglang.launch_server --model-path /m --host 0.0.0.0"
    )
    findings = check_recipe(import_docker_run(base))
    errors = [f for f in findings if f.code == "host-interface"]
    assert [f.level for f in errors] == ["error"]  # eth0 exists in a bridge container; bond0 does not
    assert "-e NCCL_SOCKET_IFNAME=bond0 names a host network interface" in errors[0].message
    on_host = base.replace("-p 30000:30000", "--network host")
    assert "host-interface" not in codes(check_recipe(import_docker_run(on_host)), "error")


def test_a_server_over_two_nodes_on_the_bridge_network_is_an_error() -> None:
    base = (
        "docker run --gpus all --ipc=host -p 30000:30000 lmsysorg/sglang:v0.5.0 python3 -m sglang.launch_server "
        "--model-path /m --tp 16 --nnodes 2 --node-rank 0 --dist-init-addr 10.0.0.1:20000 --host 0.0.0.0"
    )
    errors = [f for f in check_recipe(import_docker_run(base)) if f.code == "spanning-network"]
    assert [(f.level, f.remedy) for f in errors] == [
        ("error", "add --network host, as multi-node posts of both engines do")
    ]
    assert errors[0].message.startswith("the server spans 2 nodes, but its containers have Docker's own (bridge)")
    on_host = base.replace("-p 30000:30000", "--network host")
    assert "spanning-network" not in codes(check_recipe(import_docker_run(on_host)), "error")
    one_node = base.replace("--tp 16 --nnodes 2 --node-rank 0 --dist-init-addr 10.0.0.1:20000", "--tp 8")
    assert "spanning-network" not in codes(check_recipe(import_docker_run(one_node)), "error")


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            "    num_prompts: 10\n",
            "    num_prompts: 1000000000000000\n",
            "matrix.cells[0].num_prompts (line 79): 1000000000000000 is more than the maximum of 100000",
        ),
        (
            "  - id: 5000x1\n    input_len: 5000\n",
            "  - id: 5000x1\n    input_len: 2000000\n",
            "matrix.cells[0].input_len (line 77): 2000000 is more than the maximum of 1048576",
        ),
        (
            "  - id: 5000x1\n    input_len: 5000\n    concurrency: 1\n",
            "  - id: 5000x1\n    input_len: 5000\n    concurrency: 100000\n",
            "matrix.cells[0].concurrency (line 78): 100000 is more than the maximum of 10000",
        ),
        (
            "  smoke:\n    input_len: 5000\n    concurrency: 1\n    num_prompts: 3\n",
            "  smoke:\n    input_len: 5000\n    concurrency: 1\n    num_prompts: 300000\n",
            "matrix.smoke.num_prompts (line 155): 300000 is more than the maximum of 100000",
        ),
    ],
    ids=["prompts", "input-len", "concurrency", "smoke-prompts"],
)
def test_benchmark_sizes_beyond_their_maxima_are_one_line_errors_naming_the_key(
    old: str, new: str, message: str
) -> None:
    text = MARLIN.read_text()
    assert old in text
    with pytest.raises(InputError) as refused:
        parse_recipe_text(text.replace(old, new, 1), source="r.yaml")
    assert refused.value.message == f"r.yaml: {message}"


@pytest.mark.parametrize(
    ("program", "options", "image", "error"),
    [
        ("vllm serve", "", "vllm/vllm-openai:v0.33.0", True),  # `vllm serve vllm serve M`: vLLM stops
        ("python3 -m vllm.entrypoints.openai.api_server", "", "vllm/vllm-openai:v0.33.0", True),
        ("", "", "vllm/vllm-openai:v0.33.0", False),  # the entrypoint takes the arguments
        ("vllm serve", "\n  - --entrypoint ''", "vllm/vllm-openai:v0.33.0", False),  # Docker runs the program
        ("vllm serve", "", "nvcr.io/nvidia/vllm:25.09-py3", False),  # an image without that entrypoint
    ],
)
def test_a_program_the_image_entrypoint_already_runs_is_an_error(
    program: str, options: str, image: str, error: bool
) -> None:
    recipe = parse_recipe_text(
        f"schema_version: 2\nname: t\nimage:\n  reference: {image}\nmodel:\n  repo_id: org/m\n"
        f"  local_dir: /data/m\n  mount_point: /m\ndocker:\n  options:\n  - --gpus all\n  - -v /data/m:/m{options}\n"
        f"server:\n  kind: vllm\n  command: '{program}'\n  args:\n  - /m\n"
    )
    codes = [p.code for p in check_recipe(recipe, 8) if p.level == "error"]
    assert ("entrypoint-repeated" in codes) == error, codes
