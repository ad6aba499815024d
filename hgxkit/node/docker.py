"""Docker on a GPU node as pure decisions: which engine, Docker's apt source, daemon.json, the GPU smoke test.

Example:
    >>> with_cgroupfs({"runtimes": {"nvidia": {"path": "nvidia-container-runtime"}}})["exec-opts"]
    ['native.cgroupdriver=cgroupfs']
    >>> smoke_problem(["GPU 0: NVIDIA H200 (UUID: GPU-1)"], "gpu-list", 8)
    'the container sees 1 GPUs, expected 8: GPU 0: NVIDIA H200 (UUID: GPU-1)'
"""

from __future__ import annotations

import json

from hgxkit.problems import Problem

CGROUPFS = "native.cgroupdriver=cgroupfs"
DAEMON_JSON = "/etc/docker/daemon.json"


def deb822_sources(repo_url: str, codename: str, keyring: str) -> str:
    """Docker's deb822 source file, as in Docker's install guide."""
    return (
        "# managed by hgxkit (roles/docker)\n"
        f"Types: deb\nURIs: {repo_url}\nSuites: {codename}\nComponents: stable\nSigned-By: {keyring}\n"
    )


def parse_daemon_json(text: str | None) -> dict | Problem:
    """daemon.json as a dict ({} when absent or empty), or the Problem that stops hgxkit from touching it."""
    if text is None or not text.strip():
        return {}
    try:
        config = json.loads(text)
    except json.JSONDecodeError as err:
        return Problem("daemon.json", f"{DAEMON_JSON} is not valid JSON (line {err.lineno})", "fix it first")
    if not isinstance(config, dict):
        return Problem("daemon.json", f"{DAEMON_JSON} holds {type(config).__name__}, not an object", "fix it first")
    return config


def with_cgroupfs(config: dict) -> dict:
    """`config` with Docker's cgroup driver set to cgroupfs (every other key kept as it is).

    With the systemd driver, `systemctl daemon-reload` strips GPU access from running containers
    ("Failed to initialize NVML: Unknown Error", nvidia-container-toolkit#48).
    """
    options = [o for o in config.get("exec-opts", []) if not str(o).startswith("native.cgroupdriver=")]
    return {**config, "exec-opts": [*options, CGROUPFS]}


def daemon_json_text(config: dict) -> str:
    """daemon.json as hgxkit writes it (indented like nvidia-ctk does, so the two agree byte for byte)."""
    return json.dumps(config, indent=4) + "\n"


def smoke_problem(output: list[str], expect: str, gpus: int | None) -> str | None:
    """Why the GPU smoke container's output fails (None when it passes).

    `expect` is "gpu-list" (`nvidia-smi -L` lists every GPU) or "visible-devices" (the container printed
    NVIDIA_VISIBLE_DEVICES=all: simulated nodes, whose hook injects no nvidia-smi).
    """
    if expect == "gpu-list":
        listed = [line for line in output if line.startswith("GPU ")]
        if gpus is not None and len(listed) != gpus:
            return f"the container sees {len(listed)} GPUs, expected {gpus}: {' | '.join(output[-3:])}"
        return None
    if expect == "visible-devices":
        return None if "all" in output else f"NVIDIA_VISIBLE_DEVICES in the container was {output!r}, not all"
    return f"container_smoke_expect {expect!r}: use gpu-list or visible-devices"
