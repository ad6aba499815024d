"""`recipe export --run RUN` exports what the run verified: the image by the digest the run archived, refused when
the run ran another recipe or another digest; without a digest the export says the tag moves."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from test_results import make_run

from hgxkit.cli import main

ROOT = Path(__file__).resolve().parents[3]
MARLIN = ROOT / "recipes" / "deepseek-v4-flash-dspark-marlin.yaml"
FLASHINFER = ROOT / "recipes" / "deepseek-v4-flash-dspark-flashinfer.yaml"
DIGEST = "sha256:" + "b" * 64


def _run(tmp_path: Path, recipe: Path = MARLIN) -> tuple[Path, str]:
    results = tmp_path / "results"
    make_run(results, "node1", "20261205T080000Z", "marlin", digest=DIGEST, recipe_yaml=recipe.read_text())
    return results, "node1/20261205T080000Z_marlin"


def test_the_export_runs_the_digest_the_run_archived(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results, run = _run(tmp_path)
    argv = ["recipe", "export", str(MARLIN), "--to", "compose", "--run", run, "--results-dir", str(results)]
    assert main(argv) == 0
    text = capsys.readouterr().out
    services = yaml.safe_load(text)["services"]
    assert {service["image"] for service in services.values()} == {f"lmsysorg/sglang@{DIGEST}"}
    assert "moves" not in text


def test_a_run_of_another_recipe_is_refused_naming_what_differs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results, run = _run(tmp_path, FLASHINFER)
    argv = ["recipe", "export", str(MARLIN), "--to", "k8s", "--run", run, "--results-dir", str(results)]
    assert main(argv) == 2
    assert "that run verified another recipe (server --moe-runner-backend: flashinfer_mxfp4 -> marlin" in (
        capsys.readouterr().err
    )


def test_without_a_run_the_export_says_its_tag_moves(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["recipe", "export", str(MARLIN), "--to", "k8s"]) == 0
    assert "# image by tag: lmsysorg/sglang:dev-dspark moves; --run RUN pins the digest the run ran" in (
        capsys.readouterr().out
    )
