"""Multi-node groups without a host: placement (hosts -> ranks, head address), what differs between members,
the group's spec hash, the rollout and recovery decisions, rank health, the router's worker, the node commands,
the exposure of `--network host`, and the archive of a group's fingerprints."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from hgxkit.cli import main
from hgxkit.importing.docker_run import import_docker_run
from hgxkit.importing.importer import ImportOptions, import_post
from hgxkit.recipe.check import check_recipe
from hgxkit.recipe.danger import dangerous_options
from hgxkit.recipe.dump import dump_recipe
from hgxkit.recipe.exposure import recipe_exposure_problems
from hgxkit.recipe.judge import Allowances, findings
from hgxkit.results.archive import load_run, write_run
from hgxkit.results.fingerprint import Fingerprint
from hgxkit.results.summary import RunSummary
from hgxkit.secrets import redact
from hgxkit.serving.containers import RANK_LABEL, SPEC_LABEL, ApiKeyFiles, container_specs
from hgxkit.serving.groupcmd import listener_command, reach_command, restore_command, set_aside_command
from hgxkit.serving.multinode import (
    Candidate,
    Member,
    MemberState,
    NodeGroup,
    RankHealth,
    decide_group,
    difference_table,
    failed_ranks,
    group_spec_hash,
    head_worker,
    member_differences,
    parse_rank_health,
    place_groups,
    ranks_now,
    recovery_action,
)
from hgxkit.serving.nodegroups import group_for
from hgxkit.serving.rollout import RunningContainer
from hgxkit.verify.plan import client_argv, plan_cells

ROOT = Path(__file__).resolve().parents[3]
POSTS = ROOT / "tests" / "fixtures" / "posts"
IMAGE = "lmsysorg/sglang@sha256:" + "ab" * 32


def post(number: str):
    path = next(POSTS.glob(f"{number}-*.txt"))
    return import_post([(path.name, path.read_text())], ImportOptions()).recipe


POST_005 = post("005")  # docker, --network=host, TP16 over two H200x8 nodes, --host 0.0.0.0 --port 40000
TWO = NodeGroup(0, (Member("node1", 0, "10.0.0.1"), Member("node2", 1, "10.0.0.2")), 20000)


# --- placement --------------------------------------------------------------------------------------------


def test_inventory_order_gives_the_ranks_n_hosts_at_a_time() -> None:
    hosts = [Candidate(f"n{i}", address=f"10.0.0.{i}") for i in range(1, 5)]
    placement = place_groups(hosts, nodes=2, dist_port=20000)
    assert placement.problems == []
    assert [[(m.host, m.rank) for m in g.members] for g in placement.groups] == [
        [("n1", 0), ("n2", 1)],
        [("n3", 0), ("n4", 1)],
    ]
    assert [g.head.address for g in placement.groups] == ["10.0.0.1", "10.0.0.3"]
    assert placement.group_of("n4").index == 1 and placement.group_of("n9") is None
    assert placement.groups[0].label() == "n1 (rank 0), n2 (rank 1)"


def test_group_hosts_lists_the_ranks_and_the_head_comes_first() -> None:
    order = ("b", "a")
    hosts = [
        Candidate("a", order, "fab-a"),
        Candidate("b", order, "fab-b"),
        Candidate("c", None, "fab-c"),
        Candidate("d", None, "fab-d"),
    ]
    placement = place_groups(hosts, nodes=2, dist_port=5000)
    assert placement.problems == []
    (explicit, rest) = placement.groups
    assert [(m.host, m.rank, m.address) for m in explicit.members] == [("b", 0, "fab-b"), ("a", 1, "fab-a")]
    assert explicit.head.host == "b" and explicit.dist_port == 5000
    assert rest.hosts == ["c", "d"]


@pytest.mark.parametrize(
    ("hosts", "found"),
    [
        (
            [Candidate("a", ("a",), "x"), Candidate("b", None, "y")],
            "group_hosts of a lists 1 host(s) (a) but the server spans 2",
        ),
        (
            [Candidate("a", ("b", "c"), "x"), Candidate("b", None, "y"), Candidate("c", None, "z")],
            "does not list a itself",
        ),
        ([Candidate("a", ("a", "zz"), "x")], "lists zz, which is not an inventory host serving this recipe"),
        (
            [Candidate("a", ("a", "b"), "x"), Candidate("b", ("b", "a"), "y")],
            "b is in group a, b but its own group_hosts is b, a",
        ),
        (
            [Candidate("a", None, "x"), Candidate("b", None, "y"), Candidate("c", None, "z")],
            "c serve(s) a recipe spanning 2 nodes but 1 host(s) are left",
        ),
        (
            [Candidate("a", None, None), Candidate("b", None, "y")],
            "the fabric address of a is unknown; set fabric_address for a",
        ),
        (
            [Candidate("a", None, "x;reboot"), Candidate("b", None, "y")],
            "the fabric address of a 'x;reboot' is not a host name or address",
        ),
    ],
)
def test_placement_problems_name_the_host_and_the_knob(hosts: list[Candidate], found: str) -> None:
    problems = place_groups(hosts, nodes=2, dist_port=None).problems
    assert any(found in str(p) for p in problems), [str(p) for p in problems]


class FakeInventory:
    def __init__(self, hosts: list[FakeHost], groups: dict[str, list[FakeHost]]) -> None:
        self.hosts, self.groups = hosts, groups

    def __iter__(self):
        return iter(self.hosts)

    def get_group(self, name: str, default=None):
        return self.groups.get(name, default)


class FakeHost:
    def __init__(self, name: str, data: dict) -> None:
        self.name, self.data, self.inventory = name, data, None


def test_an_inventory_group_names_the_ranks_and_other_recipes_are_not_candidates(tmp_path: Path) -> None:
    recipe = tmp_path / "005.yaml"
    recipe.write_text(dump_recipe(POST_005))
    other = str(ROOT / "recipes" / "deepseek-v4-flash-dspark-marlin.yaml")
    data = {"recipe": str(recipe), "group_hosts": "pair"}
    hosts = [
        FakeHost("gpu-a", {**data, "fabric_address": "10.1.0.1"}),
        FakeHost("gpu-b", {**data, "fabric_address": "10.1.0.2"}),
        FakeHost("login", {"recipe": other}),
    ]
    inventory = FakeInventory(hosts, {"pair": [hosts[1], hosts[0]]})  # the group's order: gpu-b is the head
    for h in hosts:
        h.inventory = inventory
    group, problems = group_for(hosts[0])
    assert problems == [] and group is not None
    assert [(m.host, m.rank, m.address) for m in group.members] == [("gpu-b", 0, "10.1.0.2"), ("gpu-a", 1, "10.1.0.1")]
    assert group.dist_port == 20000  # the post's --dist-init-addr port
    assert group_for(hosts[2]) == (None, [])  # a single-node recipe: no group
    hosts[0].data["dist_port"] = 29500
    hosts[1].data["dist_port"] = 29500
    assert group_for(hosts[1])[0].dist_port == 29500


# --- what differs between members -------------------------------------------------------------------------


def test_members_that_differ_are_shown_as_one_table() -> None:
    states = [
        MemberState("node1", 0, driver="580.105.08", image_digest="sha256:" + "a" * 64, model_commit="c1"),
        MemberState("node2", 1, driver="580.95.05", image_digest="sha256:" + "b" * 64, model_commit="c1"),
        MemberState("node3", 2, driver=None, image_digest=None, model_commit="c1"),  # a fresh node: not compared
    ]
    assert member_differences(states) == ["driver", "image digest"]
    assert difference_table(states, ["driver", "image digest"]).splitlines() == [
        "value         node1 (rank 0)       node2 (rank 1)       node3 (rank 2)",
        "driver        580.105.08           580.95.05            -",
        "image digest  sha256:aaaaaaaaaaaa  sha256:bbbbbbbbbbbb  -",
    ]
    assert member_differences([states[0], replace(states[0], host="node2", rank=1)]) == []


# --- the group's spec hash ----------------------------------------------------------------------------------


def rank_specs(recipe=POST_005, group=TWO, **extra):
    own = [
        container_specs(
            recipe,
            total_gpus=8,
            bind_address="127.0.0.1",
            api_key=None,
            image=IMAGE,
            rank=m.rank,
            head=group.head.address,
            **extra,
        )[0]
        for m in group.members
    ]
    return own


def test_every_rank_carries_one_hash_over_all_ranks() -> None:
    rank0, rank1 = rank_specs()
    assert rank0.spec_hash != rank1.spec_hash  # --node-rank differs
    group_hash = group_spec_hash([rank0.spec_hash, rank1.spec_hash])
    labelled = rank_specs(group_hash=group_hash)
    assert [s.spec_hash for s in labelled] == [group_hash, group_hash]
    assert [s.labels[RANK_LABEL] for s in labelled] == ["0", "1"]
    assert all(f"{SPEC_LABEL}={group_hash}" in s.argv for s in labelled)
    argv = labelled[1].argv
    assert argv[argv.index("--node-rank") + 1] == "1" and argv[argv.index("--dist-init-addr") + 1] == "10.0.0.1:20000"
    assert "--rm" not in argv and "--network=host" in argv  # a stopped rank is kept, so a failed replace can restart it
    assert group_spec_hash([rank1.spec_hash, rank0.spec_hash]) != group_hash  # rank order counts


def test_a_flag_or_a_head_change_changes_the_group_hash() -> None:
    base = group_spec_hash([s.spec_hash for s in rank_specs()])
    server = POST_005.server
    flagged = replace(POST_005, server=replace(server, args=(*server.args, ("--log-level", "info"))))
    assert group_spec_hash([s.spec_hash for s in rank_specs(flagged)]) != base
    moved = NodeGroup(0, (Member("node1", 0, "10.0.0.9"), Member("node2", 1, "10.0.0.2")), 20000)
    assert group_spec_hash([s.spec_hash for s in rank_specs(group=moved)]) != base
    keyed = container_specs(
        POST_005,
        total_gpus=8,
        bind_address="127.0.0.1",
        api_key=ApiKeyFiles.beside("/k"),
        image=IMAGE,
        rank=0,
        head="10.0.0.1",
    )[0]
    assert keyed.argv[-2:] == ["--config", "/run/hgxkit/api-key.yaml"]


# --- rollout and recovery decisions ---------------------------------------------------------------------------


def running(name: str, spec: str | None, up: bool = True, cid: str = "id") -> RunningContainer:
    return RunningContainer(name, cid, spec, 0, up)


def test_the_group_is_kept_only_when_every_rank_runs_its_hash() -> None:
    current = {"node1": [running("m", "h1")], "node2": [running("m", "h1")]}
    ranks = ranks_now(current, TWO, "m", "-hgxkit-previous")
    assert decide_group(ranks, "h1").action == "keep" and not decide_group(ranks, "h1").changes
    changed = decide_group(ranks, "h2")
    assert changed.action == "replace" and changed.reasons == [
        "node1 (rank 0): spec h1 -> h2",
        "node2 (rank 1): spec h1 -> h2",
    ]
    stopped = {"node1": [running("m", "h1")], "node2": [running("m", "h1", up=False)]}
    assert decide_group(ranks_now(stopped, TWO, "m", "-hgxkit-previous"), "h1").reasons == [
        "node2 (rank 1): not running"
    ]
    missing = {"node1": [running("m", "h1")]}
    assert decide_group(ranks_now(missing, TWO, "m", "-hgxkit-previous"), "h1").reasons == [
        "node2 (rank 1): no container"
    ]


def test_old_groups_on_a_member_are_stale_and_a_set_aside_copy_means_recover() -> None:
    current = {"node1": [running("m", "h1"), running("old-0", "x")], "node2": [running("m", "h1")]}
    decision = decide_group(ranks_now(current, TWO, "m", "-hgxkit-previous"), "h1")
    assert decision.action == "keep" and decision.changes
    assert [c.name for c in decision.stale["node1"]] == ["old-0"]
    cut = {"node1": [running("m", "h2"), running("m-hgxkit-previous", "h1", up=False)], "node2": [running("m", "h1")]}
    ranks = ranks_now(cut, TWO, "m", "-hgxkit-previous")
    decision = decide_group(ranks, "h2")
    assert decision.action == "recover" and decision.reasons == ["node1 (rank 0): m-hgxkit-previous was set aside"]
    assert recovery_action(ranks, "h2", head_healthy=True) == "rollback"  # node2 still runs the old spec
    done = {"node1": [running("m", "h2"), running("m-hgxkit-previous", "h1", up=False)], "node2": [running("m", "h2")]}
    ranks = ranks_now(done, TWO, "m", "-hgxkit-previous")
    assert recovery_action(ranks, "h2", head_healthy=True) == "finish"
    assert recovery_action(ranks, "h2", head_healthy=False) == "rollback"


def test_rank_health_names_the_host_of_a_dead_rank() -> None:
    health = [
        parse_rank_health("node1", 0, ["running 0", "Init parallel begin."]),
        parse_rank_health("node2", 1, ["exited 0", "Dummy health check server started"]),
        parse_rank_health("node3", 2, []),
        RankHealth("node4", 3, "running", restarts=2),
    ]
    assert failed_ranks(health) == [
        "rank 1 on node2: exited; last log: Dummy health check server started",
        "rank 2 on node3: missing",
        "rank 3 on node4: running (2 restarts)",
    ]
    assert health[0].line() == "rank 0 on node1: running; last log: Init parallel begin."


# --- router, exposure, node commands ----------------------------------------------------------------------------


def test_the_router_fronts_rank_0_only() -> None:
    worker = head_worker(POST_005, TWO, bind_address="127.0.0.1", api_key=True)
    assert (worker.name, worker.address, worker.bind_address, worker.ports) == ("node1", "10.0.0.1", "0.0.0.0", [40000])
    bridged = import_docker_run(
        "docker run -p 5000:30000 --gpus all img python3 -m sglang.launch_server --model-path /m --tp 16 --nnodes 2 "
        "--node-rank 0 --dist-init-addr 10.0.0.1:5000"
    )
    assert head_worker(bridged, TWO, bind_address="10.9.9.9", api_key=False).ports == [5000]


def test_network_host_of_a_group_spanning_nodes_is_allowed_by_name_and_judged_by_the_exposure_policy() -> None:
    assert [d.name for d in dangerous_options(POST_005)] == ["--network=host"]
    assert [f.code for f in check_recipe(POST_005, 8) if f.level == "error"] == []
    allowed = Allowances(docker_options=("--network=host",))
    assert [f.code for f in findings(POST_005, allowed, 8) if f.level == "error"] == ["exposure"]
    assert [f.code for f in findings(POST_005, replace(allowed, api_key="auto"), 8) if f.level == "error"] == []
    single = import_docker_run("docker run --network=host --gpus all img sglang serve --model-path /m --host 0.0.0.0")
    assert [d.name for d in dangerous_options(single)] == ["--network=host"]
    (problem,) = recipe_exposure_problems(POST_005, api_key=None, allow_unauthenticated=False)
    assert problem.code == "exposure" and "--network host with the server listening on 0.0.0.0" in problem.found
    assert recipe_exposure_problems(POST_005, api_key="auto", allow_unauthenticated=False) == []


def test_node_commands_quote_every_value() -> None:
    hostile = "m;touch /tmp/p"
    assert "'m;touch /tmp/p'" in str(set_aside_command(hostile))
    assert "'m;touch /tmp/p-hgxkit-previous'" in str(restore_command(hostile))
    assert str(reach_command("[fd00::1]", 20000, 5)).endswith("fd00::1 20000")
    assert str(reach_command("a;b", 1, 5)).endswith("'a;b' 1")
    listener = str(listener_command(20000, 20, 2))
    assert listener.startswith("python3 -c ") and listener.endswith(" 20000 20 2")


def test_sglang_random_prompts_are_measured_offline_with_random_ids() -> None:
    (cell,) = plan_cells(POST_005, "smoke", [(0, "sglang_multinode1-0")])
    assert (cell.port, cell.input_len, cell.output_len, cell.dataset) == (40000, 1, 512, "random")
    argv = client_argv(cell, "/out")
    assert argv[argv.index("--dataset-name") + 1] == "random-ids"
    with_path = replace(cell, extra_args=("--dataset-path", "/data/sharegpt.json"))
    argv = client_argv(with_path, "/out")
    assert argv[argv.index("--dataset-name") + 1] == "random"


# --- the archive of a group's run ------------------------------------------------------------------------------


def test_a_group_run_archives_every_member_and_compare_shows_their_differences(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topology = {
        "nodes": 2,
        "dist_port": 20000,
        "ranks": [
            {"rank": 0, "host": "node1", "address": "10.0.0.1"},
            {"rank": 1, "host": "node2", "address": "10.0.0.2"},
        ],
    }

    def archive(time: str, member_driver: str) -> str:
        summary = RunSummary(
            run_id=f"node1/{time}_g",
            host="node1",
            recipe="g",
            time=time,
            simulated=True,
            tool="sglang.benchmark.serving",
            tool_version="0.5.23",
            cells=[],
            gates=[],
            bench="none",
        )
        head = Fingerprint("node1", True, packages={"driver": "580.105.08"}, node_group=topology, number_of_nodes=2)
        member = Fingerprint("node2", True, packages={"driver": member_driver}, node_group=topology, number_of_nodes=2)
        write_run(tmp_path, summary, head, {}, "report", [], members={"node2": member})
        return summary.run_id

    a, b = archive("20261201T000000Z", "580.105.08"), archive("20261201T010000Z", "580.95.05")
    run = load_run(a, tmp_path)
    assert list(run.members) == ["node2"] and run.members["node2"].node_group["ranks"][1]["host"] == "node2"
    assert (tmp_path / a / "members" / "node2.json").is_file()
    assert main(["results", "--root", str(tmp_path), "compare", a, b]) == 0
    assert "- rank 1 (node2 vs node2): driver 580.105.08 vs 580.95.05" in capsys.readouterr().out
    assert main(["results", "--root", str(tmp_path), "show", b]) == 0
    shown = capsys.readouterr().out
    assert (
        "- multi-node group: 2 nodes, rendezvous port 20000: rank 0 node1 (10.0.0.1), rank 1 node2 (10.0.0.2)" in shown
    )
    assert "- node2: driver 580.105.08 vs 580.95.05" in shown
    assert main(["results", "--root", str(tmp_path), "show", b, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["members"]["node2"]["packages"]["driver"] == "580.95.05"


def test_a_json_escaped_quote_ends_a_masked_value() -> None:
    text = json.dumps({"rendered": ['docker run --env "HF_TOKEN=$HF_TOKEN" --env "MY_TOKEN=s3cr3tvalue" img']})
    scrubbed = redact(text)
    assert json.loads(scrubbed)["rendered"][0] == 'docker run --env "HF_TOKEN=$HF_TOKEN" --env "MY_TOKEN=***" img'
