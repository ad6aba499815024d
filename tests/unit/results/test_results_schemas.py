"""JSON everywhere: `results ls|show|compare --json` and the archive files validate against the shipped schemas;
schema versions are checked on load; the fingerprint carries MLPerf's system_desc fields."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from test_results import ROOT, make_run

from hgxkit.cli import main
from hgxkit.errors import InputError
from hgxkit.results.fingerprint import MLPERF_SYSTEM_DESC_FIELDS, Fingerprint
from hgxkit.results.metrics import METRIC_FIELDS
from hgxkit.results.schemas import SCHEMA_NAMES, load_schema, schema_errors, validate
from hgxkit.results.summary import RunSummary


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_schemas_are_package_data_with_versioned_ids() -> None:
    for name in SCHEMA_NAMES:
        schema = load_schema(name)
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert schema["$id"].startswith(f"urn:hgxkit:results:{name}:") and schema["description"]
    cell = load_schema("summary")["$defs"]["cell"]
    assert set(METRIC_FIELDS) <= set(cell["required"])  # every metric is documented and required
    fingerprint = load_schema("fingerprint")["properties"]
    assert {k.replace("-", "_") for k in MLPERF_SYSTEM_DESC_FIELDS} <= set(fingerprint)


def test_cli_json_outputs_validate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    make_run(tmp_path, "node1", "20261130T120000Z", "deepseek-v4-flash-dspark-marlin", details=True, telemetry=True)
    make_run(tmp_path, "node2", "20261130T130000Z", "deepseek-v4-flash-dspark-flashinfer", details=True, scale=1.3)
    root = ["results", "--root", str(tmp_path)]
    ls = _json(capsys, *root, "ls", "--json")
    assert schema_errors(ls, "ls") == [] and [r["cells"] for r in ls["runs"]] == [1, 1] and ls["skipped"] == []
    show = _json(capsys, *root, "show", "marlin", "--json")
    assert schema_errors(show, "show") == []
    assert show["summary"]["cells"][0]["telemetry"]["simulated"] is True
    assert show["mlperf_system_desc"]["hw_notes"].startswith("SIMULATED")
    assert show["flags"] == [
        "node1/20261130T120000Z_deepseek-v4-flash-dspark-marlin group 0 5000x5: GPU 1 "
        "throttled: SwPowerCap in 6/24 samples (SIMULATED telemetry)"
    ]
    compare = _json(capsys, *root, "compare", "marlin", "flashinfer", "--json")
    assert schema_errors(compare, "compare") == []
    (row,) = compare["tables"]["ttft_mean"]["rows"]
    assert row["kind"] == "real" and row["interval_a"]["high"] < row["interval_b"]["low"]
    monkeypatch.chdir(ROOT)
    reference = _json(capsys, *root, "compare", "marlin", "--reference", "--json")
    assert schema_errors(reference, "compare") == [] and reference["kind"] == "reference"
    assert reference["missing"] > 0 and reference["within"] + reference["outside"] > 0
    assert (
        main([*root, "schema", "ls"]) == 0 and json.loads(capsys.readouterr().out)["$id"] == "urn:hgxkit:results:ls:1"
    )


def test_archive_files_validate_and_a_broken_one_does_not(tmp_path: Path) -> None:
    path = make_run(tmp_path, "node1", "20261130T120000Z", "dspark", details=True, telemetry=True)
    summary = json.loads((path / "summary.json").read_text())
    assert schema_errors(summary, "summary") == []
    assert schema_errors(json.loads((path / "fingerprint.json").read_text()), "fingerprint") == []
    broken = copy.deepcopy(summary)
    broken["cells"][0]["failed"] = -1
    broken["cells"][0]["ttft_mean_ms"] = "fast"
    errors = schema_errors(broken, "summary")
    assert errors == [
        "cells/0/failed: -1 is less than the minimum of 0",
        "cells/0/ttft_mean_ms: 'fast' is not of type 'number', 'null'",
    ]
    with pytest.raises(
        InputError, match=r"^s.json: does not match the summary schema: cells/0/failed: .* \(and 1 more\)$"
    ):
        validate(broken, "summary", "s.json")


def test_schema_1_archives_still_load_and_newer_ones_are_refused(tmp_path: Path) -> None:
    path = make_run(tmp_path, "node1", "20261130T120000Z", "dspark", details=True)
    v2 = json.loads((path / "summary.json").read_text())
    keep = {
        "input_len",
        "concurrency",
        "num_prompts",
        "completed",
        "failed",
        "ttft_mean_ms",
        "ttft_p90_ms",
        "ttft_p99_ms",
        "accept_length",
        "output_throughput",
        "group",
        "duration_s",
        "ttfts_ms",
        "raw_file",
    }
    v1 = {k: v for k, v in v2.items() if k not in ("statistics",)} | {
        "schema_version": 1,
        "metric_definitions": {"ttft_ms": "time to first token"},
        "cells": [{k: v for k, v in c.items() if k in keep} for c in v2["cells"]],
    }
    loaded = RunSummary.from_json(v1)
    assert loaded.schema_version == 2 and loaded.cells[0].ttft_mean_ms == v2["cells"][0]["ttft_mean_ms"]
    assert loaded.cells[0].intervals["ttft_mean_ms"].known  # recomputed from the v1 per-request TTFTs
    assert loaded.cells[0].tpot_mean_ms is None  # v1 never stored it
    assert schema_errors(loaded.to_json(), "summary") == []
    with pytest.raises(InputError, match=r"summary.json: schema_version 3 is newer than this hgxkit reads \(up to 2\)"):
        RunSummary.from_json(v2 | {"schema_version": 3})
    fp_v1 = {"system_name": "old", "simulated": False, "schema_version": 1, "operating_system": "Ubuntu 24.04"}
    old = Fingerprint.from_json(fp_v1)
    assert (old.schema_version, old.division, old.server_env_report) == (2, "unknown", None)
    with pytest.raises(InputError, match=r"fp.json: schema_version is None, not a number"):
        Fingerprint.from_json({"system_name": "x", "simulated": False}, source="fp.json")


def test_mlperf_system_desc_has_every_required_field() -> None:
    fp = Fingerprint(
        "node1",
        False,
        host_processor_model_name="Intel Xeon Platinum 8480+",
        accelerators_per_node=8,
        accelerator_interconnect="NVLink 4 / NVSwitch",
        framework="SGLang 0.5.23",
    )
    desc = fp.mlperf_system_desc()
    assert list(desc) == list(MLPERF_SYSTEM_DESC_FIELDS) and len(desc) == 35
    assert desc["accelerators_per_node"] == "8" and desc["accelerator_interconnect"] == "NVLink 4 / NVSwitch"
    assert desc["accelerator_on-chip_memories"] == "unknown" and desc["number_of_nodes"] == "1"
    assert desc["host_memory_capacity"] == "unknown"  # None becomes MLPerf's "unknown"
