"""The doctor's verdict as a pure function: what a host is, what bring-up will do to it, and what stops it.

`hgxkit doctor INVENTORY` (hgxkit/cli/doctor.py) reads `DoctorFacts` from every host, read-only, and
calls `diagnose`; nothing here touches a host. The OS, GPU, NVSwitch, RAM and disk checks are preflight's
(`preflight_problems`), so the doctor and bring-up refuse the same hosts for the same reasons.

Example:
    >>> clock_problem(node_epoch=1000.0, controller_epoch=1400.0, synchronized=True).code
    'time'
    >>> plan_docker(DockerNow(version="20.10.24", packages={"docker.io": "20.10"}), "docker-ce")
    'replace docker.io 20.10 with docker-ce (Docker removes the conflicting packages)'
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from hgxkit.node.preflight import HostFacts, PreflightPolicy, preflight_problems
from hgxkit.problems import Problem

SCHEMA_VERSION = 1
MAX_CLOCK_OFFSET_S = 300.0  # apt refuses Release files "not valid yet", TLS certificates fail, beyond minutes
GB = 1e9


@dataclass(frozen=True)
class Reach:
    """One URL the node must reach: what it is for, and the HTTP status it got (None: no answer, `error` why)."""

    purpose: str
    url: str
    status: int | None
    error: str = ""
    required: bool = True


@dataclass(frozen=True)
class DockerNow:
    """The Docker engine on the node before bring-up: server version, Docker packages, the snap."""

    version: str | None = None
    packages: dict[str, str] = field(default_factory=dict)
    snap: bool = False


@dataclass(frozen=True)
class DoctorFacts:
    """Everything the doctor reads from one host (None: could not be read)."""

    user: str
    sudo: str  # "root", "passwordless" or "denied: <sudo's message>"
    host: HostFacts
    kernel: str | None
    loaded_driver: str | None
    docker: DockerNow
    node_epoch: float | None
    ntp_synchronized: bool | None
    reach: list[Reach] = field(default_factory=list)
    fabric: tuple[str, list[str], list[str]] | None = None  # (fabric_address, its addresses, the node's)
    lock_holder: str | None = None  # the process holding hgxkit's run lock, None when it is free


@dataclass(frozen=True)
class DoctorPolicy:
    """What the host must be and get: preflight's policy plus the doctor's own needs."""

    preflight: PreflightPolicy
    xet_cache_gb: float = 0.0  # hf_xet's chunk + shard caches on the models disk (0: not there, or no Xet)
    hicache_gb: float = 0.0  # host RAM the recipe's HiCache pools pin
    ram_reserve_gb: float = 64.0
    driver_branch: str = "580"
    driver_version: str | None = None
    docker_source: str = "docker.io"  # docker-ce or docker.io, as roles/docker decides for this OS
    allow_reboot: bool = False


@dataclass(frozen=True)
class Diagnosis:
    """One host's answer: rows (check, what was found, ok), what bring-up will do, and the problems."""

    host: str
    rows: list[tuple[str, str, bool]]
    actions: list[str]
    problems: list[Problem]

    @property
    def ok(self) -> bool:
        """True when nothing stops bring-up (warnings do not)."""
        return not any(p.level == "error" for p in self.problems)


def unreachable(host: str, why: str) -> Diagnosis:
    """The answer for a host the controller could not connect to."""
    problem = Problem(
        "ssh",
        f"cannot connect over SSH: {why}",
        "check ssh_hostname, ssh_user and ssh_key in the inventory (`ssh USER@HOST true` must work without a prompt)",
    )
    return Diagnosis(host, [("ssh", f"no connection: {why}", False)], [], [problem])


def sudo_problem(sudo: str, user: str) -> Problem | None:
    """No passwordless sudo for a user other than root."""
    if sudo in ("root", "passwordless"):
        return None
    return Problem(
        "sudo",
        f"user {user} has no passwordless sudo ({sudo.removeprefix('denied: ') or 'sudo -n true failed'})",
        f"add `{user} ALL=(ALL) NOPASSWD: ALL` to /etc/sudoers.d/hgxkit on the node, or connect as root",
    )


