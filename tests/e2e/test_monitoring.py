"""End-to-end: `--data monitoring=true` on a simulated node serving the marlin recipe leaves the DCGM exporter
(stand-in), Debian's node exporter, Debian's Prometheus with hgxkit's rules and Debian's Alertmanager sending to a
webhook receiver the test runs on the node; Prometheus' API shows DCGM_FI_DEV_GPU_UTIL for 8 GPUs, the node
exporter and both serving groups; a re-run changes nothing; a smoke verify archives each cell's telemetry read from
Prometheus, agreeing with a sampled run's; XID 79 injected on GPU 3 reaches the receiver as GpuFellOffBus (one
alert) and its resolution after the XID window; stopping one group fires ServingGroupDown; stopping the DCGM
exporter reaches the receiver as the critical DcgmExporterDown.

The stand-in exporter serves only the last-XID gauge, not dcgm-exporter's windowed DCGM_EXP_XID_ERRORS_COUNT, so
the resolution here is the rules' fallback on the gauge (the windowed path is proven by `promtool test rules`,
tests/unit/monitoring/test_monitoring_rules.py)."""

from __future__ import annotations

import json
import re
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

import pytest
from sim_steps import cluster_name, node_sh, out, run_deploy

from hgxkit.sim import nodes as simnodes
from hgxkit.sim.standin.dcgm import image as dcgm_image

pytestmark = pytest.mark.e2e
CLUSTER = cluster_name("monitoring")
# Short windows so the alerts fire within the test (the defaults are minutes); scrapes every second, as verify's
# own samplers, so telemetry read from Prometheus has the same resolution as sampled telemetry.
HOOK_PORT = 9099
HOOK_LOG = "/tmp/hgxkit-test-hook.jsonl"
DATA = (
    "verify=false",
    "monitoring=true",
    "monitoring_serving_down_for=10s",
    "prometheus_scrape_interval=1s",
    "monitoring_xid_window=30s",
    "monitoring_exporter_down_for=10s",
    f"alertmanager_webhook_url=http://127.0.0.1:{HOOK_PORT}/hook",
    "alertmanager_group_wait=1s",
    "alertmanager_group_interval=5s",
)
# A webhook receiver on the node (Alertmanager reaches it over the node's loopback): one JSON line per POST.
RECEIVER = f"""
import http.server
class Hook(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with open("{HOOK_LOG}", "ab") as log:
            log.write(body.replace(b"\\n", b" ") + b"\\n")
        self.send_response(200)
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", {HOOK_PORT}), Hook).serve_forever()
"""
# The simulated GPUs' noise (hgxkit/sim/data/aptrepo/files/nvidia-smi, which the DCGM stand-in reads too): a GPU
# with one running request draws 141.83 W + 8 W x U(-1, 1) and shows 35 % + int(3 x U(-1, 1)) utilisation, a new
# draw every second; an idle one 71.83 W and 0 %. Two runs' per-GPU means over N samples then differ by the jitter
# (sd 8/sqrt(3) W and 1.29 %, per sample) and by the window's edges, where one sample on each side may catch the
# GPU idle in one run and busy in the other (70 W, 35 % each). Tolerance: both edges plus 3 sd of the difference.
BUSY_STEP = {"power_mean_w": 70.0, "utilization_mean_pct": 35.0}
JITTER_SD = {"power_mean_w": 8 / 3**0.5, "utilization_mean_pct": 1.29}


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


def delivered(alert: str, status: str) -> list[dict]:
    """The alerts named `alert` with `status` (firing, resolved) the test's webhook receiver got."""
    text = node_sh(CLUSTER, f"cat {HOOK_LOG} 2>/dev/null || true")
    found = []
    for line in text.splitlines():
        if line.startswith("{"):
            found += [a for a in json.loads(line)["alerts"] if a["labels"].get("alertname") == alert]
    return [a for a in found if a["status"] == status]


def alerting_state() -> str:
    """What the alert path looks like on the node, for a failure message: Prometheus' alerts, Alertmanager's
    alerts and log, the receiver's log and process."""
    return node_sh(
        CLUSTER,
        "curl -sS -m 5 http://127.0.0.1:9090/api/v1/alerts; echo; curl -sS -m 5 http://127.0.0.1:9093/api/v2/alerts; "
        f"echo; journalctl -u prometheus-alertmanager --no-pager -n 15; cat {HOOK_LOG}; "
        "ps -eo pid,args | grep [h]gxkit-test-hook; ss -ltn | grep 9099; uptime; "
        "journalctl -u hgxkit-test-hook --no-pager -n 10",
    )[-6000:]


def firing(alert: str) -> list[dict]:
    alerts = api("/api/v1/alerts").get("data", {}).get("alerts", [])
    return [a for a in alerts if a["labels"].get("alertname") == alert and a["state"] == "firing"]


