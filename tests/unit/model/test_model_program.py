"""hgxkit/model/nodeprogram.py: the downloader's modules built into the one file a node runs, the same bytes from the
same sources, runnable with nothing of hgxkit beside it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hgxkit.model import core, nodeprogram

ROOT = Path(__file__).resolve().parents[3]


def test_the_same_sources_build_the_same_bytes_wherever_they_lie(tmp_path: Path) -> None:
    """Idempotence of the deploy: no time, path or file date goes into the program, so a second deploy uploads
    nothing and the stamp's `program_sha` stays."""
    copy = tmp_path / "fetch"
    shutil.copytree(nodeprogram.PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    for path in copy.iterdir():
        os.utime(path, (1_000_000_000, 1_000_000_000))
    first, second = nodeprogram.build(), nodeprogram.build(copy)
    assert first == second and first.encode() == nodeprogram.uploads()[nodeprogram.PROGRAM_NAME]
    assert str(tmp_path) not in first and str(ROOT) not in first


def _node(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The program run as on a node from a folder holding only the uploads; `-I -S`: no site-packages, no
    PYTHONPATH, so nothing of hgxkit can be imported."""
    command = [sys.executable, "-I", "-S", nodeprogram.PROGRAM_NAME, *args]
    return subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)


def test_the_uploads_alone_answer_help_and_status(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    nodeprogram.write(lib)
    assert sorted(p.name for p in lib.iterdir()) == sorted(nodeprogram.uploads())
    isolated = subprocess.run([sys.executable, "-I", "-S", "-c", "import hgxkit"], cwd=lib, capture_output=True)
    assert isolated.returncode != 0  # so the runs below prove the program needs nothing of the repository

    helped = _node(lib, "--help")
    assert helped.returncode == 0 and "status,run,result,peer-serve" in helped.stdout, helped.stderr

    spec = core.Spec(
        repo_id="org/tiny",
        revision="a" * 40,
        local_dir=str(tmp_path / "models" / "tiny"),
        state_dir=str(tmp_path / "state"),
        program_sha=nodeprogram.program_sha(),
    )
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(spec.to_json())
    done = _node(lib, "status", "--spec", str(spec_path))
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout.splitlines()[-1])
    # The node computes the same program_sha as the role: the check goes on to the (missing) copy itself.
    assert answer["state"] == "incomplete" and "newer downloader" not in answer["reason"], answer
    assert answer["name"] == "tiny" and answer["unit"] == core.unit_name(spec.local_dir)


def test_the_package_runs_from_the_repository_as_it_is() -> None:
    """`python -m hgxkit.model.fetch` (the bundle maker's way) runs the modules without building them."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "hgxkit.model.fetch", "--help"], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0 and done.stdout.startswith("usage: hgxkit_fetch.py"), done.stderr


BROKEN = [
    (
        "a module not listed",
        "extra.py",
        None,
        "",
        r"modules \['extra'\] are not in hgxkit/model/nodeprogram.py MODULES",
    ),
    (
        "a sibling imported before it is built",
        "errors.py",
        "from __future__ import annotations\n",
        "from .cli import main\n",
        r"errors.py:\d+: imports `.cli` at run time, which is not before it in MODULES",
    ),
    (
        "a package the node lacks",
        "retry.py",
        "import random\n",
        "import yaml\n",
        r"retry.py:\d+: imports \['yaml'\], which the node does not have",
    ),
    (
        "one name bound twice",
        "fleetauth.py",
        None,
        "\n\ndef with_retries() -> None:\n    pass\n",
        r"fleetauth.py: `with_retries` is also bound in retry.py",
    ),
    (
        "an import below the definitions",
        "errors.py",
        None,
        "\nimport os\n",
        r"errors.py:\d+: an import below the first definition",
    ),
]


@pytest.mark.parametrize(("case", "module", "after", "added", "message"), BROKEN, ids=[c[0] for c in BROKEN])
def test_a_module_that_breaks_the_joining_rule_fails_the_build_naming_it(
    tmp_path: Path, case: str, module: str, after: str | None, added: str, message: str
) -> None:
    copy = tmp_path / "fetch"
    shutil.copytree(nodeprogram.PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    path = copy / module
    text = path.read_text() if path.exists() else ""
    if after is None:
        path.write_text(text + added)
    else:
        assert after in text, case
        path.write_text(text.replace(after, after + added, 1))
    with pytest.raises(nodeprogram.ProgramRuleError, match=message) as raised:
        nodeprogram.build(copy)
    assert "\n" not in str(raised.value)
