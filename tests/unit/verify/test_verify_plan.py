"""Verify's benchmark plan: the recipe's cells as written, for the kind's own client."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from hgxkit.errors import InputError
from hgxkit.recipe.matrix import MatrixCell
from hgxkit.recipe.read import load_recipe
from hgxkit.verify.plan import Cell, bench_knob, cells_from_output, client_argv, last_words, plan_cells

ROOT = Path(__file__).resolve().parents[3]
MARLIN = load_recipe(ROOT / "recipes" / "deepseek-v4-flash-dspark-marlin.yaml")
GROUPS = [(0, "dsv4-0"), (1, "dsv4-1")]


def test_full_runs_the_posts_warmups_then_every_cell_as_written_five_times() -> None:
    cells = plan_cells(MARLIN, "full", GROUPS)
    warmups = [c for c in cells if not c.record]
    kept = [c for c in cells if c.record]
    assert len(warmups) == 2 * len(MARLIN.matrix.warmup_runs) and all(c.repeats == 1 for c in warmups)
    assert len(kept) == 2 * 12 and all(c.repeats == 5 for c in kept)  # FULL_REPEATS (see plan.py)
    by_id = {c.cell_id: c for c in kept if c.group == 0}
    assert (by_id["20000x10"].input_len, by_id["20000x10"].concurrency, by_id["20000x10"].num_prompts) == (
        20000,
        10,
        30,
    )
    argv = client_argv(by_id["5000x5"], "/out")
    assert (
        argv[argv.index("--dataset-name") + 1] == "random-ids" and argv[argv.index("--random-range-ratio") + 1] == "1.0"
    )
    assert argv[argv.index("--random-output-len") + 1] == "512" and "--flush-cache" in argv


def test_smoke_is_one_small_cell_per_group_and_a_recipe_without_matrix_gets_one_too() -> None:
    (cell, _) = plan_cells(MARLIN, "smoke", GROUPS)
    assert (cell.input_len, cell.concurrency, cell.num_prompts, cell.repeats) == (5000, 1, 3, 1)
    bare = replace(MARLIN, matrix=None)
    (default, _) = plan_cells(bare, "smoke", GROUPS)
    assert (default.input_len, default.concurrency, default.output_len) == (512, 1, 64)


def test_rate_cells_seed_and_the_clients_own_range_ratio() -> None:
    rate = MatrixCell(
        id="1024@4",
        input_len=1024,
        output_len=128,
        request_rate=4.0,
        num_prompts=40,
        seed=7,
        range_ratio=1.0,
        client="sglang.bench_serving",
    )
    recipe = replace(MARLIN, matrix=replace(MARLIN.matrix, entries=(rate,), warmup_runs=()))
    (cell,) = [c for c in plan_cells(recipe, "full", GROUPS[:1], repeats=1) if c.record]
    argv = client_argv(cell, "/out")
    assert "--max-concurrency" not in argv and argv[argv.index("--request-rate") + 1] == "4.0"
    assert argv[argv.index("--seed") + 1] == "7" and cell.shape == "1024@4.0rps"


def test_vllm_recipes_get_vllm_bench_serve_with_a_fixed_length_ratio_translated() -> None:
    from hgxkit.recipe.server_args import ServerCommand

    server = ServerCommand.from_words(["--model", "/models/qwen", "--served-model-name", "qwen", "-tp", "4"], "vllm")
    recipe = replace(MARLIN, server=server)
    (cell,) = [c for c in plan_cells(recipe, "full", GROUPS[:1], repeats=1) if c.record][:1]
    argv = client_argv(cell, "/out")
    assert argv[:2] == ["--backend", "vllm"] and argv[argv.index("--base-url") + 1] == "http://127.0.0.1:8000"
    assert argv[argv.index("--model") + 1] == "qwen" and argv[argv.index("--tokenizer") + 1] == "/models/qwen"
    assert argv[argv.index("--random-range-ratio") + 1] == "0.0"  # the post's SGLang 1.0: fixed lengths
    assert argv[argv.index("--dataset-name") + 1] == "random" and "--flush-cache" not in argv
    assert cell.file == "g0_5000x1.json"


def test_a_repeat_sends_no_warm_up_requests_and_still_flushes_the_cache() -> None:
    cell = next(c for c in plan_cells(MARLIN, "full", GROUPS) if c.cell_id == "5000x5")
    first, again = client_argv(cell, "/out"), client_argv(cell, "/out", warm=True)
    assert first[first.index("--warmup-requests") + 1] == "5" and again[again.index("--warmup-requests") + 1] == "0"
    assert "--flush-cache" in again and [w for w in first if w != "5"] == [w for w in again if w not in ("0", "5")]
    vllm = replace(cell, kind="vllm", served_name="m", tokenizer="/m")
    assert client_argv(vllm, "/out", warm=True)[client_argv(vllm, "/out").index("--num-warmups") + 1] == "0"


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("bench_repeats", 10**15, "bench_repeats: 1000000000000000 is out of range; give an integer from 1 to 100"),
        ("bench_repeats", "0", "bench_repeats: 0 is out of range; give an integer from 1 to 100"),
        ("bench_output_len", "-5", "bench_output_len: -5 is out of range; give an integer from 1 to 1048576"),
        ("bench_output_len", "1e15", "bench_output_len: 1e15 is out of range; give an integer from 1 to 1048576"),
    ],
)
def test_verify_knobs_that_size_a_run_are_bounded_with_one_line_naming_the_knob(
    name: str, value: object, message: str
) -> None:
    with pytest.raises(InputError) as refused:
        bench_knob(name, value)
    assert refused.value.message == message
    assert bench_knob(name, "7") == 7 and bench_knob(name, None) is None


def test_a_cell_without_result_says_the_clients_last_line() -> None:
    """A cell without a result says why, from the client's last line (e.g. Docker refusing the exec, a reason
    otherwise left on the node)."""
    cells = [Cell(0, "sglang", 30000, 512, 1, 4, 64), Cell(1, "sglang-1", 30001, 512, 1, 4, 64)]
    oci = "OCI runtime exec failed: exec failed: … error setting rlimit type 8: operation not permitted: unknown"
    logs = {cells[0].file: f"{oci}\ndocker exec sglang exited 126\n\n", cells[1].file: ""}
    _, problems = cells_from_output(cells, {}, client_logs=logs)
    assert problems == [
        f"group 0 cell 512x1: the client wrote no result; its last lines: {oci} | docker exec sglang exited 126",
        "group 1 cell 512x1: the client wrote no result; its log is empty",
    ]
    _, unread = cells_from_output(cells[:1], {})
    assert unread == ["group 0 cell 512x1: the client wrote no result"]


def test_the_clients_last_line_is_cut_to_its_end() -> None:
    long = "x" * 400 + "ValueError: the tokenizer is missing"
    assert last_words(long) == "; its last line: …" + long[-300:]
    assert last_words("Traceback (most recent call last):\n  File \"serving.py\", line 9\nKeyError: 'model'\n") == (
        "; its last lines: File \"serving.py\", line 9 | KeyError: 'model'"
    )
    assert last_words(None) == "" and last_words(" \n\t\n") == "; its log is empty"


def test_a_suites_lengths_are_drawn_alike_by_each_engines_client_and_the_translation_is_said() -> None:
    from hgxkit.recipe.server_args import ServerCommand

    suite = MatrixCell(
        id="8192x1024-c4",
        input_len=8192,
        output_len=1024,
        concurrency=4,
        num_prompts=40,
        dataset="random",
        range_ratio=0.8,
        client="InferenceX benchmark_serving.py (vLLM fork)",
    )
    sglang = replace(MARLIN, matrix=replace(MARLIN.matrix, entries=(suite,), warmup_runs=()))
    (cell,) = [c for c in plan_cells(sglang, "full", GROUPS[:1], repeats=1) if c.record]
    argv = client_argv(cell, "/out")
    assert argv[argv.index("--random-range-ratio") + 1] == "0.8" and cell.lengths is None  # the same convention
    assert (argv[argv.index("--random-input-len") + 1], argv[argv.index("--random-output-len") + 1]) == (
        "8192",
        "1024",
    )
    server = ServerCommand.from_words(["--model", "/models/qwen", "-tp", "8"], "vllm")
    vllm = replace(sglang, server=server)
    (cell,) = [c for c in plan_cells(vllm, "full", GROUPS[:1], repeats=1) if c.record]
    argv = client_argv(cell, "/out")
    given = [
        argv[argv.index(flag) + 1] for flag in ("--random-input-len", "--random-output-len", "--random-range-ratio")
    ]
    assert given == ["7372", "921", "0.111"] and (cell.input_len, cell.output_len) == (8192, 1024)
    assert cell.lengths == (
        "InferenceX benchmark_serving.py (vLLM fork)'s --random-range-ratio 0.8 draws input 6553-8192, output "
        "819-1024 tokens; vllm bench serve is given --random-input-len 7372 --random-output-len 921 "
        "--random-range-ratio 0.111 (input 6553-8191, output 818-1024)"
    )
