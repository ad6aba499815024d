"""The serve role's plan on a node (pyinfra's @fake connector): one operation per group, named by what it would
change, and nothing run while planning. The node serves the marlin recipe; the plan is for flashinfer."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from pyinfra.api import Config, Inventory, State
from pyinfra.api.connect import connect_all
from pyinfra.api.deploy import add_deploy
from pyinfra.api.exceptions import DeployError

from hgxkit.knobs import knob
from hgxkit.recipe.read import load_recipe
from hgxkit.serving.containers import container_specs
from hgxkit.serving.image import image_record, image_to_run
from hgxkit.serving.rollout import spec_record
from roles.serve import prefetch_image, serve

MARLIN = "recipes/deepseek-v4-flash-dspark-marlin.yaml"
FLASHINFER = "recipes/deepseek-v4-flash-dspark-flashinfer.yaml"
DIGEST = "sha256:" + "1" * 64
STATE = "/var/lib/hgxkit/serve"


def listed(s: Any) -> str:
    """The `docker ps` line of a running container made from spec `s`."""
    labels = [
        s.labels.get(k, "") for k in ("hgxkit.serve", "hgxkit.router", "hgxkit.spec", "hgxkit.group", "hgxkit.port")
    ]
    return "\t".join(["ps", f"id-{s.name}", s.name, "running", *labels])


def node_serving(recipe_path: str) -> dict[Any, Any]:
    """@fake responses of a brought-up node whose containers run `recipe_path` and left their spec records."""
    recipe = load_recipe(recipe_path)
    specs = container_specs(
        recipe, total_gpus=8, bind_address="127.0.0.1", api_key=None, image=image_to_run(recipe.image.reference, DIGEST)
    )
    responses: dict[Any, Any] = {
        re.compile(r"replace/[^/ ]+/spec\.json"): "",  # filled per container below
        "/proc/meminfo": "MemTotal:       4227858432 kB",
        # hgxkit.serving.facts.all_containers: ps, id, name, state, labels serve, router, spec, group, port
        "docker ps -a --no-trunc --format": [listed(s) for s in specs],
        f"{STATE}/image.json": image_record(recipe.image.reference, DIGEST).strip(),
    }
    records = {
        re.compile(re.escape(f"replace/{s.name}/spec.json")): json.dumps(spec_record(s, "sglang")) for s in specs
    }
    return {**records, **responses}


def plan(recipe_path: str, responses: dict[Any, Any], deploy: Any = serve, **knobs: Any) -> tuple[list[str], list[str]]:
    """Plan `deploy` for `recipe_path` on one @fake host (with `knobs`): the operations' names, and the commands
    run."""
    data = {
        **knobs,
        "fake_delay": 0,
        "fake_delay_jitter": 0,
        "fake_responses": responses,
        "recipe": recipe_path,
        "serve_total_gpus": 8,
        "serve_state_dir": STATE,
    }
    inventory = Inventory(([("@fake/h200-1", data)], {}))
    state = State(inventory=inventory, config=Config())
    connect_all(state)
    host = inventory.get_host("@fake/h200-1")
    assert knob(host, "serve_state_dir") == STATE
    add_deploy(state, deploy)
    names = [
        re.sub(r"^hgxkit serving(: image prefetch)? \| ", "", name)
        for op_hash in host.op_hash_order
        for name in state.get_op_meta(op_hash).names
    ]
    return names, [str(c) for c in host.connector.executed_commands]


def test_the_plan_names_each_group_and_the_flag_that_differs() -> None:
    names, commands = plan(FLASHINFER, node_serving(MARLIN))
    assert names == [
        "Check the GPUs and the model before deepseek-v4-flash-dspark-flashinfer's containers change",
        "group 0: replace container deepseek-v4-flash-0 (--moe-runner-backend marlin -> flashinfer_mxfp4)",
        "group 1: replace container deepseek-v4-flash-1 (--moe-runner-backend marlin -> flashinfer_mxfp4)",
    ]
    assert not [c for c in commands if re.search(r"docker (run|rm|pull)|systemd-run", c)]  # planning only reads


def test_an_unchanged_node_plans_no_operation() -> None:
    names, _ = plan(MARLIN, node_serving(MARLIN))
    assert names == []


def test_a_node_without_containers_starts_each_group_and_a_fresh_one_decides_after_the_pull() -> None:
    serving = node_serving(MARLIN)
    empty = {**serving, "docker ps -a --no-trunc --format": []}
    names, _ = plan(MARLIN, empty)
    assert names[1:] == ["group 0: start container deepseek-v4-flash-0", "group 1: start container deepseek-v4-flash-1"]
    fresh = {k: v for k, v in empty.items() if k != f"{STATE}/image.json"}
    names, _ = plan(MARLIN, fresh)
    assert names == ["Roll out deepseek-v4-flash-dspark-marlin group by group (decided after pulling the image)"]


def test_the_background_pull_is_an_operation_of_its_own() -> None:
    fresh = {"docker ps -a --no-trunc --format": []}
    names, commands = plan(MARLIN, fresh, prefetch_image)
    assert names == [
        "Upload the pull program (progress: bytes, rate, ETA)",
        "Start pulling lmsysorg/sglang:dev-dspark in the background (unit hgxkit-image-pull)",
    ]
    assert not [c for c in commands if re.search(r"docker pull|systemd-run", c)]  # planning only reads
    assert plan(MARLIN, node_serving(MARLIN), prefetch_image)[0] == []  # the node runs a recorded digest


def test_drift_the_docker_listing_shows_is_planned_back() -> None:
    """A container gone, one stopped and one whose spec label changed: each is found in the one `docker ps`."""
    serving = node_serving(MARLIN)
    listed_lines = serving["docker ps -a --no-trunc --format"]
    gone = {**serving, "docker ps -a --no-trunc --format": listed_lines[1:]}
    stopped = {
        **serving,
        "docker ps -a --no-trunc --format": [listed_lines[0].replace("\trunning\t", "\texited\t"), listed_lines[1]],
    }
    changed = {
        **serving,
        "docker ps -a --no-trunc --format": [
            listed_lines[0],
            re.sub(r"\t[0-9a-f]{16}\t1\t", "\t0123456789abcdef\t1\t", listed_lines[1]),
        ],
    }
    check = "Check the GPUs and the model before deepseek-v4-flash-dspark-marlin's containers change"
    assert plan(MARLIN, gone)[0] == [check, "group 0: start container deepseek-v4-flash-0"]
    assert plan(MARLIN, stopped)[0] == [check, "group 0: replace container deepseek-v4-flash-0 (it is not running)"]
    assert plan(MARLIN, changed)[0] == [check, "group 1: replace container deepseek-v4-flash-1 (its spec changed)"]
    paused = {
        **serving,
        "docker ps -a --no-trunc --format": [line.replace("\trunning\t", "\tpaused\t") for line in listed_lines],
    }
    assert plan(MARLIN, paused)[0] == []  # as `docker inspect` said: a paused container is running


def test_a_prefill_decode_split_without_the_router_is_refused_before_any_change() -> None:
    pd = "tests/fixtures/pd/dspark-pd-one-node.yaml"
    with pytest.raises(DeployError) as refused:
        plan(pd, {"/proc/meminfo": "MemTotal:       4227858432 kB"}, allow_docker_options=["--network"])
    assert "[pd-router]" in str(refused.value) and "--data router=true" in str(refused.value)
    names, _ = plan(
        pd, {"/proc/meminfo": "MemTotal:       4227858432 kB"}, allow_docker_options=["--network"], router=True
    )
    assert names and all("deepseek-v4-flash-pd-" in name or "image" in name.lower() for name in names), names


def test_a_keyed_vllm_split_is_refused_before_any_change_as_its_router_checks_no_key() -> None:
    memory = {"/proc/meminfo": "MemTotal:       4227858432 kB"}
    keyed = {"allow_docker_options": ["--network"], "router": True, "api_key": "auto"}
    with pytest.raises(DeployError) as refused:
        plan("tests/fixtures/pd/vllm-pd-one-node.yaml", memory, **keyed)
    assert "[pd-router-key]" in str(refused.value) and "checks no client's API key" in str(refused.value)
    names, _ = plan("tests/fixtures/pd/dspark-pd-one-node.yaml", memory, **keyed)  # sglang-router checks it
    assert names and all("deepseek-v4-flash-pd-" in name or "image" in name.lower() for name in names), names


def test_replacing_a_splits_only_decode_is_refused_by_name_unless_the_gap_is_accepted() -> None:
    pd, changed = (
        "tests/fixtures/pd/dspark-pd-one-node.yaml",
        "tests/fixtures/pd/dspark-pd-one-node-decode-changed.yaml",
    )
    split = {"allow_docker_options": ["--network"], "router": True}
    with pytest.raises(DeployError) as refused:
        plan(changed, node_serving(pd), **split)
    message = str(refused.value)
    assert "[pd-gap] group 1 (deepseek-v4-flash-pd-1) is the split's only serving decode group" in message, message
    assert "--data pd_accept_gap=true" in message and "no container was started or stopped" in message
    names, commands = plan(changed, node_serving(pd), pd_accept_gap=True, **split)
    assert names[1:] == [
        "group 1: replace container deepseek-v4-flash-pd-1 (--max-running-requests (absent) -> 32); "
        "no decode serves meanwhile (pd_accept_gap)"
    ]
    assert not [c for c in commands if re.search(r"docker (run|rm|pull)|systemd-run", c)]  # planning only reads
    assert plan(pd, node_serving(pd), **split)[0] == []  # unchanged: no gap, nothing planned
