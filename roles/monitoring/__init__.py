"""Monitoring (optional) that stays after the benchmark: DCGM exporter and node exporter on every host with
`monitoring: true`, Prometheus with hgxkit's alert rules on the monitoring host, Grafana there when asked.

What is scraped and alerted on is decided in hgxkit/monitoring (pure, tested without a host); this role writes
the files and runs the services. An unchanged setup changes nothing: files are compared by content, containers
carry a hash of their spec, and Prometheus restarts only when its files changed (after `promtool check config`
accepted them). Knobs: roles/monitoring/defaults.py.

Example (deploys/monitoring.py):
    from roles.monitoring import monitoring
    monitoring()
"""

from __future__ import annotations

import json
from io import StringIO

import yaml
from pyinfra import host
from pyinfra.api import Host, deploy
from pyinfra.api.output import echo
from pyinfra.operations import apt, files, python, server, systemd
from pyinfra.operations.util import any_changed

from hgxkit.hostcmd import HostRunner, argv, script
from hgxkit.knobs import ssh_hostname
from hgxkit.monitoring.alerts import AlertSettings, alert_rules
from hgxkit.monitoring.dashboards import (
    GRAFANA_DASHBOARDS,
    all_dashboards,
    grafana_dashboard_provider,
    grafana_datasource,
    grafana_spec,
)
from hgxkit.monitoring.dcgm import counters_csv, exporter_spec
from hgxkit.monitoring.facts import MonitoringContainers
from hgxkit.monitoring.scrape import (
    ROUTER_METRICS_PORT,
    RULES_FILE,
    MonitoredNode,
    ServingTarget,
    choose_monitoring_host,
    exposure_problems,
    node_exporter_args,
    prometheus_args,
    prometheus_config,
    recipe_targets,
)
from hgxkit.node.facts_apt import InstalledPackages
from hgxkit.node.facts_gpu import NvidiaSmi
from hgxkit.problems import refuse
from hgxkit.runfailure import RunFailure
from hgxkit.serving.image import digest_from_inspect, image_to_run, pull_and_inspect
from hgxkit.serving.router import RouterSpec, choose_router_host, needs_replacing
from hgxkit.serving.steps import judged_for
from roles.monitoring.defaults import DEFAULTS, MonitoringKnobs

PROMETHEUS_YML = "/etc/prometheus/prometheus.yml"


def _yaml(data: dict) -> str:
    return "# written by hgxkit (roles/monitoring); edits are overwritten\n" + yaml.safe_dump(data, sort_keys=False)


def _address(h: Host) -> str:
    """How other hosts reach `h`: model_peer_address, ssh_hostname, or its inventory name."""
    candidates = (MonitoringKnobs.from_host(h).model_peer_address, ssh_hostname(h))
    return next((str(v) for v in candidates if v), h.name)


def _serving_targets(h: Host) -> tuple[list[ServingTarget], list[str]]:
    """The serving groups `h` runs, as scrape targets (the recipe's groups over its GPUs)."""
    total = MonitoringKnobs.from_host(h).serve_total_gpus
    if total is None:
        total = len(h.get_fact(NvidiaSmi).gpus) or None
    override = MonitoringKnobs.from_host(h).monitoring_ttft_p99_ms
    return recipe_targets(
        h.name,
        judged_for(h).recipe,
        total_gpus=int(total) if total else None,
        address=_address(h),
        bind_address=str(MonitoringKnobs.from_host(h).bind_address),
        ttft_p99_ms=float(override) if override else None,
    )


def _settings() -> AlertSettings:
    knobs = MonitoringKnobs.from_host(host)
    return AlertSettings(
        throttle_for=str(knobs.monitoring_throttle_for),
        nvlink_window=str(knobs.monitoring_nvlink_window),
        serving_down_for=str(knobs.monitoring_serving_down_for),
        ttft_margin=float(knobs.monitoring_ttft_margin),
        ttft_window=str(knobs.monitoring_ttft_window),
        ttft_for=str(knobs.monitoring_ttft_for),
    )