def clock_problem(node_epoch: float | None, controller_epoch: float, synchronized: bool | None) -> Problem | None:
    """The node's clock off by more than minutes (an error), or not synchronized (a warning)."""
    if node_epoch is not None and abs(node_epoch - controller_epoch) > MAX_CLOCK_OFFSET_S:
        return Problem(
            "time",
            f"the node's clock is {node_epoch - controller_epoch:+.0f} s off the controller's",
            "set the time and enable NTP (timedatectl set-ntp true); apt and TLS reject a clock that far off",
        )
    if synchronized is False:
        return Problem(
            "time-sync", "the clock is not NTP-synchronized", "enable NTP (timedatectl set-ntp true)", "warning"
        )
    return None


def reach_problems(reach: list[Reach]) -> list[Problem]:
    """Every URL the node could not reach (any HTTP status counts as reached: the route and TLS work)."""
    return [
        Problem(
            "reach",
            f"no answer from {r.url} ({r.purpose}){': ' + r.error if r.error not in ('', 'no answer') else ''}",
            "open the route or proxy from the node, or point the inventory at a mirror it reaches",
            "error" if r.required else "warning",
        )
        for r in reach
        if r.status is None
    ]


def fabric_problem(fabric: tuple[str, list[str], list[str]] | None) -> Problem | None:
    """The inventory's fabric_address does not resolve to one of the node's own addresses."""
    if fabric is None:
        return None
    name, resolved, own = fabric
    if set(resolved) & set(own):
        return None
    found = f"resolves to {', '.join(resolved)}" if resolved else "does not resolve on the node"
    return Problem(
        "fabric",
        f"fabric_address {name} {found}; the node's addresses are {', '.join(own) or 'none'}",
        "set fabric_address to an address of the node's fabric interface (`ip -o addr` on the node)",
    )


def lock_problem(holder: str | None) -> Problem | None:
    """Another hgxkit run holds the node's run lock."""
    if holder is None:
        return None
    return Problem(
        "lock",
        f"another hgxkit run holds /var/lib/hgxkit/run.lock ({holder})",
        "wait for that run to finish, or stop it, then run again",
    )


def plan_driver(loaded: str | None, installed: dict[str, str], policy: DoctorPolicy) -> str:
    """What the nvidia_driver role will do, in words."""
    target = policy.driver_version or f"the newest {policy.driver_branch}"
    have = loaded or next((v.split("-")[0] for p, v in sorted(installed.items()) if "driver" in p), None)
    reboot = "then reboot" if policy.allow_reboot else "then stop for a reboot (allow_reboot is false)"
    if have is None:
        return f"install NVIDIA driver {target} with fabric manager, {reboot}"
    wanted = have == policy.driver_version if policy.driver_version else have.startswith(policy.driver_branch + ".")
    if wanted:
        return f"keep NVIDIA driver {have}"
    return f"replace NVIDIA driver {have} with {target}, {reboot}"


def plan_docker(docker: DockerNow, source: str) -> str:
    """What the docker role will do, in words."""
    if docker.snap:
        return f"remove the snap Docker, install {source}"
    if source in docker.packages:
        return f"keep {source} {docker.version or docker.packages[source]}"
    if docker.packages:
        name, version = sorted(docker.packages.items())[0]
        return f"replace {name} {version} with {source} (Docker removes the conflicting packages)"
    if docker.version:
        return f"install {source} over a Docker {docker.version} not from a package"
    return f"install {source}"


