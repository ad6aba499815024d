"""Each role's knob class: its defaults are the ones the roles had before the classes (PREVIOUS_DEFAULTS, kept
here as written then), every knob has a meaning, and a shared knob has the same type wherever a role takes it."""

from __future__ import annotations

import importlib
from dataclasses import fields
from pathlib import Path
from typing import get_type_hints

import pytest

from hgxkit.knobs import Knobs, SharedKnobs
from roles import known_knob_names

ROOT = Path(__file__).resolve().parents[3]
ROLES = sorted(p.parent.name for p in (ROOT / "roles").glob("*/defaults.py"))
# Knobs declared with the classes (read before without a declaration, by hgxkit or the deploys, or set only by
# the simulator's inventory).
ADDED = {
    "serve": {"allow_docker_options", "router"},  # router: a prefill/decode split is refused without it
    "docker": {"allow_unauthenticated", "state_dir"},
    "monitoring": {
        "router",
        "router_host",
        "model_peer_address",
        "alertmanager_email_from",
        "alertmanager_email_to",
        "alertmanager_group_interval",
        "alertmanager_group_wait",
        "alertmanager_pagerduty_routing_key",
        "alertmanager_port",
        "alertmanager_repeat_interval",
        "alertmanager_slack_channel",
        "alertmanager_slack_webhook_url",
        "alertmanager_smtp_password",
        "alertmanager_smtp_smarthost",
        "alertmanager_smtp_username",
        "alertmanager_url",
        "alertmanager_webhook_url",
        "grafana_admin_password_file",
        "monitoring_exporter_down_for",
        "monitoring_scrape_body_size_limit",
        "monitoring_scrape_sample_limit",
        "monitoring_xid_window",
    },
    "router": {
        "allow_unauthenticated",
        "bind_address",
        "api_key",
        "serve_api_key_file",
        "serve_total_gpus",
        "model_peer_address",
    },
    "verify": {
        "prometheus_port",
        "prometheus_bind_address",
        "prometheus_scrape_interval",
        "router",  # the router's three: a prefill/decode split is benchmarked through it
        "router_host",
        "router_port",
    },
    "shared": {
        "verify",
        "hgxkit_simulated",
        "nvidia_driver_versions",
        "allow_unauthenticated",
        "model_peer_address",
        "router",
        "router_host",
        "router_port",  # the router role's, read by verify too
        "router_policy",  # the router role's, which an export of a prefill/decode split writes too
        "allow_docker_options",  # the recipe's allowances: every consumer's judgement reads them
    },
}