@pytest.fixture(scope="module")
def monitored(sim_nodes):
    """One node with 3 TiB of RAM serving marlin (two TP4 groups), monitoring on."""
    dcgm_image.ensure_published(simnodes.client())
    sim_nodes(1, cluster=CLUSTER, memory_gib=3072)
    done = run_deploy(CLUSTER, "deploys/dspark.py", *DATA, timeout=900)
    # After the deploy (bring-up may reboot the node), in a transient unit (a process started from the SSH
    # session would end with it).
    node_sh(
        CLUSTER,
        f"cat > /tmp/hgxkit-test-hook.py <<'EOF'\n{RECEIVER}\nEOF\n"
        "systemd-run --unit hgxkit-test-hook --collect --quiet python3 /tmp/hgxkit-test-hook.py",
        check=True,
    )
    assert until(lambda: ":9099 " in node_sh(CLUSTER, "ss -ltnH")), "the test's webhook receiver did not start"
    return done


def test_prometheus_sees_8_gpus_the_node_exporter_and_both_groups(monitored) -> None:
    assert monitored.returncode == 0, out(monitored)[-5000:]
    gpus = until(lambda: [r for r in vector("DCGM_FI_DEV_GPU_UTIL") if r["metric"].get("simulated") == "true"])
    assert sorted(r["metric"]["gpu"] for r in gpus) == [str(i) for i in range(8)]
    assert {r["metric"]["node"] for r in gpus} == {"node1"}

    def up_targets() -> dict[tuple[str, str], str]:
        found = {(r["metric"]["job"], r["metric"].get("group", "")): r["value"][1] for r in vector("up")}
        return found if len(found) == 5 and set(found.values()) == {"1"} else {}

    up = until(up_targets) or {(r["metric"]["job"], r["metric"].get("group", "")): r["value"][1] for r in vector("up")}
    assert up == {
        ("prometheus", ""): "1",
        ("dcgm", ""): "1",
        ("node", ""): "1",
        ("serving-sglang", "deepseek-v4-flash-0"): "1",
        ("serving-sglang", "deepseek-v4-flash-1"): "1",
    }
    assert vector("node_memory_MemTotal_bytes")  # the node exporter's own metrics
    assert until(lambda: vector("sglang:num_running_reqs"))  # the groups' /metrics
    rules = api("/api/v1/rules")["data"]["groups"]
    assert sorted(g["name"] for g in rules) == ["hgxkit-gpu", "hgxkit-reference", "hgxkit-serving"]
    image = node_sh(CLUSTER, "docker inspect -f '{{.Config.Image}}' hgxkit-dcgm-exporter").strip()
    assert re.fullmatch(r"hgxkit-sim/dcgm-exporter@sha256:[0-9a-f]{64}", image)
    listening = node_sh(CLUSTER, "ss -ltnH | awk '{print $4}'").split()
    assert {"127.0.0.1:9090", "127.0.0.1:9100", "127.0.0.1:9400", "127.0.0.1:9093"} <= set(listening)
    assert not [a for a in listening if a.endswith(":9094")]  # Alertmanager's cluster port stays closed
    assert api("/api/v1/alertmanagers")["data"]["activeAlertmanagers"] == [
        {"url": "http://127.0.0.1:9093/api/v2/alerts"}
    ]
    # The receivers' file holds the webhook URL: root and the service's group read it; the run never printed it.
    mode = node_sh(CLUSTER, "stat -c '%a %U %G' /etc/prometheus/alertmanager.yml", answer=True).strip()
    assert mode == "640 root prometheus"
    assert f"127.0.0.1:{HOOK_PORT}" not in out(monitored)


def test_second_run_changes_nothing(monitored) -> None:
    again = run_deploy(CLUSTER, "deploys/dspark.py", *DATA, timeout=900)
    assert again.returncode == 0, out(again)[-4000:]
    match = re.search(r"Grand total\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)", out(again))
    assert match, out(again)[-3000:]
    _ops, changed, errors, _unchanged = (0 if v == "-" else int(v) for v in match.groups())
    assert (changed, errors) == (0, 0), out(again)[-4000:]


def tolerance(field: str, samples: int) -> float:
    """How far two runs' per-GPU means over `samples` samples may differ from the simulated GPUs' noise alone."""
    return 2 * BUSY_STEP[field] / samples + 3 * JITTER_SD[field] * (2 / samples) ** 0.5


def archived_cells(results) -> dict[int, dict]:
    (run_dir,) = [p for p in results.glob("node1/*") if p.is_dir()]
    summary = json.loads((run_dir / "summary.json").read_text())
    for cell in summary["cells"]:
        for name in cell["telemetry"]["files"]:
            assert (run_dir / "telemetry" / name).stat().st_size > 0, name
    return {cell["group"]: cell for cell in summary["cells"]}