def diagnose(name: str, facts: DoctorFacts, policy: DoctorPolicy, controller_epoch: float) -> Diagnosis:
    """Rows, actions and problems for one host."""
    pre = dataclasses.replace(
        policy.preflight, min_free_disk_gb=policy.preflight.min_free_disk_gb + policy.xet_cache_gb
    )
    hf = facts.host
    problems = [p for p in [sudo_problem(facts.sudo, facts.user)] if p]
    problems += preflight_problems(hf, pre)
    if policy.hicache_gb and hf.ram_bytes is not None:
        available = hf.ram_bytes / 1024**3 - policy.ram_reserve_gb
        if policy.hicache_gb > available:
            problems.append(
                Problem(
                    "ram-hicache",
                    f"the recipe's HiCache host pools need {policy.hicache_gb:.0f} GiB, "
                    f"{available:.0f} GiB of RAM is left after the {policy.ram_reserve_gb:.0f} GiB reserve, "
                    "so the serve role will refuse this recipe here (bring-up itself is not affected)",
                    "lower --hicache-ratio or set --hicache-size in the recipe, or use a node with more memory",
                    "warning",
                )
            )
    problems += [
        p
        for p in (
            clock_problem(facts.node_epoch, controller_epoch, facts.ntp_synchronized),
            fabric_problem(facts.fabric),
            lock_problem(facts.lock_holder),
        )
        if p
    ]
    problems += reach_problems(facts.reach)
    codes = {p.code for p in problems if p.level == "error"}
    pci = hf.pci
    rows = [
        ("ssh", f"{facts.user}, sudo: {facts.sudo}", "sudo" not in codes),
        (
            "os",
            f"{hf.os_id or '?'} {hf.os_version or '?'} {hf.arch or '?'}, kernel {facts.kernel or '?'}",
            not codes & {"os", "arch"},
        ),
        (
            "gpus",
            f"{pci.gpus} x {', '.join(sorted({'10de:' + d for d in pci.gpu_device_ids})) or 'none'} on PCI"
            if pci
            else "lspci missing",
            not codes & {"pci", "gpu-count", "gpu-model"},
        ),
        ("nvswitch", f"{pci.nvswitches} on PCI" if pci else "?", "nvswitch" not in codes),
        ("models_dir", _disk_text(hf.models_dir_free_bytes, pre, policy.xet_cache_gb), "disk" not in codes),
        ("ram", _ram_text(hf.ram_bytes, pre.min_ram_gb, policy.hicache_gb), "ram" not in codes),
        (
            "time",
            "synchronized"
            if facts.ntp_synchronized
            else "not synchronized"
            if facts.ntp_synchronized is False
            else "unknown",
            "time" not in codes,
        ),
    ]
    if facts.fabric:
        rows.append(("fabric", f"{facts.fabric[0]} -> {', '.join(facts.fabric[1]) or '?'}", "fabric" not in codes))
    rows += [
        (f"reach {r.purpose}", f"{r.url}: {r.status or r.error or 'no answer'}", r.status is not None)
        for r in facts.reach
    ]
    rows.append(("lock", facts.lock_holder or "free", "lock" not in codes))
    actions = [
        plan_driver(facts.loaded_driver, hf.nvidia_packages, policy),
        plan_docker(facts.docker, policy.docker_source),
        "install the NVIDIA container toolkit, then check GPU health",
    ]
    return Diagnosis(name, rows, actions, problems)


def _disk_text(free: int | None, pre: PreflightPolicy, xet_gb: float) -> str:
    need = f"need {pre.min_free_disk_gb:.0f} GB" + (f" (incl. {xet_gb:.0f} GB Xet caches)" if xet_gb else "")
    return f"{pre.models_dir}: {'?' if free is None else f'{free / GB:.1f} GB'} free, {need}"


def _ram_text(ram: int | None, min_gb: float, hicache_gb: float) -> str:
    have = "?" if ram is None else f"{ram / 1024**3:.0f} GiB"
    return f"{have}, need {min_gb:.0f} GiB" + (f" (HiCache pools {hicache_gb:.0f} GiB)" if hicache_gb else "")


def render_text(d: Diagnosis) -> str:
    """One table per host, what bring-up will do, then one line per problem with its remedy."""
    width = max((len(check) for check, _, _ in d.rows), default=5)
    lines = [f"{d.host}: {'ready for bring-up' if d.ok else 'CANNOT be brought up'}"]
    lines += [f"  {'ok ' if ok else 'BAD'}  {check.ljust(width)}  {found}" for check, found, ok in d.rows]
    if d.actions and d.ok:
        lines.append("  bring-up will:")
        lines += [f"    - {action}" for action in d.actions]
    lines += [f"  {p.level}: {d.host}: [{p.code}] {p.message}" for p in d.problems]
    return "\n".join(lines)


def to_json(diagnoses: list[Diagnosis]) -> dict[str, Any]:
    """The `--json` document (schema: hgxkit/node/schemas/doctor.schema.json)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "ok": all(d.ok for d in diagnoses),
        "hosts": [
            {
                "host": d.host,
                "ok": d.ok,
                "checks": [{"check": c, "found": f, "ok": ok} for c, f, ok in d.rows],
                "bringup": d.actions,
                "problems": [
                    {"code": p.code, "level": p.level, "found": p.found, "remedy": p.remedy} for p in d.problems
                ],
            }
            for d in diagnoses
        ],
    }


def docker_source_for(os_id: str | None, setting: str) -> str:
    """`docker-ce` or `docker.io`, as roles/docker decides (auto: docker-ce on Ubuntu)."""
    if setting == "auto":
        return "docker-ce" if os_id == "ubuntu" else "docker.io"
    return setting
