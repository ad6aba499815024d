"""Other tools' result files as a recipe's reference: AIPerf, GenAI-Perf, GuideLLM, InferenceX rows and printed
result blocks are read in the recipe's units, matched with the recipe's cells, written into the recipe by
`results import-reference`, and compared by `compare_reference` with a run.

The fixtures (tests/fixtures/results/README.md says which are real tool output and which are hand-written)
carry the numbers checked here; each conversion is checked against the file's own value.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from hgxkit.cli import main
from hgxkit.errors import InputError
from hgxkit.importing.reference_import import build_reference
from hgxkit.importing.result_files import read_result_file
from hgxkit.recipe.dump import dump_recipe
from hgxkit.recipe.matrix import BenchmarkMatrix, MatrixCell
from hgxkit.recipe.read import load_recipe, parse_recipe_text
from hgxkit.results.compare import compare_reference
from hgxkit.results.report import reference_markdown
from hgxkit.results.summary import CellResult, RunSummary

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures" / "results"
AIPERF = FIXTURES / "aiperf-0.8.0-mock" / "profile_export_aiperf.json"
AIPERF_STREAMING = FIXTURES / "aiperf-operator-c128" / "profile_export_aiperf.json"
GENAI_PERF = FIXTURES / "genai-perf-24.12" / "profile_export_genai_perf.json"
GUIDELLM = FIXTURES / "guidellm-handwritten" / "benchmarks.json"
GUIDELLM_REAL = FIXTURES / "guidellm-0.8.1-sim" / "benchmarks.json"
ROWS = FIXTURES / "inferencex-handwritten" / "api-benchmarks-dsr1.json"
AGG = FIXTURES / "inferencex-handwritten" / "agg_bmk.json"
MARLIN = ROOT / "recipes" / "deepseek-v4-flash-dspark-marlin.yaml"

CELLS = (
    MatrixCell(id="550x4", input_len=550, concurrency=4, num_prompts=64),
    MatrixCell(id="x128", concurrency=128),
    MatrixCell(id="200x100", input_len=200, output_len=500, concurrency=100),
    MatrixCell(id="1024x1024-c4", input_len=1024, output_len=1024, concurrency=4),
    MatrixCell(id="1024x1024-c8", input_len=1024, output_len=1024, concurrency=8),
    MatrixCell(id="8192x1024-c4", input_len=8192, output_len=1024, concurrency=4, dataset="random", range_ratio=0.8),
    MatrixCell(id="8192x1024-c8", input_len=8192, output_len=1024, concurrency=8, dataset="random", range_ratio=0.8),
)


def _recipe_file(tmp_path: Path, *, reference: bool = False, tp: int = 8) -> Path:
    """The marlin recipe with this test's cells, tp 8 (as the rows' setup), and its reference kept or dropped."""
    recipe = load_recipe(MARLIN)
    recipe = replace(recipe, matrix=BenchmarkMatrix(entries=CELLS), reference=recipe.reference if reference else None)
    text = dump_recipe(recipe).replace("- --tp 4\n", f"- --tp {tp}\n").replace("  size: 4\n", f"  size: {tp}\n")
    if reference:  # the post's cells are gone from the matrix: point the old reference at one of ours
        data = yaml.safe_load(text)
        data["reference"]["cells"] = [{"cell": "550x4", "ttft_mean_ms": 1.0}]
        text = yaml.safe_dump(data, sort_keys=False)
    path = tmp_path / "recipe.yaml"
    path.write_text(text)
    parse_recipe_text(text, source=str(path))
    return path


# --- reading each format -------------------------------------------------------------------------------------


def test_a_real_guidellm_report_reads_as_its_console_printed_it() -> None:
    result = read_result_file(str(GUIDELLM_REAL))
    assert (result.format, result.tool) == ("GuideLLM", "GuideLLM 0.8.1")
    (point,) = result.points
    assert (point.concurrency, point.input_len, point.output_len) == (4, 256, 32)
    metrics = point.metrics
    # GuideLLM's console: TTFT mean 52.8 ms, ITL (per request: hgxkit's TPOT) 5.8 ms, request latency 0.2 s
    assert (round(metrics["ttft_mean_ms"], 1), round(metrics["tpot_mean_ms"], 1)) == (52.8, 5.8)
    assert 200 < metrics["e2e_mean_ms"] < 300  # seconds in the file, ms in the recipe
    given = (metrics["request_throughput"], metrics["output_throughput"], metrics["total_throughput"])
    assert tuple(round(v, 1) for v in given) == (15.6, 500.7, 647.0)
    assert (metrics["completed"], metrics["failed"]) == (40, 0)
    assert "itl_mean_ms" not in metrics  # GuideLLM's own TPOT counts the first token: not taken


def test_aiperf_export_reads_settings_from_its_phases_and_converts_units() -> None:
    result = read_result_file(str(AIPERF))
    assert (result.format, result.tool) == ("AIPerf", "AIPerf 0.8.0")
    (point,) = result.points
    assert (point.concurrency, point.input_len, point.output_len, point.num_prompts) == (4, 550, None, 64)
    assert point.source == "profile_export_aiperf.json:1"
    metrics = point.metrics
    assert metrics["e2e_mean_ms"] == 1.516322453125  # request_latency, unit ms
    assert metrics["e2e_p99_ms"] == 15.14387014
    assert metrics["duration_s"] == 0.034502655  # benchmark_duration, unit sec
    assert metrics["request_throughput"] == 1854.929714829192
    assert metrics["total_throughput"] == 2042654.398625265
    assert metrics["completed"] == 64 and isinstance(metrics["completed"], int)
    # A run without streaming has no first token: nothing is made up for it.
    assert not any(key.startswith(("ttft", "tpot", "itl")) for key in metrics)


def test_aiperf_inter_token_latency_is_tpot_and_inter_chunk_latency_is_itl() -> None:
    point = read_result_file(str(AIPERF_STREAMING)).points[0]
    assert point.concurrency == 128  # input_config.runtime.concurrency
    assert point.metrics["ttft_mean_ms"] == 150.0 and point.metrics["ttft_median_ms"] == 142.5
    assert point.metrics["tpot_mean_ms"] == 25.0 and point.metrics["tpot_p99_ms"] == 32.5
    assert not any(key.startswith("itl") for key in point.metrics)


def test_aiperf_first_layout_in_nanoseconds_with_chunk_gaps(tmp_path: Path) -> None:
    """AIPerf ≤0.3's input_config (loadgen, input.prompt) and metrics in ns."""
    data = {
        "time_to_first_token": {"unit": "ns", "avg": 2.5e8, "p99": 4e8},
        "inter_token_latency": {"unit": "ns", "avg": 1.2e7},
        "inter_chunk_latency": {"unit": "ns", "avg": 3e7, "p50": 2.5e7, "max": 9e7},
        "benchmark_duration": {"unit": "ns", "avg": 6e10},
        "input_config": {
            "endpoint": {"streaming": True},
            "loadgen": {"concurrency": 8, "request_count": 100},
            "input": {"prompt": {"input_tokens": {"mean": 1024}, "output_tokens": {"mean": 1024}}},
        },
    }
    path = tmp_path / "profile_export_aiperf.json"
    path.write_text(json.dumps(data))
    point = read_result_file(str(path)).points[0]
    assert (point.input_len, point.output_len, point.concurrency, point.num_prompts) == (1024, 1024, 8, 100)
    assert point.metrics == {
        "ttft_mean_ms": 250.0,
        "ttft_p99_ms": 400.0,
        "tpot_mean_ms": 12.0,
        "itl_mean_ms": 30.0,
        "itl_median_ms": 25.0,
        "itl_max_ms": 90.0,
        "duration_s": 60.0,
    }


