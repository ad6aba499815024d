"""Posted benchmark commands and their printed results become `matrix` cells and `reference` numbers.

Every expected number below is copied from the post (tests/fixtures/posts/index.yaml lists them in `notes`),
not from the parser: a cell has every setting the command gave (or the client's default, written out with a
note), a reference cell every number the client printed, and the lines it was read from.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hgxkit.importing.importer import ImportOptions, import_post
from hgxkit.importing.outcome import ImportOutcome
from hgxkit.recipe.matrix import MatrixCell

POSTS = Path(__file__).resolve().parents[2] / "fixtures" / "posts"


def posts(*numbers: str, **options: object) -> ImportOutcome:
    files = [(p.name, p.read_text()) for n in numbers for p in POSTS.glob(f"{n}-*.txt")]
    return import_post(files, ImportOptions(**options))  # type: ignore[arg-type]


def settings(cell: MatrixCell) -> dict[str, object]:
    keys = (
        "input_len",
        "output_len",
        "concurrency",
        "request_rate",
        "num_prompts",
        "dataset",
        "range_ratio",
        "warmups",
        "seed",
        "client",
        "backend",
    )
    return {key: getattr(cell, key) for key in keys if getattr(cell, key) is not None}


def numbers(result: ImportOutcome) -> dict[str, dict[str, float | int]]:
    assert result.recipe.reference is not None
    return {ref.cell.id: ref.metrics() for ref in result.recipe.reference.cells}


def test_vllm_dsv32_bench_serve_with_its_result_block() -> None:
    # 012: `vllm bench serve … --random-input 2048 --random-output 1024 --request-rate 10 --num-prompt 100 \ `
    result = posts("012")
    (cell,) = result.recipe.matrix.cells()
    assert settings(cell) == {
        "input_len": 2048,
        "output_len": 1024,
        "request_rate": 10.0,
        "num_prompts": 100,
        "dataset": "random",
        "range_ratio": 0.0,
        "client": "vllm bench serve",
    }
    assert cell.extra_args == ("--trust-remote-code",)  # after the broken `\ ` continuation, read on (a note)
    assert numbers(result) == {
        cell.id: {
            "completed": 100,
            "failed": 0,
            "duration_s": 129.34,
            "request_throughput": 0.77,
            "output_throughput": 791.73,
            "total_throughput": 2375.18,
            "peak_concurrency": 100,
            "ttft_mean_ms": 21147.20,
            "ttft_median_ms": 21197.97,
            "ttft_p99_ms": 41133.00,
            "tpot_mean_ms": 99.71,
            "tpot_median_ms": 99.25,
            "tpot_p99_ms": 124.28,
            "itl_mean_ms": 99.71,
            "itl_median_ms": 76.89,
            "itl_p99_ms": 2032.37,
        }
    }
    assert result.recipe.reference.cells[0].sources == ("012-vllm-recipes-dsv32-serve-serve-bench-result.txt:61-85",)
    assert any("--num-prompt read as --num-prompts" in note for note in result.notes)
    assert any("a backslash followed by spaces" in note for note in result.notes)


def test_sglang_kimi_three_cells_with_three_result_blocks() -> None:
    # 028: `python3 -m sglang.bench_serving … --random-input-len 1000 --random-output-len 1000 --num-prompts N
    # --max-concurrency C --request-rate inf` for (N, C) = (10, 1), (80, 16), (500, 100)
    result = posts("028")
    cells = result.recipe.matrix.cells()
    shared = {
        "input_len": 1000,
        "output_len": 1000,
        "dataset": "random",
        "range_ratio": 0.0,
        "client": "sglang.benchmark.serving",
        "backend": "sglang",
    }
    assert [settings(c) for c in cells] == [
        {**shared, "concurrency": 1, "num_prompts": 10},
        {**shared, "concurrency": 16, "num_prompts": 80},
        {**shared, "concurrency": 100, "num_prompts": 500},
    ]
    got = numbers(result)
    assert got[cells[0].id] == {
        "completed": 10,
        "duration_s": 39.77,
        "request_throughput": 0.25,
        "input_throughput": 153.40,
        "output_throughput": 106.10,
        "total_throughput": 259.50,
        "peak_concurrency": 2,
        "mean_concurrency": 1.00,
        "e2e_mean_ms": 3972.87,
        "e2e_median_ms": 4044.55,
        "e2e_p90_ms": 7046.30,
        "e2e_p99_ms": 7441.13,
        "ttft_mean_ms": 176.89,
        "ttft_median_ms": 154.24,
        "ttft_p99_ms": 285.75,
        "tpot_mean_ms": 9.22,
        "tpot_median_ms": 9.32,
        "tpot_p99_ms": 12.72,
        "itl_mean_ms": 9.02,
        "itl_median_ms": 8.80,
        "itl_p95_ms": 13.23,
        "itl_p99_ms": 14.17,
        "itl_max_ms": 29.38,
    }
    assert got[cells[1].id] == {
        "completed": 80,
        "duration_s": 158.05,
        "request_throughput": 0.51,
        "input_throughput": 250.99,
        "output_throughput": 258.18,
        "total_throughput": 509.17,
        "peak_concurrency": 19,
        "mean_concurrency": 14.09,
        "e2e_mean_ms": 27837.05,
        "e2e_median_ms": 23508.00,
        "e2e_p90_ms": 57126.31,
        "e2e_p99_ms": 66044.35,
        "ttft_mean_ms": 374.30,
        "ttft_median_ms": 375.51,
        "ttft_p99_ms": 695.58,
        "tpot_mean_ms": 53.25,
        "tpot_median_ms": 57.93,
        "tpot_p99_ms": 85.45,
        "itl_mean_ms": 53.95,
        "itl_median_ms": 53.97,
        "itl_p95_ms": 84.74,
        "itl_p99_ms": 244.84,
        "itl_max_ms": 655.61,
    }
    assert got[cells[2].id] == {
        "completed": 500,
        "duration_s": 996.64,
        "request_throughput": 0.50,
        "input_throughput": 250.67,
        "output_throughput": 253.51,
        "total_throughput": 504.18,
        "peak_concurrency": 104,
        "mean_concurrency": 92.70,
        "e2e_mean_ms": 184773.75,
        "e2e_median_ms": 174183.65,
        "e2e_p90_ms": 343625.28,
        "e2e_p99_ms": 404284.53,
        "ttft_mean_ms": 1289.59,
        "ttft_median_ms": 1313.35,
        "ttft_p99_ms": 2346.78,
        "tpot_mean_ms": 364.70,
        "tpot_median_ms": 403.32,
        "tpot_p99_ms": 452.34,
        "itl_mean_ms": 363.82,
        "itl_median_ms": 316.21,
        "itl_p95_ms": 745.91,
        "itl_p99_ms": 1345.88,
        "itl_max_ms": 3118.59,
    }


def test_a_server_post_and_its_benchmark_post_import_together() -> None:
    # 027 has GLM-5's server (EAGLE), 029 the benchmark of that server with accept lengths: one recipe.
    result = posts("027", "029")
    assert result.recipe.model.repo_id == "zai-org/GLM-5-FP8"
    cells = result.recipe.matrix.cells()
    assert [(c.concurrency, c.num_prompts) for c in cells] == [(1, 10), (100, 1000)]
    got = numbers(result)
    assert got[cells[0].id] == {
        "completed": 10,
        "duration_s": 35.78,
        "request_throughput": 0.28,
        "input_throughput": 170.54,
        "output_throughput": 117.96,
        "total_throughput": 288.50,
        "peak_concurrency": 2,
        "mean_concurrency": 1.00,
        "accept_length": 3.48,
        "e2e_mean_ms": 3576.31,
        "e2e_median_ms": 2935.97,
        "e2e_p90_ms": 5908.97,
        "e2e_p99_ms": 8588.08,
        "ttft_mean_ms": 290.88,
        "ttft_median_ms": 282.34,
        "ttft_p99_ms": 332.27,
        "tpot_mean_ms": 7.54,
        "tpot_median_ms": 6.97,
        "tpot_p99_ms": 9.04,
        "itl_mean_ms": 7.80,
        "itl_median_ms": 6.81,
        "itl_p95_ms": 13.51,
        "itl_p99_ms": 26.99,
        "itl_max_ms": 29.50,
    }
    assert got[cells[1].id] == {
        "completed": 1000,
        "duration_s": 411.74,
        "request_throughput": 2.43,
        "input_throughput": 1220.41,
        "output_throughput": 1214.97,
        "total_throughput": 2435.38,
        "peak_concurrency": 105,
        "mean_concurrency": 96.30,
        "accept_length": 3.50,
        "e2e_mean_ms": 39648.76,
        "e2e_median_ms": 39058.12,
        "e2e_p90_ms": 57009.82,
        "e2e_p99_ms": 68880.33,
        "ttft_mean_ms": 20613.80,
        "ttft_median_ms": 21429.21,
        "ttft_p99_ms": 29543.17,
        "tpot_mean_ms": 38.73,
        "tpot_median_ms": 36.52,
        "tpot_p99_ms": 67.09,
        "itl_mean_ms": 38.13,
        "itl_median_ms": 16.57,
        "itl_p95_ms": 86.01,
        "itl_p99_ms": 164.88,
        "itl_max_ms": 1307.02,
    }


def test_the_benchmark_of_the_other_variant_is_not_this_servers() -> None:
    # 024 shows BF16 and FP8; 025 benchmarks the FP8 model. With the FP8 server (--pick 2) the cell is taken;
    # with the BF16 one the client asks for a model the server does not serve, and is skipped.
    fp8 = posts("024", "025", pick=2)
    (cell,) = fp8.recipe.matrix.cells()
    assert settings(cell) == {
        "input_len": 2048,
        "output_len": 1024,
        "concurrency": 10,
        "num_prompts": 100,
        "dataset": "random",
        "range_ratio": 0.0,
        "client": "vllm bench serve",
        "backend": "vllm",
    }
    assert cell.extra_args == ("--endpoint", "/v1/completions")
    assert numbers(fp8)[cell.id] == {
        "completed": 100,
        "duration_s": 776.49,
        "request_throughput": 0.13,
        "output_throughput": 131.88,
        "total_throughput": 394.81,
        "ttft_mean_ms": 7639.31,
        "ttft_median_ms": 6935.71,
        "ttft_p99_ms": 13766.68,
        "tpot_mean_ms": 68.43,
        "tpot_median_ms": 67.23,
        "tpot_p99_ms": 72.14,
        "itl_mean_ms": 68.43,
        "itl_median_ms": 66.34,
        "itl_p99_ms": 69.38,
    }
    bf16 = posts("024", "025", pick=1)
    assert bf16.recipe.matrix is None and bf16.recipe.reference is None
    assert any(r.action == "skipped" and "not the imported server's" in r.what for r in bf16.report)


def test_a_markdown_table_row_joins_the_cell_its_configuration_names() -> None:
    # 047: the table row `attn=fa3,random_input_len=1024,random_output_len=1024` belongs to the fa3 server's cell.
    result = posts("047", pick=1)
    (cell,) = result.recipe.matrix.cells()
    assert settings(cell) == {
        "input_len": 1024,
        "output_len": 1024,
        "request_rate": 16.0,
        "num_prompts": 200,
        "dataset": "random",
        "range_ratio": 0.0,
        "client": "sglang.benchmark.serving",
        "backend": "sglang",
    }
    assert numbers(result) == {cell.id: {"input_throughput": 2216.96, "output_throughput": 2268.68}}
    flashinfer = posts("047", pick=2)
    assert numbers(flashinfer) == {cell.id: {"input_throughput": 2226.81, "output_throughput": 2278.76}}


def test_a_truncated_block_is_read_as_far_as_it_goes() -> None:
    # 062: the post's copy stops after `Mean TTFT (ms): 44294.80`; 1648 of 3000 requests succeeded.
    result = posts("062")
    (cell,) = result.recipe.matrix.cells()
    assert settings(cell) == {
        "num_prompts": 3000,
        "dataset": "sharegpt",
        "client": "sglang.benchmark.serving",
        "backend": "sglang",
    }
    assert numbers(result)[cell.id] == {
        "completed": 1648,
        "duration_s": 170.41,
        "request_throughput": 9.67,
        "input_throughput": 2165.94,
        "output_throughput": 1915.40,
        "total_throughput": 4081.34,
        "e2e_mean_ms": 80126.93,
        "e2e_median_ms": 81160.44,
        "ttft_mean_ms": 44294.80,
    }
    assert any("1648 of the cell's 3000 requests succeeded" in note for note in result.notes)


@pytest.mark.parametrize(
    ("numbers_", "skipped"),
    [
        # 021: the expected output follows the FP4 benchmark, whose model is not the TP8 server's.
        (("021",), "its command"),
        # 057: `./bench.sh` is no client command hgxkit reads; the block has `[result]` placeholders.
        (("005", "057"), "no benchmark command before it"),
    ],
)
def test_a_block_without_its_client_command_is_skipped_with_the_reason(numbers_: tuple[str, ...], skipped: str) -> None:
    result = posts(*numbers_, pick=1)
    assert any(r.action == "skipped" and "result block" in r.what and skipped in r.what for r in result.report)
