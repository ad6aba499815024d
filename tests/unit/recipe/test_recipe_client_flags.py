"""A recipe's benchmark cells add only flags that shape the load to the client verify runs.

The rule is part of reading a recipe (`recipe_problems`), so every consumer inherits it: `recipe check`, the
deploy, the export and `verify --endpoint`, where the client runs on the operator's machine. An import drops
another client's flags, or a connection or output flag, with a note instead of carrying them into a cell.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hgxkit.cli import main
from hgxkit.errors import InputError
from hgxkit.importing.importer import ImportOptions, import_post, split_extra_flags
from hgxkit.recipe.judge import judge
from hgxkit.recipe.read import load_recipe, parse_recipe_text
from hgxkit.verify.endpoint import parse_endpoint, verify_endpoint

ROOT = Path(__file__).resolve().parents[3]
RECIPE = ROOT / "recipes" / "deepseek-v4-flash-dspark-marlin.yaml"


def with_extra_args(words: str) -> str:
    """The seed recipe's text with `extra_args: [words]` on its first cell."""
    text = RECIPE.read_text()
    return text.replace("  - id: 5000x1\n", f"  - id: 5000x1\n    extra_args: [{words!r}]\n", 1)


@pytest.mark.parametrize(
    "words",
    [
        "--base-url http://203.0.113.9:8000",  # the key goes where the recipe says
        "--host 203.0.113.9",
        "--output-file /etc/cron.d/x",  # written where the recipe says, on the operator's machine
        "--output-file=/etc/cron.d/x",
        "--tokenizer evil/repo",  # code from a repository of the recipe's choosing
        "--base-u http://203.0.113.9:8000",  # an argparse abbreviation is the flag it abbreviates
        "-o x",
        "--save-result",
    ],
)
def test_a_cell_that_says_where_the_client_connects_or_writes_is_refused_on_reading(words: str) -> None:
    flag = words.split()[0].partition("=")[0]
    with pytest.raises(InputError, match=rf"extra_args \(line \d+\): '{re.escape(flag)}' is not a flag a recipe gives"):
        parse_recipe_text(with_extra_args(words), source="r.yaml")


def test_recipe_check_says_the_same_in_one_line(tmp_path: Path, capsys) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(with_extra_args("--base-url http://203.0.113.9:8000"))
    assert main(["recipe", "check", str(recipe)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'--base-url' is not a flag a recipe gives the benchmark client" in err[0], err


@pytest.mark.parametrize("words", ["--disable-ignore-eos", "--disable-tqdm", "--temperature 0.7", "--goodput ttft:500"])
def test_flags_that_shape_the_load_are_kept(words: str) -> None:
    recipe = parse_recipe_text(with_extra_args(words), source="r.yaml")
    assert recipe.matrix is not None and recipe.matrix.cells()[0].extra_args == tuple(words.split())


def test_verify_against_an_endpoint_refuses_a_dataset_path_before_it_asks_anything(tmp_path: Path) -> None:
    """`--dataset-path` names a file on the serving node; run here, it would read the operator's."""
    recipe = parse_recipe_text(with_extra_args("--dataset-path /root/.ssh/id_ed25519"), source="r.yaml")
    tokenizer = tmp_path / "tok"
    tokenizer.mkdir()
    (tokenizer / "tokenizer.json").write_text("{}")
    with pytest.raises(InputError, match=r"cell 5000x1 .*reads its prompts from --dataset-path, a path on the"):
        verify_endpoint(
            judge(recipe),
            parse_endpoint("http://10.0.0.5:5000"),
            mode="full",
            results_dir=tmp_path / "results",
            client=["c"],
            workdir=tmp_path / "w",
            run_client=lambda argv: pytest.fail("ran"),
            fetch=lambda url: pytest.fail(f"asked {url}"),
            tokenizer=str(tokenizer),
        )


def test_an_import_drops_another_clients_flags_with_a_note() -> None:
    post = ROOT / "tests" / "fixtures" / "posts" / "053-genai-perf-docs-vllm-docker-net-host-then-genai-perf.txt"
    outcome = import_post([(post.name, post.read_text())], ImportOptions(pick=1))
    assert outcome.recipe.matrix is not None
    assert all("--num-sessions" not in c.extra_args for c in outcome.recipe.matrix.cells())
    assert any("`--num-sessions" in note and "dropped from cell" in note for note in outcome.notes), outcome.notes


def test_extra_args_split_into_flags_with_their_values() -> None:
    allowed = frozenset({"--temperature", "--ignore-eos"})
    words = ["--temperature", "-0.5", "--base-url", "http://x", "--ignore-eos", "stray"]
    assert split_extra_flags(words, allowed) == (
        ("--temperature", "-0.5", "--ignore-eos", "stray"),
        [("--base-url", "http://x")],
    )
    assert split_extra_flags(["stray"], allowed) == ((), [("stray",)])


def test_every_shipped_recipe_still_reads() -> None:
    for path in sorted((ROOT / "recipes").glob("*.yaml")):
        load_recipe(str(path))