PREVIOUS_DEFAULTS: dict[str, dict[str, object]] = {
    "container_toolkit": {
        "nvidia_container_repo_url": None,
        "nvidia_container_repo_key_url": None,
        "nvidia_container_toolkit_version": "1.18.0-1",
        "container_toolkit_cgroupfs": True,
        "container_smoke_image": "ubuntu:24.04",
        "container_smoke_command": "nvidia-smi -L",
        "container_smoke_expect": "gpu-list",
        "expected_gpu_count": 8,
        "state_dir": "/var/lib/hgxkit",
        "bundle": None,
        "bundle_fingerprint": None,
    },
    "docker": {
        "docker_source": "auto",
        "docker_repo_url": None,
        "docker_repo_key_url": None,
        "docker_version": None,
        "image_cache": None,
        "image_cache_port": 5050,
        "image_cache_bind": None,
        "image_cache_upstream": "https://registry-1.docker.io",
        "image_cache_fill_s": 7200,
    },
    "gpu_health": {
        "dcgm_package": "datacenter-gpu-manager-4-cuda13",
        "dcgm_version": None,
        "dcgm_diag_level": 1,
        "gpu_health_persistence": True,
        "gpu_health_allow_xids": [],
        "expected_gpu_count": 8,
    },
    "model": {
        "recipe": "recipes/deepseek-v4-flash-dspark-marlin.yaml",
        "models_dir": "/data/models",
        "model_dirs_allowed": [],
        "bundle": None,
        "bundle_fingerprint": None,
        "model_source": "hub",
        "model_peer": None,
        "model_peer_address": None,
        "model_peer_user": "root",
        "model_peer_key": "/root/.ssh/hgxkit_model_peer",
        "model_peer_wait_s": 3600,
        "hf_endpoint": None,
        "hf_token_env": "HF_TOKEN",
        "hf_token_file": None,
        "model_venv": "/opt/hgxkit/hf-venv",
        "model_hf_hub_requirement": "huggingface_hub[hf_xet]==2.4.0",
        "model_lib_dir": "/usr/local/lib/hgxkit/model",
        "model_state_dir": "/var/lib/hgxkit/model",
        "model_disk_margin_pct": 2,
        "model_disk_margin_gb": 5,
        "model_full_rehash": False,
        "model_download_workers": 8,
        "model_fleet_fanout": 2,
        "model_fleet_port": 8097,
        "model_fleet_bind_any": False,
        "model_xet": True,
        "model_xet_high_performance": True,
        "model_xet_cache_dir": None,
        "model_xet_chunk_cache_gb": 10,
        "model_xet_shard_cache_gb": 16,
        "model_retries": 5,
        "model_retry_backoff_s": 2,
        "model_corrupt_refetch": 2,
        "model_wait_timeout_s": 21600,
        "model_poll_interval_s": 2,
        "model_progress_every_s": 10,
    },
    "monitoring": {
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
        "expected_gpu_count": 8,
        "serve_total_gpus": None,
        "bind_address": "127.0.0.1",
        "recipe": "recipes/deepseek-v4-flash-dspark-marlin.yaml",
        "monitoring": False,
        "monitoring_host": None,
        "prometheus_port": 9090,
        "prometheus_bind_address": "127.0.0.1",
        "prometheus_scrape_interval": "15s",
    },
    "nvidia_driver": {
        "nvidia_driver_branch": "580",
        "nvidia_driver_version": None,
        "nvidia_driver_flavor": "open",
        "nvidia_repo_url": None,
        "nvidia_repo_key_url": None,
        "nvidia_install_kernel_headers": True,
        "nvidia_blacklist_nouveau": True,
        "nvidia_unattended_upgrades": "blacklist",
        "nvidia_fabricmanager_mismatch": "repair",
        "nvidia_persistence": True,
        "allow_reboot": False,
        "nvidia_reboot_timeout": 900,
        "expected_gpu_count": 8,
        "bundle": None,
        "bundle_fingerprint": None,
    },
    "preflight": {
        "expected_gpu_count": 8,
        "models_dir": "/data/models",
        "expected_gpu_device_ids": ["2335"],
        "expected_nvswitch_count": 4,
        "supported_arch": ["x86_64"],
        "allow_secure_boot": False,
        "required_cgroup_version": 2,
        "min_free_disk_gb": 400,
        "min_ram_gb": 512,
        "nvidia_repo_url": None,
    },
    "serve": {
        "recipe": "recipes/deepseek-v4-flash-dspark-marlin.yaml",
        "serve_total_gpus": None,
        "bind_address": "127.0.0.1",
        "api_key": None,
        "serve_state_dir": "/var/lib/hgxkit/serve",
        "serve_api_key_file": "/etc/hgxkit/serve/api-key",
        "group_hosts": None,
        "fabric_address": None,
        "dist_port": None,
        "bundle": None,
        "bundle_fingerprint": None,
        "allow_unauthenticated": False,
        "pin_image": False,
        "image_update": False,
        "image_prefetch": True,
        "serve_pull_progress_every_s": 5,
        "serve_health_timeout": 2400,
        "serve_health_interval": 5,
        "serve_model_weights_gb": 160,
        "serve_host_ram_reserve_gb": 64,
        "multinode_reach_timeout": 5,
        "pd_accept_gap": False,
        "recipe_env_allowlist": None,
    },
    "router": {
        "router": False,
        "router_host": None,
        "router_port": 30000,
        "router_policy": "cache_aware",
        "router_bind_address": "127.0.0.1",
        "router_image": None,
        "router_worker_address": None,
        "router_circuit_reopen_s": 5,
        "router_health_timeout": 120,
    },
    "verify": {
        "recipe": "recipes/deepseek-v4-flash-dspark-marlin.yaml",
        "serve_total_gpus": None,
        "api_key": None,
        "serve_state_dir": "/var/lib/hgxkit/serve",
        "serve_api_key_file": "/etc/hgxkit/serve/api-key",
        "monitoring": False,
        "monitoring_host": None,
        "bench": "smoke",
        "bench_output_len": None,
        "bench_repeats": None,
        "results_dir": "results",
        "verify_workdir": "/var/lib/hgxkit/verify",
        "verify_timeout": 14400,
        "verify_poll": 5,
        "verify_ready_timeout": 600,
        "verify_gates": True,
        "verify_client_process": "per_container",
    },
    "shared": {
        "recipe": "recipes/deepseek-v4-flash-dspark-marlin.yaml",
        "expected_gpu_count": 8,
        "models_dir": "/data/models",
        "model_dirs_allowed": [],
        "recipe_env_allowlist": None,
        "serve_total_gpus": None,
        "bind_address": "127.0.0.1",
        "api_key": None,
        "serve_state_dir": "/var/lib/hgxkit/serve",
        "serve_api_key_file": "/etc/hgxkit/serve/api-key",
        "state_dir": "/var/lib/hgxkit",
        "host_lock_wait_s": 0,
        "bundle": None,
        "bundle_fingerprint": None,
        "recheck": False,
        "group_hosts": None,
        "fabric_address": None,
        "dist_port": None,
        "monitoring": False,
        "monitoring_host": None,
        "prometheus_port": 9090,
        "prometheus_bind_address": "127.0.0.1",
        "prometheus_scrape_interval": "15s",
    },
}


