"""GPU health: DCGM installed and running, `dcgmi diag` passing, ECC on and clean, no XIDs, persistence on.

Example (deploys/bringup.py):
    from roles.gpu_health import gpu_health
    gpu_health()
"""

from __future__ import annotations

from dataclasses import replace

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.operations import python, server, systemd

from hgxkit.node.apt import apt_install_commands
from hgxkit.node.driver import NVIDIA_CUDA_LIST
from hgxkit.node.facts_apt import InstalledPackages
from hgxkit.node.facts_system import ServiceActive
from hgxkit.node.health import GpuHealthReport, gpu_health_report
from hgxkit.problems import refuse
from roles.gpu_health.defaults import DCGM_UNIT, DEFAULTS, GpuHealthKnobs


def current_report() -> GpuHealthReport:
    """Run the health checks on this host now."""
    knobs = GpuHealthKnobs.from_host(host)
    report = gpu_health_report(host.get_fact, level=knobs.dcgm_diag_level, expected_gpus=knobs.expected_gpu_count)
    allowed = set(knobs.gpu_health_allow_xids)
    return replace(report, xids=[x for x in report.xids if x.code not in allowed])


@deploy("hgxkit GPU health", data_defaults=DEFAULTS)
def gpu_health() -> None:
    """Install DCGM and gate on the node's GPU health (changes nothing once DCGM runs)."""
    knobs = GpuHealthKnobs.from_host(host)
    package, version = knobs.dcgm_package, knobs.dcgm_version
    installed = host.get_fact(InstalledPackages, patterns=package)
    needs_install = package not in installed or (version is not None and installed[package] != version)
    if needs_install:
        server.shell(
            name=f"Install DCGM ({package})",
            commands=apt_install_commands(NVIDIA_CUDA_LIST, [f"{package}={version}" if version else package]),
        )
    running = host.get_fact(ServiceActive, unit=DCGM_UNIT)
    if needs_install or not running:
        systemd.service(name="DCGM host engine", service=DCGM_UNIT, running=True, enabled=True)
        python.call(name="Gate: GPU health", function=_gate_now)
    else:
        systemd.service(name="DCGM host engine enabled", service=DCGM_UNIT, running=None, enabled=True)
        _gate_now()


def _gate_now() -> None:
    report = current_report()
    problems = report.problems(require_persistence=GpuHealthKnobs.from_host(host).gpu_health_persistence)
    refuse(f"GPU health gate failed on {host.name}", problems)
