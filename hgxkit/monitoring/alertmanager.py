"""Alertmanager: where the alerts go. Its configuration (receivers from the role's knobs, grouping per node,
inhibition), its command line, and the checks on the receivers' values before anything is written.

Receivers: a webhook (Alertmanager's JSON), a Slack-compatible incoming webhook, PagerDuty (Events API v2 routing
key), email over SMTP; any set of them, all sent every alert and its resolution. Their URLs, keys and passwords
are secrets: the configuration holding them is written root:prometheus 0640 (the service's user reads it, no one
else), sent to the node on stdin, compared by hash, and never printed. Alertmanager listens on loopback with its
cluster port off (its default gossips on 0.0.0.0:9094).

Inhibition (a cause silences its consequences, one notification per cause): a node down silences every other
alert of that node; XID 79 silences the generic XID alert of that GPU; the DCGM exporter down silences the
GPU-count alert of that node (its GPUs vanish because it does not answer).

Example:
    >>> config = alertmanager_config(Receivers(webhook_url="http://127.0.0.1:9099/hook"), Timing())
    >>> config["route"]["group_by"], config["receivers"][0]["webhook_configs"][0]["send_resolved"]
    (['node'], True)
    >>> [sorted(rule) for rule in config["inhibit_rules"]][0]
    ['equal', 'source_matchers', 'target_matchers']
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from urllib.parse import urlsplit

RECEIVER = "hgxkit"
ALERTMANAGER_YML = "/etc/prometheus/alertmanager.yml"
ALERTMANAGER_DEFAULTS = "/etc/default/prometheus-alertmanager"
SERVICE_GROUP = "prometheus"  # Debian's prometheus-alertmanager runs as prometheus:prometheus
INHIBIT = (
    ('alertname="NodeDown"', 'alertname!="NodeDown"', ["node"]),
    ('alertname="GpuFellOffBus"', 'alertname="GpuCriticalXid"', ["node", "gpu"]),
    ('alertname="DcgmExporterDown"', 'alertname="GpuFewerThanExpected"', ["node"]),
)


@dataclass(frozen=True)
class Receivers:
    """Where alerts go (knobs alertmanager_*); each None is a receiver left out."""

    webhook_url: str | None = None
    slack_webhook_url: str | None = None
    slack_channel: str | None = None
    pagerduty_routing_key: str | None = None
    email_to: str | None = None
    email_from: str | None = None
    smtp_smarthost: str | None = None
    smtp_username: str | None = None
    smtp_password: str | None = None

    def any(self) -> bool:
        return bool(self.webhook_url or self.slack_webhook_url or self.pagerduty_routing_key or self.email_to)


@dataclass(frozen=True)
class Timing:
    """The route's timing (knobs alertmanager_group_wait, _group_interval, _repeat_interval)."""

    group_wait: str = "30s"
    group_interval: str = "5m"
    repeat_interval: str = "4h"


def receiver_problems(receivers: Receivers) -> list[str]:
    """What is wrong with the receivers' knobs, naming the knob, never its value (it may be a secret).

    >>> for line in receiver_problems(Receivers(webhook_url="ftp://x", email_to="ops@example.org")):
    ...     print(line)
    alertmanager_webhook_url is not an http(s) URL with a host
    alertmanager_email_to needs alertmanager_email_from and alertmanager_smtp_smarthost
    """
    problems = []
    urls = (
        ("alertmanager_webhook_url", receivers.webhook_url),
        ("alertmanager_slack_webhook_url", receivers.slack_webhook_url),
    )
    for knob, url in urls:
        if url is not None and not _http_url(url):
            problems.append(f"{knob} is not an http(s) URL with a host")
    if receivers.email_to and not (receivers.email_from and receivers.smtp_smarthost):
        problems.append("alertmanager_email_to needs alertmanager_email_from and alertmanager_smtp_smarthost")
    if receivers.smtp_password and not receivers.smtp_username:
        problems.append("alertmanager_smtp_password needs alertmanager_smtp_username")
    values = [v for v in vars(receivers).values() if isinstance(v, str)]
    if any("\n" in v or "\r" in v for v in values):
        problems.append("an alertmanager_* receiver knob holds a line break")
    return problems


def _http_url(url: str) -> bool:
    try:
        parts = urlsplit(url)
        _ = parts.port  # a port that is not a number raises here
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def _receiver(receivers: Receivers) -> dict:
    receiver: dict = {"name": RECEIVER}
    if receivers.webhook_url:
        receiver["webhook_configs"] = [{"url": receivers.webhook_url, "send_resolved": True}]
    if receivers.slack_webhook_url:
        slack: dict = {"api_url": receivers.slack_webhook_url, "send_resolved": True}
        if receivers.slack_channel:
            slack["channel"] = receivers.slack_channel
        receiver["slack_configs"] = [slack]
    if receivers.pagerduty_routing_key:
        receiver["pagerduty_configs"] = [{"routing_key": receivers.pagerduty_routing_key, "send_resolved": True}]
    if receivers.email_to:
        email: dict = {
            "to": receivers.email_to,
            "from": receivers.email_from,
            "smarthost": receivers.smtp_smarthost,
            "send_resolved": True,
        }
        if receivers.smtp_username:
            email["auth_username"] = receivers.smtp_username
        if receivers.smtp_password:
            email["auth_password"] = receivers.smtp_password
        receiver["email_configs"] = [email]
    return receiver


def alertmanager_config(receivers: Receivers, timing: Timing) -> dict:
    """alertmanager.yml as a dict: one route grouping per node, one receiver with every configured target,
    and the inhibition rules (`INHIBIT`). No receiver configured: alerts stop at Alertmanager (its API and UI)."""
    return {
        "route": {
            "receiver": RECEIVER,
            "group_by": ["node"],
            "group_wait": timing.group_wait,
            "group_interval": timing.group_interval,
            "repeat_interval": timing.repeat_interval,
        },
        "receivers": [_receiver(receivers)],
        "inhibit_rules": [
            {"source_matchers": [source], "target_matchers": [target], "equal": list(equal)}
            for source, target, equal in INHIBIT
        ],
    }


def alertmanager_args(bind_address: str, port: int) -> str:
    """The ARGS line of Debian's /etc/default/prometheus-alertmanager: listen address, cluster port off.

    >>> alertmanager_args("127.0.0.1", 9093)
    'ARGS="--web.listen-address=127.0.0.1:9093 --cluster.listen-address="\\n'
    """
    address = f"[{bind_address}]:{port}" if ":" in bind_address else f"{bind_address}:{port}"
    return f'ARGS="--web.listen-address={address} --cluster.listen-address="\n'


def file_sha256(text: str) -> str:
    """The sha256 of `text` as written on the node (pyinfra's stdin ends every line with a newline)."""
    return hashlib.sha256((text.rstrip("\n") + "\n").encode()).hexdigest()
