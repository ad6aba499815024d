"""What Prometheus scrapes, from the inventory and the recipes: every node's DCGM and node exporter, every serving
group's /metrics (path and names from its server kind), the router; and the prometheus.yml that says so.

Every target is labelled `node` (inventory name); serving targets also `group` (container name) and `kind`.
A serving group's /metrics comes from the recipe's image, which hgxkit does not vouch for: its jobs carry scrape
limits (`ScrapeLimits`: samples, body size, labels per series and their lengths), so an image that floods them
fails its scrape (ServingGroupDown says so) instead of filling Prometheus; and `honor_labels` stays off, so the
image cannot overwrite the `node`/`group` labels the alerts and dashboards key on.
The monitoring host reaches its own exporters and groups over 127.0.0.1; another node's only when that node
binds beyond loopback (the same policy as serving: loopback unless told).

Example:
    >>> nodes = [MonitoredNode("node1", "10.0.0.1", "127.0.0.1", 8)]
    >>> groups = [ServingTarget("node1", "dsv4-0", 5000, "sglang", "/metrics")]
    >>> config, problems = prometheus_config(nodes, groups, monitoring_host="node1", router_port=None)
    >>> [job["job_name"] for job in config["scrape_configs"]], problems
    (['prometheus', 'dcgm', 'node', 'serving-sglang'], [])
    >>> config["scrape_configs"][3]["static_configs"][0]
    {'targets': ['127.0.0.1:5000'], 'labels': {'node': 'node1', 'group': 'dsv4-0', 'kind': 'sglang'}}
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from hgxkit.netaddr import is_loopback
from hgxkit.problems import Problem
from hgxkit.recipe.render import render_recipe
from hgxkit.recipe.spec import Recipe

RULES_FILE = "/etc/prometheus/hgxkit-rules.yml"
ALERTMANAGER_PORT = 9093
DCGM_PORT = 9400
NODE_PORT = 9100
PROMETHEUS_PORT = 9090
ROUTER_METRICS_PORT = 29000  # sglang-router's --prometheus-port default; roles/router keeps it on 127.0.0.1


@dataclass(frozen=True)
class MonitoredNode:
    """An inventory host as Prometheus reaches it: its address, where its exporters bind, its GPUs."""

    name: str
    address: str
    bind_address: str
    expected_gpus: int | None


@dataclass(frozen=True)
class ServingTarget:
    """One serving group's /metrics: the host it runs on, its container name, port, kind and metrics path."""

    node: str
    group: str
    port: int
    kind: str
    metrics_path: str
    bind_address: str = "127.0.0.1"
    address: str = ""
    ttft_p99_ms: float | None = None  # the recipe's TTFT P99 the alert compares with (None: no TTFT alert)
    itl_p99_ms: float | None = None  # the recipe's inter-token latency P99 (a dashboard line; None: none)


@dataclass(frozen=True)
class ScrapeLimits:
    """Limits on what one scrape of an image's /metrics may bring (Prometheus' scrape_config fields); a scrape over
    any of them fails as a whole. The defaults hold SGLang and vLLM at TP8 with every histogram many times over."""

    sample_limit: int = 20000
    body_size_limit: str = "16MB"
    label_limit: int = 40
    label_name_length_limit: int = 128
    label_value_length_limit: int = 1024

    def fields(self) -> dict:
        return {
            "sample_limit": self.sample_limit,
            "body_size_limit": self.body_size_limit,
            "label_limit": self.label_limit,
            "label_name_length_limit": self.label_name_length_limit,
            "label_value_length_limit": self.label_value_length_limit,
        }


def _host_port(address: str, port: int) -> str:
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


def reach(
    monitoring_host: str, node: str, address: str, bind_address: str, what: str
) -> tuple[str | None, list[Problem]]:
    """The address Prometheus on `monitoring_host` scrapes `node`'s `what` at, or a problem when it cannot.

    >>> reach("node1", "node2", "node2.lan", "127.0.0.1", "node exporter")[1][0].code
    'monitoring-reach'
    >>> reach("node1", "node2", "node2.lan", "0.0.0.0", "node exporter")
    ('node2.lan', [])
    """
    if node == monitoring_host:
        return "127.0.0.1", []
    if is_loopback(bind_address):
        return None, [
            Problem(
                "monitoring-reach",
                f"{node} binds its {what} to {bind_address}; Prometheus on {monitoring_host} cannot reach it",
                f"set monitoring_bind_address (for the exporters) or bind_address (serving) for {node} to an "
                f"address {monitoring_host} reaches, with monitoring_allow_exposed: true, or run Prometheus on it",
            )
        ]
    return address, []


