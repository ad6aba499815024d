"""The serve role's plan-time decision per group (hgxkit.serving.rollout.group_actions): keep, start, replace
with the settings that differ, remove; pure, from the node's containers and spec records and the recipe."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hgxkit.recipe.read import load_recipe
from hgxkit.serving.containers import ContainerSpec, container_specs
from hgxkit.serving.rollout import (
    GroupAction,
    RunningContainer,
    group_actions,
    spec_difference,
    spec_record,
    split_gaps,
)

IMAGE = "lmsysorg/sglang@sha256:" + "0" * 64


def specs(name: str) -> list[ContainerSpec]:
    return container_specs(
        load_recipe(f"recipes/{name}.yaml"), total_gpus=8, bind_address="127.0.0.1", api_key=None, image=IMAGE
    )


def running(spec: ContainerSpec, *, up: bool = True) -> RunningContainer:
    return RunningContainer(spec.name, f"id-{spec.name}", spec.spec_hash, spec.group, up, port=spec.port)


@pytest.fixture
def marlin() -> list[ContainerSpec]:
    return specs("deepseek-v4-flash-dspark-marlin")


def test_a_changed_flag_is_named_per_group(marlin: list[ContainerSpec]) -> None:
    flashinfer = specs("deepseek-v4-flash-dspark-flashinfer")
    records = {s.name: spec_record(s, "sglang") for s in marlin}
    actions = group_actions([running(s) for s in marlin], flashinfer, records, "sglang")
    assert [a.line() for a in actions] == [
        f"group {s.group}: replace container {s.name} (--moe-runner-backend marlin -> flashinfer_mxfp4)" for s in marlin
    ]
    assert all(a.old is not None and a.old.container_id == f"id-{a.name}" for a in actions)


def test_unchanged_missing_stopped_and_unrecorded_groups(marlin: list[ContainerSpec]) -> None:
    first, second = marlin[0], marlin[1]
    stale = RunningContainer("old-recipe-0", "id-old", "x", 0, True)
    current = [running(first), running(second, up=False), stale]
    actions = {a.name: a for a in group_actions(current, marlin, {}, "sglang")}
    assert (
        actions["old-recipe-0"].line()
        == "group 0: remove container old-recipe-0 (its group is no longer in the recipe)"
    )
    assert actions[first.name].action == "keep"
    assert actions[second.name].line() == f"group {second.group}: replace container {second.name} (it is not running)"
    assert all(actions[s.name].action == "start" for s in marlin[2:])
    changed = RunningContainer(first.name, "id", "other-hash", first.group, True)
    (action, *_) = group_actions([changed], marlin, {}, "sglang")
    assert action.why == "its spec changed; no record of what it was started with"


def test_the_difference_names_image_flags_and_docker_options(marlin: list[ContainerSpec]) -> None:
    old = spec_record(marlin[0], "sglang")
    assert "--label" not in " ".join(old["options"])  # hgxkit's labels only repeat the hash
    new = {
        **old,
        "image": "other@sha256:1",
        "options": [*old["options"], "-e X=1"],
        "server": [*old["server"], "--made-up-switch"],
    }
    assert spec_difference(old, new) == (
        f"image {IMAGE} -> other@sha256:1; --made-up-switch (absent) -> on; option (absent) -> -e X=1"
    )
    assert spec_difference(old, old) == ""


def test_the_difference_reads_each_kinds_command_and_keeps_unknown_kinds_whole() -> None:
    # vLLM's image has the server as its entrypoint: a bare first word is the model, not a program.
    assert spec_difference({"kind": "vllm", "server": ["org/m"]}, {"kind": "vllm", "server": ["org/n"]}) == (
        "--model org/m -> org/n"
    )
    launch = ["python3", "-m", "sglang.launch_server", "--tp", "8"]
    serve = ["sglang", "--tp", "8"]
    assert spec_difference({"kind": "sglang", "server": launch}, {"kind": "sglang", "server": serve}) == (
        "(program) python3 -m sglang.launch_server -> sglang"
    )
    # A kind hgxkit does not know: the command is compared as one setting.
    assert spec_difference({"kind": "other", "server": ["a", "b"]}, {"kind": "other", "server": []}) == (
        "a b on -> (absent)"
    )


def test_each_action_carries_its_container_spec_and_group(marlin: list[ContainerSpec]) -> None:
    first = marlin[0]
    stale = RunningContainer("old-recipe-0", "id-old", "x", 0, True)
    actions = {a.name: a for a in group_actions([running(first), stale], marlin, {}, "sglang")}
    assert actions[first.name] == GroupAction("keep", first.name, first.group, spec=first, old=running(first))
    assert actions["old-recipe-0"].old == stale
    assert spec_record(first, "sglang")["options"][:2] == ["-d", f"--name {first.name}"]
    assert GroupAction("remove", "x", None, "why").line() == "no group: remove container x (why)"


def test_a_changed_hash_with_an_identical_record_says_only_that_the_spec_changed(marlin: list[ContainerSpec]) -> None:
    first = marlin[0]
    changed = RunningContainer(first.name, "id", "other-hash", first.group, True)
    (action,) = group_actions([changed], marlin[:1], {first.name: spec_record(first, "sglang")}, "sglang")
    assert action.why == "its spec changed"


SPLIT = {0: "prefill", 1: "decode"}


def pd_specs(recipe: str = "tests/fixtures/pd/dspark-pd-one-node.yaml") -> list[ContainerSpec]:
    return container_specs(load_recipe(recipe), total_gpus=8, bind_address="127.0.0.1", api_key=None, image=IMAGE)


def test_replacing_a_sides_only_serving_group_is_a_gap_named_by_group_and_side() -> None:
    old, new = pd_specs(), pd_specs("tests/fixtures/pd/dspark-pd-one-node-decode-changed.yaml")
    actions = group_actions([running(s) for s in old], new, {}, "sglang")
    assert [a.action for a in actions] == ["keep", "replace"]
    (gap,) = split_gaps(actions, SPLIT)
    assert (gap.group, gap.name, gap.side) == (1, "deepseek-v4-flash-pd-1", "decode")
    assert gap.problem().code == "pd-gap" and "answers 502/503 until the new one is healthy" in gap.line()
    # the prefill changed too (a new image): each side's only group, each a gap, in the rollout's group order
    both = group_actions([running(s) for s in old], [replace(s, spec_hash="new") for s in old], {}, "sglang")
    assert [(g.group, g.side) for g in split_gaps(both, SPLIT)] == [(0, "prefill"), (1, "decode")]


def test_a_second_group_of_the_side_serving_meanwhile_is_no_gap() -> None:
    def act(kind: str, group: int, up: bool = True) -> GroupAction:
        old = RunningContainer(f"m-{group}", f"id{group}", "h", group, up) if kind != "start" else None
        return GroupAction(kind, f"m-{group}", group, old=old)  # type: ignore[arg-type]

    sides = {0: "prefill", 1: "decode", 2: "decode"}
    # two decodes replaced one at a time: the other serves during each (the first is healthy before the second)
    assert split_gaps([act("keep", 0), act("replace", 1), act("replace", 2)], sides) == []
    # the other decode is stopped: replacing the running one leaves none
    assert [g.group for g in split_gaps([act("keep", 0), act("replace", 1), act("keep", 2, up=False)], sides)] == [1]
    # a stopped group's replace loses nothing; a group started earlier in the order serves during a later replace
    assert split_gaps([act("keep", 0), act("replace", 1, up=False)], SPLIT) == []
    assert split_gaps([act("keep", 0), act("start", 1), act("replace", 2)], sides) == []
    # a decode kept running serves while the other is replaced; one being removed does not
    assert split_gaps([act("keep", 0), act("keep", 1), act("replace", 2)], sides) == []
    assert [g.group for g in split_gaps([act("keep", 0), act("remove", 2), act("replace", 1)], sides)] == [1]
    # groups that serve both phases are no side: no gap whatever is replaced, alone or beside another
    assert split_gaps([act("replace", 0), act("replace", 1)], {}) == []
    assert split_gaps([act("replace", 0)], {}) == []
    assert split_gaps([act("keep", 0), act("replace", 2)], {0: "prefill", 1: "decode"}) == []
