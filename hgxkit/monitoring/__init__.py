"""Monitoring that stays after the benchmark: DCGM and node exporters, Prometheus, alert rules, dashboards.

The decisions are pure and tested without a host: which DCGM fields the exporter reads (`dcgm`), what
Prometheus scrapes (`scrape`), the alert rules (`alerts`), the Grafana dashboards (`dashboards`).
roles/monitoring applies them on the nodes.
"""
