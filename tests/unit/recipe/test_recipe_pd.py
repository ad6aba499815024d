"""A one-node prefill/decode split: each group's side from its own server arguments (SGLang's --disaggregation-mode,
vLLM's kv_role in --kv-transfer-config), and `recipe check`'s refusals of a split that cannot serve (one line each,
naming the group and the remedy)."""

from __future__ import annotations

from pathlib import Path

from hgxkit.recipe.check import check_recipe
from hgxkit.recipe.dump import dump_recipe
from hgxkit.recipe.pd import is_prefill_decode, pd_router_problem, sides
from hgxkit.recipe.read import load_recipe, parse_recipe_text
from hgxkit.recipe.render import render_recipe

ROOT = Path(__file__).resolve().parents[3]
PD = ROOT / "tests" / "fixtures" / "pd" / "dspark-pd-one-node.yaml"
MARLIN = ROOT / "recipes" / "deepseek-v4-flash-dspark-marlin.yaml"
VLLM_PD = ROOT / "tests" / "fixtures" / "pd" / "vllm-pd-one-node.yaml"


def variant(old: str, new: str) -> str:
    text = PD.read_text()
    assert old in text
    return text.replace(old, new)


def errors(text: str) -> list[str]:
    return [str(p) for p in check_recipe(parse_recipe_text(text), 8) if p.level == "error"]


def test_each_group_runs_its_own_side_and_the_recipe_checks_clean() -> None:
    recipe = load_recipe(PD)
    assert sides(recipe, 8) == ["prefill", "decode"] and is_prefill_decode(recipe, 8)
    assert [p.code for p in check_recipe(recipe, 8) if p.level == "error"] == []
    groups = render_recipe(recipe, total_gpus=8)
    assert [(g.gpus, g.port, g.server_argv[-2:]) for g in groups] == [
        ([0, 1, 2, 3], 5000, ["--disaggregation-mode", "prefill"]),
        ([4, 5, 6, 7], 5001, ["--disaggregation-mode", "decode"]),
    ]


def test_a_recipe_that_does_both_phases_is_no_split() -> None:
    assert not is_prefill_decode(load_recipe(MARLIN), 8)


def test_the_group_arguments_survive_a_dump_and_read() -> None:
    recipe = load_recipe(PD)
    again = parse_recipe_text(dump_recipe(recipe))
    assert again.groups == recipe.groups


def test_decode_without_prefill_is_refused_naming_the_group() -> None:
    found = errors(variant("- - --disaggregation-mode prefill", "- - --disaggregation-mode decode"))
    assert found == [
        "[pd-split] group 0 is a decode server but no group is a prefill server, so no request completes; give "
        "another group --disaggregation-mode prefill in groups.server_args"
    ]


def test_prefill_without_decode_is_refused() -> None:
    found = errors(variant("- - --disaggregation-mode decode", "- - --disaggregation-mode prefill"))
    assert found[0].startswith("[pd-split] group 0 is a prefill server but no group is a decode server")
    assert len([f for f in found if f.startswith("[pd-split]")]) == 1


def test_one_side_alone_without_grouping_is_refused() -> None:
    text = variant("  - --enable-metrics\n", "  - --enable-metrics\n  - --disaggregation-mode prefill\n")
    text = text[: text.index("groups:")] + text[text.index("matrix:") :]
    text = text.replace("'{{port}}'", "30000").replace("--name '{{name}}'", "--name pd")
    text = text.replace("--gpus '\"device={{gpus}}\"'", "--gpus all")
    assert [f for f in errors(text) if f.startswith("[pd-split]")] == [
        "[pd-split] group 0 is a prefill server but no group is a decode server, so no request completes; give "
        "another group --disaggregation-mode decode in groups.server_args"
    ]


def test_two_prefills_on_the_default_bootstrap_port_are_refused() -> None:
    text = variant("  size: 4\n", "  size: 2\n").replace("--tp 4", "--tp 2")
    text = text.replace(
        "  - - --disaggregation-mode decode\n",
        "  - - --disaggregation-mode prefill\n  - - --disaggregation-mode decode\n  - - --disaggregation-mode decode\n",
    )
    assert errors(text) == [
        "[pd-bootstrap] prefill groups 0 and 1 both open bootstrap port 8998 on one host; give group 1 its own "
        "--disaggregation-bootstrap-port in groups.server_args"
    ]
    apart = text.replace(
        "  - - --disaggregation-mode prefill\n  - - --disaggregation-mode decode\n  - - --disaggregation-mode decode",
        "  - - --disaggregation-mode prefill\n    - --disaggregation-bootstrap-port 8999\n"
        "  - - --disaggregation-mode decode\n  - - --disaggregation-mode decode",
    )
    assert errors(apart) == []
    explicit = text.replace(
        "  - - --disaggregation-mode prefill\n  - - --disaggregation-mode decode\n  - - --disaggregation-mode decode",
        "  - - --disaggregation-mode prefill\n    - --disaggregation-bootstrap-port 8998\n"
        "  - - --disaggregation-mode decode\n  - - --disaggregation-mode decode",
    )
    assert [e[:15] for e in errors(explicit)] == ["[pd-bootstrap] "]


def test_a_split_on_the_containers_own_network_is_refused() -> None:
    found = errors(variant("  - --network=host\n", ""))
    assert [f.split("]")[0] for f in found] == ["[pd-network"]
    assert found[0].endswith("run the groups with --network host (and --port {{port}})")


