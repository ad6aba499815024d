"""NVIDIA Container Toolkit: pinned and held, Docker's nvidia runtime configured once, a GPU smoke test.

daemon.json gets the nvidia runtime from `nvidia-ctk runtime configure` (only when it lacks one) and Docker's
cgroupfs driver from hgxkit, written atomically; Docker restarts only when its configuration changed. The GPU
smoke container runs when anything changed or no smoke test has passed on this boot with this toolkit and
daemon.json (a record under state_dir); otherwise the role says why it skips it. So a re-run, and `--dry`,
start no container.

Example (deploys/bringup.py):
    from roles.container_toolkit import container_toolkit
    container_toolkit()
"""

from __future__ import annotations

import hashlib
import json

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.operations import apt, files, python, server, systemd

from hgxkit.bundle.source import delivered
from hgxkit.hostcmd import HostRunner, argv, script, text
from hgxkit.hostfiles import write_text
from hgxkit.node.apt import apt_install_commands, apt_mark_hold, flat_repo_line
from hgxkit.node.docker import DAEMON_JSON, daemon_json_text, parse_daemon_json, smoke_problem, with_cgroupfs
from hgxkit.node.facts_apt import HeldPackages, InstalledPackages
from hgxkit.node.facts_files import FileText, JsonFile
from hgxkit.node.facts_system import BootId
from hgxkit.problems import Problem, refuse
from hgxkit.runfailure import RunFailure
from roles.container_toolkit.defaults import (
    DEFAULTS,
    KEY_URL,
    KEYRING,
    PACKAGES,
    REPO_URL,
    SOURCES_FILE,
    STALE_LISTS,
    ContainerToolkitKnobs,
)


def daemon_config(text: str | None) -> dict:
    """daemon.json as a dict ({} when absent); refuse to touch a file that is not a JSON object."""
    config = parse_daemon_json(text)
    if isinstance(config, Problem):
        refuse(f"{host.name}: {DAEMON_JSON} is left as it is", [config.message])
    return config  # type: ignore[return-value]


def smoke_record_path() -> str:
    return f"{ContainerToolkitKnobs.from_host(host).state_dir}/node/gpu-smoke.json"


def smoke_key(version: str, daemon_text: str | None, smoke: dict) -> dict:
    """What a passed smoke test vouches for: this boot, this toolkit, this daemon.json, this test."""
    digest = hashlib.sha256((daemon_text or "").encode()).hexdigest()[:16]
    return {"boot_id": host.get_fact(BootId), "toolkit": version, "daemon_json": digest, "smoke": smoke}


@deploy("hgxkit NVIDIA container toolkit", data_defaults=DEFAULTS)
def container_toolkit() -> None:
    """Install the pinned toolkit, configure Docker's nvidia runtime, and prove a GPU container runs."""
    knobs = ContainerToolkitKnobs.from_host(host)
    for name in STALE_LISTS:
        files.file(name=f"Remove stale {name}", path=f"/etc/apt/sources.list.d/{name}", present=False)
    bundle = delivered(host)  # the `bundle` knob: the toolkit from the bundle's signed repository
    files.download(
        name="Container toolkit repository key",
        src=bundle.key_url if bundle else knobs.nvidia_container_repo_key_url or KEY_URL,
        dest=KEYRING,
        mode="0644",
        sha256sum=bundle.key_sha256 if bundle else None,
    )
    repo = bundle.apt_url("nvidia-container") if bundle else knobs.nvidia_container_repo_url or REPO_URL
    apt.repo(name="Container toolkit repository", src=flat_repo_line(repo, KEYRING), filename=SOURCES_FILE)

    version = knobs.nvidia_container_toolkit_version
    installed = host.get_fact(InstalledPackages, patterns=" ".join(PACKAGES))
    missing = [p for p in PACKAGES if installed.get(p) != version]
    if missing:
        server.shell(
            name=f"Install the container toolkit {version}",
            commands=apt_install_commands(SOURCES_FILE, [f"{p}={version}" for p in PACKAGES]),
        )
    if missing or not set(PACKAGES) <= set(host.get_fact(HeldPackages)):
        server.shell(name="Hold the container toolkit", commands=[apt_mark_hold(PACKAGES)])

    daemon_text = host.get_fact(FileText, path=DAEMON_JSON)
    config = daemon_config(daemon_text)
    changed = []
    if "nvidia" not in config.get("runtimes", {}):
        changed.append(
            server.shell(
                name="Configure Docker's nvidia runtime",
                commands=[argv("nvidia-ctk", "runtime", "configure", "--runtime=docker")],
            )
        )
    if knobs.container_toolkit_cgroupfs and with_cgroupfs(config) != config:
        # At execute time: nvidia-ctk (above) may have rewritten the file since this plan read it.
        changed.append(
            python.call(name="Docker cgroup driver cgroupfs (GPUs survive daemon-reload)", function=_cgroupfs)
        )
    if changed:
        systemd.service(
            name="Restart Docker for the new configuration", service="docker.service", running=True, restarted=True
        )
    smoke = {
        "image": knobs.container_smoke_image,
        "command": knobs.container_smoke_command,
        "expect": knobs.container_smoke_expect,
        "gpus": knobs.expected_gpu_count,
    }
    record = host.get_fact(JsonFile, path=smoke_record_path())
    if missing or changed or record != smoke_key(version, daemon_text, smoke):
        python.call(name="GPU container smoke test", function=_smoke_now, version=version, **smoke)
    else:
        host.noop("GPU container smoke test passed on this boot with this toolkit and daemon.json; not rerun")


def _cgroupfs() -> None:
    text = host.get_fact(FileText, path=DAEMON_JSON)
    if not write_text(HostRunner(host), DAEMON_JSON, daemon_json_text(with_cgroupfs(daemon_config(text)))):
        raise RunFailure(f"could not write {DAEMON_JSON}", [], "check the node's root file system (space, read-only)")


def _smoke_now(version: str, image: str, command: str, expect: str, gpus: int | None) -> None:
    run = HostRunner(host)
    smoke_run = argv("docker", "run", "--rm", "--gpus", "all", image, "sh", "-c", command)
    shown = text(smoke_run)
    output = run(script("{smoke} 2>&1", smoke=smoke_run))
    problem = smoke_problem(output, expect, gpus)
    if problem:
        refuse(f"GPU container smoke test failed on {host.name} (`{shown}`)", [problem])
    smoke = {"image": image, "command": command, "expect": expect, "gpus": gpus}
    passed = smoke_key(version, host.get_fact(FileText, path=DAEMON_JSON), smoke)
    write_text(run, smoke_record_path(), json.dumps(passed) + "\n")
