"""apt commands the bring-up roles run: refresh one source list, install pinned packages, flat repo lines.

apt waits for another apt's lock (unattended-upgrades at boot is the usual holder) up to `LOCK_TIMEOUT_S`
instead of failing at once, and every package word is quoted (a pin such as `nvidia-open=580.95.05-*` holds a
glob character that the shell must not expand).

Example:
    >>> print(apt_install_commands("hgxkit-nvidia-cuda", ["nvidia-open=580.95.05-*"])[1])
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o DPkg::Lock::Timeout=600 --allow-downgrades \
--allow-change-held-packages 'nvidia-open=580.95.05-*'
"""

from __future__ import annotations

from pyinfra.api import StringCommand

from hgxkit.hostcmd import script

LOCK_TIMEOUT_S = 600


def apt_install_commands(list_name: str, packages: list[str]) -> list[StringCommand]:
    """Refresh one apt source list and install `packages` (pinned `pkg=version` words) non-interactively."""
    return [
        # Refresh only this role's list: quick, and other repositories are not the role's business.
        script(
            "apt-get update -qq -o Dir::Etc::sourcelist={list} -o Dir::Etc::sourceparts=- "
            "-o APT::Get::List-Cleanup=0 -o DPkg::Lock::Timeout={timeout}",
            list=f"sources.list.d/{list_name}.list",
            timeout=LOCK_TIMEOUT_S,
        ),
        script(
            "DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o DPkg::Lock::Timeout={timeout} "
            "--allow-downgrades --allow-change-held-packages {packages}",
            timeout=LOCK_TIMEOUT_S,
            packages=packages,
        ),
    ]


def apt_mark_hold(packages: list[str]) -> StringCommand:
    """Hold `packages` at their installed versions."""
    return script("apt-mark hold {packages}", packages=packages)


def flat_repo_line(repo_url: str, keyring: str) -> str:
    """A flat apt source line (`URL /`), the layout of NVIDIA's CUDA and container-toolkit repositories."""
    return f"deb [signed-by={keyring}] {repo_url.rstrip('/')}/ /"
