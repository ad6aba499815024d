"""Prefill/decode posts of the third round (corpus 193-198): what each promise says a user gets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hgxkit.errors import InputError
from hgxkit.importing.importer import ImportOptions, import_post

POSTS = Path(__file__).resolve().parents[2] / "fixtures" / "posts"


def refusal(text: str) -> str:
    with pytest.raises(InputError) as caught:
        import_post([("p.md", text)], ImportOptions())
    return caught.value.message


def split(connector: str) -> str:
    """A vLLM split whose sides differ in TP and in their transfer configs, which name `connector` and no role
    (a v0-era post's shape: the prefill's config has extra settings of its own)."""
    decode = json.dumps({"kv_connector": connector})
    prefill = json.dumps({"kv_connector": connector, "kv_connector_extra_config": {"skip_sampling": True}})
    return (
        f"```bash\nvllm serve org/m --tensor-parallel-size 2 --port 8080 --kv-transfer-config '{decode}'\n"
        f"vllm serve org/m --tensor-parallel-size 1 --port 8090 --kv-transfer-config '{prefill}'\n```\n"
    )


def test_a_split_whose_connector_hgxkit_does_not_deploy_is_refused_naming_it_before_its_sides_are_compared() -> None:
    message = refusal(split("DynamoNixlConnector"))
    assert "DynamoNixlConnector" in message and "NixlConnector (the transfer backends" in message
    assert "differ in" not in message


def test_a_split_of_a_connector_hgxkit_deploys_still_names_the_flag_its_sides_must_share() -> None:
    assert "differ in --tensor-parallel-size" in refusal(split("NixlConnector"))


def test_the_backend_refusal_allows_for_another_release_s_connector() -> None:
    assert "another release's" in refusal(split("PyNcclConnector"))


def corpus(number: int) -> tuple[str, str]:
    (path,) = POSTS.glob(f"{number}-*.txt")
    return path.name, path.read_text()


def test_a_flag_today_s_sglang_finds_ambiguous_is_refused_with_the_image_pin_as_the_way_out() -> None:
    with pytest.raises(InputError) as caught:
        import_post([corpus(196)], ImportOptions())
    assert "--cuda-graph-max-bs is ambiguous" in caught.value.message
    assert "import with --image REF" in caught.value.message


def test_the_same_split_over_two_hosts_imports_with_an_image_of_its_era() -> None:
    outcome = import_post([corpus(196)], ImportOptions(image="lmsysorg/sglang:v0.4.7-cu124"))
    recipe = outcome.recipe
    assert recipe.groups.hosts == 2 and recipe.groups.explicit == ((0, 1),)
    sides = {dict(args)["--disaggregation-mode"]: dict(args) for args in recipe.groups.server_args}
    assert sides["decode"]["--mem-fraction-static"] == "0.6" and "--mem-fraction-static" not in sides["prefill"]
    assert recipe.server.flag("--cuda-graph-max-bs") == "8"
    assert recipe.server.flag("--disaggregation-ib-device") == "mlx5_1,mlx5_2,mlx5_3,mlx5_4"
    assert recipe.server.flag("--host") == "0.0.0.0"
    assert any("was not checked" in note and "--cuda-graph-max-bs" in note for note in outcome.notes)


def test_a_router_alone_is_named_also_as_the_production_stack_writes_it() -> None:
    """vllm_router.app's static backends, in an inline code span over lines without backslashes."""
    with pytest.raises(InputError) as caught:
        import_post([corpus(198)], ImportOptions())
    assert caught.value.message.split(": ", 1)[0].endswith(".txt:3")
    assert "only a prefill/decode router command" in caught.value.message
