"""Knobs of the monitoring role (inventory data overrides each; `--data key=value` for one run).


Shared knobs read here (hgxkit/knobs.py): expected_gpu_count (the fewer-GPUs alert), serve_total_gpus and
bind_address (which serving groups to scrape, and where), recipe; and monitoring, monitoring_host, prometheus_port,
prometheus_bind_address and prometheus_scrape_interval, documented above and shared because verify reads them.
"""

from __future__ import annotations

from dataclasses import dataclass

from hgxkit.knobs import Knobs, declare, shared


@dataclass(frozen=True)
class MonitoringKnobs(Knobs):
    """The monitoring role's knobs (inventory data or `--data key=value` overrides each)."""

    monitoring_bind_address: str = declare(
        "127.0.0.1",
        "(per host) where this host's exporters listen. 127.0.0.1 keeps them on the node: Prometheus on another host "
        "then cannot scrape them (refused, naming the host).",
    )
    monitoring_allow_exposed: bool = declare(
        False,
        "metrics and Prometheus' API have no authentication: a bind address beyond loopback (monitoring_bind_address,"
        " prometheus_bind_address, grafana_bind_address) is refused unless this is true (the same policy as serving's"
        " bind_address).",
    )
    monitoring_dir: str = declare(
        "/etc/hgxkit/monitoring",
        "where the role keeps its files on the node (counters file, dashboards, Grafana's provisioning).",
    )
    dcgm_exporter_image: str = declare(
        "nvcr.io/nvidia/k8s/dcgm-exporter:4.4.2-4.7.1-ubuntu22.04",
        "NVIDIA's DCGM exporter. Pulled once; the container runs by its repository digest (like the serving image), "
        "so a moved tag never changes a running exporter.",
    )
    dcgm_exporter_digest: str | None = declare(
        None,
        "None, or the sha256:… digest the tag must resolve to (refused when it does not).",
    )
    dcgm_exporter_port: int = declare(9400, "the exporter's port (its default, 9400).")
    dcgm_exporter_hostengine: str | None = declare(
        None,
        'None: the exporter starts its own DCGM host engine in the container. "localhost:5555": it reads the node\'s '
        "nv-hostengine (bring-up runs nvidia-dcgm); needs a DCGM on the node at least as new as the exporter's.",
    )
    node_exporter_port: int = declare(
        9100,
        "the node exporter's port (its default, 9100). The node exporter is Debian's package "
        "prometheus-node-exporter, not a container: it is a systemd service in the host's own namespaces (real /proc,"
        " /sys and mounts without the bind-mount and --pid host set-up a container needs), security updates come with"
        " the distribution's, and the same archive gives Prometheus and promtool, which the tests use.",
    )
    prometheus_retention: str = declare("30d", "how long Prometheus keeps samples (--storage.tsdb.retention.time).")
    prometheus_retention_size: str | None = declare(
        None,
        'None, or a size cap (--storage.tsdb.retention.size, e.g. "50GB").',
    )
    monitoring_throttle_for: str = declare("10m", "how long thermal or power throttling must last before it alerts.")
    monitoring_nvlink_window: str = declare(
        "10m",
        "NVLink (and PCIe replay) error counters rising within this window alert.",
    )
    monitoring_serving_down_for: str = declare(
        "1m",
        "how long a serving group's /metrics may fail before serving-down fires.",
    )
    monitoring_ttft_margin: float = declare(
        0.5,
        "TTFT P99 alerts above (1 + margin) x the recipe's TTFT P99 (the highest its reference cells give); 0.5: 50 %"
        " above.",
    )
    monitoring_ttft_p99_ms: float | None = declare(
        None,
        "None, or the TTFT P99 (ms) to compare with instead of the recipe's (e.g. what verify measured on this node).",
    )
    monitoring_ttft_window: str = declare(
        "5m",
        "the rate window of the TTFT P99 (histogram_quantile over the kind's TTFT histogram).",
    )
    monitoring_ttft_for: str = declare("10m", "how long TTFT P99 must stay above before it alerts.")
    monitoring_xid_window: str = declare(
        "5m",
        "an XID alert fires for this long after the XID and then resolves: the DCGM exporter counts XIDs within it "
        "(DCGM_EXP_XID_ERRORS_COUNT, its --xid-count-window-size; 5m is the exporter's default).",
    )
    monitoring_exporter_down_for: str = declare(
        "2m",
        "how long an exporter may not answer before DcgmExporterDown (critical), NodeExporterDown or NodeDown fire.",
    )
    monitoring_scrape_sample_limit: int = declare(
        20000,
        "the most samples one scrape of a serving group's or the router's /metrics may return (the image is the "
        "recipe's); more fails that scrape, and ServingGroupDown fires.",
    )
    monitoring_scrape_body_size_limit: str = declare(
        "16MB",
        "the largest /metrics body of a serving group or the router Prometheus reads (its body_size_limit).",
    )
    alertmanager_url: str | None = declare(
        None,
        "None: Debian's prometheus-alertmanager runs on the monitoring host, on 127.0.0.1:alertmanager_port, with the "
        "receivers below. A URL (http(s)://HOST:PORT[/PREFIX]): Prometheus sends its alerts there instead (a fleet's "
        "one Alertmanager) and none runs here.",
    )
    alertmanager_port: int = declare(9093, "the local Alertmanager's port (its default, 9093; loopback only).")
    alertmanager_webhook_url: str | None = declare(
        None,
        "None, or a URL that gets every alert and its resolution as Alertmanager's webhook JSON. Kept root-only on "
        "the node, never printed.",
    )
    alertmanager_slack_webhook_url: str | None = declare(
        None,
        "None, or a Slack (or Slack-compatible, e.g. Mattermost) incoming-webhook URL. A secret: root-only, never "
        "printed.",
    )
    alertmanager_slack_channel: str | None = declare(None, "None (the webhook's own channel), or a channel to post in.")
    alertmanager_pagerduty_routing_key: str | None = declare(
        None,
        "None, or a PagerDuty Events API v2 routing key. A secret: root-only, never printed.",
    )
    alertmanager_email_to: str | None = declare(
        None,
        "None, or the address alerts are mailed to (needs alertmanager_email_from and alertmanager_smtp_smarthost).",
    )
    alertmanager_email_from: str | None = declare(None, "the sender address of alert mail.")
    alertmanager_smtp_smarthost: str | None = declare(None, 'the SMTP server, HOST:PORT (e.g. "smtp.example.org:587").')
    alertmanager_smtp_username: str | None = declare(None, "None, or the SMTP user name.")
    alertmanager_smtp_password: str | None = declare(
        None,
        "None, or the SMTP password. A secret: root-only, never printed.",
    )
    alertmanager_group_wait: str = declare(
        "30s",
        "how long Alertmanager gathers a node's alerts before the first notification (alerts are grouped per node).",
    )
    alertmanager_group_interval: str = declare(
        "5m",
        "how long it waits before notifying a node's group again with what changed (new alerts, resolutions).",
    )
    alertmanager_repeat_interval: str = declare("4h", "how often an alert that still fires is sent again.")
    router: bool = shared("router")
    router_host: str | None = shared("router_host")
    model_peer_address: str | None = shared("model_peer_address")
    grafana: bool = declare(
        False,
        "False. True: run Grafana (container, by digest) on the monitoring host with hgxkit's dashboards (a GPU one "
        "and one per server kind). The dashboards' JSON files are written to <monitoring_dir>/dashboards either way.",
    )
    grafana_image: str = declare(
        "grafana/grafana-oss:11.2.0",
        "the Grafana image, pulled once and run by its repository digest.",
    )
    grafana_port: int = declare(3000, "Grafana's port (3000).")
    grafana_bind_address: str = declare("127.0.0.1", "where Grafana listens: 127.0.0.1 unless told.")
    grafana_admin_password_file: str = declare(
        "/etc/hgxkit/monitoring/grafana-admin-password",
        "Grafana's admin password (user admin), generated on the node at the first deploy, root-only (root:root "
        "0640: Grafana's container reads it as group root). Never admin/admin; read it with sudo on the node.",
    )
    expected_gpu_count: int | None = shared("expected_gpu_count")
    serve_total_gpus: int | None = shared("serve_total_gpus")
    bind_address: str = shared("bind_address")
    recipe: str = shared("recipe")
    monitoring: bool = shared("monitoring")
    monitoring_host: str | None = shared("monitoring_host")
    prometheus_port: int = shared("prometheus_port")
    prometheus_bind_address: str = shared("prometheus_bind_address")
    prometheus_scrape_interval: str = shared("prometheus_scrape_interval")


DEFAULTS = MonitoringKnobs.defaults()
__doc__ = f"{__doc__}\n{MonitoringKnobs.table()}\n"
