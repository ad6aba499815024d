"""The Vagrantfile parses and validates (`vagrant validate`; no hypervisor is needed for that)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _validate(tmp_path: Path, vagrantfile: str) -> subprocess.CompletedProcess[str]:
    """`vagrant validate --ignore-provider` on a copy (keeps .vagrant/ out of the checkout). Without
    --ignore-provider, Vagrant also demands a usable provider, so the check would depend on whether the
    machine has a hypervisor (a fresh CI machine has none: "No usable default provider could be found")."""
    if shutil.which("vagrant") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but vagrant is missing (.ci/run installs the Debian package)")
        pytest.skip("vagrant not installed")
    work = tmp_path / "project"
    work.mkdir()
    (work / "Vagrantfile").write_text(vagrantfile)
    env = {**os.environ, "VAGRANT_HOME": str(tmp_path / "vagrant.d"), "VAGRANT_CHECKPOINT_DISABLE": "1"}
    argv = ["vagrant", "validate", "--ignore-provider"]
    return subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=120)


def test_vagrantfile_validates(tmp_path):
    res = _validate(tmp_path, (ROOT / "Vagrantfile").read_text())
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Vagrantfile validated successfully." in res.stdout


def test_a_broken_vagrantfile_fails_validation(tmp_path):
    """The check can fail: a Vagrantfile with an unknown config key is refused even with --ignore-provider."""
    broken = (ROOT / "Vagrantfile").read_text().replace("node.vm.hostname", "node.vm.hostnamex", 1)
    res = _validate(tmp_path, broken)
    assert res.returncode != 0
    assert "hostnamex" in res.stdout + res.stderr
