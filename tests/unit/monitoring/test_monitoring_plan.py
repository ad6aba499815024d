"""The monitoring role's plan on a node (pyinfra's @fake connector): what it would do on a fresh node, nothing when
off, the exporter left alone when it runs its spec, and exposure refused before anything changes."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from pyinfra.api import Config, Inventory, State
from pyinfra.api.connect import connect_all
from pyinfra.api.deploy import add_deploy
from pyinfra.api.exceptions import DeployError

from hgxkit.monitoring.dcgm import exporter_spec
from roles.monitoring import monitoring
from roles.monitoring.defaults import DEFAULTS

MARLIN = "recipes/deepseek-v4-flash-dspark-marlin.yaml"
FRESH = [
    "Monitoring directory",
    "DCGM exporter counters",
    "Start the DCGM exporter on 127.0.0.1:9400",
    "Node exporter listen address",
    "Refresh apt lists for prometheus-node-exporter",
    "Debian's Prometheus node exporter",
    "Node exporter running",
    "Node exporter takes its listen address",
    "Prometheus listen address and retention",
    "Prometheus scrape configuration",
    "Prometheus alert rules",
    "Refresh apt lists for prometheus",
    "Debian's Prometheus",
    "promtool checks the configuration and rules",
    "Prometheus running",
    "Prometheus takes the new configuration",
    "Dashboards directory",
    "Dashboard hgxkit-gpu.json",
    "Dashboard hgxkit-serving-sglang.json",
    "Dashboard hgxkit-serving-vllm.json",
]


def plan(responses: dict[Any, Any] | None = None, **knobs: Any) -> tuple[list[str], list[str]]:
    """Plan the monitoring role on one @fake host: the operations' names, and the commands run while planning."""
    data = {
        "fake_delay": 0,
        "fake_delay_jitter": 0,
        "fake_responses": responses or {},
        "recipe": MARLIN,
        "serve_total_gpus": 8,
        **knobs,
    }
    inventory = Inventory(([("@fake/h200-1", data)], {}))
    state = State(inventory=inventory, config=Config())
    connect_all(state)
    host = inventory.get_host("@fake/h200-1")
    add_deploy(state, monitoring)
    names = [
        re.sub(r"^hgxkit monitoring \| ", "", name)
        for op_hash in host.op_hash_order
        for name in state.get_op_meta(op_hash).names
    ]
    return names, [str(c) for c in host.connector.executed_commands]


def test_a_fresh_node_gets_exporters_prometheus_and_dashboards_and_planning_starts_nothing() -> None:
    names, commands = plan(monitoring=True)
    assert names == FRESH
    assert not [c for c in commands if re.search(r"docker (run|rm|pull)|promtool|apt-get install", c)]


def test_off_plans_nothing() -> None:
    assert plan() == ([], [])


def test_a_running_exporter_with_the_same_spec_is_left_alone() -> None:
    spec = exporter_spec(
        DEFAULTS["dcgm_exporter_image"],
        bind_address="127.0.0.1",
        port=9400,
        counters_file="/etc/hgxkit/monitoring/dcgm-counters.csv",
        hostengine=None,
    )
    labels = dict(w.split("=", 1) for w in spec.argv[spec.argv.index("--label") :][:4] if "=" in w)
    inspected = json.dumps(
        {
            "name": "/hgxkit-dcgm-exporter",
            "id": "id-x",
            "labels": labels,
            "running": True,
            "started": "2026-01-01T00:00:00Z",
            "restarts": 0,
        }
    )
    names, _ = plan({"docker ps -aq --filter label=hgxkit.monitoring": [inspected]}, monitoring=True)
    assert "Start the DCGM exporter on 127.0.0.1:9400" not in names and len(names) == len(FRESH) - 1
    stopped = inspected.replace('"running": true', '"running": false')
    names, _ = plan({"docker ps -aq --filter label=hgxkit.monitoring": [stopped]}, monitoring=True)
    assert "Start the DCGM exporter on 127.0.0.1:9400" in names


def test_exposure_beyond_loopback_is_refused_before_any_change() -> None:
    with pytest.raises(DeployError) as caught:
        plan(monitoring=True, prometheus_bind_address="0.0.0.0")
    assert str(caught.value).startswith("monitoring checks failed on @fake/h200-1; nothing was changed:")
    assert "prometheus_bind_address 0.0.0.0 publishes metrics (no authentication) beyond this host" in str(caught.value)
    assert plan(monitoring=True, prometheus_bind_address="0.0.0.0", monitoring_allow_exposed=True)[0] == FRESH


def test_grafana_adds_its_provisioning_and_container() -> None:
    names, _ = plan(monitoring=True, grafana=True)
    assert names[len(FRESH) :] == [
        "Grafana provisioning datasources",
        "Grafana provisioning dashboards",
        "Grafana datasource",
        "Grafana dashboards",
        "Start Grafana on 127.0.0.1:3000",
    ]


def test_installed_packages_skip_the_apt_refresh() -> None:
    installed = {re.compile(r"dpkg-query .* prometheus-node-exporter"): ["prometheus-node-exporter 1.5.0-1+b6 ii "]}
    names, _ = plan(installed, monitoring=True)
    assert "Refresh apt lists for prometheus-node-exporter" not in names
    assert "Refresh apt lists for prometheus" in names  # prometheus itself is not installed
