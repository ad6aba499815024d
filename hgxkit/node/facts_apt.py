"""pyinfra facts about a node's packages: installed versions (dpkg), their apt origins, holds, and snaps.

Example (in a deploy):
    from hgxkit.node.facts_apt import InstalledPackages
    host.get_fact(InstalledPackages, patterns="nvidia-* libnvidia-*")  # {"nvidia-driver-580-open": "580.95.05-1", …}
"""

from __future__ import annotations

from pyinfra.api import FactBase, StringCommand

from hgxkit.hostcmd import script
from hgxkit.nvidia.host import parse_dpkg_query


class HeldPackages(FactBase[list[str]]):
    """Packages on hold (`apt-mark showhold`)."""

    def command(self) -> StringCommand:
        return script("apt-mark showhold 2>/dev/null || true")

    @staticmethod
    def default() -> list[str]:
        return []

    def process(self, output: list[str]) -> list[str]:
        return sorted(line.strip() for line in output if line.strip())


class InstalledPackages(FactBase[dict[str, str]]):
    """Installed packages matching shell globs, `{name: version}` (e.g. `patterns="nvidia-* libnvidia-*"`)."""

    def command(self, patterns: str) -> StringCommand:
        return script(
            "dpkg-query -W -f={format} {patterns} 2>/dev/null || true",
            format="${Package} ${Version} ${db:Status-Abbrev}\\n",
            patterns=patterns.split(),
        )

    @staticmethod
    def default() -> dict[str, str]:
        return {}

    def process(self, output: list[str]) -> dict[str, str]:
        return parse_dpkg_query("\n".join(output))


class PackagePolicies(FactBase[dict[str, str]]):
    """`apt-cache policy` text of each installed package matching `patterns` (see `node.driver.package_origin`)."""

    def command(self, patterns: str) -> StringCommand:
        return script(
            # Only installed packages: dpkg also lists ones it merely knows of (status "un").
            "for p in $(dpkg-query -W -f={format} {patterns} 2>/dev/null | awk '$1 ~ /^[ih]i/ {{print $2}}'); "
            'do echo "##package $p"; apt-cache policy "$p" 2>/dev/null; done',
            format="${db:Status-Abbrev} ${Package}\\n",
            patterns=patterns.split(),
        )

    @staticmethod
    def default() -> dict[str, str]:
        return {}

    def process(self, output: list[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        name = None
        chunk: list[str] = []
        for line in [*output, "##package"]:
            if line.startswith("##package"):
                if name:
                    out[name] = "\n".join(chunk)
                name, chunk = line[len("##package") :].strip() or None, []
            else:
                chunk.append(line)
        return out


class SnapInstalled(FactBase[bool]):
    """True when the snap `snap` is installed (False without snapd)."""

    def command(self, snap: str) -> StringCommand:
        return script(
            "if command -v snap >/dev/null 2>&1 && snap list {snap} >/dev/null 2>&1; then echo present; fi",
            snap=snap,
        )

    def process(self, output: list[str]) -> bool:
        return "present" in output
