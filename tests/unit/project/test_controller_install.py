"""A controller for real nodes, installed as the README says: the built wheel in a fresh virtualenv, no extras.

The module fixture builds the wheel from this tree (`pip wheel --no-deps`, from a copy so the checkout gets no
build/ or egg-info), makes a venv with `python -m venv` and `pip install`s the wheel alone, constrained by
requirements/controller.txt: its dependencies come from the package index at their pins (with pip's cache warm
the fixture takes about 40 s on two busy cores), and the venv then holds exactly the pinned packages.
The commands then run from a folder holding only what a user's clone gives a controller besides the package
(deploys/, roles/, recipes/), so every `hgxkit` module comes from the installed wheel. Nothing is mocked: the
venv really lacks the Docker SDK (one test proves it). Without network access the fixture skips, except under
CI=true, where it fails.

Also here, without installing: the controller's imports are declared in pyproject.toml, the pins of
requirements/ (written by `make lock`) cover every declared requirement within its bounds, and building the CLI
imports nothing of the simulation beyond its argument parsers.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import venv
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[3]
RECIPE = "recipes/deepseek-v4-flash-dspark-marlin.yaml"
POST = ROOT / "tests" / "fixtures" / "forum-dspark-h200.txt"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
CONTROLLER_PINS = ROOT / "requirements" / "controller.txt"  # a plain `pip install .`
TEST_PINS = ROOT / "requirements" / "test.txt"  # `make venv`: pip install -e '.[sim,test]'
# Code that runs on a node, never on the controller: its imports are the node's business (the downloader, and the
# model check's fast path, sent inline, which imports model_core uploaded beside the downloader).
NODE_SIDE = ("hgxkit/model/fetch/", "hgxkit/model/quickcheck.py")
pytestmark = pytest.mark.install
SIM_ONLY = {"docker", "cryptography"}  # the `sim` extra


@dataclass(frozen=True)
class Controller:
    venv: Path
    work: Path  # deploys/, roles/, recipes/ and a post: what a clone gives besides the package

    def run(self, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
        env["PATH"] = f"{self.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        command = [str(self.venv / "bin" / argv[0]), *argv[1:]]
        return subprocess.run(command, cwd=self.work, env=env, capture_output=True, text=True, timeout=timeout)


OFFLINE = (
    "Could not find a version",
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "Network is unreachable",
)


def _pip(*args: str, cwd: Path) -> None:
    """Run pip; a failure fails the tests, except that no index in reach skips them (but fails under CI=true)."""
    out = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=900)
    if out.returncode == 0:
        return
    tail = "\n".join((out.stdout + out.stderr).strip().splitlines()[-15:])
    why = f"`{' '.join(args[-4:])}` failed (exit {out.returncode}):\n{tail}"
    if os.environ.get("CI") != "true" and any(sign in tail for sign in OFFLINE):
        pytest.skip(f"no package index in reach: {why}")
    pytest.fail(why)


@pytest.fixture(scope="module")
def controller(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Controller]:
    top = tmp_path_factory.mktemp("controller")
    src = top / "src"
    src.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "hgxkit", src / "hgxkit", ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    # An absolute path: a bare `src` is a project name on the index to pip.
    _pip(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--disable-pip-version-check",
        "-q",
        "-w",
        str(top / "dist"),
        str(src),
        cwd=top,
    )
    (wheel,) = (top / "dist").glob("hgxkit-*.whl")
    venv.EnvBuilder(with_pip=True, clear=True).create(top / "venv")
    _pip(
        str(top / "venv" / "bin" / "python"),
        "-m",
        "pip",
        "install",
        "--no-compile",
        "--disable-pip-version-check",
        "-q",
        "-c",
        str(CONTROLLER_PINS),
        str(wheel),
        cwd=top,
    )
    work = top / "work"
    work.mkdir()
    for name in ("deploys", "roles", "recipes"):
        shutil.copytree(ROOT / name, work / name, ignore=ignore)
    shutil.copy2(POST, work / "post.txt")
    (work / "empty-results").mkdir()
    yield Controller(top / "venv", work)


def test_the_venv_is_a_controller_without_the_sim_extra(controller: Controller) -> None:
    out = controller.run(
        "python", "-c", "import hgxkit, importlib.util as u; print(hgxkit.__file__); print(u.find_spec('docker'))"
    )
    where, docker = out.stdout.split()
    assert "site-packages" in where and docker == "None", out


def test_the_venv_holds_exactly_the_controller_pins(controller: Controller) -> None:
    out = controller.run("python", "-m", "pip", "freeze", "--disable-pip-version-check", "--exclude", "hgxkit")
    assert out.returncode == 0, out
    assert _pins_of(out.stdout) == _pins(CONTROLLER_PINS), "run `make lock`: requirements/controller.txt is stale"


def test_help_and_version(controller: Controller) -> None:
    out = controller.run("hgxkit", "--help")
    assert out.returncode == 0 and out.stderr == "", out
    assert all(group in out.stdout for group in ("recipe", "results", "sim")), out.stdout
    out = controller.run("hgxkit", "--version")
    assert (out.returncode, out.stdout) == (0, f"hgxkit {PYPROJECT['project']['version']}\n"), out


@pytest.mark.parametrize("command", ["render", "check", "show"])
def test_recipe_commands_on_a_shipped_recipe(controller: Controller, command: str) -> None:
    out = controller.run("hgxkit", "recipe", command, RECIPE)
    assert out.returncode == 0, out
    assert out.stdout.strip(), out


def test_recipe_import_of_the_seed_post_makes_a_recipe_that_checks(controller: Controller) -> None:
    out = controller.run("hgxkit", "recipe", "import", "post.txt", "-o", "imported.yaml")
    assert out.returncode == 0, out
    assert controller.run("hgxkit", "recipe", "check", "imported.yaml").returncode == 0


def test_results_ls_on_an_empty_archive(controller: Controller) -> None:
    out = controller.run("hgxkit", "results", "--root", "empty-results", "ls")
    assert out.returncode == 0 and "no runs under empty-results" in out.stdout, out


def test_sim_says_in_one_line_how_to_install_the_extra(controller: Controller) -> None:
    out = controller.run("hgxkit", "sim", "up")
    assert out.returncode == 2 and out.stdout == "", out
    assert out.stderr.count("\n") == 1, out.stderr
    assert re.fullmatch(r"hgxkit: error: `hgxkit sim` needs docker.*: pip install 'docker[<>=\d.,]+'.*\n", out.stderr)
    assert controller.run("hgxkit", "sim", "host", "setup", "--help").returncode == 0  # stdlib only, no extra


def test_pyinfra_plans_the_seed_deploy_with_the_installed_package(controller: Controller) -> None:
    """`pyinfra --dry` loads deploys/dspark.py (and the deploys and roles it includes) on the installed package.

    An unreachable host would end before the deploy file loads ("No hosts remaining"), so the one host is
    `@local`: --dry changes nothing, and the facts bring-up reads are read-only commands. Preflight then
    refuses this machine (no H200s) — which proves the plan ran through the bring-up's skip check, the roles'
    defaults and preflight's facts — or, on a real node, the plan completes.
    """
    (controller.work / "inventory.py").write_text('hosts = ["@local"]\n')
    # The seed's --shm-size=32g is more than this machine's memory, which the recipe's judgement (before bring-up)
    # refuses unless allowed: allowed here, so the plan reaches preflight.
    allow = 'allow_docker_options=["--shm-size"]'
    out = controller.run("pyinfra", "--dry", "inventory.py", "deploys/dspark.py", "--data", allow, timeout=300)
    text = out.stdout + out.stderr
    assert "Loading: deploys/dspark.py" in text, text
    assert "Traceback" not in text and "ModuleNotFoundError" not in text, text
    assert out.returncode == 0 or "preflight failed on @local; nothing was changed" in text, text


def _third_party_imports(path: Path) -> set[str]:
    """Top-level names of what `path` imports from outside the project and the standard library (anywhere)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module]
        else:
            continue
        found |= {name.split(".")[0] for name in names}
    return found - set(sys.stdlib_module_names) - {"hgxkit", "roles", "__future__"}


