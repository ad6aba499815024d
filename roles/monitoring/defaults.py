"""Knobs of the monitoring role (inventory data overrides each; `--data key=value` for one run).

monitoring                    False. True: this host runs the DCGM exporter and the node exporter, and the
                              monitoring host also runs Prometheus with hgxkit's alert rules (and Grafana when
                              `grafana: true`). deploys/reproduce.py (and so deploys/dspark.py) includes
                              deploys/monitoring.py when it is on; it stays after the benchmark.
monitoring_host               the inventory host that runs Prometheus; None: the first host with `monitoring: true`.
monitoring_bind_address       (per host) where this host's exporters listen. 127.0.0.1 keeps them on the node:
                              Prometheus on another host then cannot scrape them (refused, naming the host).
monitoring_allow_exposed      metrics and Prometheus' API have no authentication: a bind address beyond loopback
                              (monitoring_bind_address, prometheus_bind_address, grafana_bind_address) is refused
                              unless this is true (the same policy as serving's bind_address).
monitoring_dir                where the role keeps its files on the node (counters file, dashboards, Grafana's
                              provisioning).
dcgm_exporter_image           NVIDIA's DCGM exporter. Pulled once; the container runs by its repository digest
                              (like the serving image), so a moved tag never changes a running exporter.
dcgm_exporter_digest          None, or the sha256:… digest the tag must resolve to (refused when it does not).
dcgm_exporter_port            the exporter's port (its default, 9400).
dcgm_exporter_hostengine      None: the exporter starts its own DCGM host engine in the container. "localhost:5555":
                              it reads the node's nv-hostengine (bring-up runs nvidia-dcgm); needs a DCGM on the
                              node at least as new as the exporter's.
node_exporter_port            the node exporter's port (its default, 9100). The node exporter is Debian's package
                              prometheus-node-exporter, not a container: it is a systemd service in the host's own
                              namespaces (real /proc, /sys and mounts without the bind-mount and --pid host set-up a
                              container needs), security updates come with the distribution's, and the same archive
                              gives Prometheus and promtool, which the tests use.
prometheus_port               Prometheus' port (9090).
prometheus_bind_address       where Prometheus listens (its UI and API): 127.0.0.1 unless told.
prometheus_retention          how long Prometheus keeps samples (--storage.tsdb.retention.time).
prometheus_retention_size     None, or a size cap (--storage.tsdb.retention.size, e.g. "50GB").
prometheus_scrape_interval    scrape and rule evaluation interval; also the resolution of the per-cell telemetry verify
                              reads from Prometheus when monitoring is on (its own samplers take one a second: 1s
                              matches them).
monitoring_throttle_for       how long thermal or power throttling must last before it alerts.
monitoring_nvlink_window      NVLink (and PCIe replay) error counters rising within this window alert.
monitoring_serving_down_for   how long a serving group's /metrics may fail before serving-down fires.
monitoring_ttft_margin        TTFT P99 alerts above (1 + margin) x the recipe's TTFT P99 (the highest its
                              reference cells give); 0.5: 50 % above.
monitoring_ttft_p99_ms        None, or the TTFT P99 (ms) to compare with instead of the recipe's (e.g. what verify
                              measured on this node).
monitoring_ttft_window        the rate window of the TTFT P99 (histogram_quantile over the kind's TTFT histogram).
monitoring_ttft_for           how long TTFT P99 must stay above before it alerts.
grafana                       False. True: run Grafana (container, by digest) on the monitoring host with hgxkit's
                              dashboards (a GPU one and one per server kind). The dashboards' JSON files are written
                              to <monitoring_dir>/dashboards either way.
grafana_image                 the Grafana image, pulled once and run by its repository digest.
grafana_port                  Grafana's port (3000).
grafana_bind_address          where Grafana listens: 127.0.0.1 unless told.

Shared knobs read here (hgxkit/knobs.py): expected_gpu_count (the fewer-GPUs alert), serve_total_gpus and
bind_address (which serving groups to scrape, and where), recipe; and monitoring, monitoring_host, prometheus_port,
prometheus_bind_address and prometheus_scrape_interval, documented above and shared because verify reads them.
"""

from hgxkit.knobs import shared_defaults

DEFAULTS = {
    "monitoring_bind_address": "127.0.0.1",
    "monitoring_allow_exposed": False,
    "monitoring_dir": "/etc/hgxkit/monitoring",
    "dcgm_exporter_image": "nvcr.io/nvidia/k8s/dcgm-exporter:4.4.2-4.7.1-ubuntu22.04",
    "dcgm_exporter_digest": None,
    "dcgm_exporter_port": 9400,
    "dcgm_exporter_hostengine": None,
    "node_exporter_port": 9100,
    "prometheus_retention": "30d",
    "prometheus_retention_size": None,
    "monitoring_throttle_for": "10m",
    "monitoring_nvlink_window": "10m",
    "monitoring_serving_down_for": "1m",
    "monitoring_ttft_margin": 0.5,
    "monitoring_ttft_p99_ms": None,
    "monitoring_ttft_window": "5m",
    "monitoring_ttft_for": "10m",
    "grafana": False,
    "grafana_image": "grafana/grafana-oss:11.2.0",
    "grafana_port": 3000,
    "grafana_bind_address": "127.0.0.1",
    **shared_defaults(
        "expected_gpu_count",
        "serve_total_gpus",
        "bind_address",
        "recipe",
        "monitoring",
        "monitoring_host",
        "prometheus_port",
        "prometheus_bind_address",
        "prometheus_scrape_interval",
    ),
}
