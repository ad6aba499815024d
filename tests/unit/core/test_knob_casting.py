"""Typed knobs: what each type accepts from the inventory or `--data`, the one line a bad value or an unknown
knob stops the run with, and a role's class read from a host that sets none, some or bad values."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from pyinfra.api.exceptions import DeployError

from hgxkit.knobs import cast_knob, refuse_unknown_knobs
from roles import check_knob_names
from roles.nvidia_driver.defaults import DEFAULTS as DRIVER_DEFAULTS
from roles.nvidia_driver.defaults import NvidiaDriverKnobs
from roles.preflight.defaults import PreflightKnobs


def _host(**data: object) -> SimpleNamespace:
    return SimpleNamespace(name="node1", data=data)


@pytest.mark.parametrize(
    ("kind", "given", "expected"),
    [
        (bool, "true", True),
        (bool, "YES", True),
        (bool, "1", True),
        (bool, "False", False),
        (bool, "no", False),
        (bool, 0, False),
        (bool, True, True),
        (int, "42", 42),
        (int, 42, 42),
        (int, 7.0, 7),
        (float, "2.5", 2.5),
        (float, 3, 3),
        (str, "580", "580"),
        (str, 580, "580"),  # pyinfra parses `--data nvidia_driver_branch=580` to an int
        (int | None, "none", None),
        (int | None, "", None),
        (int | None, None, None),
        (int | None, "8", 8),
        (str | None, "None", None),
        (list[str], '["a", "b"]', ["a", "b"]),
        (list[str], ("a",), ["a"]),
        (list[int], "[79, 48]", [79, 48]),
        (dict[str, int], '{"a": 1}', {"a": 1}),
        (str | list[str] | None, "gpu_nodes", "gpu_nodes"),
        (str | list[str] | None, ["h1", "h2"], ["h1", "h2"]),
        (Any, {"x": [1]}, {"x": [1]}),
    ],
)
def test_each_type_casts_what_the_inventory_or_data_gives(kind: Any, given: object, expected: object) -> None:
    assert cast_knob("k", given, kind) == expected


@pytest.mark.parametrize(
    ("kind", "given", "line"),
    [
        (bool, "maybe", "knob k: 'maybe' is not a boolean (true or false)"),
        (bool, 2, "knob k: 2 is not a boolean (true or false)"),
        (int, "ten", "knob k: 'ten' is not an integer"),
        (int, True, "knob k: True is not an integer"),
        (int, 2.5, "knob k: 2.5 is not an integer"),
        (float, "fast", "knob k: 'fast' is not a number"),
        (str, ["a"], "knob k: ['a'] is not a string"),
        (int | None, "x", "knob k: 'x' is not an integer or none"),
        (list[str], "a,b", 'knob k: \'a,b\' is not a list (JSON: ["a", "b"])'),
        (list[int], '["x"]', "knob k: '[\"x\"]' is not an integer"),
        (dict[str, int], "[1]", "knob k: '[1]' is not a mapping (JSON: {\"a\": 1})"),
    ],
)
def test_a_bad_value_stops_the_run_with_one_line_naming_knob_value_and_type(
    kind: Any, given: object, line: str
) -> None:
    with pytest.raises(DeployError) as stopped:
        cast_knob("k", given, kind)
    assert str(stopped.value) == line


def test_allow_reboot_maybe_is_one_line_naming_the_knob() -> None:
    with pytest.raises(DeployError) as stopped:
        NvidiaDriverKnobs.from_host(_host(allow_reboot="maybe"))
    assert str(stopped.value) == "knob allow_reboot: 'maybe' is not a boolean (true or false)"


def test_a_role_reads_its_defaults_the_data_cast_and_none_where_its_type_allows_it() -> None:
    assert NvidiaDriverKnobs.from_host(_host()) == NvidiaDriverKnobs()
    assert NvidiaDriverKnobs.defaults() == DRIVER_DEFAULTS
    knobs = NvidiaDriverKnobs.from_host(_host(allow_reboot="yes", nvidia_reboot_timeout="60", expected_gpu_count="4"))
    assert (knobs.allow_reboot, knobs.nvidia_reboot_timeout, knobs.expected_gpu_count) == (True, 60, 4)
    # None: the default for a knob that cannot be None; "skip" for one that can (inventories/sim.py's cgroups)
    preflight = PreflightKnobs.from_host(_host(models_dir=None, required_cgroup_version=None))
    assert preflight.models_dir == "/data/models" and preflight.required_cgroup_version is None
    assert PreflightKnobs.from_host(_host(expected_gpu_device_ids='["2335", "2336"]')).expected_gpu_device_ids == [
        "2335",
        "2336",
    ]


def test_a_misspelt_knob_stops_the_run_naming_it_and_the_closest_known_one() -> None:
    with pytest.raises(DeployError) as stopped:
        data = {"modles_dir": "/x"}
        check_knob_names(SimpleNamespace(name="node1", data=SimpleNamespace(dict=lambda: data, get=data.get)))
    assert str(stopped.value) == "unknown knob 'modles_dir' (did you mean models_dir?)"
    with pytest.raises(DeployError, match=r"^unknown knob 'zzz_qq' \(every knob is in roles/<role>/defaults.py"):
        refuse_unknown_knobs(["zzz_qq"], ["models_dir"])


def test_known_knobs_pyinfras_own_and_the_simulators_pass() -> None:
    given = {
        "models_dir": "/x",
        "allow_reboot": True,
        "ssh_hostname": "10.0.0.1",
        "ssh_strict_host_key_checking": "off",
        "_sudo": True,
        "_env": {},
        "docker_container_id": "abc",
        "hgxkit_simulated": True,
        "nvidia_driver_versions": ["580.95.05"],
        "verify": False,
        "allow_docker_options": ["--privileged"],
        "dcgm_exporter_image": "x",
        "router": True,
    }
    check_knob_names(SimpleNamespace(name="node1", data=SimpleNamespace(dict=lambda: given, get=given.get)))


def test_an_ill_typed_knob_of_a_role_the_deploy_runs_stops_it_before_any_role() -> None:
    """The deploys hand check_knob_names the knob classes of the roles they run: a bad value stops the run at
    the start, in one line naming the knob, not when the role that reads it gets there."""
    from roles.nvidia_driver.defaults import NvidiaDriverKnobs
    from roles.preflight.defaults import PreflightKnobs

    data = {"allow_reboot": "maybe"}
    host = SimpleNamespace(name="node1", data=SimpleNamespace(dict=lambda: data, get=data.get))
    check_knob_names(host, PreflightKnobs)  # preflight does not read it
    with pytest.raises(DeployError) as stopped:
        check_knob_names(host, PreflightKnobs, NvidiaDriverKnobs)
    assert str(stopped.value) == "knob allow_reboot: 'maybe' is not a boolean (true or false)"
