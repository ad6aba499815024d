"""pyinfra facts about a node's operating system: OS release, kernel, CPU, cgroups, RAM, free disk, the boot,
systemd units, and what bring-up judges (read in one round trip).

Example (in a deploy):
    from hgxkit.node.facts_system import OsRelease
    host.get_fact(OsRelease).get("VERSION_CODENAME")  # "noble"
"""

from __future__ import annotations

from pyinfra.api import FactBase, StringCommand

from hgxkit.hostcmd import argv, script
from hgxkit.node.converged import NodeState, parse_state, state_command, unit_blocks, units_command
from hgxkit.nvidia.host import parse_meminfo_bytes, parse_os_release


class OsRelease(FactBase[dict[str, str]]):
    """`/etc/os-release` as a dict (`ID`, `VERSION_ID`, `VERSION_CODENAME`, `PRETTY_NAME`, …)."""

    def command(self) -> StringCommand:
        return script("cat /etc/os-release 2>/dev/null || true")

    @staticmethod
    def default() -> dict[str, str]:
        return {}

    def process(self, output: list[str]) -> dict[str, str]:
        return parse_os_release("\n".join(output))


class KernelRelease(FactBase[str | None]):
    """The running kernel (`uname -r`)."""

    def command(self) -> StringCommand:
        return argv("uname", "-r")

    def process(self, output: list[str]) -> str | None:
        return "".join(output).strip() or None


class Lscpu(FactBase[dict[str, str]]):
    """`lscpu` as {field: value} (`Model name`, `Socket(s)`, `Core(s) per socket`, `NUMA node(s)`, …)."""

    def command(self) -> StringCommand:
        return script("LC_ALL=C lscpu 2>/dev/null || true")

    @staticmethod
    def default() -> dict[str, str]:
        return {}

    def process(self, output: list[str]) -> dict[str, str]:
        pairs = (line.split(":", 1) for line in output if ":" in line)
        return {key.strip(): value.strip() for key, value in pairs}


class CgroupVersion(FactBase[int | None]):
    """1 or 2, from the filesystem type mounted at /sys/fs/cgroup."""

    def command(self) -> StringCommand:
        return script("stat -fc %T /sys/fs/cgroup 2>/dev/null || true")

    def process(self, output: list[str]) -> int | None:
        kind = "".join(output).strip()
        return 2 if kind == "cgroup2fs" else (1 if kind == "tmpfs" else None)


class MemTotalBytes(FactBase[int | None]):
    """Host RAM in bytes (`MemTotal` of /proc/meminfo)."""

    def command(self) -> StringCommand:
        # MemTotal is the kernel's first line of /proc/meminfo: the shell's `read`, no `cat` process.
        return script("IFS= read -r line < /proc/meminfo && printf '%s\\n' \"$line\"")

    def process(self, output: list[str]) -> int | None:
        return parse_meminfo_bytes("\n".join(output))


class FreeBytes(FactBase[int | None]):
    """Free bytes on the filesystem that holds `path` (or its nearest existing parent).

    Example: `host.get_fact(FreeBytes, path="/data/models/deepseek-v4-flash-dspark")`
    """

    def command(self, path: str) -> StringCommand:
        return script(
            'p={path}; while [ ! -e "$p" ] && [ "$p" != / ]; do p=$(dirname "$p"); done; '
            "df -PB1 \"$p\" | awk 'NR==2 {{print $4}}'",
            path=path,
        )

    def process(self, output: list[str]) -> int | None:
        text = "".join(output).strip()
        return int(text) if text.isdigit() else None


class BootId(FactBase[str | None]):
    """This boot's id (`/proc/sys/kernel/random/boot_id`): changes at every reboot."""

    def command(self) -> StringCommand:
        return script("cat /proc/sys/kernel/random/boot_id 2>/dev/null || true")

    def process(self, output: list[str]) -> str | None:
        return "".join(output).strip() or None


class ServiceActive(FactBase[bool]):
    """True when the systemd unit is active (`systemctl is-active UNIT`)."""

    def command(self, unit: str) -> StringCommand:
        return script("systemctl is-active {unit} 2>/dev/null || true", unit=unit)

    def process(self, output: list[str]) -> bool:
        return "".join(output).strip() == "active"


class BringupState(FactBase[tuple[NodeState, dict | None]]):
    """What bring-up judges, read in one round trip, and the record its last pass left (see node.converged)."""

    def command(self, state_file: str) -> StringCommand:
        return state_command(state_file)

    @staticmethod
    def default() -> tuple[NodeState, dict | None]:
        return NodeState(()), None

    def process(self, output: list[str]) -> tuple[NodeState, dict | None]:
        return parse_state(output)


class NodeUnits(FactBase[dict[str, list[str]]]):
    """systemd's view of every unit a no-op reads, in one call (`converged.units_command`): {unit id: its
    `Property=value` lines}. Bring-up's digest takes its own units from it, the serving role its replace units."""

    def command(self) -> StringCommand:
        return units_command()

    @staticmethod
    def default() -> dict[str, list[str]]:
        return {}

    def process(self, output: list[str]) -> dict[str, list[str]]:
        return unit_blocks(output)
