"""`hgxkit bundle create` and `hgxkit doctor` run deploys/*.py of the checkout hgxkit is installed from, never the
current directory's: a directory with its own deploys/ and roles/ (a downloaded post, someone's clone) runs
nothing of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from hgxkit.cli import bundle, doctor
from hgxkit.errors import InputError

CHECKOUT = Path(bundle.__file__).resolve().parents[2]


@pytest.fixture()
def planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The current directory: a look-alike checkout whose deploys leave a mark when run."""
    mark = tmp_path / "ran"
    (tmp_path / "roles").mkdir()
    (tmp_path / "deploys").mkdir()
    for name in ("bundle.py", "doctor.py"):
        (tmp_path / "deploys" / name).write_text(
            f"from pathlib import Path\nPath({str(mark)!r}).write_text('ran')\nKNOB_DEFAULTS = {{'planted': True}}\n"
        )
    monkeypatch.chdir(tmp_path)
    return mark


def test_bundle_create_reads_the_knobs_of_the_installed_checkout(planted: Path) -> None:
    knobs = bundle.knob_defaults()
    assert "planted" not in knobs and "nvidia_driver_version" in knobs
    assert not planted.exists()


def test_doctor_runs_the_installed_checkouts_deploy(planted: Path) -> None:
    assert doctor.doctor_program() == CHECKOUT / "deploys" / "doctor.py"
    assert not planted.exists()


def test_without_the_checkout_beside_the_package_each_says_so_in_one_line(
    planted: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An install without deploys/ beside the package (a wheel): the current directory's are not a fallback.
    monkeypatch.setattr(bundle, "REPO_ROOT", tmp_path / "site-packages")
    monkeypatch.setattr(doctor, "REPO_ROOT", tmp_path / "site-packages")
    for call in (bundle.knob_defaults, doctor.doctor_program):
        with pytest.raises(InputError, match=r"site-packages/deploys/\w+\.py: not found; .*install it with") as err:
            call()
        assert "\n" not in str(err.value)
    assert not planted.exists()