def test_group_arguments_one_per_group_and_never_the_shared_flags() -> None:
    found = errors(
        variant("  - - --disaggregation-mode decode\n", "  - - --disaggregation-mode decode\n  - - --tp 2\n")
    )
    assert "[pd-groups] groups.server_args has 3 entries but the recipe makes 2 groups" in found[0]
    assert any("group 2 sets --tp in groups.server_args" in f for f in found)


def vllm_variant(old: str, new: str) -> str:
    text = VLLM_PD.read_text()
    assert old in text
    return text.replace(old, new)


def test_a_vllm_split_names_each_side_by_kv_role_and_checks_clean() -> None:
    recipe = load_recipe(VLLM_PD)
    assert sides(recipe, 8) == ["prefill", "decode"]
    assert [str(p) for p in check_recipe(recipe, 8) if p.level == "error"] == []
    groups = render_recipe(recipe, total_gpus=8)
    assert [(g.gpus, g.port, g.option_values("--env")[-1]) for g in groups] == [
        ([0, 1, 2, 3], 8100, "VLLM_NIXL_SIDE_CHANNEL_PORT=5600"),
        ([4, 5, 6, 7], 8101, "VLLM_NIXL_SIDE_CHANNEL_PORT=5601"),
    ]


def test_kv_both_on_every_group_is_no_split() -> None:
    text = vllm_variant('"kv_role":"kv_producer"', '"kv_role":"kv_both"').replace("kv_consumer", "kv_both")
    assert sides(parse_recipe_text(text), 8) == [None, None]


def test_vllm_groups_on_the_default_side_channel_port_are_refused_naming_the_variable() -> None:
    found = errors(vllm_variant("  - -e 'VLLM_NIXL_SIDE_CHANNEL_PORT=560{{group}}'\n", ""))
    assert found == [
        "[pd-side-channel] groups 0 and 1 both bind port 5600 (VLLM_NIXL_SIDE_CHANNEL_PORT) on one host, so the "
        "second exits; give each group its own: -e VLLM_NIXL_SIDE_CHANNEL_PORT=560{{group}}"
    ]
    same = errors(vllm_variant("=560{{group}}", "=5700"))
    assert [f.split(";")[0] for f in same] == [
        "[pd-side-channel] groups 0 and 1 both bind port 5700 (VLLM_NIXL_SIDE_CHANNEL_PORT) on one host, so the "
        "second exits"
    ]
    assert errors(vllm_variant("=560{{group}}", "=x{{group}}"))[0].startswith(
        "[pd-side-channel] group 0: VLLM_NIXL_SIDE_CHANNEL_PORT 'x0' is not a port number"
    )


def test_a_data_parallel_server_binds_one_side_channel_port_per_rank() -> None:
    text = vllm_variant("--tensor-parallel-size 4", "--tensor-parallel-size 2\n  - --data-parallel-size 2")
    assert errors(text)[0].startswith("[pd-side-channel] groups 0 and 1 both bind port 5601")
    assert errors(text.replace("=560{{group}}", "=56{{group}}0")) == []


def test_a_vllm_side_without_the_other_is_refused_naming_kv_role() -> None:
    assert errors(vllm_variant('"kv_role":"kv_producer"', '"kv_role":"kv_consumer"')) == [
        "[pd-split] group 0 is a decode server but no group is a prefill server, so no request completes; give "
        "another group kv_role kv_producer in --kv-transfer-config in groups.server_args"
    ]


def test_a_vllm_connector_other_than_nixl_is_refused() -> None:
    found = errors(
        vllm_variant('{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}', '{"kv_role":"kv_consumer"}')
    )
    assert found == [
        "[pd-backend] decode group 1: kv_connector unset is not a transfer backend hgxkit deploys a split over; "
        "use NixlConnector"
    ]


def test_a_vllm_split_spanning_nodes_or_off_the_hosts_network_is_still_refused() -> None:
    spanning = "[pd-nodes] a prefill/decode split whose groups each span nodes (groups.nodes) is not deployed yet"
    assert spanning + "; drop groups.nodes; to put the sides on different nodes, set groups.hosts" in errors(
        vllm_variant("  gpus_per_node: 8\n", "  gpus_per_node: 8\n  nodes: 2\n")
    )
    found = errors(vllm_variant("  - --network=host\n", ""))
    assert [f.split("]")[0] for f in found] == ["[pd-network"]
    assert "side channel at the host the prefill names (VLLM_NIXL_SIDE_CHANNEL_HOST)" in found[0]


def test_the_router_knob_is_named_when_a_split_is_deployed_without_it() -> None:
    problem = pd_router_problem(load_recipe(PD))
    assert problem.code == "pd-router" and problem.remedy.startswith("deploy with --data router=true")


def test_groups_on_one_port_of_the_hosts_network_are_refused() -> None:
    assert errors(variant("--port '{{port}}'", "--port 30000")) == [
        "[pd-port] every group's server listens on port 30000 of the host's network, so only the first starts; give "
        "each its own: --port {{port}} (groups.port_base)"
    ]


def test_a_bootstrap_port_that_is_no_port_number_is_refused() -> None:
    # The router is given each prefill's bootstrap port: a word that is no port would leave it out.
    text = variant(
        "  - - --disaggregation-mode prefill\n",
        "  - - --disaggregation-mode prefill\n    - --disaggregation-bootstrap-port auto\n",
    )
    assert errors(text) == [
        "[pd-bootstrap] prefill group 0: --disaggregation-bootstrap-port 'auto' is not a port number; give "
        "--disaggregation-bootstrap-port a port from 1 to 65535 in groups.server_args"
    ]
