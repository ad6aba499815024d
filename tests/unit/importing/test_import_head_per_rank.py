"""The ranks of one server over hosts whose commands name the head differently (each rank's own reading of the
docs: `--dist-init-addr` with its own address) are one server: hgxkit writes the head per deploy, and a note
names the addresses the post had. Anything else that differs, the rendezvous port included, is still refused
(hgxkit/importing/importer.py `_one_setup`, hgxkit/importing/vllm_multinode.py for Ray)."""

from __future__ import annotations

import pytest

from hgxkit.errors import InputError
from hgxkit.importing.importer import ImportOptions, import_post
from hgxkit.importing.outcome import ImportOutcome
from hgxkit.recipe.render import render_recipe

SGLANG = (
    "python3 -m sglang.launch_server --model-path org/m --tp 16 --dist-init-addr {addr} --nnodes 2 --node-rank {rank}\n"
)
VLLM = "vllm serve org/m -tp 16 --nnodes 2 --node-rank {rank} --master-addr {addr} --master-port {port}{more}\n"


def imported(text: str) -> ImportOutcome:
    return import_post([("p.md", text)], ImportOptions())


def refusal(text: str) -> str:
    with pytest.raises(InputError) as caught:
        imported(text)
    return caught.value.message


def test_sglang_ranks_naming_their_own_address_as_the_head_are_one_server() -> None:
    outcome = imported(SGLANG.format(addr="10.0.0.1:5000", rank=0) + SGLANG.format(addr="10.0.0.2:5000", rank=1))
    recipe = outcome.recipe
    assert (recipe.groups.nodes, recipe.groups.dist_port) == (2, 5000)
    assert (
        "p.md:1: the ranks name different head addresses (10.0.0.1 at line 1, 10.0.0.2 at line 2): each names the "
        "head in its own command, which hgxkit writes per deploy from the inventory's head ({{head}}), so they are "
        "one server"
    ) in outcome.notes
    for rank in (0, 1):
        (group,) = render_recipe(recipe, rank=rank, head="node1")
        argv = group.server_argv
        assert argv[argv.index("--dist-init-addr") + 1] == "node1:5000"


def test_sglang_ranks_whose_head_port_differs_are_refused() -> None:
    post = SGLANG.format(addr="10.0.0.1:5000", rank=0) + SGLANG.format(addr="10.0.0.2:5001", rank=1)
    assert refusal(post) == (
        "p.md:1: 2 serving commands that are not one setup: they differ in server --dist-init-addr: 10.0.0.1:5000 "
        "(line 1) vs 10.0.0.2:5001 (line 2); import one with --pick N (1: line 1, 2: line 2)"
    )


def test_vllm_ranks_naming_different_master_addresses_are_one_server() -> None:
    post = VLLM.format(rank=0, addr="10.0.0.1", port=29501, more="") + VLLM.format(
        rank=1, addr="10.0.0.2", port=29501, more=" --headless"
    )
    outcome = imported(post)
    assert outcome.recipe.groups.nodes == 2
    assert any("different head addresses (10.0.0.1 at line 1, 10.0.0.2 at line 2)" in n for n in outcome.notes)


def test_vllm_ranks_whose_master_port_differs_are_refused() -> None:
    post = VLLM.format(rank=0, addr="10.0.0.1", port=29501, more="") + VLLM.format(
        rank=1, addr="10.0.0.2", port=29502, more=" --headless"
    )
    assert "they differ in server --master-port: 29501 (line 1) vs 29502 (line 2)" in refusal(post)


def test_vllm_dp_hosts_naming_different_addresses_say_both() -> None:
    dp = (
        "vllm serve org/m --data-parallel-size 16 --data-parallel-size-local 8 --data-parallel-address {addr} "
        "--data-parallel-rpc-port 13345{more}\n"
    )
    post = dp.format(addr="10.0.0.1", more="") + dp.format(
        addr="10.0.0.2", more=" --headless --data-parallel-start-rank 8"
    )
    outcome = imported(post)
    assert outcome.recipe.groups.nodes == 2
    assert any("different head addresses (10.0.0.1 at line 1, 10.0.0.2 at line 2)" in n for n in outcome.notes)


RAY_HEAD = "bash run_cluster.sh vllm/vllm-openai 10.0.0.1 --head /data/hf -e VLLM_HOST_IP=10.0.0.1\n"
RAY_WORKER = "bash run_cluster.sh vllm/vllm-openai {addr} --worker /data/hf -e VLLM_HOST_IP=10.0.0.2\n"
RAY_SERVE = "vllm serve org/m --tensor-parallel-size 8 --pipeline-parallel-size 2\n"


def test_ray_hosts_naming_the_head_differently_are_one_cluster() -> None:
    outcome = imported(RAY_HEAD + RAY_WORKER.format(addr="10.0.0.9") + RAY_SERVE)
    assert outcome.recipe.groups.nodes == 2
    assert (
        "p.md:3: the Ray hosts name different head addresses (10.0.0.1 at line 1, 10.0.0.9 at line 2); hgxkit "
        "writes the head's address per deploy from the inventory, so they are one cluster"
    ) in outcome.notes


def test_a_ray_worker_joining_another_port_than_the_heads_is_refused() -> None:
    post = "ray start --head --port=6380 --num-gpus=8\nray start --block --address=10.0.0.1:6379 --num-gpus=8\n"
    assert refusal(post + "vllm serve org/m -tp 8 -pp 2\n") == (
        "p.md:2: the Ray worker joins port 6379, but the head (p.md:1) listens on 6380; write the head's port in both"
    )
