"""The monitoring role's plan on a node (pyinfra's @fake connector): what it would do on a fresh node, nothing when
off, the exporter left alone when it runs its spec, and exposure refused before anything changes."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from pyinfra.api import Config, Inventory, State, StringCommand
from pyinfra.api.connect import connect_all
from pyinfra.api.deploy import add_deploy
from pyinfra.api.exceptions import DeployError
from pyinfra.context import ctx_host, ctx_state

from hgxkit.monitoring.alertmanager import Receivers, Timing, alertmanager_config, file_sha256
from hgxkit.monitoring.dcgm import exporter_spec
from roles.monitoring import _yaml, monitoring
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
    "Alertmanager listen address (loopback, cluster off)",
    "Alertmanager receivers (root:prometheus 0640; secrets not printed)",
    "Refresh apt lists for prometheus-alertmanager",
    "Debian's Alertmanager",
    "amtool checks the Alertmanager configuration",
    "Alertmanager running",
    "Alertmanager takes the new configuration",
]


def plan_ops(
    responses: dict[Any, Any] | None = None, **knobs: Any
) -> tuple[list[str], list[str], list[dict[str, str]]]:
    """Plan the monitoring role on one @fake host: the operations' names, the commands run while planning, and each
    planned operation's name, commands and stdin as pyinfra would print them."""
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
    names, ops = [], []
    for op_hash in host.op_hash_order:
        name = re.sub(r"^hgxkit monitoring \| ", "", ", ".join(state.get_op_meta(op_hash).names))
        names.append(name)
        op_data = state.get_op_data_for_host(host, op_hash)
        arguments = op_data.global_arguments
        with ctx_state.use(state), ctx_host.use(host):
            commands = [str(c) for c in op_data.command_generator() if isinstance(c, StringCommand)]
        ops.append({"name": name, "command": " ".join(commands), "stdin": str(arguments.get("_stdin"))})
    return names, [str(c) for c in host.connector.executed_commands], ops


def plan(responses: dict[Any, Any] | None = None, **knobs: Any) -> tuple[list[str], list[str]]:
    """Plan the monitoring role on one @fake host: the operations' names, and the commands run while planning."""
    names, executed, _ = plan_ops(responses, **knobs)
    return names, executed


def test_a_fresh_node_gets_exporters_prometheus_and_dashboards_and_planning_starts_nothing() -> None:
    names, commands = plan(monitoring=True)
    assert names == FRESH
    assert not [c for c in commands if re.search(r"docker (run|rm|pull)|promtool|apt-get install", c)]


def test_alertmanager_config_and_secrets_go_by_stdin_and_hash_never_in_a_printed_word() -> None:
    """The receivers' secrets reach the node only inside SecretLines (printed as ***): no operation name, no
    planned command and no global argument repr holds them; an unchanged file (same hash) is not written again."""
    secret = "https://hooks.example.org/T000/B000/s3cr3t-token"
    data = {
        "monitoring": True,
        "alertmanager_webhook_url": secret,
        "alertmanager_pagerduty_routing_key": "pd-routing-s3cr3t",
        "alertmanager_smtp_password": "smtp-s3cr3t",
        "alertmanager_smtp_username": "alerts",
        "alertmanager_email_to": "ops@example.org",
        "alertmanager_email_from": "hgxkit@example.org",
        "alertmanager_smtp_smarthost": "smtp.example.org:587",
    }
    names, commands, ops = plan_ops(**data)
    assert "Alertmanager receivers (root:prometheus 0640; secrets not printed)" in names
    printed = repr(names) + repr(commands) + repr(ops)
    assert "s3cr3t" not in printed
    (write,) = [op for op in ops if op["name"].startswith("Alertmanager receivers")]
    assert write["stdin"] == "***" and "chown root:prometheus" in write["command"] and "chmod 0640" in write["command"]
    receivers = Receivers(
        webhook_url=secret,
        pagerduty_routing_key="pd-routing-s3cr3t",
        email_to="ops@example.org",
        email_from="hgxkit@example.org",
        smtp_smarthost="smtp.example.org:587",
        smtp_username="alerts",
        smtp_password="smtp-s3cr3t",
    )
    config = _yaml(alertmanager_config(receivers, Timing()))
    assert secret in config and "smtp-s3cr3t" in config  # the file on the node does hold them
    unchanged = {re.compile(r"sha256sum '?/etc/prometheus/alertmanager.yml"): [f"{file_sha256(config)}  x"]}
    names, _, _ = plan_ops(unchanged, **data)
    assert "Alertmanager receivers (root:prometheus 0640; secrets not printed)" not in names


def test_a_bad_receiver_is_refused_naming_the_knob_not_its_value() -> None:
    with pytest.raises(DeployError) as caught:
        plan(monitoring=True, alertmanager_webhook_url="ftp://s3cr3t@host/x")
    assert "alertmanager_webhook_url is not an http(s) URL with a host" in str(caught.value)
    assert "s3cr3t" not in str(caught.value)


def test_a_fleet_alertmanager_replaces_the_local_one() -> None:
    names, _ = plan(monitoring=True, alertmanager_url="http://alerts.example.org:9093")
    assert names == [n for n in FRESH if "Alertmanager" not in n and "alertmanager" not in n and "amtool" not in n]


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
        "Grafana admin password generated (root-only, /etc/hgxkit/monitoring/grafana-admin-password)",
        "Start Grafana on 127.0.0.1:3000",
        "Grafana admin takes the generated password",
    ]
    present = {re.compile(r"sha256sum '?/etc/hgxkit/monitoring/grafana-admin-password"): ["ab" * 32 + "  x"]}
    names, _ = plan(present, monitoring=True, grafana=True)
    assert not [n for n in names if "password" in n]  # generated once: a re-run keeps it


def test_installed_packages_skip_the_apt_refresh() -> None:
    installed = {re.compile(r"dpkg-query .* prometheus-node-exporter"): ["prometheus-node-exporter 1.5.0-1+b6 ii "]}
    names, _ = plan(installed, monitoring=True)
    assert "Refresh apt lists for prometheus-node-exporter" not in names
    assert "Refresh apt lists for prometheus" in names  # prometheus itself is not installed
