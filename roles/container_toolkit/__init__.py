"""NVIDIA Container Toolkit: pinned and held, Docker's nvidia runtime configured once, a GPU smoke test.

Example (deploys/bringup.py):
    from roles.container_toolkit import container_toolkit
    container_toolkit()
"""

from __future__ import annotations

import json

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.api.exceptions import DeployError
from pyinfra.operations import apt, files, python, server, systemd

from hgxkit.bringup import apt_install_commands, flat_repo_line
from hgxkit.driver_gate import run_on
from hgxkit.facts import FileText, HeldPackages, InstalledPackages
from roles.container_toolkit.defaults import (
    DAEMON_JSON,
    DEFAULTS,
    KEY_URL,
    KEYRING,
    PACKAGES,
    REPO_URL,
    SOURCES_FILE,
    STALE_LISTS,
)

CGROUPFS = "native.cgroupdriver=cgroupfs"
# Merge one exec-opt into daemon.json with the host's python3, keeping every other key as it is.
_ADD_CGROUPFS = (
    "python3 -c 'import json, os; p = \"" + DAEMON_JSON + '"; '
    "d = json.load(open(p)) if os.path.exists(p) and os.path.getsize(p) else {}; "
    'o = [x for x in d.get("exec-opts", []) if not x.startswith("native.cgroupdriver=")]; '
    'd["exec-opts"] = o + ["' + CGROUPFS + '"]; '
    'json.dump(d, open(p, "w"), indent=4)\''
)


def daemon_config() -> dict:
    """/etc/docker/daemon.json as a dict ({} when absent); refuse to touch a file that is not JSON."""
    text = host.get_fact(FileText, path=DAEMON_JSON)
    if text is None or not text.strip():
        return {}
    try:
        config = json.loads(text)
    except json.JSONDecodeError as err:
        raise DeployError(f"{host.name}: {DAEMON_JSON} is not valid JSON (line {err.lineno}); fix it first") from None
    if not isinstance(config, dict):
        raise DeployError(f"{host.name}: {DAEMON_JSON} must hold a JSON object; fix it first")
    return config


@deploy("hgxkit NVIDIA container toolkit", data_defaults=DEFAULTS)
def container_toolkit() -> None:
    """Install the pinned toolkit, configure Docker's nvidia runtime, and prove a GPU container runs."""
    for name in STALE_LISTS:
        files.file(name=f"Remove stale {name}", path=f"/etc/apt/sources.list.d/{name}", present=False)
    files.download(
        name="Container toolkit repository key",
        src=host.data.get("nvidia_container_repo_key_url") or KEY_URL,
        dest=KEYRING,
        mode="0644",
    )
    repo = host.data.get("nvidia_container_repo_url") or REPO_URL
    apt.repo(name="Container toolkit repository", src=flat_repo_line(repo, KEYRING), filename=SOURCES_FILE)

    version = host.data.get("nvidia_container_toolkit_version")
    installed = host.get_fact(InstalledPackages, patterns=" ".join(PACKAGES))
    missing = [p for p in PACKAGES if installed.get(p) != version]
    if missing:
        server.shell(
            name=f"Install the container toolkit {version}",
            commands=apt_install_commands(SOURCES_FILE, [f"{p}={version}" for p in PACKAGES]),
        )
    if missing or not set(PACKAGES) <= set(host.get_fact(HeldPackages)):
        server.shell(name="Hold the container toolkit", commands=["apt-mark hold " + " ".join(PACKAGES)])

    config = daemon_config()
    changed = []
    if "nvidia" not in config.get("runtimes", {}):
        changed.append(
            server.shell(
                name="Configure Docker's nvidia runtime", commands=["nvidia-ctk runtime configure --runtime=docker"]
            )
        )
    if host.data.get("container_toolkit_cgroupfs") and CGROUPFS not in config.get("exec-opts", []):
        changed.append(
            server.shell(name="Docker cgroup driver cgroupfs (GPUs survive daemon-reload)", commands=[_ADD_CGROUPFS])
        )
    if changed:
        systemd.service(
            name="Restart Docker for the new configuration", service="docker.service", running=True, restarted=True
        )
    smoke = {
        "image": host.data.get("container_smoke_image"),
        "command": host.data.get("container_smoke_command"),
        "expect": host.data.get("container_smoke_expect"),
        "gpus": host.data.get("expected_gpu_count"),
    }
    if missing or changed:
        python.call(name="GPU container smoke test", function=_smoke_now, **smoke)
    else:
        _smoke_now(**smoke)


def smoke_problem(output: list[str], expect: str, gpus: int | None) -> str | None:
    """Why the smoke test's output fails (None when it passes)."""
    if expect == "gpu-list":
        listed = [line for line in output if line.startswith("GPU ")]
        if gpus is not None and len(listed) != gpus:
            return f"the container sees {len(listed)} GPUs, expected {gpus}: {' | '.join(output[-3:])}"
        return None
    if expect == "visible-devices":
        return None if "all" in output else f"NVIDIA_VISIBLE_DEVICES in the container was {output!r}, not all"
    return f"container_smoke_expect {expect!r}: use gpu-list or visible-devices"


def _smoke_now(image: str, command: str, expect: str, gpus: int | None) -> None:
    shown = f"docker run --rm --gpus all {image} {command}"
    output = run_on(host)(f"{shown} 2>&1")
    problem = smoke_problem(output, expect, gpus)
    if problem:
        raise DeployError(f"GPU container smoke test failed on {host.name} (`{shown}`): {problem}")