@deploy("hgxkit monitoring", data_defaults=DEFAULTS)
def monitoring() -> None:
    """Exporters on this host; Prometheus (and Grafana) too when it is the monitoring host."""
    knobs = MonitoringKnobs.from_host(host)
    if not knobs.monitoring:
        return
    hosts = [h for h in host.inventory if MonitoringKnobs.from_host(h).monitoring]
    chosen, error = choose_monitoring_host(
        knobs.monitoring_host, [h.name for h in hosts], [h.name for h in host.inventory]
    )
    refuse(f"monitoring checks failed on {host.name}; nothing was changed", [error] if error else [])
    allowed = bool(knobs.monitoring_allow_exposed)
    problems = exposure_problems(str(knobs.monitoring_bind_address), allowed, "monitoring_bind_address")
    if chosen == host.name:
        problems += exposure_problems(str(knobs.prometheus_bind_address), allowed, "prometheus_bind_address")
        if knobs.grafana:
            problems += exposure_problems(str(knobs.grafana_bind_address), allowed, "grafana_bind_address")
    refuse(f"monitoring checks failed on {host.name}; nothing was changed", problems)
    _exporters()
    if chosen == host.name:
        _prometheus(hosts)
        if knobs.grafana:
            _grafana()


def _exporters() -> None:
    """The DCGM exporter (container, by digest) and Debian's node exporter, listening on monitoring_bind_address."""
    knobs = MonitoringKnobs.from_host(host)
    directory = str(knobs.monitoring_dir)
    bind = str(knobs.monitoring_bind_address)
    files.directory(name="Monitoring directory", path=directory, mode="0755")
    counters = f"{directory}/dcgm-counters.csv"
    files.put(name="DCGM exporter counters", src=StringIO(counters_csv()), dest=counters, mode="0644")
    spec = exporter_spec(
        str(knobs.dcgm_exporter_image),
        bind_address=bind,
        port=int(knobs.dcgm_exporter_port),
        counters_file=counters,
        hostengine=knobs.dcgm_exporter_hostengine,
    )
    _container(spec, knobs.dcgm_exporter_digest, f"the DCGM exporter on {bind}:{knobs.dcgm_exporter_port}")
    # The package's default listens on every interface: its ARGS are written before it is installed (apt keeps an
    # existing conffile), so it never listens beyond monitoring_bind_address.
    node_args = files.put(
        name="Node exporter listen address",
        src=StringIO(node_exporter_args(bind, int(knobs.node_exporter_port))),
        dest="/etc/default/prometheus-node-exporter",
        mode="0644",
    )
    _debian_package("prometheus-node-exporter", "Debian's Prometheus node exporter")
    systemd.service(
        name="Node exporter running", service="prometheus-node-exporter.service", running=True, enabled=True
    )
    systemd.service(
        name="Node exporter takes its listen address",
        service="prometheus-node-exporter.service",
        running=True,
        restarted=True,
        _if=any_changed(node_args),
    )


def _debian_package(package: str, what: str) -> None:
    """Install `package` from the distribution's archive; the apt lists are refreshed first only when it is
    missing (a node's lists may be empty or old), so a re-run with it installed runs nothing."""
    if package in host.get_fact(InstalledPackages, patterns=package):
        return
    apt.update(name=f"Refresh apt lists for {package}")
    apt.packages(name=what, packages=[package])


def _prometheus(hosts: list[Host]) -> None:
    """prometheus.yml and the rules from the inventory and recipes; Debian's prometheus; restart when changed."""
    knobs = MonitoringKnobs.from_host(host)
    nodes, groups, notes = [], [], []
    for h in hosts:
        expected = MonitoringKnobs.from_host(h).expected_gpu_count
        bind = str(MonitoringKnobs.from_host(h).monitoring_bind_address)
        nodes.append(MonitoredNode(h.name, _address(h), bind, int(expected) if expected else None))
        found, left_out = _serving_targets(h)
        groups += found
        notes += left_out
    router_hosts = [h.name for h in host.inventory if MonitoringKnobs.from_host(h).router]
    router_host, _ = choose_router_host(knobs.router_host, router_hosts, [h.name for h in host.inventory])
    config, problems = prometheus_config(
        nodes,
        groups,
        monitoring_host=host.name,
        router_port=ROUTER_METRICS_PORT if router_host else None,
        router_host=router_host,
        scrape_interval=str(knobs.prometheus_scrape_interval),
        dcgm_port=int(knobs.dcgm_exporter_port),
        node_port=int(knobs.node_exporter_port),
        prometheus_port=int(knobs.prometheus_port),
    )
    refuse(f"monitoring checks failed on {host.name}; Prometheus was not configured", problems)
    for note in notes:
        echo(f"[{host.name}] monitoring: {note}")
    expected = [(n.name, n.expected_gpus) for n in nodes if n.expected_gpus]
    rules = alert_rules(_settings(), expected, groups)
    args = prometheus_args(
        str(knobs.prometheus_bind_address),
        int(knobs.prometheus_port),
        str(knobs.prometheus_retention),
        knobs.prometheus_retention_size,
    )
    changed = [
        files.put(
            name="Prometheus listen address and retention",
            dest="/etc/default/prometheus",
            mode="0644",
            src=StringIO(args),
        ),
        files.put(
            name="Prometheus scrape configuration", src=StringIO(_yaml(config)), dest=PROMETHEUS_YML, mode="0644"
        ),
        files.put(name="Prometheus alert rules", src=StringIO(_yaml(rules)), dest=RULES_FILE, mode="0644"),
    ]
    _debian_package("prometheus", "Debian's Prometheus")
    # A configuration promtool refuses stops the run here, before Prometheus restarts on it.
    server.shell(
        name="promtool checks the configuration and rules",
        _if=any_changed(*changed),
        commands=[argv("promtool", "check", "config", PROMETHEUS_YML)],
    )
    systemd.service(name="Prometheus running", service="prometheus.service", running=True, enabled=True)
    systemd.service(
        name="Prometheus takes the new configuration",
        service="prometheus.service",
        running=True,
        restarted=True,
        _if=any_changed(*changed),
    )
    directory = str(knobs.monitoring_dir)
    files.directory(name="Dashboards directory", path=f"{directory}/dashboards", mode="0755")
    for name, board in all_dashboards().items():
        files.put(
            name=f"Dashboard {name}",
            src=StringIO(json.dumps(board, indent=1) + "\n"),
            dest=f"{directory}/dashboards/{name}",
            mode="0644",
        )