def test_genai_perf_export_reads_its_flat_arguments() -> None:
    result = read_result_file(str(GENAI_PERF))
    assert (result.format, result.tool) == ("GenAI-Perf", "GenAI-Perf")
    point = result.points[0]
    # request_count 0 is GenAI-Perf's "measured over an interval": not a request count.
    assert (point.input_len, point.output_len, point.concurrency, point.num_prompts) == (200, 500, 100, None)
    assert point.metrics["ttft_mean_ms"] == 184.63779366666665
    assert point.metrics["ttft_p90_ms"] == 302.80112349999996
    assert point.metrics["tpot_mean_ms"] == 2.1767344516666665  # inter_token_latency: per request, so TPOT
    assert point.metrics["e2e_median_ms"] == 5778.654798
    assert point.metrics["output_throughput"] == 44190.56002502682


def test_genai_perf_without_streaming_has_no_first_token_numbers(tmp_path: Path) -> None:
    data = json.loads(GENAI_PERF.read_text())
    data["input_config"]["streaming"] = False
    path = tmp_path / "profile_export_genai_perf.json"
    path.write_text(json.dumps(data))
    result = read_result_file(str(path))
    assert not any(key.startswith(("ttft", "tpot")) for key in result.points[0].metrics)
    assert result.points[0].metrics["e2e_mean_ms"] == 5767.434807386666
    assert result.notes == [f"{path}: the run did not stream, so it has no TTFT, TPOT or ITL"]


