"""Results: the real client's JSONL, the archive, comparisons in the post's layout, the reference, plots, secrets.

`make_run` (a run archived from the real client's fixtures, optionally slower, repeated, with telemetry) is
shared with the other tests/unit/test_results_*.py files.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from hgxkit.cli import main
from hgxkit.kinds import KINDS
from hgxkit.results.archive import list_runs, load_run, write_report_html, write_run
from hgxkit.results.bench import EXPECTED_FIELDS, BenchRecord, parse_bench_jsonl
from hgxkit.results.fingerprint import Fingerprint, GpuFingerprint, fingerprint_differences, hash_uuid
from hgxkit.results.report import run_markdown
from hgxkit.results.summary import CellResult, RunSummary
from hgxkit.results.telemetry import summarise_cell_telemetry

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sglang_bench"
TELEMETRY = Path(__file__).resolve().parents[2] / "fixtures" / "telemetry"
ROOT = Path(__file__).resolve().parents[3]
SECRET = "sk-Abcdefghijklmnopqrstuvwxyz0123456789"


def scaled(record: BenchRecord, scale: float) -> BenchRecord:
    """The record with every TTFT (per request and summary) multiplied by `scale`: a slower setup."""
    ttfts = [t * scale for t in record.ttfts_ms]
    values = {
        name: (getattr(record, name) * scale if getattr(record, name) is not None else None)
        for name in ("ttft_mean_ms", "ttft_median_ms", "ttft_p90_ms", "ttft_p99_ms")
    }
    return replace(record, ttfts_ms=ttfts, **values)


def make_run(
    tmp: Path,
    host: str,
    time: str,
    recipe: str,
    *,
    scale: float = 1.0,
    driver: str = "580.105.08",
    digest: str = "sha256:" + "a" * 64,
    simulated: bool = True,
    details: bool = False,
    repeats: int = 1,
    telemetry: bool = False,
    html: bool = False,
    recipe_yaml: str | None = None,
    members: dict[str, Fingerprint] | None = None,
    reference: object = None,
) -> Path:
    """Archive a run built from the real client's fixtures: the c5/c10 pair, or (details) the c5 run with
    per-request values, `repeats` times (each repeat's TTFTs shifted a little so they are not identical)."""
    raw = (FIXTURES / ("dspark_isl5000_c5_details.jsonl" if details else "dspark_isl5000_c5_c10.jsonl")).read_text()
    records = parse_bench_jsonl(raw)
    tel = None
    tel_files = {}
    if telemetry:
        metrics_text, gpu_csv = (TELEMETRY / "sglang_metrics.prom").read_text(), (TELEMETRY / "gpu.csv").read_text()
        tel = summarise_cell_telemetry(
            "sglang",
            KINDS["sglang"].metrics,
            metrics_text=metrics_text,
            gpu_csv=gpu_csv,
            simulated=simulated,
            files=["g0_5000x5.metrics.prom", "g0_5000x5.gpu.csv"],
        )
        tel_files = {"g0_5000x5.metrics.prom": metrics_text, "g0_5000x5.gpu.csv": gpu_csv}
    cells = []
    for r in records:
        runs = [scaled(r, scale * (1 + 0.01 * i)) for i in range(repeats)]
        names = [f"5000_{r.max_concurrency}_r{i}.jsonl" for i in range(repeats)]
        cells.append(
            CellResult.from_repeats(
                runs,
                num_prompts=r.completed,
                group=0,
                raw_files=names,  # type: ignore[arg-type]
                telemetry=tel if r.max_concurrency == 5 else None,
            )
        )
    run_id = f"{host}/{time}_{recipe}"
    summary = RunSummary(run_id, host, recipe, time, simulated, "sglang.benchmark.serving", "0.5.23", cells)
    fingerprint = Fingerprint(
        system_name=host,
        simulated=simulated,
        accelerator_model_name="NVIDIA H200",
        accelerators_per_node=8,
        gpus=[GpuFingerprint(0, "NVIDIA H200", hash_uuid("GPU-1"), cuda_version="13.0")],
        packages={"driver": driver},
        serving={"image": "lmsysorg/sglang:dev-dspark", "image_digest": digest},
        recipe={"name": recipe, "path": f"recipes/{recipe}.yaml"},
        server_env_report=f"Python: 3.12\nsglang: 0.5.23\nOPENAI_API_KEY={SECRET}\n",
    )
    raw_with_secret = raw.replace('"api_key": null', f'"api_key": "{SECRET}"')
    return write_run(
        tmp,
        summary,
        fingerprint,
        {"5000.jsonl": raw_with_secret},
        run_markdown(summary, fingerprint),
        [SECRET],
        telemetry=tel_files,
        html=html,
        recipe_yaml=recipe_yaml,
        members=members,
        reference=reference,
    )


def test_real_client_jsonl_has_every_documented_field() -> None:
    records = parse_bench_jsonl((FIXTURES / "dspark_isl5000_c5_c10.jsonl").read_text())
    assert [(r.max_concurrency, r.completed, r.tag) for r in records] == [(5, 10, None), (10, 20, "second-run")]
    for record in records:
        assert record.missing_fields == []
        assert record.input_len == 5000 and record.output_len == 64
        assert 200 < record.ttft_mean_ms < record.ttft_p99_ms < 2000  # type: ignore[operator]
        assert 4.5 < (record.accept_length or 0) < 6.0
        assert record.server_version == "0.5.23" and record.tool == "sglang.benchmark.serving"
        assert record.server_simulated is True
    assert len(EXPECTED_FIELDS) == 49


def test_details_and_no_speculation() -> None:
    (details,) = parse_bench_jsonl((FIXTURES / "dspark_isl5000_c5_details.jsonl").read_text())
    assert len(details.ttfts_ms) == 10 and details.failed == 0
    assert min(details.ttfts_ms) <= details.ttft_mean_ms <= max(details.ttfts_ms)  # type: ignore[operator]
    (nospec,) = parse_bench_jsonl((FIXTURES / "nospec_isl5000_c5.jsonl").read_text())
    assert nospec.accept_length is None


def test_bad_jsonl_names_the_line() -> None:
    with pytest.raises(ValueError, match=r"x.jsonl: line 2 is not JSON"):
        parse_bench_jsonl('{"completed": 1}\n{oops\n', source="x.jsonl")


def test_archive_layout_listing_and_lookup(tmp_path: Path) -> None:
    first = make_run(tmp_path, "node1", "20261130T120000Z", "deepseek-v4-flash-dspark-marlin", telemetry=True)
    make_run(tmp_path, "node1", "20261130T130000Z", "deepseek-v4-flash-dspark-flashinfer")
    assert sorted(p.name for p in first.iterdir()) == [
        "fingerprint.json",
        "raw",
        "report.md",
        "summary.json",
        "telemetry",
    ]
    assert sorted(p.name for p in (first / "telemetry").iterdir()) == ["g0_5000x5.gpu.csv", "g0_5000x5.metrics.prom"]
    runs = list_runs(tmp_path)
    assert [r.run_id for r in runs] == [
        "node1/20261130T120000Z_deepseek-v4-flash-dspark-marlin",
        "node1/20261130T130000Z_deepseek-v4-flash-dspark-flashinfer",
    ]
    assert load_run("flashinfer", tmp_path).summary.recipe == "deepseek-v4-flash-dspark-flashinfer"
    with pytest.raises(Exception, match="matches 2 runs"):
        load_run("node1", tmp_path)


def test_summary_round_trips_every_metric_repeat_and_interval(tmp_path: Path) -> None:
    path = make_run(tmp_path, "node1", "20261130T120000Z", "dspark", details=True, repeats=3, telemetry=True)
    stored = json.loads((path / "summary.json").read_text())
    (cell,) = stored["cells"]
    record = parse_bench_jsonl((FIXTURES / "dspark_isl5000_c5_details.jsonl").read_text())[0]
    assert len(cell["repeats"]) == 3 and cell["completed"] == 30 and cell["num_prompts"] == 10
    assert cell["repeats"][0]["itl_p99_ms"] == record.itl_p99_ms  # each repeat keeps the client's own numbers
    pooled = [t * (1 + 0.01 * i) for i in range(3) for t in record.ttfts_ms]
    assert cell["ttft_mean_ms"] == pytest.approx(float(np.mean(pooled)))
    assert cell["ttft_p99_ms"] == pytest.approx(float(np.percentile(pooled, 99)))
    assert cell["total_output_tokens"] == 3 * record.total_output_tokens  # totals add up over repeats
    assert cell["intervals"]["ttft_mean_ms"]["n"] == 30
    assert cell["intervals"]["ttft_mean_ms"]["low"] < cell["ttft_mean_ms"] < cell["intervals"]["ttft_mean_ms"]["high"]
    # 3 repeats of 10 requests: the mean's interval resamples repeats, then requests; P99 of 30 has no upper bound;
    # accept length (one value per repeat) gets Student's t over the 3 repeats.
    assert cell["intervals"]["ttft_mean_ms"]["method"].startswith("hierarchical bootstrap")
    assert cell["intervals"]["ttft_p99_ms"]["high"] is None
    assert cell["intervals"]["ttft_p99_ms"]["reason"] == "no upper bound at n=30"
    accept = cell["intervals"]["accept_length"]
    assert (accept["method"], accept["n"], accept["over"]) == ("Student t over repeats", 3, "run")
    assert (
        cell["telemetry"]["simulated"] is True and cell["telemetry"]["gpus"][1]["throttle_reasons"]["SwPowerCap"] == 6
    )
    assert stored["metric_definitions"]["ttft_p99_ms"]["unit"] == "ms"
    assert stored["statistics"]["alpha"] == 0.05
    assert load_run(str(path), tmp_path).summary.cells[0] == RunSummary.from_json(stored).cells[0]


def test_no_secret_in_any_archived_byte(tmp_path: Path) -> None:
    make_run(tmp_path, "node1", "20261130T120000Z", "deepseek-v4-flash-dspark-marlin", telemetry=True, html=True)
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) == 7
    for path in files:
        assert SECRET not in path.read_text()
    raw = next(tmp_path.rglob("5000.jsonl")).read_text()
    assert '"api_key": "***"' in raw


