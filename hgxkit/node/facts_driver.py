"""pyinfra facts about the NVIDIA driver's side of a node: the loaded kernel module, NVIDIA devices on PCI,
Secure Boot (it decides whether an unsigned module loads), XID events in the kernel log and DCGM's diagnostic.

Example (in a deploy):
    from hgxkit.node.facts_driver import NvidiaLoadedModule
    loaded = host.get_fact(NvidiaLoadedModule)  # "580.95.05", or None when no nvidia module is loaded
"""

from __future__ import annotations

from pyinfra.api import FactBase, StringCommand

from hgxkit.hostcmd import argv, script
from hgxkit.node.facts_gpu import split_status, with_status
from hgxkit.nvidia.host import PciInventory, SecureBoot, parse_lspci, parse_secure_boot
from hgxkit.nvidia.smi import parse_module_version


class NvidiaLoadedModule(FactBase[str | None]):
    """Version of the loaded nvidia kernel module (`/sys/module/nvidia/version`), None when none is loaded."""

    def command(self) -> StringCommand:
        return script(
            "cat {sys} 2>/dev/null || cat {proc} 2>/dev/null || true",
            sys="/sys/module/nvidia/version",
            proc="/proc/driver/nvidia/version",
        )

    def process(self, output: list[str]) -> str | None:
        return parse_module_version("\n".join(output))


class NvidiaPci(FactBase[PciInventory | None]):
    """NVIDIA GPUs and NVSwitches on the PCI bus (`lspci -nn`); None when lspci is missing."""

    def command(self) -> StringCommand:
        return with_status(argv("lspci", "-nn"), "lspci")

    def process(self, output: list[str]) -> PciInventory | None:
        body, rc = split_status(output)
        return parse_lspci("\n".join(body)) if rc == 0 else None


class SecureBootState(FactBase[SecureBoot]):
    """`enabled`, `disabled`, `unsupported` (legacy BIOS boot) or `unknown` (no mokutil on an EFI host)."""

    def command(self) -> StringCommand:
        return script(
            "if command -v mokutil >/dev/null 2>&1; then mokutil --sb-state 2>&1 || true; "
            "elif [ -d /sys/firmware/efi ]; then echo unknown; else echo {legacy}; fi",
            legacy="EFI variables are not supported",
        )

    def process(self, output: list[str]) -> SecureBoot:
        return parse_secure_boot("\n".join(output))


class XidLines(FactBase[list[str]]):
    """This boot's kernel-log lines with NVIDIA XID events (`journalctl -k -b`, or `dmesg`)."""

    def command(self) -> StringCommand:
        return script(
            "(journalctl -k -b --no-pager -o cat 2>/dev/null || dmesg 2>/dev/null) | grep {pattern} || true",
            pattern="NVRM: Xid",
        )

    @staticmethod
    def default() -> list[str]:
        return []

    def process(self, output: list[str]) -> list[str]:
        return list(output)


class DcgmDiagText(FactBase[str]):
    """The output of `dcgmi diag -r LEVEL -j` (stderr merged in for its error messages); see node.health."""

    def command(self, level: int) -> StringCommand:
        return script("dcgmi diag -r {level} -j 2>&1 || true", level=int(level))

    @staticmethod
    def default() -> str:
        return ""

    def process(self, output: list[str]) -> str:
        return "\n".join(output)
