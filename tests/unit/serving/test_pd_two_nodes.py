"""A prefill/decode split laid over hosts (`groups.hosts`, tests/fixtures/pd/dspark-pd-two-nodes.yaml): which host
runs which group (hgxkit/serving/hostshare.py), the router's PD arguments naming each side at its node's address
(hgxkit/serving/router.py), and what `recipe check` (hgxkit/recipe/pd.py) accepts and refuses."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from hgxkit.kinds.sglang import SGLANG
from hgxkit.recipe.pd import host_group_count, pd_problems, sides
from hgxkit.recipe.read import load_recipe
from hgxkit.recipe.render import render_recipe
from hgxkit.serving.hostshare import share_hosts, share_of
from hgxkit.serving.multinode import Candidate
from hgxkit.serving.router import WorkerHost, group_sides, pd_workers, worker_sides, worker_urls

ROOT = Path(__file__).resolve().parents[3]
TWO = load_recipe(ROOT / "tests" / "fixtures" / "pd" / "dspark-pd-two-nodes.yaml")
VLLM_ONE = load_recipe(ROOT / "tests" / "fixtures" / "pd" / "vllm-pd-one-node.yaml")
NODES = [Candidate("node1", address="10.0.0.1"), Candidate("node2", address="10.0.0.2")]


def codes(recipe, gpus: int = 8) -> list[str]:
    return [p.code for p in pd_problems(recipe, gpus)]


def with_args(recipe, old: str, new: str):
    args = tuple(tuple(new.split()) if " ".join(a) == old else a for a in recipe.server.args)
    return replace(recipe, server=replace(recipe.server, args=args))


def test_each_host_runs_its_share_numbered_after_the_previous_host() -> None:
    shares, problems = share_hosts(NODES, hosts=2, per_host=host_group_count(TWO, 8))
    assert problems == []
    assert [(s.host, s.groups, s.address) for s in shares] == [("node1", (0,), "10.0.0.1"), ("node2", (1,), "10.0.0.2")]
    node2 = share_of(shares, "node2")
    assert node2 is not None
    (group,) = render_recipe(TWO, total_gpus=8, first_group=node2.first_group)
    assert (group.group, group.name, group.port, group.gpus) == (1, "deepseek-v4-flash-pd-1", 5001, list(range(8)))
    assert "decode" in [w for entry in group.command for w in entry]


@pytest.mark.parametrize(
    ("candidates", "found"),
    [
        ([Candidate("node1", address="a")], "node1 serve(s) a recipe spanning 2 nodes"),  # a share left without a host
        ([Candidate("node1", address="a"), Candidate("node2")], "fabric address of node2 is unknown"),
        (
            [Candidate("node1", ("node1", "node3"), "a"), Candidate("node2", address="b")],
            "lists node3, which is not an inventory host",
        ),
    ],
)
def test_hosts_that_cannot_take_the_shares_are_named(candidates, found) -> None:
    _, problems = share_hosts(candidates, hosts=2, per_host=1)
    assert any(found in p.message for p in problems), [p.message for p in problems]


def test_group_hosts_orders_the_shares() -> None:
    swapped = [Candidate(n.name, ("node2", "node1"), n.address) for n in NODES]
    shares, problems = share_hosts(swapped, hosts=2, per_host=1)
    assert problems == [] and [(s.host, s.groups) for s in shares] == [("node2", (0,)), ("node1", (1,))]


def test_the_router_names_both_sides_by_their_nodes_address_even_its_own() -> None:
    hosts = [
        WorkerHost("node1", "10.0.0.1", "0.0.0.0", [5000], sides=group_sides(TWO, [0]), shared=True),
        WorkerHost("node2", "10.0.0.2", "0.0.0.0", [5001], sides=group_sides(TWO, [1]), shared=True),
    ]
    urls, problems = worker_urls("node1", hosts)
    assert problems == [] and urls == ["http://10.0.0.1:5000", "http://10.0.0.2:5001"]
    assert SGLANG.prefill_decode is not None
    args = pd_workers(urls, worker_sides("node1", hosts), "round_robin", SGLANG.prefill_decode.router)
    assert args[:6] == ["--pd-disaggregation", "--prefill", "http://10.0.0.1:5000", "8998", "--decode", urls[1]]


def test_a_share_listening_on_loopback_is_unreachable_from_the_router_and_the_other_side() -> None:
    hosts = [WorkerHost("node1", "10.0.0.1", "127.0.0.1", [5000], shared=True)]
    _, problems = worker_urls("node1", hosts)
    assert [p.code for p in problems] == ["router-reach"] and "--host 0.0.0.0" in problems[0].remedy


def test_recipe_check_accepts_the_two_node_split() -> None:
    assert sides(TWO, 8) == ["prefill", "decode"]
    assert codes(TWO) == []


def test_recipe_check_refuses_what_cannot_work_over_two_nodes() -> None:
    assert "pd-reach" in codes(with_args(TWO, "--host 0.0.0.0", "--host 127.0.0.1"))
    assert "pd-network" in codes(replace(TWO, docker=replace(TWO.docker, entries=TWO.docker.entries[:-2])))
    assert "pd-nodes" in codes(replace(TWO, groups=replace(TWO.groups, nodes=2)))
    assert "pd-groups" in codes(replace(TWO, groups=replace(TWO.groups, hosts=3)))  # 3 groups, 2 server_args
    vllm_two = replace(VLLM_ONE, groups=replace(VLLM_ONE.groups, size=8, hosts=2))
    assert "pd-hosts" in codes(vllm_two)


def test_two_prefill_groups_share_a_bootstrap_port_only_on_one_host() -> None:
    groups = replace(TWO.groups, server_args=(*TWO.groups.server_args[:1], *TWO.groups.server_args))
    three = replace(TWO, groups=replace(groups, hosts=3))  # prefill, prefill, decode: one per host
    assert "pd-bootstrap" not in codes(three)
    one_host = replace(TWO, groups=replace(groups, size=4, hosts=None, server_args=groups.server_args[:2]))
    assert "pd-bootstrap" in codes(one_host)
