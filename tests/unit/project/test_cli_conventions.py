"""CLI conventions over the whole argparse tree: help everywhere, group options after the sub-command, and every
`--json` output carrying a `schema_version` and validating against the schema its command declares.

The tree is walked, so a new command with `--json` is found here: it must declare its schema
(`hgxkit.cli.args.json_option`) and get an invocation in INVOCATIONS below, or this test names it.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import pytest
import tomllib
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from test_results import ROOT, make_run

from hgxkit.cli import build_parser, main
from hgxkit.cli.args import walk
from hgxkit.results.schemas import SCHEMA_NAMES, load_schema

MARLIN = str(ROOT / "recipes" / "deepseek-v4-flash-dspark-marlin.yaml")
FLASHINFER = str(ROOT / "recipes" / "deepseek-v4-flash-dspark-flashinfer.yaml")
Invocation = Callable[[Path, pytest.MonkeyPatch], list[list[str]]]


def _results(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    if not (tmp / "node1").exists():
        make_run(tmp, "node1", "20261130T120000Z", "deepseek-v4-flash-dspark-marlin", details=True, telemetry=True)
        make_run(tmp, "node2", "20261130T130000Z", "deepseek-v4-flash-dspark-flashinfer", details=True, scale=1.3)
    monkeypatch.chdir(ROOT)  # --reference finds recipes/<recipe>.yaml
    return ["results", "--root", str(tmp)]


def _sim_nodes(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    from hgxkit.sim import nodes

    node = nodes.NodeInfo("node1", "127.0.0.1", 2222, "root", str(tmp / "key"), "hgxkit-default-node1", "running", 8)
    monkeypatch.setattr(nodes, "status", lambda cluster: [node])
    return [["sim", "status", "--json", "--cluster", "default"]]


def _sim_images(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    from hgxkit.sim.standin import registry

    found = {"lmsysorg/sglang:dev-dspark": {"image": "sha256:" + "a" * 64, "digest": "sha256:" + "b" * 64}}
    monkeypatch.setattr(registry, "published", lambda: found)
    return [["sim", "image", "status", "--json"]]


def _doctor(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    # This machine read as a host (facts only, read-only): no GPUs here, so the verdict is "cannot", exit 1.
    inventory = tmp / "local.py"
    inventory.write_text('hosts = ["@local"]\n')
    monkeypatch.chdir(ROOT)
    return [["doctor", str(inventory), "--json"]]


def _bundle_verify(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    from test_bundle_manifest import FILES, make_bundle

    make_bundle(tmp / "bundle", FILES)
    return [["bundle", "verify", str(tmp / "bundle"), "--json"], ["bundle", "verify", str(tmp / "none"), "--json"]]


def _bundle_create(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    # The assembly itself needs the repositories, a registry and the Hub (bench/bundle.py runs it on the sim);
    # here it is a hand-made bundle, so the summary's shape is what is checked.
    from test_bundle_manifest import FILES, make_bundle

    from hgxkit.bundle import create

    def fake_create(judged: object, recipe: Path, out: Path, sources: object, key_home: Path, log: object) -> dict:
        doc = make_bundle(out, FILES)
        return {**doc, "recipe": {"name": "marlin", "file": "recipe.yaml", "sha256": "0" * 64}}

    monkeypatch.setattr(create, "create", fake_create)
    return [["bundle", "create", "--recipe", MARLIN, "-o", str(tmp / "made"), "--json"]]


# Command path -> the argv lists that exercise its --json output (each is run and validated).
INVOCATIONS: dict[tuple[str, ...], Invocation] = {
    ("recipe", "check"): lambda tmp, mp: [
        ["recipe", "check", MARLIN, "--json"],
        ["recipe", "check", MARLIN, "--gpus", "6", "--json"],
    ],
    ("recipe", "diff"): lambda tmp, mp: [
        ["recipe", "diff", MARLIN, FLASHINFER, "--json"],
        ["recipe", "diff", MARLIN, MARLIN, "--json"],
    ],
    ("recipe", "import"): lambda tmp, mp: [
        ["recipe", "import", str(ROOT / "tests/fixtures/forum-dspark-h200.txt"), "--json"]
    ],
    ("recipe", "show"): lambda tmp, mp: [["recipe", "show", path, "--json"] for path in (MARLIN, FLASHINFER)],
    ("results", "ls"): lambda tmp, mp: [[*_results(tmp, mp), "ls", "--json"]],
    ("results", "show"): lambda tmp, mp: [[*_results(tmp, mp), "show", "marlin", "--json"]],
    ("results", "compare"): lambda tmp, mp: [
        [*_results(tmp, mp), "compare", "marlin", "flashinfer", "--json"],
        [*_results(tmp, mp), "compare", "marlin", "flashinfer", "--json", "--slo", "ttft_p99<=2000,tpot<=50"],
        [*_results(tmp, mp), "compare", "marlin", "--reference", "--json"],
    ],
    ("sim", "status"): _sim_nodes,
    ("doctor",): _doctor,
    ("sim", "image", "status"): _sim_images,
    ("bundle", "verify"): _bundle_verify,
    ("bundle", "create"): _bundle_create,
}


def _tree() -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    return list(walk(build_parser()))


def _json_commands() -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    return [(path, p) for path, p in _tree() if "--json" in p._option_string_actions]


def test_every_option_argument_and_sub_command_has_help() -> None:
    missing = []
    for path, parser in _tree():
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction | argparse._VersionAction):
                continue
            if isinstance(action, argparse._SubParsersAction):
                helped = {c.dest for c in action._choices_actions if c.help}
                missing += [f"hgxkit {' '.join((*path, name))}" for name in action.choices if name not in helped]
            elif not action.help or action.help == argparse.SUPPRESS:
                missing.append(f"hgxkit {' '.join(path)} {'/'.join(action.option_strings) or action.dest}")
    assert missing == []


def test_group_options_are_accepted_after_the_sub_command_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for path, parser in _tree():
        own = [a for a in parser._actions if a.option_strings and not isinstance(a, argparse._HelpAction)]
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        for group in subs:
            for name, sub in group.choices.items():
                for action in own:
                    if isinstance(action, argparse._VersionAction):
                        continue
                    assert set(action.option_strings) & set(sub._option_string_actions), (
                        f"hgxkit {' '.join((*path, name))} does not accept {action.option_strings[0]}"
                    )
    make_run(tmp_path, "node1", "20261130T120000Z", "marlin")
    for argv in (
        ["results", "ls", "--root", str(tmp_path)],
        ["results", "--root", str(tmp_path), "ls"],
        ["results", "--root", "elsewhere", "ls", "--root", str(tmp_path)],
    ):
        assert main(argv) == 0
        assert capsys.readouterr().out == "node1/20261130T120000Z_marlin  marlin  2 cells  SIMULATED\n", argv
    assert main(["results", "ls", "--root", str(tmp_path / "none")]) == 0
    assert capsys.readouterr().out.startswith("no runs under")


def _registry() -> Registry:
    # The results schemas refer to each other by $id (show -> summary, fingerprint; compare -> summary).
    return Registry().with_resources(
        (load_schema(name)["$id"], Resource.from_contents(load_schema(name))) for name in SCHEMA_NAMES
    )


def test_every_json_output_has_a_schema_version_and_validates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    found = _json_commands()
    assert {path for path, _ in found} >= {("recipe", "check"), ("results", "compare"), ("sim", "status")}
    unknown = [" ".join(path) for path, _ in found if path not in INVOCATIONS]
    assert unknown == [], f"commands with --json but no invocation in INVOCATIONS: {unknown}"
    for path, parser in found:
        declared: Any = parser.get_default("json_schema")
        assert callable(declared), f"hgxkit {' '.join(path)}: --json without a schema (use cliargs.json_option)"
        schema = declared()
        Draft202012Validator.check_schema(schema)
        validator = Draft202012Validator(schema, registry=_registry())
        for argv in INVOCATIONS[path](tmp_path, monkeypatch):
            code = main(argv)
            out = capsys.readouterr().out
            assert code in (0, 1), (argv, code)
            document = json.loads(out)
            assert isinstance(document, dict) and isinstance(document.get("schema_version"), int), argv
            errors = [
                f"{'/'.join(map(str, e.absolute_path))}: {e.message[:160]}" for e in validator.iter_errors(document)
            ]
            assert errors == [], argv


def test_a_json_output_that_breaks_its_schema_is_caught() -> None:
    # The check above can fail: a recipe show document with an extra `server.defaults` (not in the schema) is refused.
    from hgxkit.cli.recipe import load_schema as recipe_schema
    from hgxkit.recipe.read import load_recipe
    from hgxkit.recipe.show import recipe_json

    document = recipe_json(load_recipe(MARLIN))
    validator = Draft202012Validator(recipe_schema("recipe"))
    assert list(validator.iter_errors(document)) == []
    document["server"]["defaults"] = {"host": "0.0.0.0", "port": 30000}
    assert [e.message for e in validator.iter_errors(document)] == [
        "Additional properties are not allowed ('defaults' was unexpected)"
    ]


def test_every_schema_file_ships_in_the_wheel() -> None:
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    files = sorted((ROOT / "hgxkit").rglob("schemas/*.schema.json"))
    assert len(files) >= 8
    for path in files:
        package_dir = path.parent.parent
        package = ".".join(package_dir.relative_to(ROOT).parts)
        relative = path.relative_to(package_dir).as_posix()
        assert any(fnmatch(relative, glob) for glob in package_data.get(package, [])), f"{relative} of {package}"


def test_a_command_imports_its_own_group_alone_and_help_lists_every_group() -> None:
    """`hgxkit sim ssh` (run in loops by the end-to-end tests and the inventory) pays for its own subsystem only."""
    import subprocess
    import sys

    code = (
        "import sys; from hgxkit.cli import build_parser; build_parser('sim'); "
        "print(sorted(m for m in ('numpy', 'jsonschema', 'hgxkit.cli.recipe', 'hgxkit.cli.results') if m in sys.modules))"
    )
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert shown == "[]\n"
    groups = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert list(groups.choices) == ["recipe", "sim", "results", "doctor", "verify", "bundle"]
    with pytest.raises(SystemExit) as exited:
        main(["sim", "ssh"])  # the group alone still parses and refuses as the whole tree does
    assert exited.value.code == 2
