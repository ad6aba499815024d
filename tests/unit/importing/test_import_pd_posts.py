"""Prefill/decode posts as people write them (tests/fixtures/posts 170-177): a split whose sides each listen on
their own node's address is one recipe laid over two hosts; bare-launched sides run on the host's network; sides
that pick their GPUs by SGLang's --base-gpu-id get them as device lists; Dynamo's workers and a RoleBasedGroup's
roles are refused by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from hgxkit.errors import InputError
from hgxkit.importing.importer import ImportOptions, import_post
from hgxkit.kinds.sglang import SGLANG
from hgxkit.recipe.check import check_recipe
from hgxkit.recipe.dump import dump_recipe
from hgxkit.recipe.pd import host_group_count, pd_problems, sides
from hgxkit.recipe.render import render_recipe
from hgxkit.serving.hostshare import share_hosts
from hgxkit.serving.multinode import Candidate
from hgxkit.serving.router import WorkerHost, group_sides, pd_workers, port_problem, worker_sides, worker_urls

POSTS = Path(__file__).resolve().parents[2] / "fixtures" / "posts"


def post(number: int) -> tuple[str, str]:
    path = next(POSTS.glob(f"{number}-*.txt"))
    return path.name, path.read_text()


def refusal(name: str, text: str, **options: object) -> str:
    with pytest.raises(InputError) as caught:
        import_post([(name, text)], ImportOptions(**options))  # type: ignore[arg-type]
    return caught.value.message


TWO_NODES = """```bash
# Prefill node
python -m sglang.launch_server --model-path org/m --disaggregation-mode prefill --port 30000 --host 10.0.0.1 --tp 8
# Decode node
python -m sglang.launch_server --model-path org/m --disaggregation-mode decode --port 30001 --host 10.0.0.2 --tp 8
```
"""


def test_sides_listening_on_their_own_nodes_addresses_are_one_recipe_laid_over_two_hosts() -> None:
    outcome = import_post([post(170)], ImportOptions())
    recipe = outcome.recipe
    assert recipe.groups is not None
    assert (recipe.groups.hosts, recipe.groups.explicit, recipe.groups.port_base) == (2, ((0, 1),), 30000)
    assert sides(recipe, 8) == ["prefill", "decode"]
    assert recipe.server.flag("--host") == "0.0.0.0"
    assert "192.168.0" not in dump_recipe(recipe)  # the inventory's hosts, not the poster's
    assert pd_problems(recipe, 8) == []
    assert [e for e in check_recipe(recipe, 8) if e.level == "error"] == []
    rendered = [g for first in (0, 1) for g in render_recipe(recipe, total_gpus=8, first_group=first)]
    assert [(g.gpus, g.port) for g in rendered] == [([0, 1], 30000), ([0, 1], 30001)]
    argv = [g.server_argv for g in rendered]
    assert [a[a.index("--disaggregation-mode") + 1] for a in argv] == ["prefill", "decode"]
    assert any("laid over 2 hosts" in note for note in outcome.notes)
    assert any("so serve it on a private network with `--data allow_unauthenticated=true`" in n for n in outcome.notes)


def test_the_imported_two_node_split_runs_a_side_per_inventory_host_which_the_router_names() -> None:
    outcome = import_post([post(170)], ImportOptions())
    recipe = outcome.recipe
    nodes = [Candidate("node1", address="10.9.0.1"), Candidate("node2", address="10.9.0.2")]
    shares, problems = share_hosts(nodes, hosts=2, per_host=host_group_count(recipe, 8))
    assert problems == [] and [(s.host, s.groups) for s in shares] == [("node1", (0,)), ("node2", (1,))]
    hosts = [
        WorkerHost(
            s.host, s.address, "0.0.0.0", [30000 + s.first_group], sides=group_sides(recipe, [*s.groups]), shared=True
        )
        for s in shares
    ]
    urls, problems = worker_urls("node1", hosts)
    assert problems == [] and urls == ["http://10.9.0.1:30000", "http://10.9.0.2:30001"]
    assert SGLANG.prefill_decode is not None
    args = pd_workers(urls, worker_sides("node1", hosts), "round_robin", SGLANG.prefill_decode.router)
    assert args[:6] == ["--pd-disaggregation", "--prefill", urls[0], "8998", "--decode", urls[1]]
    # The prefill holds the router's default port on the router's host: the import says which port to give it,
    # and the router role refuses the default before any change.
    note = "the groups listen on ports 30000-30001, which hold the router's default port 30000: add `--data "
    assert any(note + "router_port=30002` to `--data router=true`" in n for n in outcome.notes)
    assert port_problem("node1", hosts, 30000) is not None and port_problem("node1", hosts, 30002) is None


def test_a_tp8_split_over_two_nodes_takes_each_nodes_eight_gpus() -> None:
    recipe = import_post([("p.md", TWO_NODES)], ImportOptions()).recipe
    assert recipe.groups is not None and recipe.groups.explicit == (tuple(range(8)),)
    assert recipe.docker.last("--network") == "host"


ROUTED = """```bash
# prefill (node A)
python -m sglang.launch_server --model-path org/m --disaggregation-mode prefill --host 0.0.0.0 --port 30000 --tp 8
# decode (node B)
python -m sglang.launch_server --model-path org/m --disaggregation-mode decode --host 0.0.0.0 --port 30001 --tp 8
# router
python -m sglang_router.launch_router --pd-disaggregation --prefill http://10.1.1.1:30000 8998 \\
  --decode http://10.1.1.2:30001 --host 0.0.0.0 --port 8000
```
"""

DOCKER_RUNS = """```bash
docker run -d --gpus all --net host --name sglang-prefill lmsysorg/sglang:v0.5.9 python3 -m sglang.launch_server \\
  --model-path org/m --tp 8 --host 0.0.0.0 --port 30000 --disaggregation-mode prefill
docker run -d --gpus all --net host --name sglang-decode lmsysorg/sglang:v0.5.9 python3 -m sglang.launch_server \\
  --model-path org/m --tp 8 --host 0.0.0.0 --port 30000 --disaggregation-mode decode
python -m sglang_router.launch_router --pd-disaggregation --prefill http://node1:30000 --decode http://node2:30000
```
"""


def test_sides_listening_everywhere_are_laid_over_hosts_by_the_nodes_the_router_names() -> None:
    outcome = import_post([("p.md", ROUTED)], ImportOptions())
    assert outcome.recipe.groups is not None and outcome.recipe.groups.hosts == 2
    assert any("as the router (p.md:7) names it" in note for note in outcome.notes)


def test_the_router_naming_one_node_for_both_sides_keeps_them_on_one_node() -> None:
    text = ROUTED.replace("10.1.1.2", "10.1.1.1")
    assert "do not give each side GPUs of its own" in refusal("p.md", text)


def test_posted_docker_runs_on_their_nodes_are_one_recipe_whose_containers_are_named_per_group() -> None:
    recipe = import_post([("p.md", DOCKER_RUNS)], ImportOptions()).recipe
    assert recipe.groups is not None
    assert (recipe.groups.hosts, recipe.groups.name_template) == (2, "sglang-{{group}}")
    rendered = [g for first in (0, 1) for g in render_recipe(recipe, total_gpus=8, first_group=first)]
    assert [(g.name, g.port) for g in rendered] == [("sglang-0", 30000), ("sglang-1", 30001)]


def test_sides_on_their_nodes_that_differ_in_a_flag_every_host_shares_are_refused() -> None:
    text = TWO_NODES.replace("--host 10.0.0.2 --tp 8", "--host 10.0.0.2 --tp 4")
    assert "differ in server --tp-size: 8 (line 3) vs 4 (line 5)" in refusal("p.md", text)


def test_vllm_sides_on_their_own_nodes_are_refused_by_name() -> None:
    text = (
        "vllm serve org/m --host 10.0.0.1 --port 8100 --kv-transfer-config "
        '\'{"kv_connector":"NixlConnector","kv_role":"kv_producer"}\'\n'
        "vllm serve org/m --host 10.0.0.2 --port 8200 --kv-transfer-config "
        '\'{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}\'\n'
    )
    message = refusal("p.md", text)
    assert "a vLLM split laid over hosts, which hgxkit does not deploy yet" in message
    assert "VLLM_NIXL_SIDE_CHANNEL_HOST" in message


def test_vllm_sides_that_set_their_own_side_channel_host_are_refused_by_name() -> None:
    text = "".join(
        f"VLLM_NIXL_SIDE_CHANNEL_HOST={ip} vllm serve org/m --port {port} --kv-transfer-config "
        f'\'{{"kv_connector":"NixlConnector","kv_role":"{role}"}}\'\n'
        for ip, port, role in (("10.0.0.1", 8100, "kv_producer"), ("10.0.0.2", 8200, "kv_consumer"))
    )
    assert "run on different nodes (10.0.0.1, 10.0.0.2): a vLLM split laid over hosts" in refusal("p.md", text)


def test_a_decode_over_two_nodes_is_refused_as_a_side_spanning_nodes() -> None:
    assert "split whose sides each span nodes is not deployed yet" in refusal(*post(172), model_repo="org/m")


def test_a_prefill_and_a_decode_that_each_span_two_nodes_are_refused_as_sides_spanning_nodes() -> None:
    message = refusal(*post(180))
    assert "--disaggregation-mode: a prefill/decode split whose sides each span nodes is not deployed yet" in message
    assert "not one setup" not in message


def test_bare_launched_sides_of_one_node_run_on_the_hosts_network() -> None:
    outcome = import_post([post(171)], ImportOptions())
    recipe = outcome.recipe
    assert recipe.docker.last("--network") == "host" and recipe.docker.ports() == []
    assert recipe.groups is not None and recipe.groups.explicit == ((0, 1, 2, 3), (4, 5, 6, 7))
    assert sides(recipe, 8) == ["prefill", "decode"]
    assert [(g.port, g.gpus) for g in render_recipe(recipe, total_gpus=8)] == [
        (8188, [0, 1, 2, 3]),
        (8189, [4, 5, 6, 7]),
    ]


def test_one_nodes_sides_listening_on_the_posters_node_address_listen_on_the_deployed_nodes() -> None:
    text = TWO_NODES.replace("10.0.0.2", "10.0.0.1").replace("--tp 8", "--tp 4")
    text = text.replace("--port 30001", "--port 30001 --base-gpu-id 4")
    recipe = import_post([("p.md", text)], ImportOptions()).recipe
    assert recipe.server.flag("--host") == "0.0.0.0" and "10.0.0.1" not in dump_recipe(recipe)
    assert recipe.groups is not None and recipe.groups.hosts is None
    assert recipe.groups.explicit == ((0, 1, 2, 3), (4, 5, 6, 7))


def test_hosts_named_by_name_put_the_sides_on_their_own_nodes() -> None:
    text = TWO_NODES.replace("10.0.0.1", "gpu-a").replace("10.0.0.2", "gpu-b")
    recipe = import_post([("p.md", text)], ImportOptions()).recipe
    assert recipe.groups is not None and recipe.groups.hosts == 2


def test_sides_that_pick_their_gpus_by_base_gpu_id_get_them_as_device_lists() -> None:
    outcome = import_post([post(173)], ImportOptions())
    recipe = outcome.recipe
    assert recipe.groups is not None and recipe.groups.explicit == ((0,), (1,))
    argv = [g.server_argv for g in render_recipe(recipe, total_gpus=8)]
    assert all("--base-gpu-id" not in a for a in argv)  # inside its container a side's GPUs start at 0
    assert [a[a.index("--disaggregation-mode") + 1] for a in argv] == ["prefill", "decode"]


def test_dynamo_workers_are_refused_by_name() -> None:
    message = refusal(*post(174))
    assert "NVIDIA Dynamo (dynamo) is not supported yet" in message
    assert "\n" not in message


def test_a_role_based_group_with_prefill_and_decode_roles_is_refused_by_name() -> None:
    message = refusal(*post(176))
    assert "RoleBasedGroup sglang-pd-inference (roles router, prefill, decode; prefill and decode are the sides" in (
        message
    )


def test_a_role_based_group_that_runs_no_engine_serves_nothing() -> None:
    assert "no serving command found" in refusal(*post(177))


def test_a_post_with_only_a_router_command_says_so_at_the_router() -> None:
    message = refusal(*post(178))
    assert ":40: no serving command in " in message and "only a prefill/decode router command" in message


def test_a_side_whose_environment_names_a_file_relative_to_the_shell_is_refused() -> None:
    # sglang#4880's run instructions: the old Mooncake transfer engine read each node's own mooncake.json
    text = "".join(
        f"MOONCAKE_CONFIG_PATH=./mooncake.json python -m sglang.launch_server --model-path org/m "
        f"--disaggregation-mode {mode} --port {port} --host {ip} --tp-size 2\n"
        for mode, port, ip in (("prefill", 30000, "192.168.0.137"), ("decode", 30001, "192.168.0.140"))
    )
    message = refusal("p.md", text)
    assert message.startswith("p.md:1: MOONCAKE_CONFIG_PATH=./mooncake.json names a file relative to the directory")


def test_bare_sides_moved_onto_the_hosts_network_listen_where_the_posts_commands_do() -> None:
    """A bare launch's translation listens on 0.0.0.0 for a port it publishes; a split's sides run on the host's
    network instead, publishing nothing, so they listen where the post's commands do: SGLang's loopback default
    for 179 (every address would open both sides to the network), 0.0.0.0 where 171 says so."""
    outcome = import_post([post(179)], ImportOptions())
    assert outcome.recipe.server.flag("--host") is None
    assert not any("--host 0.0.0.0 added" in note for note in outcome.notes), outcome.notes
    said = "uses the host's network (--network=host) and listens where the post's command does (127.0.0.1)"
    assert any(said in note for note in outcome.notes), outcome.notes
    assert outcome.recipe.docker.last("--network") == "host"
    assert import_post([post(171)], ImportOptions()).recipe.server.flag("--host") == "0.0.0.0"
