"""Prefill/decode posts of the third round (corpus 193-198): what each promise says a user gets."""

from __future__ import annotations

import json

import pytest

from hgxkit.errors import InputError
from hgxkit.importing.importer import ImportOptions, import_post


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