def _distribution(requirement: str) -> str:
    return re.split(r"[ <>=!~;\[]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_a_controllers_imports_are_its_declared_dependencies() -> None:
    """Everything the controller's code imports is in `dependencies`; the Docker SDK and cryptography only in
    the `sim` extra (the wheel test above shows the result works)."""
    project = PYPROJECT["project"]
    declared = {_distribution(r) for r in project["dependencies"]}
    sim = {_distribution(r) for r in project["optional-dependencies"]["sim"]}
    dists = {name: {d.lower().replace("_", "-") for d in found} for name, found in packages_distributions().items()}
    files = [p for top in ("hgxkit", "roles", "deploys") for p in sorted((ROOT / top).rglob("*.py"))]
    missing, sim_used = [], []
    for path in files:
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(("hgxkit/sim/", *NODE_SIDE)):
            continue
        for name in sorted(_third_party_imports(path)):
            if name in SIM_ONLY:
                sim_used.append(f"{rel}: {name}")
            elif not dists.get(name, {name}) & declared:
                missing.append(f"{rel}: {name} ({', '.join(sorted(dists.get(name, {'not installed'})))})")
    assert missing == [], "add to [project] dependencies in pyproject.toml:\n" + "\n".join(missing)
    assert sim_used == [], "the controller imports the sim extra:\n" + "\n".join(sim_used)
    assert sim >= SIM_ONLY and not SIM_ONLY & declared


def test_building_the_cli_imports_nothing_of_the_simulation_but_its_parsers() -> None:
    code = (
        "import sys, hgxkit.cli; hgxkit.cli.build_parser(); "
        "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in ('docker', 'cryptography') "
        "or m.startswith('hgxkit.sim'))))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    # hgxkit.sim.host is stdlib-only (test_sim_host.py): `hgxkit sim host setup` runs before any venv exists.
    assert out.stdout.split() == [
        "hgxkit.sim",
        "hgxkit.sim.cli",
        "hgxkit.sim.host",
        "hgxkit.sim.standin",
        "hgxkit.sim.standin.cli",
    ]


def _pins_of(text: str) -> dict[str, str]:
    """`name==version` lines (comments and blank lines skipped) as {canonical name: version}; one pin a name."""
    pins: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, sep, version = line.partition("==")
        assert sep and re.fullmatch(r"[A-Za-z0-9][\w.-]*", name) and re.fullmatch(r"[\w.+!-]+", version), line
        assert canonicalize_name(name) not in pins, f"{name} pinned twice"
        pins[canonicalize_name(name)] = version
    return pins


def _pins(path: Path) -> dict[str, str]:
    return _pins_of(path.read_text())


@pytest.mark.parametrize("path", [CONTROLLER_PINS, TEST_PINS], ids=lambda p: p.name)
def test_each_pins_file_says_how_it_is_renewed_and_pins_exact_versions(path: Path) -> None:
    text = path.read_text()
    assert "renew with: make lock" in text.splitlines()[1], text[:300]
    assert _pins(path)


def test_a_controller_runs_the_versions_the_tests_ran() -> None:
    test_pins = _pins(TEST_PINS)
    differ = {name: (v, test_pins.get(name)) for name, v in _pins(CONTROLLER_PINS).items() if test_pins.get(name) != v}
    assert differ == {}, f"run `make lock` (controller vs test pins): {differ}"


@pytest.mark.parametrize(
    ("path", "extras"), [(CONTROLLER_PINS, ()), (TEST_PINS, ("sim", "test"))], ids=["controller", "test"]
)
def test_every_declared_requirement_is_pinned_within_its_bounds(path: Path, extras: tuple[str, ...]) -> None:
    project = PYPROJECT["project"]
    declared = [*project["dependencies"], *(r for extra in extras for r in project["optional-dependencies"][extra])]
    pins = _pins(path)
    wrong = []
    for text in declared:
        requirement = Requirement(text)
        pin = pins.get(canonicalize_name(requirement.name))
        if pin is None or not requirement.specifier.contains(pin, prereleases=True):
            wrong.append(f"{text}: {pin or 'not pinned'}")
    assert wrong == [], f"run `make lock` ({path.name}):\n" + "\n".join(wrong)


def test_the_hub_client_under_test_is_the_one_the_node_installs() -> None:
    """The Hub stand-in is tested against the real client: the release roles/model pins on the node."""
    node = re.search(r'"huggingface_hub\[hf_xet\]==([\w.]+)"', (ROOT / "roles" / "model" / "defaults.py").read_text())
    assert node, "roles/model/defaults.py: no huggingface_hub pin found"
    assert _pins(TEST_PINS)["huggingface-hub"] == node.group(1), "pin the same huggingface_hub in both places"
