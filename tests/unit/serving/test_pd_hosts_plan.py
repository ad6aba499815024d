"""Plans on pyinfra's @fake nodes for a prefill/decode split: the router role taking over a router an earlier run
named otherwise (roles/router), and the preflight of a split laid over two hosts (roles/serve/split.py), which has
the decode's host reach the prefill's bootstrap port before anything changes."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pyinfra.api import Config, Inventory, State
from pyinfra.api.connect import connect_all
from pyinfra.api.deploy import add_deploy
from pyinfra.api.exceptions import DeployError

from hgxkit.serving.hostshare import HostShare, bootstrap_reaches
from roles.router import router
from roles.serve.split import split_preflight

ONE_NODE = "tests/fixtures/pd/dspark-pd-one-node.yaml"
TWO_NODES = "tests/fixtures/pd/dspark-pd-two-nodes.yaml"
MEMORY = {"/proc/meminfo": "MemTotal:       4227858432 kB"}
LISTING = "docker ps -a --no-trunc --format"  # hgxkit.serving.facts.all_containers without curl
REACH = "/dev/tcp/"  # hgxkit.serving.groupcmd.reach_command
LISTEN = "socket.create_server"  # ... and listener_command


def planned(hosts: list[tuple[str, dict[str, Any]]], deploy: Any) -> tuple[State, dict[str, list[str]]]:
    """Plan `deploy` on @fake hosts: the state, and the commands each host ran while planning."""
    common = {"fake_delay": 0, "fake_delay_jitter": 0, "serve_total_gpus": 8}
    inventory = Inventory(([(name, {**common, **data}) for name, data in hosts], {}))
    state = State(inventory=inventory, config=Config())
    connect_all(state)
    add_deploy(state, deploy)
    return state, {h.name: [str(c) for c in h.connector.executed_commands] for h in inventory}


def names(state: State, host: str) -> list[str]:
    h = state.inventory.get_host(host)
    return [name for op_hash in h.op_hash_order for name in state.get_op_meta(op_hash).names]


# --- the router taking over an earlier run's ---------------------------------------------------------------


def router_node(listing: list[str]) -> list[tuple[str, dict[str, Any]]]:
    data = {
        "recipe": ONE_NODE,
        "router": True,
        "allow_docker_options": ["--network"],
        "fake_responses": {**MEMORY, LISTING: listing},
    }
    return [("@fake/node1", data)]


def test_the_router_replaces_an_earlier_runs_router_found_by_its_label() -> None:
    # ps, id, name, state, then the labels serve, router, spec, group, port
    old = "ps\tc9\tsglang-router\trunning\t\t1\told-hash\t\t"
    state, commands = planned(router_node([old]), router)
    (name,) = [n for n in names(state, "@fake/node1") if "router" in n]
    assert "as deepseek-v4-flash-pd-one-node-router on port 30000" in name
    assert name.endswith("removing hgxkit's router sglang-router that holds its port"), name
    assert not [c for c in commands["@fake/node1"] if re.search(r"docker (run|rm|pull)", c)]  # planning only reads


def test_a_container_under_the_routers_name_that_is_not_hgxkits_router_is_refused() -> None:
    foreign = "ps\tc8\tdeepseek-v4-flash-pd-one-node-router\trunning\t\t\t\t\t"
    with pytest.raises(DeployError) as refused:
        planned(router_node([foreign]), router)
    message = str(refused.value)
    assert "[router-name]" in message and "taken by a container hgxkit did not start" in message, message
    assert "docker rm -f deepseek-v4-flash-pd-one-node-router" in message


# --- a split laid over hosts: the decode reaches the prefill's bootstrap port --------------------------------


def test_each_decode_host_reaches_every_prefill_on_another_host() -> None:
    one = [HostShare("n1", 0, "10.0.0.1", (0, 1)), HostShare("n2", 1, "10.0.0.2", (2, 3))]
    # n1: prefill 0 (port 8998), decode 1; n2: prefill 2 (port 8999), decode 3
    found = {
        (r.decode_host, r.prefill_host, r.group, r.address, r.port)
        for r in bootstrap_reaches(one, {0: 8998, 2: 8999}, {1, 3})
    }
    assert found == {("n1", "n2", 2, "10.0.0.2", 8999), ("n2", "n1", 0, "10.0.0.1", 8998)}  # not its own host's
    assert bootstrap_reaches(one, {}, {1, 3}) == []  # a kind without a bootstrap port (vLLM's NIXL)
    assert bootstrap_reaches(one[:1], {0: 8998}, {1}) == []  # on one host


def split_nodes(node1: dict[str, Any], node2: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    data = {"recipe": TWO_NODES, "router": True, "allow_docker_options": ["--network"]}
    return [
        ("@fake/node1", {**data, "fabric_address": "10.0.0.1", "fake_responses": {**MEMORY, **node1}}),
        ("@fake/node2", {**data, "fabric_address": "10.0.0.2", "fake_responses": {**MEMORY, **node2}}),
    ]


def test_before_the_prefill_runs_a_listener_stands_in_and_the_decode_host_connects_to_it() -> None:
    state, commands = planned(split_nodes({LISTEN: "listening"}, {}), split_preflight)
    (listener,) = [c for c in commands["@fake/node1"] if LISTEN in c]
    assert " 8998 " in listener  # the prefill's bootstrap port (SGLang's default: the fixture sets none)
    (reach,) = [c for c in commands["@fake/node2"] if REACH in c]
    assert reach.endswith(" 10.0.0.1 8998")  # the prefill host's fabric address, which the router names too
    assert not [c for c in commands["@fake/node1"] if REACH in c]  # the prefill's host has no decode
    assert names(state, "@fake/node1") == names(state, "@fake/node2") == []  # it changes nothing


def test_a_decode_host_that_cannot_reach_the_prefill_is_refused_naming_the_key_and_the_remedy() -> None:
    with pytest.raises(DeployError) as refused:
        planned(split_nodes({LISTEN: "listening"}, {REACH: {"success": False}}), split_preflight)
    lines = str(refused.value).splitlines()
    assert lines[0] == "split preflight failed on @fake/node2; nothing was changed on any node:"
    (line,) = lines[1:]
    assert "[pd-bootstrap-reach]" in line and "@fake/node2 (decode) cannot reach prefill group 0 on @fake/node1" in line
    assert "at 10.0.0.1:8998, its bootstrap port, within 5 s" in line
    assert "open TCP 8998 from @fake/node2 to @fake/node1, or set fabric_address of @fake/node1" in line


def test_a_bootstrap_port_held_by_something_else_is_refused_and_a_running_prefill_answers_itself() -> None:
    held = {"ss -ltnH": "LISTEN 0 128 0.0.0.0:8998 0.0.0.0:*"}
    with pytest.raises(DeployError) as refused:
        planned(split_nodes({**held, LISTEN: "listening"}, {}), split_preflight)
    assert "[pd-bootstrap-port] bootstrap port 8998 of prefill group 0 on @fake/node1 is in use by something" in str(
        refused.value
    )
    prefill = "ps\tc1\tdeepseek-v4-flash-pd-0\trunning\t1\t\th0\t0\t5000"  # a re-run: the prefill holds it
    _, commands = planned(split_nodes({**held, LISTING: [prefill], LISTEN: "listening"}, {}), split_preflight)
    assert not [c for c in commands["@fake/node1"] if LISTEN in c]
    assert [c for c in commands["@fake/node2"] if REACH in c]


def test_a_recipe_not_laid_over_hosts_needs_no_split_preflight() -> None:
    data = {"recipe": ONE_NODE, "router": True, "allow_docker_options": ["--network"], "fake_responses": MEMORY}
    _, commands = planned([("@fake/node1", data)], split_preflight)
    assert not [c for c in commands["@fake/node1"] if REACH in c or LISTEN in c]
