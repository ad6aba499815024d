"""Recipe schema v2: typed matrix cells and reference cells, v1 migration, groups spanning nodes (render and check),
`recipe check` per server kind, `recipe show` and `recipe migrate`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hgxkit.cli import main
from hgxkit.errors import InputError
from hgxkit.importing.docker_run import import_docker_run
from hgxkit.importing.importer import ImportOptions, import_post
from hgxkit.recipe.check import check_recipe
from hgxkit.recipe.dump import dump_recipe
from hgxkit.recipe.read import load_recipe, parse_recipe_text
from hgxkit.recipe.render import render_recipe

ROOT = Path(__file__).resolve().parents[3]
MARLIN = ROOT / "recipes" / "deepseek-v4-flash-dspark-marlin.yaml"
POSTS = ROOT / "tests" / "fixtures" / "posts"

V1 = """\
schema_version: 1
name: tiny
image:
  reference: lmsysorg/sglang:v0.5.23
docker:
  options:
  - --gpus all
server:
  command: sglang serve
  args:
  - --tp 8
matrix:
  input_lens: [1000, 2000]
  concurrencies: [1, 4]
  num_prompts: [5, 20]
  output_len: 100
reference:
  tool: sglang.bench_serving
  cells:
  - {input_len: 2000, concurrency: 4, num_prompts: 20, ttft_mean_ms: 12.5}
  - {input_len: 3000, concurrency: 1, ttft_p99_ms: 40.0}