def exposure_problems(bind_address: str, allowed: bool, what: str) -> list[Problem]:
    """Metrics and Prometheus' API have no key: binding beyond loopback needs `monitoring_allow_exposed: true`.

    >>> exposure_problems("0.0.0.0", False, "prometheus_bind_address")[0].code
    'exposure'
    >>> exposure_problems("127.0.0.1", False, "prometheus_bind_address")
    []
    """
    if is_loopback(bind_address) or allowed:
        return []
    return [
        Problem(
            "exposure",
            f"{what} {bind_address} publishes metrics (no authentication) beyond this host",
            f"bind {what} to 127.0.0.1, or set monitoring_allow_exposed: true on a private network",
        )
    ]


def prometheus_config(
    nodes: list[MonitoredNode],
    groups: list[ServingTarget],
    *,
    monitoring_host: str,
    router_port: int | None,
    router_host: str | None = None,
    scrape_interval: str = "15s",
    dcgm_port: int = DCGM_PORT,
    node_port: int = NODE_PORT,
    prometheus_port: int = PROMETHEUS_PORT,
    limits: ScrapeLimits | None = None,
    alertmanager: str | None = None,
) -> tuple[dict, list[Problem]]:
    """prometheus.yml as a dict (jobs: prometheus, dcgm, node, serving-<kind> per kind, router), and the
    problems that keep a target out of reach. `router_port` (the router's metrics port) None: no router.
    `limits` go on the jobs that scrape images (serving groups, router); `alertmanager` is where alerts go (a URL,
    `alerting_section`), None: nowhere."""
    limits = limits or ScrapeLimits()
    problems: list[Problem] = []
    dcgm: list[dict] = []
    node_targets: list[dict] = []
    for node in nodes:
        address, found = reach(monitoring_host, node.name, node.address, node.bind_address, "exporters")
        problems += found
        if address is None:
            continue
        labels = {"node": node.name}
        dcgm.append({"targets": [_host_port(address, dcgm_port)], "labels": labels})
        node_targets.append({"targets": [_host_port(address, node_port)], "labels": dict(labels)})
    itself = {"targets": [_host_port("127.0.0.1", prometheus_port)], "labels": {"node": monitoring_host}}
    jobs: list[dict] = [
        _job("prometheus", [itself]),
        _job("dcgm", dcgm),
        _job("node", node_targets),
    ]
    by_kind: dict[tuple[str, str], list[dict]] = {}
    for group in groups:
        address, found = reach(
            monitoring_host, group.node, group.address or group.node, group.bind_address, f"serving group {group.group}"
        )
        problems += found
        if address is None:
            continue
        labels = {"node": group.node, "group": group.group, "kind": group.kind}
        by_kind.setdefault((group.kind, group.metrics_path), []).append(
            {"targets": [_host_port(address, group.port)], "labels": labels}
        )
    for (kind, path), targets in by_kind.items():
        jobs.append(_job(f"serving-{kind}", targets, metrics_path=path, limits=limits))
    if router_port is not None and router_host is not None:
        if router_host == monitoring_host:
            target = {"targets": [_host_port("127.0.0.1", router_port)], "labels": {"node": router_host}}
            jobs.append(_job("router", [target], limits=limits))
        else:
            problems.append(
                Problem(
                    "monitoring-reach",
                    f"the router on {router_host} keeps its metrics on 127.0.0.1; Prometheus on "
                    f"{monitoring_host} cannot scrape them",
                    f"set monitoring_host: {router_host} (or router_host: {monitoring_host})",
                )
            )
    config: dict = {"global": {"scrape_interval": scrape_interval, "evaluation_interval": scrape_interval}}
    if alertmanager:
        config["alerting"] = alerting_section(alertmanager)
    config["rule_files"] = [RULES_FILE]
    config["scrape_configs"] = jobs
    return config, problems


def _job(name: str, targets: list[dict], metrics_path: str = "/metrics", limits: ScrapeLimits | None = None) -> dict:
    job: dict = {"job_name": name}
    if metrics_path != "/metrics":
        job["metrics_path"] = metrics_path
    if limits is not None:
        job.update(limits.fields())
    job["static_configs"] = targets
    return job