def knob_class(role: str) -> type[Knobs]:
    module = importlib.import_module(f"roles.{role}.defaults")
    found = [v for v in vars(module).values() if isinstance(v, type) and issubclass(v, Knobs) and v is not Knobs]
    assert len(found) == 1, (role, found)
    return found[0]


def test_every_role_is_in_the_table() -> None:
    assert sorted(set(PREVIOUS_DEFAULTS) - {"shared"}) == ROLES


@pytest.mark.parametrize("role", [*ROLES, "shared"])
def test_the_defaults_are_the_ones_the_roles_had(role: str) -> None:
    cls = SharedKnobs if role == "shared" else knob_class(role)
    defaults = cls.defaults()
    assert set(defaults) - set(PREVIOUS_DEFAULTS[role]) == ADDED.get(role, set())
    assert {name: defaults[name] for name in PREVIOUS_DEFAULTS[role]} == PREVIOUS_DEFAULTS[role]
    if role != "shared":
        assert defaults == importlib.import_module(f"roles.{role}.defaults").DEFAULTS


@pytest.mark.parametrize("role", ROLES)
def test_every_knob_has_a_meaning_and_a_shared_one_its_shared_type(role: str) -> None:
    cls = knob_class(role)
    assert all(doc.strip() for doc in cls.docs().values()), cls.docs()
    shared_types, own_types = get_type_hints(SharedKnobs), get_type_hints(cls)
    for f in fields(cls):  # type: ignore[arg-type]
        if f.name in shared_types:
            assert own_types[f.name] == shared_types[f.name], f.name
            assert f.metadata["doc"] == SharedKnobs.docs()[f.name], f.name


def test_the_unknown_knob_check_knows_every_declared_knob() -> None:
    declared = set(SharedKnobs.defaults()).union(*(knob_class(role).defaults() for role in ROLES))
    assert known_knob_names() == declared


def test_the_table_in_each_roles_docstring_names_every_knob() -> None:
    for role in ROLES:
        doc = importlib.import_module(f"roles.{role}.defaults").__doc__
        assert all(f"\n{name} " in doc for name in knob_class(role).defaults()), role