def test_verify_reads_telemetry_from_prometheus_and_it_agrees_with_sampling(monitored, tmp_path) -> None:
    """A smoke verify with monitoring on archives each cell's telemetry from Prometheus (no samplers); a smoke
    verify with it off samples on the node; per GPU, mean utilisation and power agree within the simulated GPUs'
    noise (`tolerance`), and the server's token counters within one request's tokens (the samplers start with
    the cell, so they may miss the first request's prompt; Prometheus holds a scrape from before the window)."""
    read = run_deploy(CLUSTER, "deploys/verify.py", *DATA, f"results_dir={tmp_path / 'prometheus'}", timeout=900)
    assert read.returncode == 0, out(read)[-4000:]
    sampled = run_deploy(
        CLUSTER, "deploys/verify.py", "monitoring=false", f"results_dir={tmp_path / 'sampled'}", timeout=900
    )
    assert sampled.returncode == 0, out(sampled)[-4000:]
    assert "telemetry from Prometheus" in out(read) and "telemetry from Prometheus" not in out(sampled)
    from_prometheus, from_samplers = archived_cells(tmp_path / "prometheus"), archived_cells(tmp_path / "sampled")
    assert sorted(from_prometheus) == sorted(from_samplers) == [0, 1]
    lines, far = [], []
    for group, cell in sorted(from_prometheus.items()):
        a, b = cell["telemetry"], from_samplers[group]["telemetry"]
        assert (a["source"], b["source"], a["simulated"]) == ("prometheus", "sampled", True)
        assert [g["index"] for g in a["gpus"]] == [g["index"] for g in b["gpus"]] == [4 * group + k for k in range(4)]
        for ga, gb in zip(a["gpus"], b["gpus"], strict=True):
            n = min(ga["samples"], gb["samples"])
            for field in ("utilization_mean_pct", "power_mean_w"):
                gap, allowed = abs(ga[field] - gb[field]), tolerance(field, n)
                lines.append(
                    f"group {group} GPU {ga['index']} {field}: prometheus {ga[field]:.2f} "
                    f"({ga['samples']} samples) vs sampled {gb[field]:.2f} ({gb['samples']}); "
                    f"|diff| {gap:.2f}, tolerance {allowed:.2f}"
                )
                if gap > allowed:
                    far.append(lines[-1])
        # One request's tokens: its output (the cell's mean) and at most input_len prompt tokens (random ids).
        per_request = {
            "generation_tokens": cell["total_output_tokens"] / cell["completed"],
            "prompt_tokens": cell["input_len"],
        }
        for field, allowed in per_request.items():
            x, y = a["server"][field], b["server"][field]
            lines.append(
                f"group {group} server {field}: prometheus {x:.0f} ({a['server']['scrapes']} scrapes) vs "
                f"sampled {y:.0f} ({b['server']['scrapes']}); tolerance {allowed:.0f}"
            )
            if abs(x - y) > allowed:
                far.append(lines[-1])
    print("telemetry agreement:\n" + "\n".join(lines))
    assert not far, "\n".join(far)


def test_xid_79_reaches_the_receiver_once_and_resolves_after_the_window(monitored) -> None:
    node_sh(CLUSTER, "touch /etc/hgxkit-sim/faults/xid-79-gpu3")
    try:
        alerts = until(lambda: delivered("GpuFellOffBus", "firing"))
        assert [(a["labels"]["node"], a["labels"]["gpu"], a["labels"]["severity"]) for a in alerts[:1]] == [
            ("node1", "3", "critical")
        ], alerting_state()
        # The gauge still says 79 (the switch stays): the alert resolves when the XID leaves the 30 s window.
        assert until(lambda: delivered("GpuFellOffBus", "resolved"), timeout=180), alerting_state()
        assert not delivered("GpuCriticalXid", "firing")  # one alert for XID 79
    finally:
        node_sh(CLUSTER, "rm -f /etc/hgxkit-sim/faults/xid-79-gpu3")


def test_stopping_a_group_fires_serving_down(monitored) -> None:
    node_sh(CLUSTER, "docker stop -t 5 deepseek-v4-flash-1")
    alerts = until(lambda: firing("ServingGroupDown"))
    assert [(a["labels"]["group"], a["labels"]["job"]) for a in alerts] == [("deepseek-v4-flash-1", "serving-sglang")]
    resources = node_sh(
        CLUSTER,
        "systemctl show -p MemoryCurrent -p CPUUsageNSec prometheus.service "
        "prometheus-node-exporter.service; docker stats --no-stream --format "
        "'{{.Name}} {{.MemUsage}} {{.CPUPerc}}' hgxkit-dcgm-exporter",
    )
    print(f"monitoring stack on the node:\n{resources}")


def test_stopping_the_dcgm_exporter_reaches_the_receiver_as_critical(monitored) -> None:
    node_sh(CLUSTER, "docker stop -t 5 hgxkit-dcgm-exporter", check=True)
    try:
        alerts = until(lambda: delivered("DcgmExporterDown", "firing"), timeout=180)
        assert [(a["labels"]["node"], a["labels"]["severity"]) for a in alerts[:1]] == [("node1", "critical")], (
            alerting_state()
        )
    finally:
        node_sh(CLUSTER, "docker start hgxkit-dcgm-exporter")
