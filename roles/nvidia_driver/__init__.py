"""NVIDIA driver, fabric manager and NSCQ at one exact version, held; reboot only when needed and allowed.

Example (deploys/bringup.py):
    from roles.nvidia_driver import nvidia_driver
    nvidia_driver()
"""

from __future__ import annotations

from io import StringIO

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.api.output import echo
from pyinfra.facts.server import KernelVersion, Which
from pyinfra.operations import apt, files, python, server, systemd

from hgxkit.bundle.source import delivered
from hgxkit.hostcmd import argv
from hgxkit.node.apt import apt_install_commands, apt_mark_hold, flat_repo_line
from hgxkit.node.driver import (
    FABRIC_MANAGER_UNIT,
    NVIDIA_CUDA_LIST,
    DriverPlan,
    default_cuda_repo_url,
    driver_gate,
    driver_package_plan,
    driver_state,
    packages_needing_install,
    reboot_reason,
    reboot_wait_line,
)
from hgxkit.node.facts_apt import HeldPackages, InstalledPackages
from hgxkit.node.facts_system import OsRelease, ServiceActive
from hgxkit.node.preflight import distro_key
from hgxkit.nvidia.smi import upstream_version
from hgxkit.problems import refuse
from roles.nvidia_driver.defaults import (
    CUDA_REPO_KEY_FILE,
    DEFAULTS,
    KEYRING,
    NOUVEAU_CONF,
    NOUVEAU_TEXT,
    UNATTENDED_CONF,
    UNATTENDED_TEXT,
    NvidiaDriverKnobs,
)


def plan_for_host() -> DriverPlan:
    """The driver package plan for this host's OS and the inventory's branch/version/flavor."""
    release = host.get_fact(OsRelease)
    distro = distro_key(release.get("ID"), release.get("VERSION_ID"))
    if distro is None:
        refuse(
            f"{host.name}: no driver plan",
            [f"unsupported OS {release.get('PRETTY_NAME')}; run the preflight role first"],
        )
    knobs = NvidiaDriverKnobs.from_host(host)
    try:
        return driver_package_plan(
            distro=distro or "",
            branch=knobs.nvidia_driver_branch,
            version=knobs.nvidia_driver_version,
            flavor=knobs.nvidia_driver_flavor,
        )
    except ValueError as err:
        refuse(f"{host.name}: no driver plan", [str(err)])
        raise


def repo_urls() -> tuple[str, str]:
    release = host.get_fact(OsRelease)
    knobs = NvidiaDriverKnobs.from_host(host)
    repo = knobs.nvidia_repo_url or default_cuda_repo_url(
        distro_key(release.get("ID"), release.get("VERSION_ID")) or "ubuntu2404"
    )
    key = knobs.nvidia_repo_key_url or f"{repo.rstrip('/')}/{CUDA_REPO_KEY_FILE}"
    return repo, key


def _guard_unattended_upgrades() -> None:
    mode = NvidiaDriverKnobs.from_host(host).nvidia_unattended_upgrades
    if mode == "blacklist":
        files.put(
            name="Keep NVIDIA and kernel packages out of unattended-upgrades",
            src=StringIO(UNATTENDED_TEXT),
            dest=UNATTENDED_CONF,
            mode="0644",
        )
    elif mode == "remove":
        apt.packages(name="Remove unattended-upgrades", packages=["unattended-upgrades"], present=False, purge=True)
    elif mode != "ignore":
        refuse(
            f"{host.name}: the driver role's knobs",
            [f"nvidia_unattended_upgrades {mode!r}; use blacklist, remove or ignore"],
        )


def _kernel_prerequisites() -> None:
    knobs = NvidiaDriverKnobs.from_host(host)
    if knobs.nvidia_blacklist_nouveau:
        nouveau = files.put(name="Blacklist nouveau", src=StringIO(NOUVEAU_TEXT), dest=NOUVEAU_CONF, mode="0644")
        if host.get_fact(Which, command="update-initramfs"):
            server.shell(
                name="Rebuild the initramfs without nouveau",
                commands=[argv("update-initramfs", "-u")],
                _if=nouveau.did_change,
            )
    if knobs.nvidia_install_kernel_headers:
        kernel = host.get_fact(KernelVersion)
        apt.packages(name="Kernel headers and DKMS for the NVIDIA module", packages=["dkms", f"linux-headers-{kernel}"])


