"""Monitoring (optional) that stays after the benchmark: DCGM exporter and node exporter on every host with
`monitoring: true`, Prometheus with hgxkit's alert rules and an Alertmanager that sends them to the configured
receivers on the monitoring host, Grafana there when asked.

What is scraped and alerted on is decided in hgxkit/monitoring (pure, tested without a host); this role writes
the files and runs the services. An unchanged setup changes nothing: files are compared by content (the
Alertmanager configuration, which holds the receivers' secrets, by hash), containers carry a hash of their spec,
and Prometheus and Alertmanager restart only when their files changed (after `promtool check config` and
`amtool check-config` accepted them). Knobs: roles/monitoring/defaults.py.

Example (deploys/monitoring.py):
    from roles.monitoring import monitoring
    monitoring()
"""

from __future__ import annotations

import json
from io import StringIO
from pathlib import PurePosixPath

import yaml
from pyinfra import host
from pyinfra.api import Host, StringCommand, deploy
from pyinfra.api.output import echo
from pyinfra.operations import apt, files, python, server, systemd
from pyinfra.operations.util import any_changed

from hgxkit.hostcmd import HostRunner, SecretLines, argv, script
from hgxkit.knobs import ssh_hostname
from hgxkit.monitoring.alertmanager import (
    ALERTMANAGER_DEFAULTS,
    ALERTMANAGER_YML,
    SERVICE_GROUP,
    Receivers,
    Timing,
    alertmanager_args,
    alertmanager_config,
    file_sha256,
    receiver_problems,
)
from hgxkit.monitoring.alerts import AlertSettings, alert_rules
from hgxkit.monitoring.dashboards import (
    GRAFANA_DASHBOARDS,
    all_dashboards,
    grafana_dashboard_provider,
    grafana_datasource,
    grafana_spec,
)
from hgxkit.monitoring.dcgm import counters_csv, exporter_spec
from hgxkit.monitoring.facts import FileSha256, MonitoringContainers
from hgxkit.monitoring.readback import duration_s
from hgxkit.monitoring.scrape import (
    ROUTER_METRICS_PORT,
    RULES_FILE,
    MonitoredNode,
    ScrapeLimits,
    ServingTarget,
    alerting_section,
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
        xid_window=str(knobs.monitoring_xid_window),
        exporter_down_for=str(knobs.monitoring_exporter_down_for),
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
        problems += receiver_problems(_receivers())
        problems += _alertmanager_url_problems()
    refuse(f"monitoring checks failed on {host.name}; nothing was changed", problems)
    _exporters()
    if chosen == host.name:
        _prometheus(hosts)
        if knobs.alertmanager_url is None:
            _alertmanager()
        if knobs.grafana:
            _grafana()


def _receivers() -> Receivers:
    knobs = MonitoringKnobs.from_host(host)
    return Receivers(
        webhook_url=knobs.alertmanager_webhook_url,
        slack_webhook_url=knobs.alertmanager_slack_webhook_url,
        slack_channel=knobs.alertmanager_slack_channel,
        pagerduty_routing_key=knobs.alertmanager_pagerduty_routing_key,
        email_to=knobs.alertmanager_email_to,
        email_from=knobs.alertmanager_email_from,
        smtp_smarthost=knobs.alertmanager_smtp_smarthost,
        smtp_username=knobs.alertmanager_smtp_username,
        smtp_password=knobs.alertmanager_smtp_password,
    )


def _alertmanager_target() -> str:
    """Where Prometheus sends alerts: alertmanager_url, else the local Alertmanager on loopback."""
    knobs = MonitoringKnobs.from_host(host)
    return str(knobs.alertmanager_url or f"http://127.0.0.1:{int(knobs.alertmanager_port)}")


def _alertmanager_url_problems() -> list[str]:
    try:
        alerting_section(_alertmanager_target())
    except ValueError as error:
        return [str(error)]
    return []


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
        xid_window_ms=int(duration_s(str(knobs.monitoring_xid_window)) * 1000),
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


def _scrape_config(hosts: list[Host]) -> tuple[dict, list[MonitoredNode], list[ServingTarget]]:
    """prometheus.yml from the inventory and recipes (refused when a target is out of reach), its nodes and groups."""
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
    limits = ScrapeLimits(
        sample_limit=int(knobs.monitoring_scrape_sample_limit),
        body_size_limit=str(knobs.monitoring_scrape_body_size_limit),
    )
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
        limits=limits,
        alertmanager=_alertmanager_target(),
    )
    refuse(f"monitoring checks failed on {host.name}; Prometheus was not configured", problems)
    for note in notes:
        echo(f"[{host.name}] monitoring: {note}")
    return config, nodes, groups


def _prometheus(hosts: list[Host]) -> None:
    """prometheus.yml and the rules from the inventory and recipes; Debian's prometheus; restart when changed."""
    knobs = MonitoringKnobs.from_host(host)
    config, nodes, groups = _scrape_config(hosts)
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
    _checked_service(
        "Prometheus",
        "prometheus.service",
        ("promtool checks the configuration and rules", argv("promtool", "check", "config", PROMETHEUS_YML)),
        changed,
    )
    _dashboards()


def _checked_service(what: str, service: str, check: tuple[str, StringCommand], changed: list) -> None:
    """`service` running; when its files `changed`, `check` (a command that fails on a file the service would
    refuse: the run stops there, before the restart), then a restart onto them."""
    name, command = check
    server.shell(name=name, _if=any_changed(*changed), commands=[command])
    systemd.service(name=f"{what} running", service=service, running=True, enabled=True)
    systemd.service(
        name=f"{what} takes the new configuration",
        service=service,
        running=True,
        restarted=True,
        _if=any_changed(*changed),
    )


