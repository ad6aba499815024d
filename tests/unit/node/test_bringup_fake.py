"""Bring-up roles on Ubuntu 22.04 and 24.04 through pyinfra's @fake connector: the exact packages, pinned
versions and repository lines (these OSes cannot be booted here), and the refusals before any change."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pyinfra.api import Config, Inventory, State
from pyinfra.api.connect import connect_all
from pyinfra.api.deploy import add_deploy
from pyinfra.api.exceptions import DeployError
from pyinfra.api.operations import run_ops

from roles.container_toolkit import container_toolkit
from roles.docker import docker_engine
from roles.nvidia_driver import nvidia_driver
from roles.preflight import preflight

OS_RELEASE = {
    "22.04": 'NAME="Ubuntu"\nVERSION_ID="22.04"\nID=ubuntu\nVERSION_CODENAME=jammy\nPRETTY_NAME="Ubuntu 22.04.5 LTS"\n',
    "24.04": 'NAME="Ubuntu"\nVERSION_ID="24.04"\nID=ubuntu\nVERSION_CODENAME=noble\nPRETTY_NAME="Ubuntu 24.04.3 LTS"\n',
}
LSPCI_8 = "\n".join(
    [
        f"{bus}:00.0 3D controller [0302]: NVIDIA Corporation GH100 [H200 SXM 141GB] [10de:2335] (rev a1)"
        for bus in ("18", "2a", "3a", "5d", "9a", "ab", "ba", "db")
    ]
    + [f"84:0{i}.0 Bridge [0680]: NVIDIA Corporation GH100 [H100 NVSwitch] [10de:22a3] (rev a1)" for i in range(4)]
)


def run_fake(deploy: Any, responses: dict[Any, Any], **data: Any) -> tuple[list[str], Exception | None]:
    """Plan and run `deploy` against one @fake host; return the commands it ran and any error."""
    inventory = Inventory(
        ([("@fake/h200-1", {"fake_delay": 0, "fake_delay_jitter": 0, "fake_responses": responses, **data})], {})
    )
    state = State(inventory=inventory, config=Config())
    connect_all(state)
    host = inventory.get_host("@fake/h200-1")
    run_shell_command = host.connector.run_shell_command

    def recording(command, **arguments):  # the fake connector drops stdin: keep it as a pseudo-command
        result = run_shell_command(command, **arguments)
        if "_stdin" in arguments:
            host.connector.executed_commands.append(f"stdin of the command above: {arguments['_stdin']}")
        return result

    host.connector.run_shell_command = recording
    error: Exception | None = None
    try:
        add_deploy(state, deploy)
        run_ops(state)
    except Exception as err:
        error = err
    return list(host.connector.executed_commands), error


def fresh_ubuntu(version: str) -> dict[Any, Any]:
    return {
        "cat /etc/os-release": OS_RELEASE[version],
        re.compile(r"uname -r"): "6.8.0-45-generic\n",
        "lspci -nn": LSPCI_8 + "\n##hgxkit-rc=0\n",
        "mokutil": "SecureBoot disabled\n",
        "stat -fc %T /sys/fs/cgroup": "cgroup2fs\n",
        "/proc/meminfo": "MemTotal:       2113570536 kB\n",
        "df -PB1": "3500000000000\n",
        re.compile(r"^uname -m"): "x86_64\n",
    }


def commands_with(commands: list[str], needle: str) -> list[str]:
    return [c for c in commands if needle in c]


@pytest.mark.parametrize(("version", "distro"), [("22.04", "ubuntu2204"), ("24.04", "ubuntu2404")])
def test_driver_role_pins_the_580_set_from_the_cuda_repo(
    version: str, distro: str, caplog: pytest.LogCaptureFixture
) -> None:
    commands, error = run_fake(nvidia_driver, fresh_ubuntu(version), nvidia_driver_version="580.95.05")
    repo = f"https://developer.download.nvidia.com/compute/cuda/repos/{distro}/x86_64/"
    assert commands_with(commands, f"{repo}3bf863cc.pub"), "downloads NVIDIA's CUDA repository key"
    line = f"deb [signed-by=/etc/apt/keyrings/hgxkit-nvidia-cuda.asc] {repo} /"
    assert commands_with(commands, line), f"writes the repository line {line}"
    (install,) = commands_with(commands, "apt-get install")
    # Every pinned package word is quoted: an unquoted `*` could glob against files in the shell's directory.
    assert install.endswith(
        "--allow-change-held-packages 'nvidia-open-580=580.95.05-*' 'nvidia-fabricmanager=580.95.05-*' "
        "'libnvidia-nscq=580.95.05-*'"
    )
    assert commands_with(commands, "apt-mark hold nvidia-open-580 nvidia-fabricmanager libnvidia-nscq")
    assert commands_with(commands, "linux-headers-6.8.0-45-generic")
    assert commands_with(commands, "blacklist nouveau") or commands_with(commands, "blacklist-nouveau.conf")
    assert commands_with(commands, "51hgxkit-nvidia-blacklist")
    # Fresh node, reboot not allowed by default: the run stops in the documented reboot-required state.
    assert commands_with(commands, "/var/run/reboot-required")
    assert not commands_with(commands, "reboot )")
    assert error is not None  # pyinfra reports the failed host; the reason is in the log
    assert "reboot required on @fake/h200-1: the driver packages change (to 580.95.05)" in caplog.text


def test_driver_role_reboots_only_when_allowed() -> None:
    commands, _ = run_fake(nvidia_driver, fresh_ubuntu("24.04"), nvidia_driver_version="580.95.05", allow_reboot=True)
    assert commands_with(commands, "( sleep 1 && reboot )")
    assert not commands_with(commands, "/var/run/reboot-required")


def test_pre_580_branch_uses_the_branch_suffixed_fabric_manager() -> None:
    commands, _ = run_fake(
        nvidia_driver, fresh_ubuntu("22.04"), nvidia_driver_branch="570", nvidia_driver_version="570.195.03"
    )
    (install,) = commands_with(commands, "apt-get install")
    assert install.endswith(
        "'nvidia-open-570=570.195.03-*' 'nvidia-fabricmanager-570=570.195.03-*' 'libnvidia-nscq-570=570.195.03-*'"
    )


def test_version_off_the_branch_is_refused_before_any_change() -> None:
    commands, error = run_fake(
        nvidia_driver, fresh_ubuntu("24.04"), nvidia_driver_branch="580", nvidia_driver_version="570.195.03"
    )
    assert isinstance(error, DeployError) and "570.195.03 is not on branch 580" in str(error)
    assert not commands_with(commands, "apt-get")


def test_fabric_manager_mismatch_refused_when_asked() -> None:
    responses = fresh_ubuntu("24.04") | {
        "dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}": (
            "nvidia-open-580 580.95.05-0ubuntu1 ii \nnvidia-fabricmanager 580.82.07-1 ii \n"
        ),
    }
    commands, error = run_fake(
        nvidia_driver, responses, nvidia_driver_version="580.95.05", nvidia_fabricmanager_mismatch="refuse"
    )
    assert isinstance(error, DeployError)
    assert "fabric manager 580.82.07 does not match driver 580.95.05" in str(error)
    assert not commands_with(commands, "apt-get install")


@pytest.mark.parametrize(("version", "codename"), [("22.04", "jammy"), ("24.04", "noble")])
def test_docker_role_installs_docker_ce_from_dockers_repository(version: str, codename: str) -> None:
    responses = fresh_ubuntu(version) | {
        "dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}": "docker.io 26.1.3-0ubuntu1 ii \n",
        "dpkg -l": "ii  docker.io  26.1.3-0ubuntu1  amd64  Linux container runtime\n",
    }
    commands, error = run_fake(docker_engine, responses, docker_version="5:28.5.1-1~ubuntu.24.04~noble")
    assert error is None
    assert commands_with(commands, "https://download.docker.com/linux/ubuntu/gpg")
    (removal,) = commands_with(commands, " remove ")
    assert removal.endswith("remove docker.io")
    (install,) = commands_with(commands, " install 'docker-ce")
    assert install.endswith(
        "install 'docker-ce=5:28.5.1-1~ubuntu.24.04~noble' 'docker-ce-cli=5:28.5.1-1~ubuntu.24.04~noble' "
        "containerd.io docker-buildx-plugin docker-compose-plugin"
    )
    assert commands_with(commands, f"Suites: {codename}") or commands_with(commands, "docker.sources")
    assert not commands_with(commands, "snap remove")


def test_docker_role_removes_the_snap_docker() -> None:
    responses = fresh_ubuntu("24.04") | {"snap list docker": "present\n"}
    commands, _ = run_fake(docker_engine, responses)
    assert commands_with(commands, "snap remove --purge docker")


def test_docker_role_uses_docker_io_on_debian() -> None:
    responses = {"cat /etc/os-release": 'ID=debian\nVERSION_ID="12"\nVERSION_CODENAME=bookworm\n'}
    commands, error = run_fake(docker_engine, responses)
    assert error is None
    assert any(" install " in c and "docker.io" in c for c in commands)
    assert not commands_with(commands, "download.docker.com")


def test_container_toolkit_pins_and_configures_docker_once() -> None:
    responses = fresh_ubuntu("24.04") | {"/etc/docker/daemon.json": "##hgxkit-absent\n"}
    commands, _ = run_fake(container_toolkit, responses)
    line = (
        "deb [signed-by=/etc/apt/keyrings/hgxkit-nvidia-container-toolkit.asc] "
        "https://nvidia.github.io/libnvidia-container/stable/deb/amd64/ /"
    )
    assert commands_with(commands, line)
    assert commands_with(commands, "https://nvidia.github.io/libnvidia-container/gpgkey")
    (install,) = commands_with(commands, "apt-get install")
    assert install.endswith(
        "nvidia-container-toolkit=1.18.0-1 nvidia-container-toolkit-base=1.18.0-1 "
        "libnvidia-container-tools=1.18.0-1 libnvidia-container1=1.18.0-1"
    )
    assert commands_with(commands, "nvidia-ctk runtime configure --runtime=docker")
    (written,) = commands_with(commands, "mv -f /etc/docker/daemon.json.hgxkit-tmp /etc/docker/daemon.json")
    daemon = commands[commands.index(written) + 1]  # written atomically, from stdin
    assert daemon.startswith("stdin of the command above: ") and '"native.cgroupdriver=cgroupfs"' in daemon
    assert commands_with(commands, "start docker.service")  # restart, or start when it was not running


def test_container_toolkit_leaves_a_configured_docker_alone() -> None:
    daemon = '{"runtimes": {"nvidia": {"args": [], "path": "nvidia-container-runtime"}}, "exec-opts": ["native.cgroupdriver=cgroupfs"]}'
    installed = "".join(
        f"{p} 1.18.0-1 ii \n"
        for p in (
            "nvidia-container-toolkit",
            "nvidia-container-toolkit-base",
            "libnvidia-container-tools",
            "libnvidia-container1",
        )
    )
    responses = fresh_ubuntu("24.04") | {
        "/etc/docker/daemon.json": daemon + "\n",
        "dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}": installed,
        "apt-mark showhold": "libnvidia-container-tools\nlibnvidia-container1\nnvidia-container-toolkit\n"
        "nvidia-container-toolkit-base\n",
        "docker run --rm --gpus all": "".join(f"GPU {i}: NVIDIA H200 (UUID: GPU-{i})\n" for i in range(8)),
    }
    commands, error = run_fake(container_toolkit, responses)
    assert error is None
    for needle in ("nvidia-ctk", "apt-get install", "restart docker", "apt-mark hold"):
        assert not commands_with(commands, needle), needle


def test_preflight_refuses_seven_gpus_before_any_change() -> None:
    seven = "\n".join(LSPCI_8.splitlines()[1:])
    responses = fresh_ubuntu("24.04") | {"lspci -nn": seven + "\n##hgxkit-rc=0\n"}
    commands, error = run_fake(preflight, responses)
    assert isinstance(error, DeployError)
    assert "[gpu-count] 7 NVIDIA GPUs on PCI, the inventory expects 8" in str(error)
    assert "nothing was changed" in str(error)
    assert not [c for c in commands if c.startswith(("apt", "DEBIAN", "systemctl"))]


def test_preflight_passes_a_proper_node() -> None:
    _, error = run_fake(preflight, fresh_ubuntu("24.04"))
    assert error is None