def _refuse_fabric_mismatch(plan: DriverPlan, installed: dict[str, str]) -> None:
    """With nvidia_fabricmanager_mismatch: refuse, stop before any change when FM and driver disagree."""
    fabric = installed.get(plan.fabric_packages[0])
    driver = installed.get(plan.driver_packages[0])
    target = plan.version or (upstream_version(driver) if driver else None)
    mismatch = fabric is not None and target is not None and upstream_version(fabric) != target
    if mismatch and NvidiaDriverKnobs.from_host(host).nvidia_fabricmanager_mismatch == "refuse":
        refuse(
            f"{host.name}: the fabric manager does not match the driver; nothing was installed",
            [
                f"fabric manager {upstream_version(fabric or '')} does not match driver {target}; "
                f"install {plan.fabric_packages[0]}={target}-* (or set nvidia_fabricmanager_mismatch: repair)"
            ],
        )


@deploy("hgxkit NVIDIA driver + fabric manager", data_defaults=DEFAULTS)
def nvidia_driver() -> None:
    """Install the pinned driver set, hold it, guard it, and reboot or stop in "reboot required"."""
    knobs = NvidiaDriverKnobs.from_host(host)
    plan = plan_for_host()
    installed = host.get_fact(InstalledPackages, patterns=" ".join(plan.pre_packages + plan.packages))
    _refuse_fabric_mismatch(plan, installed)
    _guard_unattended_upgrades()
    _kernel_prerequisites()

    bundle = delivered(host)  # the `bundle` knob: the pinned set from the bundle's signed repository
    repo_url, key_url = (bundle.apt_url("nvidia"), bundle.key_url) if bundle else repo_urls()
    files.download(
        name="NVIDIA CUDA repository key",
        src=key_url,
        dest=KEYRING,
        mode="0644",
        sha256sum=bundle.key_sha256 if bundle else None,
    )
    apt.repo(name="NVIDIA CUDA repository", src=flat_repo_line(repo_url, KEYRING), filename=NVIDIA_CUDA_LIST)

    missing = packages_needing_install(plan, installed)
    driver_changes = any(name in plan.driver_packages for name in missing)
    if missing:
        server.shell(
            name=f"Install the NVIDIA driver set at {plan.version or 'branch ' + plan.branch}",
            commands=apt_install_commands(NVIDIA_CUDA_LIST, plan.install_args()),
        )
    held = set(host.get_fact(HeldPackages))
    to_hold = [name for name in plan.pre_packages + plan.packages]
    if missing or not set(to_hold) <= held:
        server.shell(name="Hold the NVIDIA driver set", commands=[apt_mark_hold(to_hold)])

    if knobs.nvidia_persistence:
        systemd.service(
            name="Enable nvidia-persistenced", service="nvidia-persistenced.service", running=None, enabled=True
        )
    systemd.service(name="Enable the fabric manager", service=FABRIC_MANAGER_UNIT, running=None, enabled=True)

    state = driver_state(host.get_fact, plan.fabric_packages[0], plan.driver_packages[0])
    target = plan.version or state.installed_version
    reason = reboot_reason(state, target, driver_changes)
    gate = {
        "expected_version": target,
        "expected_gpus": knobs.expected_gpu_count,
        "fabric_package": plan.fabric_packages[0],
        "driver_package": plan.driver_packages[0],
    }
    if reason and not knobs.allow_reboot:
        files.file(name="Mark the node as needing a reboot", path="/var/run/reboot-required", touch=False)
        python.call(name="Stop: reboot required", function=_reboot_required, reason=reason)
        return
    if reason:
        timeout = knobs.nvidia_reboot_timeout
        python.call(
            name="Say what the reboot waits for",
            function=echo,
            message=reboot_wait_line(host.name, reason, target, timeout),
        )
        server.reboot(name=f"Reboot: {reason}", delay=5, reboot_timeout=timeout)
        python.call(name="Gate: driver, fabric manager, NVLink", function=_gate_now, **gate)
        return
    services_ok = host.get_fact(ServiceActive, unit=FABRIC_MANAGER_UNIT)
    if missing or not services_ok:
        systemd.service(
            name="Start the fabric manager", service=FABRIC_MANAGER_UNIT, running=True, restarted=bool(missing)
        )
        python.call(name="Gate: driver, fabric manager, NVLink", function=_gate_now, **gate)
        return
    refuse(f"NVIDIA gate failed on {host.name}", driver_gate(host.get_fact, **gate))


def _reboot_required(reason: str) -> None:
    refuse(
        f"reboot required on {host.name}: {reason}",
        ["the driver set is installed and held; reboot the node (or set allow_reboot: true) and run the deploy again"],
    )


def _gate_now(**gate: object) -> None:
    refuse(f"NVIDIA gate failed on {host.name}", driver_gate(host.get_fact, **gate))  # type: ignore[arg-type]
