"""The driver/fabric gate, run through any command runner: plan time (no change planned) or after a reboot.

Example (inside a pyinfra deploy or python.call callback):
    problems = driver_gate(run_on(host), expected_version="580.105.08", expected_gpus=8,
                           fabric_package="nvidia-fabricmanager", driver_package="nvidia-open")
"""

from __future__ import annotations

from collections.abc import Callable

from hgxkit.bringup import DriverState, Problem, gate_problems
from hgxkit.facts import NvidiaLoadedModule, NvidiaSmi, Nvlink, ServiceActive, SmiResult
from hgxkit.nvidia.smi import upstream_version

Runner = Callable[[str], list[str]]


def run_on(host: object) -> Runner:
    """A runner that executes shell commands on a pyinfra host now and returns stdout lines."""

    def run(command: str) -> list[str]:
        _ok, output = host.run_shell_command(command)  # type: ignore[attr-defined]
        return list(output.stdout_lines)

    return run


FABRIC_MANAGER_UNIT = "nvidia-fabricmanager.service"  # the same unit name under both package namings


def read_smi(run: Runner) -> SmiResult:
    return NvidiaSmi().process(run(NvidiaSmi().command()))


def driver_state(run: Runner, fabric_package: str, driver_package: str, smi: SmiResult | None = None) -> DriverState:
    """Installed, loaded and fabric-manager versions as the host reports them now."""
    smi = smi or read_smi(run)
    loaded = NvidiaLoadedModule().process(run(NvidiaLoadedModule().command()))
    if loaded is None and smi.ok and smi.gpus:
        loaded = smi.gpus[0].driver_version  # NVML reports the loaded kernel driver's version
    versions = run(
        f"dpkg-query -W -f='${{Package}} ${{Version}}\\n' {driver_package} {fabric_package} 2>/dev/null || true"
    )
    by_name = dict(line.split(" ", 1) for line in versions if " " in line)
    installed = by_name.get(driver_package)
    fabric = by_name.get(fabric_package)
    return DriverState(
        installed_version=upstream_version(installed) if installed else None,
        loaded_version=loaded,
        smi_failure=smi.failure,
        fabric_manager_version=upstream_version(fabric) if fabric else None,
    )


def driver_gate(
    run: Runner, *, expected_version: str | None, expected_gpus: int | None, fabric_package: str, driver_package: str
) -> list[Problem]:
    """Every post-bring-up gate that fails now: versions, fabric manager, fabric state, NVLinks."""
    smi = read_smi(run)
    state = driver_state(run, fabric_package, driver_package, smi)
    nvlink = Nvlink().process(run(Nvlink().command()))
    active = ServiceActive().process(run(ServiceActive().command(unit=FABRIC_MANAGER_UNIT)))
    return gate_problems(
        expected_version=expected_version or state.installed_version or "?",
        loaded_version=state.loaded_version,
        smi_versions={gpu.driver_version for gpu in smi.gpus},
        smi_failure=smi.failure,
        fabric_manager_version=state.fabric_manager_version,
        fabric_manager_active=active,
        fabric=[(gpu.index, gpu.fabric_state, gpu.fabric_status) for gpu in smi.gpus],
        nvlink_problems=nvlink.problems() if nvlink else ["nvidia-smi nvlink failed"],
        expected_gpus=expected_gpus,
    )