def _dashboards() -> None:
    directory = str(MonitoringKnobs.from_host(host).monitoring_dir)
    files.directory(name="Dashboards directory", path=f"{directory}/dashboards", mode="0755")
    for name, board in all_dashboards().items():
        files.put(
            name=f"Dashboard {name}",
            src=StringIO(json.dumps(board, indent=1) + "\n"),
            dest=f"{directory}/dashboards/{name}",
            mode="0644",
        )


def _alertmanager() -> None:
    """Debian's Alertmanager on loopback (cluster port off) with the receivers from the knobs; its configuration,
    which holds their secrets, root:prometheus 0640, written from stdin only when its hash differs, checked by
    `amtool check-config` before the service restarts on it."""
    knobs = MonitoringKnobs.from_host(host)
    receivers = _receivers()
    timing = Timing(
        group_wait=str(knobs.alertmanager_group_wait),
        group_interval=str(knobs.alertmanager_group_interval),
        repeat_interval=str(knobs.alertmanager_repeat_interval),
    )
    text = _yaml(alertmanager_config(receivers, timing))
    # Written before the package is installed (apt keeps an existing conffile), so the service never starts with
    # Debian's sample configuration or its cluster port on every interface.
    changed = [
        files.put(
            name="Alertmanager listen address (loopback, cluster off)",
            src=StringIO(alertmanager_args("127.0.0.1", int(knobs.alertmanager_port))),
            dest=ALERTMANAGER_DEFAULTS,
            mode="0644",
        )
    ]
    if host.get_fact(FileSha256, path=ALERTMANAGER_YML) != file_sha256(text):
        changed.append(
            server.shell(
                name="Alertmanager receivers (root:prometheus 0640; secrets not printed)",
                commands=[_secret_write(ALERTMANAGER_YML, SERVICE_GROUP)],
                _stdin=SecretLines([text.rstrip("\n")]),
            )
        )
    _debian_package("prometheus-alertmanager", "Debian's Alertmanager")
    _checked_service(
        "Alertmanager",
        "prometheus-alertmanager.service",
        ("amtool checks the Alertmanager configuration", _amtool_check()),
        changed,
    )
    if not receivers.any():
        echo(
            f"[{host.name}] monitoring: no alert receiver is set, so alerts stop at Alertmanager (127.0.0.1:"
            f"{knobs.alertmanager_port}): set alertmanager_webhook_url, _slack_webhook_url, _pagerduty_routing_key "
            "or _email_to"
        )


def _secret_write(path: str, group: str) -> StringCommand:
    """Write stdin to `path` atomically, owner root, group `group`, mode 0640: a file only root and the service
    read. The group comes with Debian's prometheus package, which this role installs before."""
    return script(
        "umask 077 && mkdir -p {dir} && cat > {tmp} && chown root:{group} {tmp} && chmod 0640 {tmp} && "
        "mv -f {tmp} {path}",
        dir=str(PurePosixPath(path).parent),
        tmp=f"{path}.hgxkit-tmp",
        group=group,
        path=path,
    )


def _amtool_check() -> StringCommand:
    """`amtool check-config` on the written file; its output is printed without lines that may quote a receiver's
    URL, key or password (the whole output stays on the node: run the same command there as root)."""
    return script(
        "out=$(amtool check-config {path} 2>&1) && exit 0; "
        "printf '%s\\n' \"$out\" | grep -v -i -E {secretish}; "
        "echo 'amtool refused '{path}' (lines that could quote a secret left out: run amtool check-config there)'; "
        "exit 1",
        path=ALERTMANAGER_YML,
        secretish="://|url|key|pass|secret|token|@",
    )


def _grafana() -> None:
    """Grafana (container, by digest) with the Prometheus datasource and hgxkit's dashboards provisioned, and an
    admin password generated on the node (never Grafana's default)."""
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
    password_file = str(knobs.grafana_admin_password_file)
    generated = None
    if host.get_fact(FileSha256, path=password_file) is None:
        generated = server.shell(
            name=f"Grafana admin password generated (root-only, {password_file})",
            commands=[
                script(
                    "umask 077 && mkdir -p {dir} && head -c 48 /dev/urandom | base64 | tr -dc A-Za-z0-9 | head -c 32 "
                    "> {tmp} && chmod 0640 {tmp} && mv -f {tmp} {path}",
                    dir=str(PurePosixPath(password_file).parent),
                    tmp=f"{password_file}.hgxkit-tmp",
                    path=password_file,
                )
            ],
        )
    spec = grafana_spec(
        str(knobs.grafana_image),
        bind_address=str(knobs.grafana_bind_address),
        port=int(knobs.grafana_port),
        monitoring_dir=directory,
        password_file=password_file,
    )
    _container(spec, None, f"Grafana on {knobs.grafana_bind_address}:{knobs.grafana_port}")
    if generated is not None:
        # Grafana takes the file only when it creates its database: one made before keeps its old password.
        server.shell(
            name="Grafana admin takes the generated password",
            commands=[
                script(
                    "for i in 1 2 3 4 5 6 7 8 9 10; do docker exec -i {name} grafana cli admin reset-admin-password "
                    "--password-from-stdin < {path} >/dev/null 2>&1 && exit 0; sleep 3; done; "
                    "echo 'could not set the Grafana admin password (docker logs '{name}')'; exit 1",
                    name=spec.name,
                    path=password_file,
                )
            ],
        )
        echo(f"[{host.name}] Grafana's admin password is in {password_file} on the node (root-only; user admin)")


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
