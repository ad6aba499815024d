"""The simulated NVIDIA repository builds, is signed, and indexes every package version."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from hgxkit.sim import aptrepo


def test_build_repo_signed_and_cached(tmp_path):
    missing = [t for t in aptrepo.TOOLS if shutil.which(t) is None]
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {missing} missing (.ci/run installs them)")
        pytest.skip(f"needs {missing}")
    repo = aptrepo.build_repo(tmp_path)
    cuda = repo.root / "cuda/debian12/x86_64"
    packages = (cuda / "Packages").read_text()
    assert "Package: nvidia-fabricmanager\n" in packages and "Version: 580.95.05-1\n" in packages
    assert "Filename: ./nvidia-open_580.105.08-1_amd64.deb\n" in packages
    assert repo.packages["nvidia-container-toolkit"] == ["1.17.8-1", "1.18.0-1"]
    keyring = tmp_path / "k.gpg"
    subprocess.run(
        ["gpg", "--batch", "--yes", "--dearmor", "-o", str(keyring), str(cuda / "hgxkit-sim.pub")], check=True
    )
    ok = subprocess.run(["gpgv", "--keyring", str(keyring), str(cuda / "InRelease")], capture_output=True)
    assert ok.returncode == 0, ok.stderr
    nvct = repo.root / "libnvidia-container/stable/deb/amd64"
    assert "Package: libnvidia-container1\n" in (nvct / "Packages").read_text()
    assert (repo.root / "libnvidia-container/gpgkey").read_text() == (cuda / "hgxkit-sim.pub").read_text()
    again = aptrepo.build_repo(tmp_path)
    assert again.fingerprint == repo.fingerprint and again.root == repo.root
