"""A secret a post holds appears in nothing `recipe import` prints, in any form (notes, the JSON ledger, the line
account, an error), whether its name or only its shape says it is one."""

from __future__ import annotations

from pathlib import Path

import pytest

from hgxkit.cli import main
from hgxkit.errors import InputError

TOKEN = "hf_FAKEtokenFORtestsNOTrealXXXXXXXXXX"  # the shape of a Hub token, obviously none
POST = (
    f"export MYTOK={TOKEN}\n"  # a name that says nothing: the value's shape says it
    f"export HF_TOKEN={TOKEN}\n"
    "python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B --port 30000\n"
)


@pytest.mark.parametrize("form", [[], ["--json"], ["--explain"], ["-o", "recipe.yaml"]])
def test_no_form_of_the_import_shows_the_posts_secret(
    form: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "post.sh").write_text(POST)
    assert main(["recipe", "import", "post.sh", *form]) == 0
    out, err = capsys.readouterr()
    assert "MYTOK" in out + err and TOKEN not in out + err
    assert not any(TOKEN in p.read_text() for p in tmp_path.glob("*.yaml"))


def test_an_error_that_quotes_a_secret_shows_it_masked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def refuse(*_args: object) -> None:
        raise InputError(f"post.sh:1: --api-key {TOKEN} is refused")

    monkeypatch.setattr("hgxkit.cli.recipe.import_post", refuse)
    (tmp_path / "post.sh").write_text(POST)
    assert main(["recipe", "import", str(tmp_path / "post.sh")]) == 2
    err = capsys.readouterr().err
    assert TOKEN not in err and err.startswith("hgxkit: error: post.sh:1: --api-key ")


def test_hgxkits_own_word_for_a_generated_key_is_no_secret() -> None:
    from hgxkit.secrets import redact

    assert (
        redact("set api_key: auto (a key is generated on the node)")
        == "set api_key: auto (a key is generated on the node)"
    )
    assert redact(f"api_key: {TOKEN}") == "api_key: ***"
