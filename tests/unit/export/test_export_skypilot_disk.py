"""A SkyPilot task asks for a disk that holds the image and the weights: SkyPilot's own default (256 GB) does not
hold a DeepSeek-class model, so the export asks for `--disk-size` (default 1024 GB)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from hgxkit.cli import main

RECIPE = str(Path(__file__).resolve().parents[3] / "recipes" / "deepseek-v4-flash-dspark-marlin.yaml")


@pytest.mark.parametrize(("flags", "disk"), [([], 1024), (["--disk-size", "2048"], 2048)])
def test_every_task_asks_for_the_disk(flags: list[str], disk: int, tmp_path: Path) -> None:
    assert main(["recipe", "export", RECIPE, "--to", "skypilot", "-o", str(tmp_path), *flags]) == 0
    tasks = [yaml.safe_load(path.read_text()) for path in sorted(tmp_path.glob("skypilot-*.yaml"))]
    assert len(tasks) == 2 and {task["resources"]["disk_size"] for task in tasks} == {disk}
