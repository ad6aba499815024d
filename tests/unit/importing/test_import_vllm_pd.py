"""vLLM's one-node NIXL split imports as one recipe: a prefill and a decode group, each side's kv_role its own.

Posts 140 (the DeepSeek-V4-Flash guide's two `docker run` commands and vllm-router, both sides kv_both) and 150
(the NixlConnector page's bare launches and toy proxy), and small posts of the same forms.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hgxkit.errors import InputError
from hgxkit.importing.importer import ImportOptions, ImportOutcome, import_post
from hgxkit.importing.pd_sides import side_channel_template
from hgxkit.recipe.check import check_recipe
from hgxkit.recipe.pd import pd_problems, sides
from hgxkit.recipe.render import render_recipe

POSTS = Path(__file__).resolve().parents[2] / "fixtures" / "posts"
DSV4 = next(POSTS.glob("140-*.txt"))
DOCS = next(POSTS.glob("150-*.txt"))


def _import(text: str, name: str = "post.md") -> ImportOutcome:
    return import_post([(name, text)], ImportOptions())


def _refusal(text: str, name: str = "post.md") -> str:
    with pytest.raises(InputError) as caught:
        _import(text, name)
    assert "\n" not in caught.value.message
    return caught.value.message


def _dsv4(decode_channel: str = "5558") -> str:
    return DSV4.read_text().replace("VLLM_NIXL_SIDE_CHANNEL_PORT=5558", f"VLLM_NIXL_SIDE_CHANNEL_PORT={decode_channel}")


def test_the_dsv4_guides_split_is_refused_naming_both_groups_and_the_port_their_dp_ranks_share() -> None:
    message = _refusal(DSV4.read_text(), DSV4.name)
    assert message.startswith(f"{DSV4.name}:9: groups 0 (line 9, VLLM_NIXL_SIDE_CHANNEL_PORT=5557, 4 DP rank(s))")
    assert "1 (line 43, VLLM_NIXL_SIDE_CHANNEL_PORT=5558, 4 DP rank(s)) both bind port 5558" in message
    assert "(group 1 from 5561)" in message


def test_the_dsv4_guides_split_with_ports_apart_joins_its_sides_as_the_router_names_them() -> None:
    outcome = _import(_dsv4("5561"), DSV4.name)
    recipe = outcome.recipe
    assert sides(recipe, 8) == ["prefill", "decode"]
    assert recipe.groups is not None and recipe.groups.explicit == ((0, 1, 2, 3), (4, 5, 6, 7))
    own = recipe.groups.server_args
    assert own is not None
    assert ("--max-num-seqs", "8") in own[0] and ("--max-num-seqs", "512") in own[1]
    assert ("--enforce-eager",) in own[0] and all(e[0] != "--enforce-eager" for e in own[1])
    assert any(e[0] == "--compilation-config" for e in own[1])
    assert recipe.server.flag("--data-parallel-size") == "4" and not recipe.server.has("--max-num-seqs")
    assert any("the router or proxy command" in n and "line 9 (port 8000): kv_producer" in n for n in outcome.notes)
    assert any("VLLM_NIXL_SIDE_CHANNEL_PORT 5557, 5561 (one per group) cannot be written" in n for n in outcome.notes)
    assert pd_problems(recipe, 8) == []
    problems = check_recipe(recipe, total_gpus=8)
    assert not [p for p in problems if p.code.startswith("pd-")], problems


def test_the_nixl_pages_bare_launches_join_by_the_toy_proxys_ports() -> None:
    outcome = _import(DOCS.read_text(), DOCS.name)
    recipe = outcome.recipe
    assert sides(recipe, 8) == ["prefill", "decode"]
    assert recipe.groups is not None and recipe.groups.explicit == ((0,), (1,)) and recipe.groups.port_base == 8100
    assert "-e VLLM_NIXL_SIDE_CHANNEL_PORT=560{{group}}" in [" ".join(e.words) for e in recipe.docker.entries]
    rendered = render_recipe(recipe, total_gpus=8)
    assert [g.port for g in rendered] == [8100, 8101]
    assert "kv_producer" in rendered[0].server_argv[-1] and "kv_consumer" in rendered[1].server_argv[-1]
    assert pd_problems(recipe, 8) == []


SIDE = (
    "docker run --gpus '\"device={gpus}\"' --network host -e VLLM_NIXL_SIDE_CHANNEL_PORT={channel} "
    "vllm/vllm-openai:v0.11.0 --model org/m --port {port} {extra}"
    """--kv-transfer-config '{{"kv_connector":"{connector}","kv_role":"{role}"}}'\n"""
)


def _side(
    gpus: str, port: int, role: str = "kv_both", channel: int = 5600, extra: str = "", connector: str = ""
) -> str:
    return SIDE.format(
        gpus=gpus, port=port, role=role, channel=channel, extra=extra, connector=connector or "NixlConnector"
    )


def test_producer_and_consumer_sides_join_without_a_router() -> None:
    post = _side("0,1,2,3", 8000, "kv_producer", 5600) + _side("4,5,6,7", 8001, "kv_consumer", 5601)
    recipe = _import(post).recipe
    assert sides(recipe, 8) == ["prefill", "decode"]
    assert recipe.groups is not None and recipe.groups.port_base == 8000


def test_a_vllm_router_with_the_sides_the_other_way_round_makes_the_first_command_the_decode() -> None:
    post = (
        _side("0,1,2,3", 8000, channel=5600)
        + _side("4,5,6,7", 8001, channel=5601)
        + "vllm-router --vllm-pd-disaggregation --prefill http://localhost:8001 --decode http://localhost:8000\n"
    )
    assert sides(_import(post).recipe, 8) == ["decode", "prefill"]


def test_a_router_that_names_neither_sides_port_is_refused_naming_the_port() -> None:
    post = (
        _side("0,1,2,3", 8000, channel=5600)
        + _side("4,5,6,7", 8001, channel=5601)
        + "vllm-router --vllm-pd-disaggregation --prefill http://localhost:9000 --decode http://localhost:8001\n"
    )
    assert "line 1: the server listens on port 8000, which the router (post.md:3) lists as neither side" in (
        _refusal(post)
    )


def test_sides_that_differ_in_a_flag_read_from_server_args_alone_are_refused_naming_it() -> None:
    post = _side("0,1,2,3", 8000, "kv_producer", 5600, "--tensor-parallel-size 4 ") + _side(
        "4,5,6,7", 8001, "kv_consumer", 5601, "--tensor-parallel-size 2 "
    )
    message = _refusal(post)
    assert "differ in --tensor-parallel-size (4 vs 2), which hgxkit reads from server.args for every group" in message


def test_sides_on_another_connector_are_refused_naming_it() -> None:
    post = (
        _side("0,1,2,3", 8000, connector="MooncakeConnector")
        + _side("4,5,6,7", 8001, connector="MooncakeConnector")
        + "vllm-router --vllm-pd-disaggregation --prefill http://localhost:8000 --decode http://localhost:8001\n"
    )
    assert "kv_connector MooncakeConnector: the sides of vLLM's prefill/decode split" in _refusal(post)


@pytest.mark.parametrize(
    ("values", "template"),
    [([5600, 5601], "560{{group}}"), ([5000, 5100], "5{{group}}00"), ([5557, 5558], None), ([5601, 5600], None)],
)
def test_posted_side_channel_ports_are_kept_where_one_group_value_writes_them(
    values: list[int], template: str | None
) -> None:
    assert side_channel_template(values) == template


def test_a_side_whose_role_is_a_command_substitution_is_refused_naming_it_and_its_flag() -> None:
    post = (
        'kv() { printf \'{"kv_connector":"NixlConnector","kv_role":"%s"}\' "$1"; }\n'
        'CUDA_VISIBLE_DEVICES=0 vllm serve org/m --port 8100 --kv-transfer-config "$(kv kv_producer)"\n'
    )
    message = _refusal(post)
    assert message.startswith("post.md: command substitution ($(…)) at line 2, column 75 is not imported")
    assert "(`$(kv kv_producer)`, the value of --kv-transfer-config)" in message
