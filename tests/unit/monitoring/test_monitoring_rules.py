"""The alert rules under Debian's real `promtool test rules` (series in, alerts out), one test file per behaviour in
tests/fixtures/monitoring/; mutants of the rules that those files must kill; and the Alertmanager configuration
under Debian's real `amtool check-config`.

The rules the fixtures run against are generated here (`RULES_SETUP`): default settings, node1 and node2 with 8
GPUs, SGLang group g-0 on node1 whose recipe gives TTFT P99 1000 ms. Run one by hand: write that file as
hgxkit-rules.yml beside the fixtures (`write_rules`), then `promtool test rules tests/fixtures/monitoring/*.yml`."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from hgxkit.monitoring.alertmanager import INHIBIT, Receivers, Timing, alertmanager_config
from hgxkit.monitoring.alerts import AlertSettings, alert_rules
from hgxkit.monitoring.scrape import ServingTarget

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "monitoring"
RULES_SETUP = (
    AlertSettings(),
    [("node1", 8), ("node2", 8)],
    [ServingTarget("node1", "g-0", 5000, "sglang", "/metrics", ttft_p99_ms=1000.0, itl_p99_ms=50.0)],
)


def _tool(name: str, package: str) -> str:
    path = shutil.which(name)
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{name} is missing: apt-get install {package} (hgxkit sim host setup --for test)")
        pytest.skip(f"{name} is missing: apt-get install {package}")
    return path


def write_rules(folder: Path, mutate: Callable[[dict], None] | None = None) -> dict:
    """The rules of RULES_SETUP as `folder`/hgxkit-rules.yml (after `mutate`, when given); the fixtures beside."""
    rules = alert_rules(*RULES_SETUP)
    if mutate:
        mutate(rules)
    (folder / "hgxkit-rules.yml").write_text(yaml.safe_dump(rules, sort_keys=False))
    for fixture in FIXTURES.glob("*.test.yml"):
        shutil.copy(fixture, folder / fixture.name)
    return rules


def promtool_test(folder: Path, *names: str) -> subprocess.CompletedProcess:
    files = names or tuple(sorted(p.name for p in folder.glob("*.test.yml")))
    return subprocess.run(
        [_tool("promtool", "prometheus"), "test", "rules", *files],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_every_fixture_passes(tmp_path: Path) -> None:
    write_rules(tmp_path)
    done = promtool_test(tmp_path)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    fixtures = sorted(p.name for p in FIXTURES.glob("*.test.yml"))
    assert len(fixtures) == 9 and out.count("SUCCESS") == len(fixtures), out


def test_every_alert_rule_has_a_firing_and_a_quiet_case() -> None:
    alerts = [r["alert"] for g in alert_rules(*RULES_SETUP)["groups"] for r in g["rules"] if "alert" in r]
    firing, quiet = set(), set()
    for fixture in FIXTURES.glob("*.test.yml"):
        for test in yaml.safe_load(fixture.read_text())["tests"]:
            for case in test.get("alert_rule_test", []):
                (firing if case["exp_alerts"] else quiet).add(case["alertname"])
    assert len(alerts) == 16
    assert set(alerts) - firing == set(), "no firing case"
    assert set(alerts) - quiet == set(), "no quiet (not yet, or resolved) case"


def _rule(rules: dict, name: str) -> dict:
    return next(r for g in rules["groups"] for r in g["rules"] if r.get("alert") == name)


def _replace(name: str, old: str, new: str) -> Callable[[dict], None]:
    def mutate(rules: dict) -> None:
        rule = _rule(rules, name)
        assert old in rule["expr"], (name, rule["expr"])
        rule["expr"] = rule["expr"].replace(old, new)

    return mutate


def _gauge_xid(rules: dict) -> None:
    """The rule as it was written before the window: the last-XID gauge alone."""
    _rule(rules, "GpuCriticalXid")["expr"] = "DCGM_FI_DEV_XID_ERRORS == 94 or DCGM_FI_DEV_XID_ERRORS == 48"


def _count_without_absent(rules: dict) -> None:
    _rule(rules, "GpuFewerThanExpected")["expr"] = (
        'count by (node) (DCGM_FI_DEV_GPU_UTIL{node="node1"}) < 8 or '
        'count by (node) (DCGM_FI_DEV_GPU_UTIL{node="node2"}) < 8'
    )


MUTANTS = {
    "ecc >0 inverted to <=0": (_replace("GpuEccDoubleBit", "> 0", "<= 0"), "ecc_double_bit.test.yml"),
    "ecc >0 to >=0": (_replace("GpuEccDoubleBit", "> 0", ">= 0"), "ecc_double_bit.test.yml"),
    "ecc >0 to <0": (_replace("GpuEccDoubleBit", "> 0", "< 0"), "ecc_double_bit.test.yml"),
    "exporter down ==0 inverted to !=0": (_replace("DcgmExporterDown", "== 0", "!= 0"), "exporter_down.test.yml"),
    "exporter down ==0 to ==1": (_replace("DcgmExporterDown", "== 0", "== 1"), "exporter_down.test.yml"),
    "exporter down ==0 to <0": (_replace("DcgmExporterDown", "== 0", "< 0"), "exporter_down.test.yml"),
    "xid on the gauge alone never resolves": (_gauge_xid, "xid_windowed_resolves.test.yml"),
    "xid fallback without the window": (
        _replace("GpuCriticalXid", "changes(DCGM_FI_DEV_XID_ERRORS[5m]) > 0", "DCGM_FI_DEV_XID_ERRORS > 0"),
        "xid_gauge_fallback_resolves.test.yml",
    ),
    "xid 79 also in the generic alert": (
        _replace("GpuCriticalXid", 'xid=~"48|', 'xid=~"79|48|'),
        "xid79_one_alert.test.yml",
    ),
    "gpu count without absent": (_count_without_absent, "gpu_count_absent.test.yml"),
    "power throttling on the SW power cap": (
        _replace("GpuPowerThrottling", "/ 8)", "/ 4)"),
        "power_throttling_hw_bits.test.yml",
    ),
}


@pytest.mark.parametrize("mutant", sorted(MUTANTS))
def test_a_mutant_of_the_rules_fails_its_fixture(tmp_path: Path, mutant: str) -> None:
    mutate, fixture = MUTANTS[mutant]
    write_rules(tmp_path)
    assert promtool_test(tmp_path, fixture).returncode == 0  # the fixture passes on the real rules
    write_rules(tmp_path, mutate)
    done = promtool_test(tmp_path, fixture)
    assert done.returncode != 0 and "FAILED" in done.stdout + done.stderr, done.stdout + done.stderr


def _amtool(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    amtool = _tool("amtool", "prometheus-alertmanager")
    return subprocess.run([amtool, *args], cwd=cwd, capture_output=True, text=True, timeout=60)


def test_amtool_accepts_every_receiver_and_routes_per_node(tmp_path: Path) -> None:
    receivers = Receivers(
        webhook_url="http://127.0.0.1:9099/hook",
        slack_webhook_url="https://hooks.slack.example/services/T/B/x",
        slack_channel="#gpu-alerts",
        pagerduty_routing_key="0123456789abcdef0123456789abcdef",
        email_to="ops@example.org",
        email_from="hgxkit@example.org",
        smtp_smarthost="smtp.example.org:587",
        smtp_username="alerts",
        smtp_password="pw",
    )
    path = tmp_path / "alertmanager.yml"
    path.write_text(yaml.safe_dump(alertmanager_config(receivers, Timing()), sort_keys=False))
    done = _amtool("check-config", str(path), cwd=tmp_path)
    assert done.returncode == 0 and "SUCCESS" in done.stdout, done.stdout + done.stderr
    assert " - 3 inhibit rules\n - 1 receivers\n" in done.stdout
    routed = _amtool("config", "routes", "test", f"--config.file={path}", "node=node1", "alertname=X", cwd=tmp_path)
    assert routed.returncode == 0 and routed.stdout.strip() == "hgxkit", routed.stdout + routed.stderr
    empty = tmp_path / "empty.yml"
    empty.write_text(yaml.safe_dump(alertmanager_config(Receivers(), Timing()), sort_keys=False))
    assert _amtool("check-config", str(empty), cwd=tmp_path).returncode == 0


def test_inhibition_keeps_one_alert_per_cause() -> None:
    config = alertmanager_config(Receivers(), Timing())
    rules = {(r["source_matchers"][0], r["target_matchers"][0]): r["equal"] for r in config["inhibit_rules"]}
    assert rules == {
        ('alertname="NodeDown"', 'alertname!="NodeDown"'): ["node"],
        ('alertname="GpuFellOffBus"', 'alertname="GpuCriticalXid"'): ["node", "gpu"],
        ('alertname="DcgmExporterDown"', 'alertname="GpuFewerThanExpected"'): ["node"],
    }
    alerts = {r["alert"] for g in alert_rules(*RULES_SETUP)["groups"] for r in g["rules"] if "alert" in r}
    named = {m.split('"')[1] for source, target, _ in INHIBIT for m in (source, target)}
    assert named <= alerts  # every inhibition names a rule that exists
    assert config["route"]["group_by"] == ["node"]


def test_each_group_with_a_ttft_figure_gets_its_own_rule_whatever_the_groups_before_it() -> None:
    """A group without a figure, or of a server hgxkit has no histogram for, is passed over, not the end of the list."""
    from hgxkit.monitoring.alerts import serving_rules

    groups = [
        ServingTarget("node1", "g-0", 5000, "sglang", "/metrics"),  # no TTFT P99 in its recipe
        ServingTarget("node1", "g-1", 5001, "trtllm", "/metrics", ttft_p99_ms=100.0),  # a kind hgxkit does not serve
        ServingTarget("node2", "g-2", 5000, "vllm", "/metrics", ttft_p99_ms=100.0),
    ]
    ttft = [r for r in serving_rules(AlertSettings(), groups) if r["alert"] == "ServingTtftP99High"]
    assert [(r["labels"]["node"], r["labels"]["group"]) for r in ttft] == [("node2", "g-2")]


def test_thresholds_are_written_to_the_microsecond() -> None:
    """No float noise (0.30000000000000004) and no false precision in a rule's text: seconds to 6 places."""
    from hgxkit.monitoring.alerts import reference_rules, serving_rules

    group = ServingTarget("node1", "g-0", 5000, "sglang", "/metrics", ttft_p99_ms=12.34567, itl_p99_ms=0.1 + 0.2)
    assert [r["expr"] for r in reference_rules([group])] == ["vector(0.012346)", "vector(0.0003)"]
    (ttft,) = [r for r in serving_rules(AlertSettings(), [group]) if r["alert"] == "ServingTtftP99High"]
    assert ttft["expr"].endswith(") > 0.018519")  # 12.34567 ms + 50 %