# Each archived file kind, and the input that reaches it with a secret planted (nowhere else): scrubbing each
# file is a separate call in write_run, so each needs its own case (one planted input caught only report.html).
PLANTED = [
    "raw/5000.jsonl",
    "telemetry/g0_5000x5.metrics.prom",
    "report.md",
    "summary.json",
    "fingerprint.json",
    "recipe.yaml",
    "members/node2.json",
    "report.html",
]


def archive_planted(root: Path, where: set[str], line: str, secrets: list[str], raw_field: str) -> Path:
    """A run archived from inputs where those of the files in `where` (PLANTED names) carry `line`, and the raw
    client JSONL's `raw_field` carries it when `where` holds raw/5000.jsonl."""

    def plant(name: str, text: str) -> str:
        return text + f"\n{line}\n" if name in where else text

    (record, _) = parse_bench_jsonl((FIXTURES / "dspark_isl5000_c5_c10.jsonl").read_text())
    cell = CellResult.from_repeats([record], num_prompts=record.completed, group=0, raw_files=["5000.jsonl"])
    version = f"0.5.23 {line}" if "summary.json" in where else "0.5.23"
    summary = RunSummary(
        "node1/20261130T120000Z_dspark",
        "node1",
        "dspark",
        "20261130T120000Z",
        True,
        "sglang.benchmark.serving",
        version,
        [cell],
    )
    fingerprint = Fingerprint(
        system_name="node1",
        simulated=True,
        packages={"driver": "580.105.08"},
        server_env_report=plant("fingerprint.json", plant("report.html", "Python: 3.12")),
    )
    member = replace(fingerprint, system_name="node2", server_env_report=plant("members/node2.json", "Python: 3.12"))
    raw = json.dumps({"completed": 10, raw_field: line if "raw/5000.jsonl" in where else None}) + "\n"
    metrics = (TELEMETRY / "sglang_metrics.prom").read_text()
    path = write_run(
        root,
        summary,
        fingerprint,
        {"5000.jsonl": raw},
        plant("report.md", "# report"),
        secrets,
        telemetry={"g0_5000x5.metrics.prom": plant("telemetry/g0_5000x5.metrics.prom", metrics)},
        html=True,
        recipe_yaml=plant("recipe.yaml", "name: dspark"),
        members={"node2": member},
    )
    assert sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.is_file()) == sorted(PLANTED)
    return path


