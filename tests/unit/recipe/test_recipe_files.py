"""Recipe files: schema validation with file/key/line errors, the published schema, the shipped recipes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from hgxkit.errors import InputError
from hgxkit.recipe.diff import diff_recipes
from hgxkit.recipe.dump import dump_recipe
from hgxkit.recipe.read import load_recipe, parse_recipe_text
from hgxkit.recipe.schema import RECIPE_SCHEMA

ROOT = Path(__file__).resolve().parents[3]
MARLIN = ROOT / "recipes" / "deepseek-v4-flash-dspark-marlin.yaml"
FLASHINFER = ROOT / "recipes" / "deepseek-v4-flash-dspark-flashinfer.yaml"
POST = (ROOT / "tests" / "fixtures" / "forum-dspark-h200.txt").read_text()

MINIMAL = """\
schema_version: 1
name: tiny
image:
  reference: img:1
docker:
  options:
  - --rm
server:
  command: sglang serve
  args:
  - --tp 2
"""


def test_published_schema_is_the_one_the_loader_uses() -> None:
    assert json.loads((ROOT / "recipes" / "schema.json").read_text()) == RECIPE_SCHEMA


@pytest.mark.parametrize("path", [MARLIN, FLASHINFER])
def test_shipped_recipes_load_and_survive_a_dump(path: Path) -> None:
    recipe = load_recipe(path)
    again = parse_recipe_text(dump_recipe(recipe))
    assert again == type(recipe)(**{**recipe.__dict__, "path": None})


def test_the_two_shipped_recipes_differ_in_exactly_one_line() -> None:
    differences = diff_recipes(load_recipe(MARLIN), load_recipe(FLASHINFER))
    assert [d.line() for d in differences] == ["server --moe-runner-backend: marlin -> flashinfer_mxfp4"]


def test_a_split_whose_decode_group_changed_differs_in_that_groups_own_argument() -> None:
    """Each group's own server arguments are part of the setup: a re-deploy of the second recipe replaces the decode."""
    split = ROOT / "tests" / "fixtures" / "pd" / "dspark-pd-one-node.yaml"
    changed = ROOT / "tests" / "fixtures" / "pd" / "dspark-pd-one-node-decode-changed.yaml"
    differences = diff_recipes(load_recipe(split), load_recipe(changed))
    assert [d.line() for d in differences] == ["groups group 1 --max-running-requests: (absent) -> 32"]


def _post_cells(backend: str) -> list[tuple[int, int, int, float, float, float, float]]:
    pattern = re.compile(
        rf"--- {backend} input=(\d+) conc=(\d+) prompts=(\d+) --- Peak concurrent requests: \d+ "
        r"Accept length: ([\d.]+) Mean TTFT \(ms\): ([\d.]+) P90 TTFT \(ms\): ([\d.]+) P99 TTFT \(ms\): ([\d.]+)"
    )
    return [
        (int(i), int(c), int(n), float(acc), float(mean), float(p90), float(p99))
        for i, c, n, acc, mean, p90, p99 in pattern.findall(POST)
    ]


@pytest.mark.parametrize(("path", "backend"), [(MARLIN, "marlin"), (FLASHINFER, "flashinfer")])
def test_shipped_reference_is_the_posts_full_table(path: Path, backend: str) -> None:
    recipe = load_recipe(path)
    assert recipe.reference is not None
    cells = [
        (
            c.input_len,
            c.concurrency,
            c.num_prompts,
            c.accept_length,
            c.ttft_mean_ms,
            c.ttft_p90_ms,
            c.ttft_p99_ms,
        )
        for c in recipe.reference.cells
    ]
    assert len(cells) == 12
    assert cells == _post_cells(backend)
    assert recipe.reference.slo_ttft_p99_ms == 5000


def test_shipped_matrix_is_the_posts() -> None:
    matrix = load_recipe(MARLIN).matrix
    assert matrix is not None
    assert matrix.input_lens == (5000, 10000, 20000)
    assert matrix.concurrencies == (1, 5, 10, 20)
    assert [matrix.prompts_for(c) for c in matrix.concurrencies] == [10, 15, 30, 60]
    assert matrix.dataset == "random-ids"


def test_shipped_model_is_the_dspark_checkpoint_under_data_models() -> None:
    model = load_recipe(MARLIN).model
    assert model.repo_id == "deepseek-ai/DeepSeek-V4-Flash-DSpark"
    assert model.local_dir == "/data/models/deepseek-v4-flash-dspark"
    assert model.mount_point == "/model"


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("name: tiny", "name: Tiny Recipe"), "tiny.yaml: name (line 2): 'Tiny Recipe' does not match"),
        # Version 1 files are migrated when loaded; a version this hgxkit does not know is refused.
        (
            ("schema_version: 1", "schema_version: 3"),
            "schema_version (line 1): 3 is not a recipe schema this hgxkit reads (1, 2; version 1 is migrated when "
            "loaded): the recipe is newer than this hgxkit: upgrade hgxkit",
        ),
        (
            ("  - --rm", "  - --rmm"),
            "docker.options[0] (line 7): token 1 '--rmm' (line 1, column 1): unknown docker",
        ),
        (
            ("  - --rm", "  - --name"),
            "docker.options[0] (line 7): token 1 '--name' (line 1, column 1): --name is missing",
        ),
        (
            ("  - --rm", "  - rm"),
            "docker.options[0] (line 7): token 1 'rm' (line 1, column 1): not a docker option",
        ),
        (("  - --rm", '  - "--name \'x"'), "docker.options[0] (line 7): unbalanced single quote"),
        (
            ("  - --rm", "  - --name {{name}}"),
            "docker.options[0] (line 7): {{name}} needs groups.name_template",
        ),
        (("  - --tp 2", "  - --tp {{gpu}}"), "server.args[0] (line 11): unknown placeholder {{gpu}}"),
        (
            ("  reference: img:1", "  reference: img:1\n  digest: sha256:abc"),
            "image.digest (line 5): 'sha256:abc'",
        ),
        (("image:", "imagee:"), "imagee (line 3): unknown key 'imagee'; remove it or fix its spelling"),
        (
            ("docker:\n", "docker:\n  invocation: podman run\n"),
            "docker.invocation (line 6): 'podman run' is not one",
        ),
        (("  - --rm", "  - --rm\n  - [a]"), "docker.options[1] (line 8): ['a'] is not of type 'string'"),
        (("name: tiny", "name: tiny\ngroups: {port_base: 5000}"), "groups (line 3): give either size"),
        (("name: tiny", "name: [unclosed"), "tiny.yaml: not valid YAML (line 3, column 6): expected ','"),
    ],
)
def test_bad_recipes_name_file_key_and_line(tmp_path: Path, edit: tuple[str, str], message: str) -> None:
    path = tmp_path / "tiny.yaml"
    path.write_text(MINIMAL.replace(*edit, 1))
    with pytest.raises(InputError) as caught:
        load_recipe(path)
    assert message in caught.value.message
    assert caught.value.message.startswith(str(path))


def test_missing_recipe_file_says_where_to_look(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"no such recipe file; list shipped recipes"):
        load_recipe(tmp_path / "nope.yaml")


def test_matrix_prompts_must_match_concurrencies(tmp_path: Path) -> None:
    text = MINIMAL + "matrix:\n  input_lens: [10]\n  concurrencies: [1, 2]\n  num_prompts: [3]\n  output_len: 4\n"
    with pytest.raises(InputError, match=r"matrix.num_prompts \(line 15\): 1 entries for 2 concurrencies"):
        parse_recipe_text(text, source="m.yaml")
