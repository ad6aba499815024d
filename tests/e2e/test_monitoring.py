"""End-to-end: `--data monitoring=true` on a simulated node serving the marlin recipe leaves the DCGM exporter
(stand-in), Debian's node exporter and Debian's Prometheus with hgxkit's rules; Prometheus' API shows
DCGM_FI_DEV_GPU_UTIL for 8 GPUs, the node exporter and both serving groups; a re-run changes nothing; XID 79
injected on GPU 3 fires GpuFellOffBus; stopping one group fires ServingGroupDown (issue 28)."""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

import pytest
from sim_steps import cluster_name, node_sh, run_deploy

from hgxkit.sim import nodes as simnodes
from hgxkit.sim.standin.dcgm import image as dcgm_image

pytestmark = pytest.mark.e2e
CLUSTER = cluster_name("monitoring")
# Short windows so the alerts fire within the test (the defaults are minutes).
DATA = ("verify=false", "monitoring=true", "monitoring_serving_down_for=10s", "prometheus_scrape_interval=5s")


def out(result: subprocess.CompletedProcess[str]) -> str:
    return result.stdout + result.stderr


def api(path: str, **params: str) -> dict:
    """Prometheus' HTTP API on the node (it listens on 127.0.0.1 only)."""
    query = f"?{urllib.parse.urlencode(params)}" if params else ""
    text = node_sh(CLUSTER, f"curl -sS -m 10 'http://127.0.0.1:9090{path}{query}'")
    return json.loads(text) if text.startswith("{") else {}


def until(check: Callable[[], Any], timeout: float = 120.0) -> Any:
    """Poll `check()` until it returns something truthy, or the timeout; the last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(3)


def vector(query: str) -> list[dict]:
    return api("/api/v1/query", query=query).get("data", {}).get("result", [])


def firing(alert: str) -> list[dict]:
    alerts = api("/api/v1/alerts").get("data", {}).get("alerts", [])
    return [a for a in alerts if a["labels"].get("alertname") == alert and a["state"] == "firing"]


@pytest.fixture(scope="module")
def monitored(sim_nodes):
    """One node with 3 TiB of RAM serving marlin (two TP4 groups), monitoring on."""
    dcgm_image.ensure_published(simnodes.client())
    sim_nodes(1, cluster=CLUSTER, memory_gib=3072)
    return run_deploy(CLUSTER, "deploys/dspark.py", *DATA, timeout=900)


def test_prometheus_sees_8_gpus_the_node_exporter_and_both_groups(monitored) -> None:
    assert monitored.returncode == 0, out(monitored)[-5000:]
    gpus = until(lambda: [r for r in vector("DCGM_FI_DEV_GPU_UTIL") if r["metric"].get("simulated") == "true"])
    assert sorted(r["metric"]["gpu"] for r in gpus) == [str(i) for i in range(8)]
    assert {r["metric"]["node"] for r in gpus} == {"node1"}
    def up_targets() -> dict[tuple[str, str], str]:
        found = {(r["metric"]["job"], r["metric"].get("group", "")): r["value"][1] for r in vector("up")}
        return found if len(found) == 5 and set(found.values()) == {"1"} else {}

    up = until(up_targets) or {(r["metric"]["job"], r["metric"].get("group", "")): r["value"][1] for r in vector("up")}
    assert up == {("prometheus", ""): "1", ("dcgm", ""): "1", ("node", ""): "1",
                  ("serving-sglang", "deepseek-v4-flash-0"): "1", ("serving-sglang", "deepseek-v4-flash-1"): "1"}
    assert vector("node_memory_MemTotal_bytes")  # the node exporter's own metrics
    assert until(lambda: vector("sglang:num_running_reqs"))  # the groups' /metrics
    rules = api("/api/v1/rules")["data"]["groups"]
    assert [g["name"] for g in rules] == ["hgxkit-gpu", "hgxkit-serving"]
    image = node_sh(CLUSTER, "docker inspect -f '{{.Config.Image}}' hgxkit-dcgm-exporter").strip()
    assert re.fullmatch(r"hgxkit-sim/dcgm-exporter@sha256:[0-9a-f]{64}", image)
    listening = node_sh(CLUSTER, "ss -ltnH | awk '{print $4}'").split()
    assert {"127.0.0.1:9090", "127.0.0.1:9100", "127.0.0.1:9400"} <= set(listening)


def test_second_run_changes_nothing(monitored) -> None:
    again = run_deploy(CLUSTER, "deploys/dspark.py", *DATA, timeout=900)
    assert again.returncode == 0, out(again)[-4000:]
    match = re.search(r"Grand total\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)", out(again))
    assert match, out(again)[-3000:]
    _ops, changed, errors, _unchanged = (0 if v == "-" else int(v) for v in match.groups())
    assert (changed, errors) == (0, 0), out(again)[-4000:]


def test_xid_79_on_gpu_3_fires_gpu_fell_off_bus(monitored) -> None:
    node_sh(CLUSTER, "touch /etc/hgxkit-sim/faults/xid-79-gpu3")
    try:
        alerts = until(lambda: firing("GpuFellOffBus"))
        assert [(a["labels"]["node"], a["labels"]["gpu"], a["labels"]["severity"]) for a in alerts] == [
            ("node1", "3", "critical")]
    finally:
        node_sh(CLUSTER, "rm -f /etc/hgxkit-sim/faults/xid-79-gpu3")


def test_stopping_a_group_fires_serving_down(monitored) -> None:
    node_sh(CLUSTER, "docker stop -t 5 deepseek-v4-flash-1")
    alerts = until(lambda: firing("ServingGroupDown"))
    assert [(a["labels"]["group"], a["labels"]["job"]) for a in alerts] == [("deepseek-v4-flash-1", "serving-sglang")]
    resources = node_sh(CLUSTER, "systemctl show -p MemoryCurrent -p CPUUsageNSec prometheus.service "
                                 "prometheus-node-exporter.service; docker stats --no-stream --format "
                                 "'{{.Name}} {{.MemUsage}} {{.CPUPerc}}' hgxkit-dcgm-exporter")  # fmt: skip
    print(f"monitoring stack on the node:\n{resources}")
