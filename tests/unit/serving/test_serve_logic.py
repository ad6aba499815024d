"""Serving decisions: container specs, spec hashes, rollout plans, exposure policy, HiCache host RAM."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from hgxkit.recipe.exposure import exposure_problems
from hgxkit.recipe.read import load_recipe
from hgxkit.recipe.spec import ImageRef
from hgxkit.serving.containers import KEY_CONFIG_IN_CONTAINER, ApiKeyFiles, container_specs
from hgxkit.serving.facts import ListeningPorts, parse_inspected
from hgxkit.serving.policy import hicache_need, memory_problems
from hgxkit.serving.rollout import RunningContainer, plan_rollout

ROOT = Path(__file__).resolve().parents[3]
MARLIN = load_recipe(ROOT / "recipes" / "deepseek-v4-flash-dspark-marlin.yaml")
FLASHINFER = load_recipe(ROOT / "recipes" / "deepseek-v4-flash-dspark-flashinfer.yaml")
IMAGE = "lmsysorg/sglang@sha256:" + "ab" * 32


def specs(recipe=MARLIN, **overrides):
    args = {"total_gpus": 8, "bind_address": "127.0.0.1", "api_key": None, "image": IMAGE} | overrides
    return container_specs(recipe, **args)


def test_specs_are_the_recipe_with_labels_loopback_ports_and_the_digest() -> None:
    group0, group1 = specs()
    assert (group0.name, group0.gpus, group0.port) == ("deepseek-v4-flash-0", [0, 1, 2, 3], 5000)
    argv = group1.argv
    assert argv[:2] == ["docker", "run"]
    assert argv[argv.index("-p") + 1] == "127.0.0.1:5001:30000"
    assert argv[argv.index("--gpus") + 1] == '"device=4,5,6,7"'
    assert IMAGE in argv and "lmsysorg/sglang:dev-dspark" not in argv
    assert f"hgxkit.spec={group1.spec_hash}" in argv and "hgxkit.group=1" in argv
    assert argv[argv.index(IMAGE) + 1 :][:2] == ["sglang", "serve"]


def test_spec_hash_changes_with_anything_that_changes_the_container() -> None:
    base = [s.spec_hash for s in specs()]
    assert [s.spec_hash for s in specs()] == base  # stable
    assert [s.spec_hash for s in specs(FLASHINFER)] != base
    assert [s.spec_hash for s in specs(image=IMAGE.replace("ab", "cd"))] != base
    assert [s.spec_hash for s in specs(bind_address="0.0.0.0")] != base


def test_api_key_reaches_sglang_in_a_mounted_config_file_never_on_a_command_line() -> None:
    keys = ApiKeyFiles.beside("/etc/hgxkit/serve/api-key")
    (group0, _) = specs(api_key=keys, bind_address="0.0.0.0")
    assert group0.argv[-2:] == ["--config", KEY_CONFIG_IN_CONTAINER]
    assert f"/etc/hgxkit/serve/api-key.yaml:{KEY_CONFIG_IN_CONTAINER}:ro" in group0.argv
    assert "--api-key" not in group0.argv and "0.0.0.0:5000:30000" in group0.argv


def test_recipe_secrets_reach_the_container_only_through_root_only_files() -> None:
    text = (
        (ROOT / "recipes" / "deepseek-v4-flash-dspark-marlin.yaml")
        .read_text()
        .replace("  - --enable-metrics\n", "  - --enable-metrics\n  - --api-key '{{env:SGLANG_API_KEY}}'\n")
    )
    from hgxkit.recipe.read import parse_recipe_text

    recipe = parse_recipe_text(text)
    plain = container_specs(recipe, total_gpus=8, bind_address="127.0.0.1", api_key=None, image=IMAGE)
    filled = container_specs(
        recipe,
        total_gpus=8,
        bind_address="127.0.0.1",
        api_key=None,
        image=IMAGE,
        environ={"SGLANG_API_KEY": "s3cret-$HOME"},
    )
    assert [s.spec_hash for s in plain] == [s.spec_hash for s in filled]  # the secret is not in the hash
    assert "${SGLANG_API_KEY}" in filled[0].shell() and "s3cret" not in filled[0].shell()
    command = str(filled[0].command())
    # SGLang reads no API-key variable: the key is in a YAML file mounted read-only, never on a command line.
    assert "s3cret" not in command and "--api-key" not in command
    folder = "/var/lib/hgxkit/serve/replace/deepseek-v4-flash-0"
    assert f"{folder}/recipe-api-key.yaml:/run/hgxkit/recipe-api-key.yaml:ro" in filled[0].final_argv()
    assert filled[0].final_argv()[-2:] == ["--config", "/run/hgxkit/recipe-api-key.yaml"]
    assert filled[0].secret_files() == {"recipe-api-key.yaml": 'api-key: "s3cret-$HOME"\n'}


def test_rollout_keeps_unchanged_replaces_changed_removes_stale() -> None:
    desired = specs()
    running = [
        RunningContainer("deepseek-v4-flash-0", "id0", desired[0].spec_hash, 0, True),
        RunningContainer("deepseek-v4-flash-1", "id1", "old", 1, True),
        RunningContainer("deepseek-v4-flash-2", "id2", "old", 2, True),
    ]
    rollout = plan_rollout(running, desired)
    assert [c.name for c in rollout.keep] == ["deepseek-v4-flash-0"]
    assert [s.name for s in rollout.replace] == ["deepseek-v4-flash-1"]
    assert [c.name for c in rollout.remove] == ["deepseek-v4-flash-2"]
    same = plan_rollout([replace(running[0]), replace(running[1], spec_hash=desired[1].spec_hash)], desired)
    assert not same.changes
    stopped = plan_rollout(
        [replace(running[0], running=False), replace(running[1], spec_hash=desired[1].spec_hash)], desired
    )
    assert [s.name for s in stopped.replace] == ["deepseek-v4-flash-0"]


def test_exposure_policy() -> None:
    assert exposure_problems("127.0.0.1", None, False) == []
    (problem,) = exposure_problems("0.0.0.0", None, False)
    assert "bind_address 0.0.0.0 publishes the API beyond this host without an API key" in str(problem)
    assert exposure_problems("0.0.0.0", "auto", False) == []
    assert exposure_problems("0.0.0.0", None, True) == []
    (pasted,) = exposure_problems("127.0.0.1", "sk-pasted-key-value", False)
    assert pasted.code == "api_key" and "sk-pasted-key-value" not in str(pasted)
    assert "set api_key: auto" in str(pasted)


def test_hicache_host_ram_of_the_post_exceeds_a_2_tib_node() -> None:
    need = hicache_need(MARLIN, groups=2, gpu_memory_gb=143771 / 1024, weights_gb=160)
    assert (need.ranks, need.groups) == (4, 2)
    assert need.per_rank_gb == pytest.approx(4 * (143771 / 1024 * 0.88 - 40 - 4))
    (problem,) = memory_problems(need, 2048 * 1024**3, 64)
    assert f"HiCache host pools need {need.total_gb:.0f} GB" in str(problem)
    assert memory_problems(need, 3072 * 1024**3, 64) == []


def test_hicache_size_overrides_the_ratio() -> None:
    text = (
        (ROOT / "recipes" / "deepseek-v4-flash-dspark-marlin.yaml")
        .read_text()
        .replace("--hicache-size 0", "--hicache-size 100")
    )
    from hgxkit.recipe.read import parse_recipe_text

    need = hicache_need(parse_recipe_text(text), groups=2, gpu_memory_gb=140, weights_gb=160)
    assert need.total_gb == 100 * 4 * 2


def test_by_digest_drops_the_moving_tag() -> None:
    digest0, digest1 = "sha256:" + "0" * 64, "sha256:" + "1" * 64
    assert ImageRef("lmsysorg/sglang:dev-dspark").at_digest(digest0) == "lmsysorg/sglang@" + digest0
    assert ImageRef("localhost:5000/x:1").at_digest(digest1) == "localhost:5000/x@" + digest1


def test_managed_containers_from_docker_inspect() -> None:
    inspected = {
        "id": "abc",
        "name": "/deepseek-v4-flash-1",
        "labels": {"hgxkit.serve": "1", "hgxkit.group": "1", "hgxkit.spec": "h1"},
        "running": True,
        "started": "2026-11-30T12:00:00Z",
        "restarts": 0,
    }
    (container,) = parse_inspected([json.dumps(inspected)])
    assert container == RunningContainer("deepseek-v4-flash-1", "abc", "h1", 1, True, "2026-11-30T12:00:00Z")
    assert parse_inspected([]) == [] and parse_inspected(["not json"]) == []
    labelled = {**inspected, "labels": {**inspected["labels"], "hgxkit.port": "8000"}}
    assert parse_inspected([json.dumps(labelled)])[0].port == 8000  # what a removed container frees
    ports = ListeningPorts().process(["LISTEN 0 4096 127.0.0.1:5000 0.0.0.0:*", "LISTEN 0 128 [::]:22 [::]:*"])
    assert ports == {5000, 22}


def test_one_docker_listing_answers_managed_containers_and_container_names() -> None:
    from hgxkit.serving.facts import ContainerNames, ManagedContainers, RouterContainers, all_containers

    # ps, id, name, state, then the labels serve, router, spec, group, port (hgxkit.serving.facts._PS_LABELS)
    output = [
        "ps\tc1\tm-0\trunning\t1\t\th0\t0\t30000",
        "ps\tc4\tm-1\texited\t1\t\th1\t1\t30001",
        "ps\tc2\tsglang-router\trunning\t\t1\thr\t\t",
        "ps\tc3\tsomeone-else\trunning\t\t\t\t\t",
    ]
    assert ManagedContainers().command().get_raw_value() == ContainerNames().command().get_raw_value()
    assert ManagedContainers().process(output) == [
        RunningContainer("m-0", "c1", "h0", 0, True, None, 30000),
        RunningContainer("m-1", "c4", "h1", 1, False, None, 30001),
    ]
    assert RouterContainers().process(output) == [RunningContainer("sglang-router", "c2", "hr", None, True)]
    assert ContainerNames().process(output) == {"m-0": True, "m-1": True, "sglang-router": True, "someone-else": False}
    assert ContainerNames().process([""]) == {} and ManagedContainers().process([""]) == []
    assert RouterContainers().process(output[:1]) == []
    command = all_containers().get_raw_value()
    assert command.count("docker ") == 1 and "docker ps -a --no-trunc" in command  # one docker call, no inspect


@pytest.mark.parametrize(
    ("state", "running"),
    [("running", True), ("paused", True), ("restarting", True), ("exited", False), ("created", False), ("dead", False)],
)
def test_listed_state_is_running_exactly_when_docker_inspect_says_state_running(state: str, running: bool) -> None:
    from hgxkit.serving.facts import parse_listed

    (container,) = parse_listed([f"ps\tc1\tm-0\t{state}\t1\t\th0\t0\t"], "hgxkit.serve")
    assert container.running is running


def test_the_engine_api_listing_reads_as_the_cli_one_and_its_command_lines_never_leave_the_node(tmp_path) -> None:
    import subprocess

    from hgxkit.serving.facts import _NO_COMMAND, ContainerNames, ManagedContainers, RouterContainers, listed_rows

    secret = json.dumps('sglang serve --api-key s3cr"et\\ --x "y\\"" <\n')[1:-1]  # as dockerd escapes it
    api = [
        {
            "Id": "c1",
            "Names": ["/m-0"],
            "State": "running",
            "Command": "",
            "Labels": {"hgxkit.serve": "1", "hgxkit.spec": "h0", "hgxkit.group": "0", "hgxkit.port": "30000", "x": "y"},
        },
        {
            "Id": "c4",
            "Names": ["/m-1", "/other/alias"],
            "State": "exited",
            "Command": "",
            "Labels": {"hgxkit.serve": "1", "hgxkit.spec": "h1", "hgxkit.group": "1", "hgxkit.port": "30001"},
        },
        {
            "Id": "c2",
            "Names": ["/other/alias2", "/sglang-router"],
            "State": "running",
            "Command": "",
            "Labels": {"hgxkit.router": "1", "hgxkit.spec": "hr"},
        },
        {"Id": "c3", "Names": ["/someone-else"], "State": "running", "Command": "", "Labels": None},
    ]
    # What dockerd sends: compact JSON, each command line a JSON string with escapes; sed blanks them all.
    raw = json.dumps(api, separators=(",", ":")).replace('"Command":""', '"Command":"' + secret + '"')
    assert raw.count("s3cr") == 4
    blanked = subprocess.run(
        ["sed", "-E", _NO_COMMAND], input="api\t" + raw + "\n", capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert "s3cr" not in blanked[0] and "api-key" not in blanked[0] and json.loads(blanked[0][4:]) == api
    cli = [
        "ps\tc1\tm-0\trunning\t1\t\th0\t0\t30000",
        "ps\tc4\tm-1\texited\t1\t\th1\t1\t30001",
        "ps\tc2\tsglang-router\trunning\t\t1\thr\t\t",
        "ps\tc3\tsomeone-else\trunning\t\t\t\t\t",
    ]
    assert listed_rows(blanked) == listed_rows(cli)
    for fact in (ManagedContainers(), RouterContainers(), ContainerNames()):
        assert fact.process(blanked) == fact.process(cli)
    assert listed_rows(["api\tnot json", "api\t{}", "api\t[1, null]"]) == []


def test_the_listing_falls_back_to_the_docker_cli_without_curl_or_with_another_daemon(tmp_path) -> None:
    import os
    import subprocess

    from hgxkit.serving.facts import all_containers

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").write_text("#!/bin/sh\nprintf 'ps\\tc9\\tfrom-cli\\trunning\\t1\\t\\t\\t\\t\\n'\n")
    (bin_dir / "docker").chmod(0o755)
    for tool in ("sed", "sh"):  # the shell and sed from this machine, no curl on the PATH
        (bin_dir / tool).symlink_to(
            subprocess.run(
                ["sh", "-c", f"command -v {tool}"], capture_output=True, text=True, check=True
            ).stdout.strip()
        )
    command = all_containers().get_raw_value()
    no_curl = {"PATH": str(bin_dir)}
    # This machine's curl and socket are on the PATH, but another daemon is named: the CLI (which honours it) asks.
    another_daemon = {"PATH": str(bin_dir) + ":" + os.environ["PATH"], "DOCKER_HOST": "tcp://x"}
    for env in (no_curl, another_daemon):
        out = subprocess.run(["sh", "-c", command], capture_output=True, text=True, env=env, check=True).stdout
        assert out == "ps\tc9\tfrom-cli\trunning\t1\t\t\t\t\n"