@pytest.mark.parametrize("kind", PLANTED)
def test_a_secret_planted_in_the_input_of_each_archived_file_is_masked_there(tmp_path: Path, kind: str) -> None:
    from hgxkit.secrets import MASK

    line = SECRET if kind == "raw/5000.jsonl" else f"OPENAI_API_KEY={SECRET}"  # raw: as the api_key field
    path = archive_planted(tmp_path, {kind}, line, [SECRET], "api_key")
    assert [f for f in PLANTED if SECRET in (path / f).read_text()] == []
    assert MASK in (path / kind).read_text()  # the planted input did reach this file, masked
    if kind == "report.html":  # rewritten later from the archive (`results report --html`): masked again
        assert SECRET not in write_report_html(path, secrets=[SECRET]).read_text()


def test_fingerprint_differences_name_what_differs() -> None:
    a = Fingerprint("n1", True, packages={"driver": "580.95.05"}, serving={"image_digest": "sha256:" + "a" * 64})
    b = Fingerprint(
        "n2",
        True,
        packages={"driver": "580.105.08"},
        serving={"image_digest": "sha256:" + "b" * 64},
        framework="SGLang 0.5.23",
    )
    assert fingerprint_differences(a, b) == [
        "simulated: both runs ran on simulated nodes (no real GPU)",
        "driver 580.95.05 vs 580.105.08",
        "image digest differs (aaaaaaaaaaaa vs bbbbbbbbbbbb)",
        "framework unknown vs SGLang 0.5.23",
    ]


