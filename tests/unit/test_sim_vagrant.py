"""The Vagrantfile parses and validates (`vagrant validate`; no hypervisor is needed for that)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_vagrantfile_validates(tmp_path):
    if shutil.which("vagrant") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but vagrant is missing (.ci/run installs the Debian package)")
        pytest.skip("vagrant not installed")
    work = tmp_path / "project"
    work.mkdir()
    shutil.copy(ROOT / "Vagrantfile", work / "Vagrantfile")  # keeps .vagrant/ out of the checkout
    env = {**os.environ, "VAGRANT_HOME": str(tmp_path / "vagrant.d"), "VAGRANT_CHECKPOINT_DISABLE": "1"}
    res = subprocess.run(["vagrant", "validate"], cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Vagrantfile validated successfully." in res.stdout
