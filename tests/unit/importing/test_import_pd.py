"""A one-node prefill/decode post imports as one recipe, its prefill and decode commands the groups, each side's flag
its group's own; what hgxkit does not deploy split (one side alone, another transfer backend, vLLM's split, a split
off the host's network) is refused naming why."""

from __future__ import annotations

from pathlib import Path

import pytest

from hgxkit.errors import InputError
from hgxkit.importing.importer import ImportOptions, import_post
from hgxkit.recipe.check import check_recipe
from hgxkit.recipe.pd import sides
from hgxkit.recipe.render import render_recipe

POST = next((Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "posts").glob("123-*.txt"))
NAME = POST.name


def refusal(text: str, **options: object) -> str:
    with pytest.raises(InputError) as caught:
        import_post([(NAME, text)], ImportOptions(**options))  # type: ignore[arg-type]
    return caught.value.message


def test_both_sides_become_the_groups_of_one_recipe_that_checks_clean() -> None:
    recipe = import_post([(NAME, POST.read_text())], ImportOptions()).recipe
    assert sides(recipe, 8) == ["prefill", "decode"]
    assert [e for e in check_recipe(recipe, 8) if e.level == "error"] == []
    groups = render_recipe(recipe, total_gpus=8)
    assert [(g.gpus, g.port, g.name) for g in groups] == [
        ([0, 1, 2, 3], 30000, "sglang-0"),
        ([4, 5, 6, 7], 30001, "sglang-1"),
    ]
    argv = [g.server_argv for g in groups]
    assert [a[a.index("--port") + 1] for a in argv] == ["30000", "30001"]
    assert [a[a.index("--disaggregation-mode") + 1] for a in argv] == ["prefill", "decode"]


def test_one_side_alone_is_refused() -> None:
    assert refusal(POST.read_text(), pick=1).endswith(
        "--disaggregation-mode prefill: the post runs the prefill side of a prefill/decode split alone, which answers "
        "no request; import the post's prefill and decode commands together (the router comes from "
        "`--data router=true`)"
    )


def test_a_transfer_backend_of_other_hardware_or_tests_is_refused() -> None:
    text = POST.read_text().replace("backend mooncake", "backend fake")
    assert refusal(text).endswith(
        "--disaggregation-transfer-backend fake: hgxkit deploys SGLang's prefill/decode split over mooncake or nixl "
        "(the transfer backends of NVIDIA GPUs); fake is another accelerator's, a test's or another release's: use one of them"
    )


def test_nixl_imports_too() -> None:
    text = POST.read_text().replace("backend mooncake", "backend nixl")
    recipe = import_post([(NAME, text)], ImportOptions()).recipe
    assert recipe.server.flag("--disaggregation-transfer-backend") == "nixl"


def test_a_split_off_the_hosts_network_is_refused() -> None:
    text = POST.read_text().replace(" --network host", "")
    text = text.replace('"device=0,1,2,3"\'', '"device=0,1,2,3"\' -p 30000:30000')
    text = text.replace('"device=4,5,6,7"\'', '"device=4,5,6,7"\' -p 30001:30001')
    assert "prefill/decode split: the decode groups fetch the KV from the prefill's bootstrap port" in refusal(text)


def test_a_splits_servers_on_the_hosts_network_listen_from_the_first_port_with_a_note() -> None:
    # clients reach a split through hgxkit's router, which is told each group's port: the post's own ports need
    # not be kept, only made port_base + group index
    text = POST.read_text().replace("--port 30001", "--port 30005")
    outcome = import_post([(POST.name, text)], ImportOptions())
    assert outcome.recipe.groups is not None and outcome.recipe.groups.port_base == 30000
    assert any("the servers listen on ports 30000, 30005; groups listen on port_base" in n for n in outcome.notes)


def test_vllms_split_whose_sides_both_bind_the_default_side_channel_port_is_refused_naming_both_groups() -> None:
    post = "".join(
        f"docker run -d --gpus '\"device={gpus}\"' --network host vllm/vllm-openai:v0.11.0 --model org/m "
        f"--tensor-parallel-size 4 --port {port} --kv-transfer-config "
        f'\'{{"kv_connector":"NixlConnector","kv_role":"{role}"}}\'\n'
        for gpus, port, role in (("0,1,2,3", 8100, "kv_producer"), ("4,5,6,7", 8200, "kv_consumer"))
    )
    message = refusal(post)
    assert "VLLM_NIXL_SIDE_CHANNEL_PORT=5600, 1 DP rank(s)) and 1 (line 2" in message
    assert "both bind port 5600 on one host" in message