def _grafana() -> None:
    """Grafana (container, by digest) with the Prometheus datasource and hgxkit's dashboards provisioned."""
    knobs = MonitoringKnobs.from_host(host)
    directory = str(knobs.monitoring_dir)
    provisioning = f"{directory}/grafana/provisioning"
    for sub in ("datasources", "dashboards"):
        files.directory(name=f"Grafana provisioning {sub}", path=f"{provisioning}/{sub}", mode="0755")
    url = f"http://127.0.0.1:{int(knobs.prometheus_port)}"
    files.put(
        name="Grafana datasource",
        src=StringIO(_yaml(grafana_datasource(url))),
        dest=f"{provisioning}/datasources/hgxkit.yml",
        mode="0644",
    )
    files.put(
        name="Grafana dashboards",
        src=StringIO(_yaml(grafana_dashboard_provider(GRAFANA_DASHBOARDS))),
        dest=f"{provisioning}/dashboards/hgxkit.yml",
        mode="0644",
    )
    spec = grafana_spec(
        str(knobs.grafana_image),
        bind_address=str(knobs.grafana_bind_address),
        port=int(knobs.grafana_port),
        monitoring_dir=directory,
    )
    _container(spec, None, f"Grafana on {knobs.grafana_bind_address}:{knobs.grafana_port}")


def _container(spec: RouterSpec, pinned: str | None, what: str) -> None:
    """Start `spec`'s container by digest unless it already runs with the same spec hash."""
    if not needs_replacing(host.get_fact(MonitoringContainers).get(spec.name), spec):
        return
    python.call(name=f"Start {what}", function=_start, spec=spec, pinned=pinned)


def _start(spec: RouterSpec, pinned: str | None) -> None:
    """Execute time: pull the image, check the digest against `pinned`, (re)create the container by digest."""
    run = HostRunner(host)
    digest = digest_from_inspect(run(pull_and_inspect(spec.image)), spec.image)
    if digest is None:
        raise RunFailure(f"`docker pull {spec.image}` gave no repository digest", [], "check the registry")
    if pinned and digest != pinned:
        refuse(
            f"{host.name}: {spec.image} was not started",
            [
                f"{spec.image} is now {digest}, not the pinned {pinned}: set the digest knob to the new one after "
                "checking the release, or name the tag that has the pinned digest"
            ],
        )
    run(script("docker rm -f {name} >/dev/null 2>&1 || true", name=spec.name))
    started = run(script("{run} 2>&1", run=spec.command(image_to_run(spec.image, digest))))
    state = run(
        script(
            "docker inspect -f {format} {name} 2>/dev/null || echo missing", format="{{.State.Running}}", name=spec.name
        )
    )
    if not state or state[-1].strip() != "true":
        logs = run(script("docker logs --tail 20 {name} 2>&1 || true", name=spec.name)) or started[-5:]
        raise RunFailure(
            f"{spec.name} did not stay up", logs[-20:], "read its log lines above, fix the cause and run again"
        )
    echo(f"[{host.name}] {spec.name} started from {spec.image} ({digest})")