def alerting_section(url: str) -> dict:
    """prometheus.yml's `alerting:` for the Alertmanager at `url` (scheme, host:port, path prefix).

    >>> alerting_section("http://127.0.0.1:9093")
    {'alertmanagers': [{'scheme': 'http', 'static_configs': [{'targets': ['127.0.0.1:9093']}]}]}
    >>> alerting_section("https://am.example.org/prom")["alertmanagers"][0]["path_prefix"]
    '/prom'
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.username or parts.password:
        raise ValueError(f"alertmanager_url {url!r}: write http(s)://HOST[:PORT][/PREFIX], without a user or password")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    manager: dict = {"scheme": parts.scheme, "static_configs": [{"targets": [_host_port(parts.hostname, port)]}]}
    if parts.path.strip("/"):
        manager["path_prefix"] = "/" + parts.path.strip("/")
    return {"alertmanagers": [manager]}


def prometheus_args(bind_address: str, port: int, retention: str, retention_size: str | None) -> str:
    """The ARGS line of Debian's /etc/default/prometheus: listen address, retention by time (and size).

    >>> prometheus_args("127.0.0.1", 9090, "30d", None)
    'ARGS="--web.listen-address=127.0.0.1:9090 --storage.tsdb.retention.time=30d"\\n'
    """
    words = [f"--web.listen-address={_host_port(bind_address, port)}", f"--storage.tsdb.retention.time={retention}"]
    if retention_size:
        words.append(f"--storage.tsdb.retention.size={retention_size}")
    return f'ARGS="{" ".join(words)}"\n'


def node_exporter_args(bind_address: str, port: int) -> str:
    """The ARGS line of Debian's /etc/default/prometheus-node-exporter: where it listens.

    >>> node_exporter_args("127.0.0.1", 9100)
    'ARGS="--web.listen-address=127.0.0.1:9100"\\n'
    """
    return f'ARGS="--web.listen-address={_host_port(bind_address, port)}"\n'


def recipe_ttft_p99_ms(recipe: Recipe) -> float | None:
    """The TTFT P99 the alert compares with: the highest the recipe's reference cells give (the heaviest cell the
    post measured, what verify compares the node with), None when the recipe has none."""
    figures = [cell.ttft_p99_ms for cell in recipe.reference.cells if cell.ttft_p99_ms] if recipe.reference else []
    return max(figures) if figures else None


def recipe_itl_p99_ms(recipe: Recipe) -> float | None:
    """The inter-token latency P99 a dashboard draws as the recipe's line: the highest ITL P99 of its reference
    cells, else the highest TPOT P99 (posts give one or the other), None when it has neither."""
    cells = recipe.reference.cells if recipe.reference else ()
    for key in ("itl_p99_ms", "tpot_p99_ms"):
        figures = [getattr(cell, key) for cell in cells if getattr(cell, key)]
        if figures:
            return max(figures)
    return None


def recipe_targets(
    node: str,
    recipe: Recipe,
    *,
    total_gpus: int | None,
    address: str,
    bind_address: str,
    ttft_p99_ms: float | None = None,
) -> tuple[list[ServingTarget], list[str]]:
    """The serving groups `recipe` runs on `node` as scrape targets, and notes on the ones left out.

    A group whose server keeps /metrics off (SGLang without --enable-metrics) is left out: its scrape would
    only fail, and the serving-down alert would fire for a healthy group. `ttft_p99_ms` None: the recipe's.
    With `--network host` the server's own --host/--port bind; otherwise the published port on `bind_address`.
    """
    kind = recipe.server.server_kind
    if kind.metrics_flag and not recipe.server.has(kind.metrics_flag):
        return [], [
            f"{node}: the recipe's {kind.title} server runs without {kind.metrics_flag}: its groups' "
            f"{kind.metrics_path} is not scraped (add {kind.metrics_flag} to the recipe's server flags)"
        ]
    ttft = ttft_p99_ms if ttft_p99_ms is not None else recipe_ttft_p99_ms(recipe)
    host_network = recipe.docker.last("--network") == "host"
    targets = []
    for group in render_recipe(recipe, total_gpus=total_gpus):
        if host_network:
            port = int(recipe.server.flag("--port") or kind.default_port)
            listen = recipe.server.flag("--host") or kind.default_host
        elif group.port:
            port, listen = group.port, bind_address
        else:
            continue
        name = group.name or f"group-{group.group}"
        targets.append(
            ServingTarget(
                node, name, port, kind.name, kind.metrics_path, listen, address, ttft, recipe_itl_p99_ms(recipe)
            )
        )
    return targets, []


def choose_monitoring_host(explicit: str | None, candidates: list[str], inventory: list[str]) -> tuple[str | None, str]:
    """The host that runs Prometheus: `monitoring_host` when set, else the first host with `monitoring: true`.

    >>> choose_monitoring_host(None, ["node2"], ["node1", "node2"])
    ('node2', '')
    >>> choose_monitoring_host("gone", ["node1"], ["node1"])[1]
    'monitoring_host gone is not in the inventory (hosts: node1): set monitoring_host to one of them'
    """
    if explicit:
        if explicit not in inventory:
            return None, (
                f"monitoring_host {explicit} is not in the inventory (hosts: {', '.join(inventory)}): "
                "set monitoring_host to one of them"
            )
        return explicit, ""
    return (candidates[0], "") if candidates else (None, "")