def test_compare_cli_prints_the_posts_layout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_run(tmp_path, "node1", "20261130T120000Z", "deepseek-v4-flash-dspark-marlin", details=True)
    make_run(
        tmp_path,
        "node2",
        "20261130T130000Z",
        "deepseek-v4-flash-dspark-flashinfer",
        scale=1.3,
        details=True,
        driver="580.95.05",
        digest="sha256:" + "b" * 64,
    )
    plots = tmp_path / "plots"
    code = main(["results", "--root", str(tmp_path), "compare", "marlin", "flashinfer", "--md", "--plot", str(plots)])
    out = capsys.readouterr().out
    assert code == 0
    assert "- driver 580.105.08 vs 580.95.05" in out and "- image digest differs" in out
    assert "SIMULATED" in out
    assert "### TTFT Mean (ms — lower = better)" in out and "### TTFT P99 (ms — lower = better)" in out
    header = (
        "| Input | Conc | deepseek-v4-flash-dspark-marlin [95% CI] | deepseek-v4-flash-dspark-flashinfer [95% CI] |"
    )
    assert header in out and "| Under 5s? |" in out
    mean_table = out.split("### TTFT Mean")[1].split("###")[0]
    assert "deepseek-v4-flash-dspark-marlin -23%" in mean_table  # 1.3x slower flashinfer: marlin 23 % lower
    assert "| 5K | 5 | 311 [" in mean_table  # the value with its 95% interval
    throughput_table = out.split("### Output throughput")[1]
    assert "too small to judge: 1 vs 1 repeats" in throughput_table  # one repeat each: no test can tell
    assert "### Accept Length" in out
    assert sorted(p.name for p in plots.iterdir()) == ["accept_length.png", "ttft.png"]
    assert (plots / "ttft.png").read_bytes()[:4] == b"\x89PNG"


def test_compare_names_the_recipe_settings_that_differ_and_reference_needs_no_recipe_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    marlin = (ROOT / "recipes/deepseek-v4-flash-dspark-marlin.yaml").read_text()
    flashinfer = (ROOT / "recipes/deepseek-v4-flash-dspark-flashinfer.yaml").read_text()
    make_run(tmp_path, "node1", "20261130T120000Z", "deepseek-v4-flash-dspark-marlin", recipe_yaml=marlin)
    make_run(tmp_path, "node1", "20261130T130000Z", "deepseek-v4-flash-dspark-flashinfer", recipe_yaml=flashinfer)
    assert main(["results", "--root", str(tmp_path), "compare", "marlin", "flashinfer", "--md"]) == 0
    out = capsys.readouterr().out
    assert "- recipe server --moe-runner-backend: marlin -> flashinfer_mxfp4" in out
    monkeypatch.chdir(tmp_path)  # no recipes/ here: the reference comes from the archived recipe.yaml
    assert main(["results", "--root", str(tmp_path), "compare", "marlin", "--reference", "--md"]) == 0
    assert "| TTFT mean | 5K | 5 | 330.12 |" in capsys.readouterr().out


def test_ls_and_show(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_run(tmp_path, "node1", "20261130T120000Z", "deepseek-v4-flash-dspark-marlin", telemetry=True)
    assert main(["results", "--root", str(tmp_path), "ls", "--json"]) == 0
    (entry,) = json.loads(capsys.readouterr().out)["runs"]
    assert set(entry) >= {"id", "path", "host", "recipe", "time", "simulated"} and entry["simulated"] is True
    assert main(["results", "--root", str(tmp_path), "show", entry["id"]]) == 0
    shown = capsys.readouterr().out
    assert "SIMULATED" in shown and "| 0 | 5K | 10 | 20 | 0 |" in shown
    assert "| e2e_p99_ms (ms) |" in shown and "| itl_mean_ms (ms) |" in shown  # every client metric
    assert "### GPU telemetry" in shown and "SwPowerCap×6" in shown
    assert "GPU 1 throttled: SwPowerCap in 6/24 samples (SIMULATED telemetry)" in shown


def test_compare_with_the_posts_reference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    make_run(tmp_path, "node1", "20261130T120000Z", "deepseek-v4-flash-dspark-marlin")
    monkeypatch.chdir(ROOT)
    assert main(["results", "--root", str(tmp_path), "compare", "marlin", "--reference", "--md"]) == 0
    out = capsys.readouterr().out
    assert (
        "Tolerances: TTFT within ±25% of the reference, TPOT within ±25%, output throughput within ±25%, "
        "accept length within ±0.30." in out
    )
    assert "| TTFT mean | 5K | 5 | 330.12 |" in out  # the post's marlin number at 5K x 5
    assert "not measured" in out  # the run has 2 of the post's 12 cells
    assert "SIMULATED" in out