def test_guidellm_report_gives_one_point_per_benchmark_with_latency_from_seconds() -> None:
    result = read_result_file(str(GUIDELLM))
    assert (result.format, result.tool) == ("GuideLLM", "GuideLLM 0.6.0")
    first, second = result.points
    assert (first.input_len, first.output_len, first.concurrency) == (1024, 1024, 4)
    assert second.concurrency == 8
    assert first.metrics["e2e_mean_ms"] == 12500.0  # request_latency 12.5 s
    assert first.metrics["ttft_p99_ms"] == 170.3
    assert first.metrics["tpot_mean_ms"] == 12.1  # inter_token_latency_ms, not time_per_output_token_ms (12.221)
    assert first.metrics["output_throughput"] == 327.7 and first.metrics["completed"] == 64
    text = GUIDELLM.read_text().splitlines()
    for point in (first, second):
        line = int(point.source.rpartition(":")[2])
        assert text[line - 1].strip() == "{" and '"type_": "generative_benchmark"' in text[line]


def test_inferencex_rows_in_seconds_and_per_gpu_become_ms_and_whole_server() -> None:
    result = read_result_file(str(ROWS))
    assert result.format == "InferenceX rows" and len(result.points) == 8
    first = result.points[0]
    assert (first.input_len, first.output_len, first.concurrency) == (8192, 1024, 4)
    assert first.identity["run_url"].endswith("/runs/22000000001/attempts/1")
    assert first.parallel == {"tp": 8, "ep": 1, "dp_attention": False}
    assert first.metrics["ttft_median_ms"] == pytest.approx(390.0)
    assert first.metrics["tpot_p99_ms"] == pytest.approx(19.8)
    assert first.metrics["e2e_mean_ms"] == pytest.approx(19300.0)
    assert first.metrics["total_throughput"] == pytest.approx(230.4 * 8)
    assert first.metrics["output_throughput"] == pytest.approx(25.6 * 8)
    disaggregated = result.points[-1]  # 8 prefill + 8 decode GPUs
    assert disaggregated.metrics["total_throughput"] == pytest.approx(1500.0 * 16)
    assert disaggregated.metrics["output_throughput"] == pytest.approx(700.0 * 8)
    assert disaggregated.metrics["input_throughput"] == pytest.approx(800.0 * 8)
    # The suite's flat aggregate of the same runs reads to the same numbers.
    for api_row, agg_row in zip(result.points, read_result_file(str(AGG)).points, strict=False):
        assert agg_row.metrics == pytest.approx(api_row.metrics)
        assert agg_row.parallel == api_row.parallel and agg_row.identity["hardware"] == "h200"


