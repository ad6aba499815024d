"""The monitoring decisions (hgxkit/monitoring): DCGM counters and exporter container, Prometheus scrape config from
the inventory and recipes, alert rules, dashboards; checked with Debian's real promtool (`promtool check config`,
`check rules`, and `test rules`: series in, alerts out)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from hgxkit.kinds import KINDS
from hgxkit.monitoring.alerts import CRITICAL_XIDS, AlertSettings, alert_rules
from hgxkit.monitoring.dashboards import (
    DATASOURCE_UID,
    all_dashboards,
    grafana_dashboard_provider,
    grafana_datasource,
    grafana_spec,
    panel_expressions,
)
from hgxkit.monitoring.dcgm import FIELD_NAMES, counters_csv, exporter_spec
from hgxkit.monitoring.scrape import (
    MonitoredNode,
    ServingTarget,
    alerting_section,
    choose_monitoring_host,
    exposure_problems,
    node_exporter_args,
    prometheus_args,
    prometheus_config,
    recipe_targets,
    recipe_ttft_p99_ms,
)
from hgxkit.recipe.read import load_recipe
from roles.monitoring.defaults import DEFAULTS

MARLIN = "recipes/deepseek-v4-flash-dspark-marlin.yaml"
IMAGE = "nvcr.io/nvidia/k8s/dcgm-exporter:4.4.2-4.7.1-ubuntu22.04"


def test_defaults_are_documented_and_off() -> None:
    import roles.monitoring.defaults as module

    assert DEFAULTS["monitoring"] is False and DEFAULTS["grafana"] is False
    assert DEFAULTS["monitoring_bind_address"] == DEFAULTS["prometheus_bind_address"] == "127.0.0.1"
    assert DEFAULTS["grafana_bind_address"] == "127.0.0.1" and DEFAULTS["monitoring_allow_exposed"] is False
    own = [key for key in DEFAULTS if key not in ("expected_gpu_count", "serve_total_gpus", "bind_address", "recipe")]
    for key in own:
        assert f"\n{key} " in module.__doc__, key
    assert "prometheus-node-exporter" in module.__doc__ and "security updates" in module.__doc__


def test_counters_file_has_every_field_the_alerts_and_dashboards_read() -> None:
    lines = [line for line in counters_csv().splitlines() if line and not line.startswith("#")]
    fields = [line.split(",")[0] for line in lines]
    assert len(fields) == len(set(fields)) == 36
    assert fields[-1] == "DCGM_EXP_XID_ERRORS_COUNT"  # the exporter's windowed XID count, which the XID alerts read
    for needed in (
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_FREE",
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_SM_CLOCK",
        "DCGM_FI_DEV_MEM_CLOCK",
        "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
        "DCGM_FI_DEV_XID_ERRORS",
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "DCGM_FI_DEV_ROW_REMAP_PENDING",
        "DCGM_FI_DEV_ROW_REMAP_FAILURE",
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "DCGM_FI_PROF_PCIE_TX_BYTES",
        "DCGM_FI_PROF_PCIE_RX_BYTES",
    ):
        assert needed in fields, needed
    assert all(line.split(", ")[1] in ("gauge", "counter", "label") for line in lines)
    rules = yaml.safe_dump(alert_rules(AlertSettings(), [("node1", 8)], []))
    boards = json.dumps(all_dashboards())
    used = set(re.findall(r"DCGM_FI_[A-Z_]+", rules + boards))
    assert used <= set(FIELD_NAMES) and "DCGM_FI_DEV_XID_ERRORS" in used


def test_exporter_runs_by_spec_with_the_counters_file_on_the_bind_address() -> None:
    spec = exporter_spec(IMAGE, bind_address="127.0.0.1", port=9400, counters_file="/etc/m/c.csv", hostengine=None)
    assert spec.name == "hgxkit-dcgm-exporter" and len(spec.spec_hash) == 16
    assert spec.argv[:7] == [
        "docker",
        "run",
        "-d",
        "--name",
        "hgxkit-dcgm-exporter",
        "--label",
        "hgxkit.monitoring=dcgm-exporter",
    ]
    assert spec.argv[9:] == [
        "--network",
        "host",
        "--restart",
        "unless-stopped",
        "--gpus",
        "all",
        "--cap-add",
        "SYS_ADMIN",
        "-e",
        "DCGM_EXPORTER_XID_COUNT_WINDOW_SIZE=300000",
        "-v",
        "/etc/m/c.csv:/etc/dcgm-exporter/hgxkit.csv:ro",
        IMAGE,
        "-f",
        "/etc/dcgm-exporter/hgxkit.csv",
        "-a",
        "127.0.0.1:9400",
    ]
    digest = "nvcr.io/nvidia/k8s/dcgm-exporter@sha256:" + "a" * 64
    assert spec.words(digest)[21] == digest and IMAGE not in spec.words(digest)
    remote = exporter_spec(IMAGE, bind_address="::", port=9401, counters_file="/c", hostengine="localhost:5555")
    assert remote.argv[-6:] == ["-r", "localhost:5555", "-f", "/etc/dcgm-exporter/hgxkit.csv", "-a", "[::]:9401"]
    assert remote.spec_hash != spec.spec_hash


def test_scrape_config_covers_exporters_groups_and_router_of_every_node() -> None:
    nodes = [MonitoredNode("node1", "10.0.0.1", "127.0.0.1", 8), MonitoredNode("node2", "10.0.0.2", "0.0.0.0", 8)]
    groups = [
        ServingTarget("node1", "g-0", 5000, "sglang", "/metrics", "127.0.0.1", "10.0.0.1"),
        ServingTarget("node2", "v-0", 8000, "vllm", "/metrics", "0.0.0.0", "10.0.0.2"),
    ]
    config, problems = prometheus_config(nodes, groups, monitoring_host="node1", router_port=29000, router_host="node1")
    assert problems == []
    assert config["global"] == {"scrape_interval": "15s", "evaluation_interval": "15s"}
    assert config["rule_files"] == ["/etc/prometheus/hgxkit-rules.yml"]
    jobs = {job["job_name"]: job["static_configs"] for job in config["scrape_configs"]}
    assert list(jobs) == ["prometheus", "dcgm", "node", "serving-sglang", "serving-vllm", "router"]
    assert "alerting" not in config  # none asked for
    limited = {job["job_name"]: job for job in config["scrape_configs"] if "sample_limit" in job}
    assert sorted(limited) == ["router", "serving-sglang", "serving-vllm"]  # the images a recipe names
    assert {k: v for k, v in limited["serving-vllm"].items() if "limit" in k} == {
        "sample_limit": 20000,
        "body_size_limit": "16MB",
        "label_limit": 40,
        "label_name_length_limit": 128,
        "label_value_length_limit": 1024,
    }
    assert not any(job.get("honor_labels") for job in config["scrape_configs"])
    assert jobs["dcgm"] == [
        {"targets": ["127.0.0.1:9400"], "labels": {"node": "node1"}},
        {"targets": ["10.0.0.2:9400"], "labels": {"node": "node2"}},
    ]
    assert jobs["node"][1] == {"targets": ["10.0.0.2:9100"], "labels": {"node": "node2"}}
    assert jobs["serving-vllm"] == [
        {"targets": ["10.0.0.2:8000"], "labels": {"node": "node2", "group": "v-0", "kind": "vllm"}}
    ]
    assert jobs["router"] == [{"targets": ["127.0.0.1:29000"], "labels": {"node": "node1"}}]


def test_targets_out_of_reach_are_refused_naming_host_and_remedy() -> None:
    nodes = [MonitoredNode("node1", "a", "127.0.0.1", 8), MonitoredNode("node2", "b", "127.0.0.1", 8)]
    groups = [ServingTarget("node2", "g-0", 5000, "sglang", "/metrics", "127.0.0.1", "b")]
    config, problems = prometheus_config(nodes, groups, monitoring_host="node1", router_port=29000, router_host="node2")
    assert [p.code for p in problems] == ["monitoring-reach"] * 3
    assert problems[0].found == "node2 binds its exporters to 127.0.0.1; Prometheus on node1 cannot reach it"
    assert "serving group g-0" in problems[1].message and "monitoring_host: node2" in problems[2].remedy
    assert [len(job["static_configs"]) for job in config["scrape_configs"]] == [1, 1, 1]
    assert [p.code for p in exposure_problems("10.0.0.1", False, "prometheus_bind_address")] == ["exposure"]
    assert exposure_problems("10.0.0.1", True, "prometheus_bind_address") == []
    assert choose_monitoring_host(None, [], ["node1"]) == (None, "")


def test_recipe_targets_are_the_groups_with_the_posts_ttft() -> None:
    recipe = load_recipe(MARLIN)
    assert recipe_ttft_p99_ms(recipe) == 4438.23
    targets, notes = recipe_targets("node1", recipe, total_gpus=8, address="10.0.0.1", bind_address="127.0.0.1")
    assert notes == []
    assert [(t.group, t.port, t.kind, t.ttft_p99_ms) for t in targets] == [
        ("deepseek-v4-flash-0", 5000, "sglang", 4438.23),
        ("deepseek-v4-flash-1", 5001, "sglang", 4438.23),
    ]
    own, _ = recipe_targets("node1", recipe, total_gpus=8, address="a", bind_address="127.0.0.1", ttft_p99_ms=900.0)
    assert {t.ttft_p99_ms for t in own} == {900.0}


def test_a_server_without_metrics_is_not_scraped_and_says_why() -> None:
    from dataclasses import replace

    recipe = load_recipe(MARLIN)
    args = tuple(a for a in recipe.server.args if "--enable-metrics" not in str(a))
    bare = replace(recipe, server=replace(recipe.server, args=args))
    targets, notes = recipe_targets("node1", bare, total_gpus=8, address="a", bind_address="127.0.0.1")
    assert targets == []
    assert notes == [
        "node1: the recipe's SGLang server runs without --enable-metrics: its groups' /metrics is not "
        "scraped (add --enable-metrics to the recipe's server flags)"
    ]


def test_alert_rules_cover_the_faults_and_the_ttft_drift() -> None:
    groups = [
        ServingTarget("node1", "g-0", 5000, "sglang", "/metrics", ttft_p99_ms=4438.23),
        ServingTarget("node1", "g-1", 5001, "vllm", "/metrics"),
    ]
    rules = alert_rules(AlertSettings(), [("node1", 8), ("node2", 4)], groups)
    gpu, serving = (group["rules"] for group in rules["groups"][:2])
    assert [r["alert"] for r in gpu] == [
        "GpuFellOffBus",
        "GpuCriticalXid",
        "GpuEccDoubleBit",
        "GpuRowRemapPending",
        "GpuRowRemapFailed",
        "GpuThermalThrottling",
        "GpuPowerThrottling",
        "GpuNvlinkErrorsRising",
        "GpuPcieReplaysRising",
        "GpuFewerThanExpected",
        "DcgmExporterDown",
        "NodeExporterDown",
        "NodeDown",
    ]
    by_name = {r["alert"]: r for r in gpu + serving}
    assert CRITICAL_XIDS == (48, 63, 64, 74, 79, 92, 94, 95, 119, 120)
    assert by_name["GpuCriticalXid"]["expr"].count("DCGM_FI_DEV_XID_ERRORS == ") == 9  # all but 79
    assert 'DCGM_EXP_XID_ERRORS_COUNT{xid=~"48|63|64|74|92|94|95|119|120"} > 0' in by_name["GpuCriticalXid"]["expr"]
    assert by_name["GpuPowerThrottling"]["expr"] == (
        "floor(DCGM_FI_DEV_CLOCKS_EVENT_REASONS / 8) % 2 == 1 or floor(DCGM_FI_DEV_CLOCKS_EVENT_REASONS / 128) % 2 == 1"
    )
    assert by_name["DcgmExporterDown"]["labels"] == {"severity": "critical"}
    assert by_name["GpuThermalThrottling"]["for"] == "10m"
    assert by_name["GpuThermalThrottling"]["expr"] == (
        "floor(DCGM_FI_DEV_CLOCKS_EVENT_REASONS / 32) % 2 == 1 or floor(DCGM_FI_DEV_CLOCKS_EVENT_REASONS / 64) % 2 == 1"
    )
    assert by_name["GpuFewerThanExpected"]["expr"] == (
        '(count by (node) (DCGM_FI_DEV_GPU_UTIL{node="node1"}) or (absent(DCGM_FI_DEV_GPU_UTIL{node="node1"}) - 1))'
        ' < 8 or (count by (node) (DCGM_FI_DEV_GPU_UTIL{node="node2"}) or '
        '(absent(DCGM_FI_DEV_GPU_UTIL{node="node2"}) - 1)) < 4'
    )
    assert [r["alert"] for r in serving] == ["ServingGroupDown", "RouterDown", "ServingTtftP99High"]  # vLLM: no figure
    assert by_name["ServingTtftP99High"]["expr"] == (
        "histogram_quantile(0.99, sum by (le, node, group) (rate(sglang:time_to_first_token_seconds_bucket"
        '{node="node1", group="g-0"}[5m]))) > 6.65735'
    )
    assert by_name["ServingGroupDown"]["labels"] == {"severity": "critical"}
    assert by_name["ServingTtftP99High"]["labels"] == {"severity": "warning", "node": "node1", "group": "g-0"}
    assert [g["name"] for g in rules["groups"]] == ["hgxkit-gpu", "hgxkit-serving", "hgxkit-reference"]
    assert rules["groups"][2]["rules"] == [
        {
            "record": "hgxkit:recipe_ttft_p99_seconds",
            "expr": "vector(4.43823)",
            "labels": {"node": "node1", "group": "g-0"},
        }
    ]


def _kept(ours: object, read_back: object, path: str = "") -> list[str]:
    """Every key or value of `ours` that `read_back` lost or changed, by its path."""
    if isinstance(ours, dict):
        if not isinstance(read_back, dict):
            return [path or "/"]
        return [
            p
            for k, v in ours.items()
            for p in (_kept(v, read_back[k], f"{path}/{k}") if k in read_back else [f"{path}/{k}"])
        ]
    if isinstance(ours, list):
        if not isinstance(read_back, list) or len(ours) != len(read_back):
            return [f"{path}[]"]
        return [p for i, (a, b) in enumerate(zip(ours, read_back, strict=True)) for p in _kept(a, b, f"{path}[{i}]")]
    return [] if ours == read_back else [f"{path}: {ours!r} -> {read_back!r}"]


def test_grafanas_own_dashboard_models_read_every_key_of_every_dashboard() -> None:
    """Grafana's foundation SDK holds its dashboard, panel and Prometheus query models, generated from Grafana's
    schema; a key they do not know is dropped when read. Every dashboard read through them and written back is
    unchanged: no misspelt or unknown key (value types are not checked by the models)."""
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.cog.plugins import register_default_plugins
    from grafana_foundation_sdk.models.dashboard import Dashboard

    register_default_plugins()  # panels' Prometheus targets read as Grafana's Prometheus query model
    for name, board in all_dashboards().items():
        back = json.loads(json.dumps(Dashboard.from_json(board), cls=JSONEncoder))
        assert _kept(board, back) == [], name
    broken = json.loads(json.dumps(all_dashboards()["hgxkit-gpu.json"]))
    broken["panels"][0]["targets"][0]["exprr"] = broken["panels"][0]["targets"][0].pop("expr")
    back = json.loads(json.dumps(Dashboard.from_json(broken), cls=JSONEncoder))
    assert _kept(broken, back) == ["/panels[0]/targets[0]/exprr"]


def test_dashboards_are_grafana_json_with_promql_targets() -> None:
    boards = all_dashboards()
    assert sorted(boards) == ["hgxkit-gpu.json", "hgxkit-serving-sglang.json", "hgxkit-serving-vllm.json"]
    assert len({board["uid"] for board in boards.values()}) == 3
    for name, board in boards.items():
        assert json.loads(json.dumps(board)) == board
        assert board["schemaVersion"] == 39 and board["title"].startswith("hgxkit")
        ids = [panel["id"] for panel in board["panels"]]
        assert ids == list(range(1, len(ids) + 1)), name
        for panel in board["panels"]:
            assert panel["type"] == "timeseries" and panel["datasource"] == {
                "type": "prometheus",
                "uid": DATASOURCE_UID,
            }
            assert set(panel["gridPos"]) == {"h", "w", "x", "y"} and panel["targets"], (name, panel["title"])
            assert all(t["refId"] and t["expr"] for t in panel["targets"])
    gpu = boards["hgxkit-gpu.json"]
    assert len(gpu["panels"]) == 18
    assert {"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_PROF_PCIE_TX_BYTES"} <= set(
        panel_expressions(gpu)
    )
    sglang = panel_expressions(boards["hgxkit-serving-sglang.json"])
    assert "sglang:num_running_reqs" in sglang and "sglang:spec_accept_length" in sglang
    vllm = panel_expressions(boards["hgxkit-serving-vllm.json"])
    assert (
        "histogram_quantile(0.99, sum by (le, node, group) (rate(vllm:time_to_first_token_seconds_bucket[5m])))" in vllm
    )
    for kind, names in (
        ("sglang", ("sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds")),
        ("vllm", ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds")),
    ):
        (itl,) = [
            p for p in boards[f"hgxkit-serving-{kind}.json"]["panels"] if p["title"] == "Inter-token latency / TPOT"
        ]
        exprs = [t["expr"] for t in itl["targets"]]
        assert exprs[1] == (
            f"histogram_quantile(0.99, sum by (le, node, group) (rate({names[0]}_bucket[5m]) or "
            f"rate({names[1]}_bucket[5m])))"
        )
        assert "hgxkit:recipe_itl_p99_seconds" in exprs and itl["fieldConfig"]["defaults"]["unit"] == "s"
    assert any("vllm:request_time_per_output_token_seconds_bucket" in e for e in vllm)
    assert "hgxkit:recipe_ttft_p99_seconds" in sglang and "hgxkit:recipe_ttft_p99_seconds" in vllm
    assert all(kind.metrics.ttft_histogram for kind in KINDS.values())
    assert grafana_datasource("http://127.0.0.1:9090")["datasources"][0]["url"] == "http://127.0.0.1:9090"
    assert grafana_dashboard_provider("/d")["providers"][0]["options"] == {"path": "/d"}
    spec = grafana_spec(
        "grafana/grafana-oss:11.2.0", bind_address="127.0.0.1", port=3000, monitoring_dir="/m", password_file="/m/pw"
    )
    assert (
        "GF_SERVER_HTTP_ADDR=127.0.0.1" in spec.argv
        and "/m/dashboards:/var/lib/grafana/dashboards/hgxkit:ro" in spec.argv
    )
    # Never admin/admin: the password comes from the root-only file; anonymous access and sign-up are off.
    assert "GF_SECURITY_ADMIN_PASSWORD__FILE=/run/secrets/grafana-admin-password" in spec.argv
    assert "/m/pw:/run/secrets/grafana-admin-password:ro" in spec.argv
    assert {"GF_AUTH_ANONYMOUS_ENABLED=false", "GF_USERS_ALLOW_SIGN_UP=false"} <= set(spec.argv)
    assert not [w for w in spec.argv if w.startswith("GF_SECURITY_ADMIN_PASSWORD=")]


def test_listen_arguments_for_debians_default_files() -> None:
    assert prometheus_args("127.0.0.1", 9090, "30d", "50GB") == (
        'ARGS="--web.listen-address=127.0.0.1:9090 --storage.tsdb.retention.time=30d '
        '--storage.tsdb.retention.size=50GB"\n'
    )
    assert node_exporter_args("::1", 9100) == 'ARGS="--web.listen-address=[::1]:9100"\n'


# --- the real promtool (Debian's prometheus package; `hgxkit sim host setup --for test` installs it) ---


def _promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail("promtool is missing: apt-get install prometheus (hgxkit sim host setup --for test)")
        pytest.skip("promtool is missing: apt-get install prometheus")
    return path


def _run(*args: str, cwd: Path) -> str:
    done = subprocess.run([_promtool(), *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def _generated(tmp_path: Path) -> tuple[Path, Path]:
    recipe = load_recipe(MARLIN)
    groups, _ = recipe_targets("node1", recipe, total_gpus=8, address="10.0.0.1", bind_address="127.0.0.1")
    nodes = [MonitoredNode("node1", "10.0.0.1", "127.0.0.1", 8)]
    config, problems = prometheus_config(nodes, groups, monitoring_host="node1", router_port=29000, router_host="node1")
    assert problems == []
    rules_file = tmp_path / "hgxkit-rules.yml"
    rules_file.write_text(yaml.safe_dump(alert_rules(AlertSettings(), [("node1", 8)], groups), sort_keys=False))
    config["rule_files"] = [str(rules_file)]
    config["alerting"] = alerting_section("http://127.0.0.1:9093")
    config_file = tmp_path / "prometheus.yml"
    config_file.write_text(yaml.safe_dump(config, sort_keys=False))
    return config_file, rules_file


def test_promtool_accepts_the_generated_config_and_rules(tmp_path: Path) -> None:
    config_file, rules_file = _generated(tmp_path)
    out = _run("check", "config", str(config_file), cwd=tmp_path)
    assert "SUCCESS" in out and "valid prometheus config file syntax" in out
    assert "SUCCESS: 19 rules found" in _run("check", "rules", str(rules_file), cwd=tmp_path)


def test_promtool_parses_every_dashboard_expression(tmp_path: Path) -> None:
    # promtool has no expression checker of its own: each panel expression becomes a recording rule.
    exprs = [expr for board in all_dashboards().values() for expr in panel_expressions(board)]
    rules = [{"record": f"hgxkit:panel_{i}", "expr": expr} for i, expr in enumerate(exprs)]
    path = tmp_path / "panels.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "panels", "rules": rules}]}))
    assert f"SUCCESS: {len(exprs)} rules found" in _run("check", "rules", str(path), cwd=tmp_path)


@pytest.mark.parametrize(
    "name",
    [
        "hgxkit.monitoring.alertmanager",
        "hgxkit.monitoring.alerts",
        "hgxkit.monitoring.dashboards",
        "hgxkit.monitoring.dcgm",
        "hgxkit.monitoring.scrape",
        "hgxkit.sim.standin.dcgm.exporter",
    ],
)
def test_docstring_examples(name: str) -> None:
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
