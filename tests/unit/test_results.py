"""Results: the real client's JSONL, the archive, comparisons in the post's layout, the reference, plots, secrets."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from hgxkit.cli import main
from hgxkit.results.archive import list_runs, load_run, write_run
from hgxkit.results.bench import EXPECTED_FIELDS, parse_bench_jsonl
from hgxkit.results.compare import mann_whitney_p, verdict
from hgxkit.results.fingerprint import Fingerprint, GpuFingerprint, fingerprint_differences, hash_uuid
from hgxkit.results.report import run_markdown
from hgxkit.results.summary import CellResult, RunSummary

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sglang_bench"
ROOT = Path(__file__).resolve().parents[2]
SECRET = "sk-Abcdefghijklmnopqrstuvwxyz0123456789"


def test_real_client_jsonl_has_every_documented_field() -> None:
    records = parse_bench_jsonl((FIXTURES / "dspark_isl5000_c5_c10.jsonl").read_text())
    assert [(r.max_concurrency, r.completed, r.tag) for r in records] == [(5, 10, None), (10, 20, "second-run")]
    for record in records:
        assert record.missing_fields == []
        assert record.input_len == 5000 and record.output_len == 64
        assert 200 < record.ttft_mean_ms < record.ttft_p99_ms < 2000
        assert 4.5 < (record.accept_length or 0) < 6.0
        assert record.server_version == "0.5.23"
    assert len(EXPECTED_FIELDS) == 49


def test_details_and_no_speculation() -> None:
    (details,) = parse_bench_jsonl((FIXTURES / "dspark_isl5000_c5_details.jsonl").read_text())
    assert len(details.ttfts_ms) == 10 and details.failed == 0
    assert min(details.ttfts_ms) <= details.ttft_mean_ms <= max(details.ttfts_ms)
    (nospec,) = parse_bench_jsonl((FIXTURES / "nospec_isl5000_c5.jsonl").read_text())
    assert nospec.accept_length is None


def test_bad_jsonl_names_the_line() -> None:
    with pytest.raises(ValueError, match=r"x.jsonl: line 2 is not JSON"):
        parse_bench_jsonl('{"completed": 1}\n{oops\n', source="x.jsonl")


def make_run(tmp: Path, host: str, time: str, recipe: str, *, scale: float = 1.0, driver: str = "580.105.08",
             digest: str = "sha256:" + "a" * 64, simulated: bool = True) -> Path:  # fmt: skip
    raw = (FIXTURES / "dspark_isl5000_c5_c10.jsonl").read_text()
    records = parse_bench_jsonl(raw)
    cells = [
        replace(
            CellResult.from_record(r, num_prompts=r.completed, group=0, raw_file=f"5000_{r.max_concurrency}.jsonl"),
            ttft_mean_ms=r.ttft_mean_ms * scale,
            ttft_p90_ms=r.ttft_p90_ms * scale,
            ttft_p99_ms=r.ttft_p99_ms * scale,
        )
        for r in records
    ]
    run_id = f"{host}/{time}_{recipe}"
    summary = RunSummary(run_id, host, recipe, time, simulated, "sglang.benchmark.serving", "0.5.23", cells)
    fingerprint = Fingerprint(
        system_name=host, simulated=simulated, accelerator_model_name="NVIDIA H200", accelerators_per_node=8,
        gpus=[GpuFingerprint(0, "NVIDIA H200", hash_uuid("GPU-1"), cuda_version="13.0")],
        packages={"driver": driver}, serving={"image": "lmsysorg/sglang:dev-dspark", "image_digest": digest},
        recipe={"name": recipe, "path": f"recipes/{recipe}.yaml"},
    )  # fmt: skip
    raw_with_secret = raw.replace('"api_key": null', f'"api_key": "{SECRET}"')
    return write_run(tmp, summary, fingerprint, {"5000.jsonl": raw_with_secret}, run_markdown(summary, fingerprint), [SECRET])


def test_archive_layout_listing_and_lookup(tmp_path: Path) -> None:
    first = make_run(tmp_path, "node1", "20261130T120000Z", "deepseek-v4-flash-dspark-marlin")
    make_run(tmp_path, "node1", "20261130T130000Z", "deepseek-v4-flash-dspark-flashinfer")
    assert sorted(p.name for p in first.iterdir()) == ["fingerprint.json", "raw", "report.md", "summary.json"]
    runs = list_runs(tmp_path)
    assert [r.run_id for r in runs] == [
        "node1/20261130T120000Z_deepseek-v4-flash-dspark-marlin",
        "node1/20261130T130000Z_deepseek-v4-flash-dspark-flashinfer",
    ]
    assert load_run("flashinfer", tmp_path).summary.recipe == "deepseek-v4-flash-dspark-flashinfer"
    with pytest.raises(Exception, match="matches 2 runs"):
        load_run("node1", tmp_path)


def test_no_secret_in_any_archived_byte(tmp_path: Path) -> None:
    make_run(tmp_path, "node1", "20261130T120000Z", "deepseek-v4-flash-dspark-marlin")
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) == 4
    for path in files:
        assert SECRET not in path.read_text()
    raw = next(tmp_path.rglob("5000.jsonl")).read_text()
    assert '"api_key": "***"' in raw


def test_fingerprint_differences_name_what_differs() -> None:
    a = Fingerprint("n1", True, packages={"driver": "580.95.05"}, serving={"image_digest": "sha256:" + "a" * 64})
    b = Fingerprint("n2", True, packages={"driver": "580.105.08"}, serving={"image_digest": "sha256:" + "b" * 64})
    assert fingerprint_differences(a, b) == [
        "simulated: both runs ran on simulated nodes (no real GPU)",
        "driver 580.95.05 vs 580.105.08",
        "image digest differs (aaaaaaaaaaaa vs bbbbbbbbbbbb)",
    ]


def test_verdicts_follow_the_posts_own_calls() -> None:
    post = [((257, 260), "tie"), ((380, 307), "B -19%"), ((661, 597), "B -10%"), ((369, 398), "A -7%"),
            ((468, 442), "tie"), ((757, 797), "tie")]  # fmt: skip
    assert [verdict(a, b, "A", "B") for (a, b), _ in post] == [v for _, v in post]


def test_mann_whitney_decides_when_samples_exist() -> None:
    same = [100.0 + i for i in range(20)]
    assert mann_whitney_p(same, same) == pytest.approx(1.0)
    assert (mann_whitney_p(same, [v + 50 for v in same]) or 1) < 0.001
    noisy = verdict(100.0, 90.0, "A", "B", samples=([100, 80, 120, 90, 110], [95, 85, 115, 75, 105]))
    assert noisy == "tie"  # 10 % apart on average, but the per-request samples overlap: not significant


def test_compare_cli_prints_the_posts_layout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_run(tmp_path, "node1", "20261130T120000Z", "deepseek-v4-flash-dspark-marlin")
    make_run(tmp_path, "node2", "20261130T130000Z", "deepseek-v4-flash-dspark-flashinfer", scale=1.3,
             driver="580.95.05", digest="sha256:" + "b" * 64)  # fmt: skip
    plots = tmp_path / "plots"
    code = main(["results", "--root", str(tmp_path), "compare", "marlin", "flashinfer", "--md", "--plot", str(plots)])
    out = capsys.readouterr().out
    assert code == 0
    assert "- driver 580.105.08 vs 580.95.05" in out and "- image digest differs" in out
    assert "SIMULATED" in out
    assert "### TTFT Mean (ms — lower = better)" in out and "### TTFT P99 (ms — lower = better)" in out
    assert "| Input | Conc | deepseek-v4-flash-dspark-marlin | deepseek-v4-flash-dspark-flashinfer | Under 5s? |" in out
    assert "deepseek-v4-flash-dspark-marlin -23%" in out  # 1.3x slower flashinfer: marlin 23 % lower
    assert "### Accept Length" in out
    assert sorted(p.name for p in plots.iterdir()) == ["accept_length.png", "ttft.png"]
    assert (plots / "ttft.png").read_bytes()[:4] == b"\x89PNG"


def test_ls_json_and_show(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_run(tmp_path, "node1", "20261130T120000Z", "deepseek-v4-flash-dspark-marlin")
    assert main(["results", "--root", str(tmp_path), "ls", "--json"]) == 0
    (entry,) = json.loads(capsys.readouterr().out)
    assert set(entry) >= {"id", "path", "host", "recipe", "time", "simulated"} and entry["simulated"] is True
    assert main(["results", "--root", str(tmp_path), "show", entry["id"]]) == 0
    shown = capsys.readouterr().out
    assert "SIMULATED" in shown and "| 0 | 5K | 10 | 20 | 0 |" in shown


def test_compare_with_the_posts_reference(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    make_run(tmp_path, "node1", "20261130T120000Z", "deepseek-v4-flash-dspark-marlin")
    monkeypatch.chdir(ROOT)
    assert main(["results", "--root", str(tmp_path), "compare", "marlin", "--reference", "--md"]) == 0
    out = capsys.readouterr().out
    assert "Tolerances: TTFT within ±25% of the reference, accept length within ±0.30." in out
    assert "| TTFT mean | 5K | 5 | 330.12 |" in out  # the post's marlin number at 5K x 5
    assert "not measured" in out  # the run has 2 of the post's 12 cells
    assert "SIMULATED" in out