"""


def post(number: str, **options: object):
    path = next(POSTS.glob(f"{number}-*.txt"))
    return import_post([(path.name, path.read_text())], ImportOptions(**options)).recipe  # type: ignore[arg-type]


def test_a_v1_recipe_is_migrated_when_loaded() -> None:
    recipe = parse_recipe_text(V1, source="v1.yaml")
    assert recipe.schema_version == 2
    cells = recipe.matrix.cells()
    assert [(c.id, c.input_len, c.concurrency, c.num_prompts, c.output_len) for c in cells] == [
        ("1000x1", 1000, 1, 5, 100),
        ("1000x4", 1000, 4, 20, 100),
        ("2000x1", 2000, 1, 5, 100),
        ("2000x4", 2000, 4, 20, 100),
        ("3000x1", 3000, 1, None, 100),  # a reference cell off the grid: a cell
    ]
    assert (cells[0].dataset, cells[0].range_ratio) == ("random-ids", 1.0)  # v1's defaults, written out
    assert [(r.cell.id, r.input_len, r.concurrency, r.ttft_mean_ms, r.ttft_p99_ms) for r in recipe.reference.cells] == [
        ("2000x4", 2000, 4, 12.5, None),
        ("3000x1", 3000, 1, None, 40.0),
    ]
    # v1 readers' view of the matrix still works (hgxkit/verify reads it)
    assert (recipe.matrix.input_lens, recipe.matrix.concurrencies, recipe.matrix.prompts_for(4)) == (
        (1000, 2000, 3000),
        (1, 4),
        20,
    )
    again = parse_recipe_text(dump_recipe(recipe))
    assert again == recipe


def test_recipe_migrate_rewrites_a_v1_file_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "tiny.yaml"
    path.write_text(V1)
    assert main(["recipe", "migrate", str(path)]) == 0
    assert "migrated from schema version 1 to 2" in capsys.readouterr().err
    assert "schema_version: 2" in path.read_text()
    assert load_recipe(path) == parse_recipe_text(V1, source=str(path)).__class__(
        **{**parse_recipe_text(V1).__dict__, "path": str(path)}
    )
    assert main(["recipe", "migrate", str(path)]) == 0
    assert "already schema version 2" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            ("schema_version: 1", "schema_version: 7"),
            "schema_version (line 1): 7 is not a recipe schema this hgxkit reads",
        ),
        (
            ("schema_version: 1", "schema_version: 0"),
            "schema_version (line 1): 0 is not a recipe schema this hgxkit reads",
        ),
        (("num_prompts: [5, 20]", "num_prompts: [5]"), "matrix.num_prompts (line 15): 1 entries for 2 concurrencies"),
    ],
)
def test_versions_and_v1_grids_are_checked_with_their_line(edit: tuple[str, str], message: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_recipe_text(V1.replace(*edit), source="v.yaml")
    assert message in caught.value.message


V2 = MARLIN.read_text()


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("  - cell: 5000x5\n", "  - cell: 5000x7\n"), "reference.cells[1].cell (line "),
        (("  - id: 5000x5\n", "  - id: 5000x1\n"), "matrix.cells[1].id (line "),
        (
            ("  - --tp 4\n", "  - --tp 4\n  - --node-rank '{{rank}}'\n"),
            "{{rank}} is filled per host of a group spanning",
        ),
        (("  port_base: 5000\n", "  port_base: 5000\n  nodes: 2\n"), None),
    ],
)
def test_v2_cells_and_node_placeholders_are_checked(edit: tuple[str, str], message: str | None) -> None:
    assert V2.count(edit[0]) >= 1
    text = V2.replace(*edit, 1)
    if message is None:  # a group over two nodes renders per host
        recipe = parse_recipe_text(text)
        assert recipe.node_count() == 2
        return
    with pytest.raises(InputError) as caught:
        parse_recipe_text(text, source="m.yaml")
    assert message in caught.value.message


def test_matrix_cells_are_typed_with_every_setting() -> None:
    cell = load_recipe(MARLIN).matrix.cells()[0]
    assert (cell.id, cell.input_len, cell.output_len, cell.concurrency, cell.request_rate, cell.num_prompts) == (
        "5000x1",
        5000,
        512,
        1,
        None,
        10,
    )
    assert (cell.dataset, cell.range_ratio, cell.client, cell.source) == (
        "random-ids",
        1.0,
        "sglang.benchmark.serving",
        "forum-dspark-h200.txt:31",
    )
    assert not cell.by_rate


def test_a_rank_of_a_multinode_server_renders_per_host() -> None:
    recipe = post("004")  # two `python3 -m sglang.launch_server … --nnodes 2 --node-rank 0|1` commands
    assert (recipe.groups.nodes, recipe.groups.size, recipe.groups.dist_port) == (2, 8, 5000)
    argv = [render_recipe(recipe, rank=rank, head="10.1.2.3")[0].server_argv for rank in (0, 1)]
    for rank, words in enumerate(argv):
        assert words[words.index("--node-rank") + 1] == str(rank)
        assert words[words.index("--dist-init-addr") + 1] == "10.1.2.3:5000"
    with pytest.raises(InputError, match=r"spans 2 nodes: render it per host with a rank \(0-1; 0 is the head\)"):
        render_recipe(recipe)
    with pytest.raises(InputError, match=r"rank 2 is not one of the recipe's 2 nodes"):
        render_recipe(recipe, rank=2, head="10.1.2.3")
    with pytest.raises(InputError, match=r"head '10.0.0.1; reboot' is not a host name or address"):
        render_recipe(recipe, rank=0, head="10.0.0.1; reboot")


def test_vllm_workers_get_headless_on_ranks_above_zero() -> None:
    text = "vllm serve org/Big-1T -tp 8 -pp 2 --nnodes 2 --node-rank 0 --master-addr 10.0.0.1 --master-port 29600\n"
    recipe = import_post([("p.md", text)], ImportOptions()).recipe
    assert recipe.groups.dist_port == 29600
    head, worker = (render_recipe(recipe, rank=r, head="10.9.9.9")[0].server_argv for r in (0, 1))
    assert "--headless" not in head and worker[-1] == "--headless"
    assert worker[worker.index("--master-addr") + 1] == "10.9.9.9"
    assert worker[worker.index("--master-port") + 1] == "29600"


def test_check_understands_a_group_spanning_nodes() -> None:
    recipe = post("005")  # TP16 over two 8-GPU nodes, --nnodes 2
    assert [f.code for f in check_recipe(recipe, 8) if f.code in ("group-size", "gpus-all")] == []
    single = import_docker_run("docker run --gpus all lmsysorg/sglang:v0.5.23 sglang serve --model-path /m --tp 16")
    (finding,) = [f for f in check_recipe(single, 8) if f.code == "group-size"]
    assert "--nnodes 2" in finding.message and "--gpus all" in finding.message


def test_check_per_kind_has_no_false_findings() -> None:
    # vLLM: listens on 0.0.0.0 by default (no `unreachable`), -tp/-dp and `_` spellings count, no SGLang pitfalls.
    # (v0.9.2: the import refuses SGLang's --cuda-graph-max-bs on an image whose option table it has, 0.33's)
    vllm = import_docker_run(
        "docker run -p 8000:8000 -v /data:/data -e SGLANG_RAGGED_VERIFY_MODE=compact vllm/vllm-openai:v0.9.2 "
        "--model /data/models/x -tp 2 --data_parallel_size 2 --cuda-graph-max-bs 8"
    )
    codes = [f.code for f in check_recipe(vllm)]
    assert "unreachable" not in codes and "cuda-graph-max-bs" not in codes and "compact-without-sps" not in codes
    assert "model-mount" not in codes  # the model is under the mounted /data
    from hgxkit.recipe.check import parallel_size

    assert parallel_size(vllm) == 4
    # SGLang: its default host is loopback, so a published port does not reach it.
    sglang = import_docker_run("docker run -p 30000:30000 lmsysorg/sglang:v0.5.23 sglang serve --model-path org/m")
    unreachable = next(f for f in check_recipe(sglang) if f.code == "unreachable")
    assert "127.0.0.1 (SGLang default)" in unreachable.message


def test_a_placed_model_under_a_parent_mount_is_mounted() -> None:
    text = MARLIN.read_text().replace("-v /data/models/deepseek-v4-flash-dspark:/model", "-v /data:/data")
    text = text.replace("--model-path /model", "--model-path /data/models/deepseek-v4-flash-dspark")
    text = text.replace("mount_point: /model", "mount_point: /data/models/deepseek-v4-flash-dspark")
    assert [f for f in check_recipe(parse_recipe_text(text), 8) if f.code == "model-mount"] == []


def test_gpus_all_with_fewer_gpus_used_is_explained() -> None:
    recipe = import_docker_run("docker run --gpus all lmsysorg/sglang:v0.5.23 sglang serve --model-path /m --tp 4")
    (finding,) = [f for f in check_recipe(recipe, 8) if f.code == "gpus-all"]
    assert finding.level == "warning" and "all 8 GPUs of the node but the server uses 4" in finding.message


def test_recipe_show_prints_tables_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["recipe", "show", str(MARLIN)]) == 0
    out = capsys.readouterr().out
    assert "SGLang (sglang)" in out and "5000x1" in out and "forum-dspark-h200.txt:31" in out
    assert main(["recipe", "show", str(MARLIN), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["server"]["kind"] == "sglang"
    assert data["matrix"]["cells"][0] == {
        "id": "5000x1",
        "input_len": 5000,
        "output_len": 512,
        "concurrency": 1,
        "request_rate": None,
        "num_prompts": 10,
        "dataset": "random-ids",
        "range_ratio": 1.0,
        "warmups": None,
        "seed": None,
        "client": "sglang.benchmark.serving",
        "backend": None,
        "extra_args": [],
        "source": "forum-dspark-h200.txt:31",
    }
    assert data["reference"]["cells"][0]["sources"] == ["forum-dspark-h200.txt:31"]
    assert data["groups"]["nodes"] == 1


# --- v2 fields are untrusted input like every other: refused with file, key path and line ---
HOSTILE_V2 = [
    # A client flag with a command substitution: verify may hand it to a shell.
    (("  - id: 5000x1\n", "  - id: 5000x1\n    extra_args:\n    - --x $(id)\n"), "matrix.cells[0].extra_args"),
    # The same, single-quoted: literal on the host, a command again wherever it is re-evaluated.
    (("  - id: 5000x1\n", "  - id: 5000x1\n    extra_args:\n    - \"--x '`id`'\"\n"), "command substitution (`)"),
    # A per-host placeholder in a docker option: only server arguments are filled per host.
    (
        ("  - --restart unless-stopped\n", "  - --restart unless-stopped\n  - --label 'r={{rank}}'\n"),
        "docker.options[3] (line 33): {{rank}} is for server arguments only",
    ),
    # A terminal escape in a source line.
    (("    - forum-dspark-h200.txt:31\n", '    - "forum\\e[2J.txt:31"\n'), "control character U+001B"),
    # A source that is not FILE:LINE.
    (("    - forum-dspark-h200.txt:31\n", "    - somewhere\n"), "does not match: expected where the numbers were read"),
    # A cell id with a shell separator.
    (("  - id: 5000x1\n", "  - id: 5000x1;id\n"), "does not match: expected a cell id"),
]


@pytest.mark.parametrize(("edit", "message"), HOSTILE_V2, ids=[str(n) for n in range(len(HOSTILE_V2))])
def test_hostile_v2_fields_are_refused(edit: tuple[str, str], message: str) -> None:
    assert V2.count(edit[0]) >= 1
    with pytest.raises(InputError) as caught:
        parse_recipe_text(V2.replace(*edit, 1), source="m.yaml")
    assert message in caught.value.message
    assert "\n" not in caught.value.message
