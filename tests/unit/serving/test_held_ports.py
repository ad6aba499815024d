"""A serving group's port held on its host: by whom, and what frees it (hgxkit.serving.rollout.held_ports)."""

from __future__ import annotations

from pathlib import Path

from hgxkit.problems import Problem
from hgxkit.recipe.read import load_recipe
from hgxkit.serving.containers import container_specs
from hgxkit.serving.rollout import RunningContainer, held_ports

ROOT = Path(__file__).resolve().parents[3]
SPECS = container_specs(
    load_recipe(ROOT / "recipes" / "deepseek-v4-flash-dspark-marlin.yaml"),
    total_gpus=8,
    bind_address="127.0.0.1",
    api_key=None,
    image="lmsysorg/sglang@sha256:" + "0" * 64,
)
PORT = SPECS[0].port


def running(name: str, port: int | None) -> RunningContainer:
    return RunningContainer(name, "id", "hash", None, True, port=port)


def test_an_earlier_deploy_s_router_on_a_group_s_port_is_named_with_the_way_out() -> None:
    assert held_ports(SPECS[:1], [], [], {PORT}, [running("old-router", PORT)]) == [
        Problem(
            "port",
            f"port {PORT} is in use on the host by hgxkit's router old-router of an earlier deploy",
            "remove it (`docker rm -f old-router`), or move the groups (groups.port_base)",
        )
    ]


def test_a_port_something_else_holds_is_refused_without_naming_a_router() -> None:
    assert held_ports(SPECS[:1], [], [], {PORT}, [running("old-router", PORT + 100)]) == [
        Problem("port", f"port {PORT} is in use on the host", "stop what listens there or change port_base")
    ]


def test_a_port_freed_by_the_rollout_or_held_by_the_group_itself_is_no_problem() -> None:
    assert held_ports(SPECS[:1], [], [running("gone", PORT)], {PORT}, []) == []
    assert held_ports(SPECS[:1], [running(SPECS[0].name, PORT)], [], {PORT}, []) == []
    assert held_ports(SPECS, [], [], set(), [running("old-router", PORT)]) == []