def test_printed_result_blocks_are_read_as_points(tmp_path: Path) -> None:
    post = tmp_path / "post.txt"
    post.write_text(
        "============ Serving Benchmark Result ============\n"
        "Max request concurrency:                 8\n"
        "Successful requests:                     64\n"
        "Mean TTFT (ms):                          120.50\n"
        "==================================================\n"
    )
    (point,) = read_result_file(str(post)).points
    assert (point.concurrency, point.metrics, point.source) == (
        8,
        {"completed": 64, "ttft_mean_ms": 120.5},
        "post.txt:1-5",
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"time_to_first_token": {"unit": "minutes", "avg": 1}}', "time_to_first_token.unit is 'minutes'"),
        ('{"hello": 1}', "JSON that is none of the result files hgxkit reads"),
        ("just prose, no numbers\n", "no results hgxkit reads"),
    ],
)
def test_bad_input_is_one_line_naming_the_file(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "x.json"
    path.write_text(content)
    with pytest.raises(InputError) as err:
        read_result_file(str(path))
    assert err.value.message.startswith(f"{path}: ") and message in err.value.message
    assert "\n" not in err.value.message


# --- matching and writing into a recipe ----------------------------------------------------------------------


def _import(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["results", "import-reference", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_each_format_becomes_its_cell_and_the_recipe_stays_valid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = _recipe_file(tmp_path)
    out = tmp_path / "with-reference.yaml"
    files = [str(AIPERF), str(AIPERF_STREAMING), str(GENAI_PERF), str(GUIDELLM)]
    code, stdout, err = _import(capsys, *files, "--recipe", str(recipe), "-o", str(out))
    assert code == 0 and stdout == ""
    lines = err.splitlines()
    assert lines[0] == f"{AIPERF}: AIPerf 0.8.0 (input 550, concurrency 4, requests 64) became cell 550x4"
    assert lines[1] == f"{AIPERF_STREAMING}: AIPerf 0.0.0-e2e (concurrency 128) became cell x128"
    assert lines[2] == f"{GENAI_PERF}: GenAI-Perf (input 200, output 500, concurrency 100) became cell 200x100"
    assert lines[3] == f"{GUIDELLM}: GuideLLM 0.6.0: 2 became cells 1024x1024-c4, 1024x1024-c8"
    reference = load_recipe(out).reference
    assert reference is not None
    assert reference.tool == "AIPerf 0.8.0 + AIPerf 0.0.0-e2e + GenAI-Perf + GuideLLM 0.6.0"
    assert "inter_token_latency (per request (latency - TTFT) / (output tokens - 1)) read as TPOT" in reference.notes
    by_cell = {cell.cell.id: cell for cell in reference.cells}
    assert by_cell["200x100"].tpot_mean_ms == pytest.approx(2.1767344516666665, rel=1e-11)
    assert by_cell["1024x1024-c8"].e2e_mean_ms == 15800.0
    assert by_cell["1024x1024-c4"].sources == ("benchmarks.json:23",)
    assert main(["recipe", "check", str(out)]) in (0, 1)  # validation (exit 2) is what must not happen
    assert "error" not in capsys.readouterr().err.lower()


def test_an_existing_reference_is_kept_without_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recipe = _recipe_file(tmp_path, reference=True)
    before = recipe.read_text()
    code = main(["results", "import-reference", str(AIPERF), "--recipe", str(recipe), "--in-place"])
    assert code == 2 and recipe.read_text() == before
    assert "already has a reference" in capsys.readouterr().err
    code, _, _ = _import(capsys, str(AIPERF), "--recipe", str(recipe), "--in-place", "--force")
    assert code == 0
    assert [c.cell.id for c in load_recipe(recipe).reference.cells] == ["550x4"]  # type: ignore[union-attr]


def test_a_file_without_a_cell_names_the_recipes_cells_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = _recipe_file(tmp_path)
    data = json.loads(AIPERF.read_text())
    data["input_config"]["phases"][0]["concurrency"] = 3
    odd = tmp_path / "profile_export_aiperf.json"
    odd.write_text(json.dumps(data))
    before = recipe.read_text()
    code, _, err = _import(capsys, str(odd), "--recipe", str(recipe), "--in-place")
    assert code == 2 and recipe.read_text() == before
    assert f"{odd}: AIPerf 0.8.0 (input 550, concurrency 3, requests 64) became no cell (cells: 550x4, x128" in err
    assert "1 of 1 files became no cell; nothing was written" in err
    assert "Traceback" not in err


def test_inferencex_rows_are_narrowed_to_one_setup_and_name_their_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = _recipe_file(tmp_path)
    # h200 sglang and b200 sglang (and vLLM, and a speculative run) all ran 8192/1024 at concurrency 4.
    code, _, err = _import(capsys, str(ROWS), "--recipe", str(recipe))
    assert code == 2
    assert "both give cell 8192x1024-c4 (they differ in" in err and "--entry KEY or --where FIELD=VALUE" in err
    # Without --where: the entry without `-mtp` is the suite's run without speculative decoding.
    code, stdout, err = _import(capsys, str(ROWS), "--recipe", str(recipe), "--entry", "dsr1-fp8-h200-sglang")
    assert code == 0, err
    assert err.splitlines()[0] == (
        f"{ROWS}: InferenceX, 3 of 8 rows kept (entry dsr1-fp8-h200-sglang, tp 8 ep 1 "
        "dp-attention off): 3 became cells 8192x1024-c4, 8192x1024-c8, 1024x1024-c4"
    )
    code, _, err = _import(capsys, str(ROWS), "--recipe", str(recipe), "--entry", "dsr1-fp8-h200-sglang-mtp")
    assert code == 0 and "1 of 8 rows kept (entry dsr1-fp8-h200-sglang-mtp" in err, err
    reference = parse_recipe_text(stdout).reference
    assert reference is not None and reference.label == "InferenceX h200 sglang fp8"
    assert (
        "Runs: https://github.com/SemiAnalysisAI/InferenceX/actions/runs/22000000001/attempts/1 "
        "(2026-03-02, lmsysorg/sglang:v0.5.5-cu129): 8192x1024-c4, 8192x1024-c8, 1024x1024-c4"
        in (reference.notes or "")
    )
    # The comparison names the run it compares with.
    shown = reference_markdown(_run([]), compare_reference(_run([]), reference), "recipe.yaml", reference.notes)
    assert "Reference notes: InferenceX rows:" in shown and "/actions/runs/22000000001/attempts/1" in shown
    cell = {c.cell.id: c for c in reference.cells}["8192x1024-c4"]
    assert (cell.ttft_median_ms, cell.total_throughput, cell.sources) == (
        390.0,
        1843.2,
        ("api-benchmarks-dsr1.json:2",),
    )


def test_inferencex_rows_of_another_split_are_set_aside(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recipe = _recipe_file(tmp_path, tp=4)
    code, _, err = _import(capsys, str(ROWS), "--recipe", str(recipe), "--where", "hardware=h200")
    assert code == 2
    assert "no row with the recipe's split (tp 4 ep 1 dp-attention off); rows have tp 8 ep 1" in err
    code, _, err = _import(capsys, str(ROWS), "--recipe", str(recipe), "--entry", "llama70b-fp8-h200-sglang")
    assert code == 2 and "no row of entry llama70b-fp8-h200-sglang (rows are of dsr1-fp8-b200-sglang" in err


def test_options_that_do_not_fit_the_files_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recipe = _recipe_file(tmp_path)
    code, _, err = _import(capsys, str(AIPERF), "--recipe", str(recipe), "--where", "hardware=h200")
    assert code == 2 and "--entry and --where pick InferenceX rows" in err
    code, _, err = _import(capsys, str(GUIDELLM), "--recipe", str(recipe), "--cell", "550x4")
    assert code == 2 and "--cell names the cell of one file with one result" in err
    code, _, err = _import(capsys, str(AIPERF), "--recipe", str(recipe), "--where", "colour=red")
    assert code == 2


def test_cell_puts_a_file_that_states_no_concurrency_on_a_cell(tmp_path: Path) -> None:
    path = tmp_path / "profile_export_genai_perf.json"
    data = json.loads(GENAI_PERF.read_text())
    data.pop("input_config")
    path.write_text(json.dumps(data))
    recipe = load_recipe(_recipe_file(tmp_path))
    files = [read_result_file(str(path))]
    outcome = build_reference(recipe, files)
    assert outcome.reference is None and "give --cell ID" in outcome.failed[0]
    outcome = build_reference(recipe, files, cell="200x100")
    assert outcome.reference is not None and outcome.reference.cells[0].cell.id == "200x100"


# --- the comparison sees them --------------------------------------------------------------------------------


def _run(cells: list[CellResult]) -> RunSummary:
    return RunSummary("node1/20261130T120000Z_r", "node1", "r", "20261130T120000Z", False, "sglang", "0.5.5", cells)


def test_compare_reference_checks_imported_numbers_in_their_units() -> None:
    recipe = replace(load_recipe(MARLIN), matrix=BenchmarkMatrix(entries=CELLS), reference=None)
    outcome = build_reference(recipe, [read_result_file(str(GENAI_PERF)), read_result_file(str(GUIDELLM))])
    assert outcome.reference is not None
    run = _run(
        [
            # GenAI-Perf's cell: TTFT 3% slower, TPOT 10% slower, output throughput 40% lower.
            CellResult(
                input_len=200,
                concurrency=100,
                num_prompts=100,
                completed=100,
                failed=0,
                ttft_mean_ms=190.0,
                tpot_mean_ms=2.1767344516666665 * 1.1,
                output_throughput=44190.56002502682 * 0.6,
            ),
            # GuideLLM's concurrency-4 cell: TTFT mean 120.5 ms measured as 150 ms (+24%).
            CellResult(input_len=1024, concurrency=4, num_prompts=64, completed=64, failed=0, ttft_mean_ms=150.0),
        ]
    )
    check = compare_reference(run, outcome.reference)
    rows = {(r.metric, r.input_len, r.concurrency): r for r in check.rows}
    assert rows[("TTFT mean", 200, 100)].status == "+3% ok"
    assert rows[("TPOT mean", 200, 100)].status == "+10% ok"
    assert rows[("TPOT mean", 200, 100)].reference == pytest.approx(2.1767344516666665)  # ms, as the run's
    throughput = rows[("output throughput", 200, 100)]
    assert (throughput.status, throughput.direction) == ("-40% OUTSIDE", "worse")
    assert rows[("TTFT mean", 1024, 4)].status == "+24% ok" and rows[("TTFT mean", 1024, 4)].reference == 120.5
    assert rows[("TTFT P99", 1024, 4)].verdict == "not-measured"
    assert rows[("TTFT mean", 1024, 8)].verdict == "not-measured"  # the run did not measure concurrency 8
    assert check.tolerances["tpot_relative"] == 0.25 and check.outside == 1


def test_a_credential_in_a_rows_run_url_or_image_is_masked_wherever_it_goes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token, password = "hf_FAKEtokenFORtestsNOTrealXXXXXXXXXX", "ghp_FAKEpasswordFORtestsNOTrealXXXXXXXXXX"
    rows = json.loads(ROWS.read_text())
    for row in rows:
        row["run_url"] = f"https://ci:{password}@github.com/SemiAnalysisAI/InferenceX/actions/runs/1"
        row["image"] = f"lmsysorg/sglang:v0.5.5?token={token}"
    hostile = tmp_path / "rows.json"
    hostile.write_text(json.dumps(rows))
    recipe, out = _recipe_file(tmp_path), tmp_path / "out.yaml"
    code, stdout, err = _import(
        capsys, str(hostile), "--recipe", str(recipe), "--entry", "dsr1-fp8-h200-sglang", "-o", str(out)
    )
    assert code == 0, err
    written = out.read_text()
    assert "/actions/runs/1" in written and "token=***" in written
    for secret in (token, password):
        assert secret not in written + stdout + err
