"""Custom pyinfra facts for GPU nodes: GPUs, driver versions, fabric, NVLink, PCI, Secure Boot, holds.

Each fact always succeeds on the host and reports failures as data (nvidia-smi exits non-zero when no
driver is loaded or the versions mismatch; that is a state the roles act on, not an error).

Example (in a deploy):
    from hgxkit.facts import NvidiaSmi
    smi = host.get_fact(NvidiaSmi)
    if smi.failure == "version-mismatch": ...
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field

from pyinfra.api import FactBase

from hgxkit.nvidia.host import (
    PciInventory,
    SecureBoot,
    parse_dpkg_query,
    parse_lspci,
    parse_meminfo_bytes,
    parse_os_release,
    parse_secure_boot,
)
from hgxkit.nvidia.smi import (
    GPU_QUERY_FIELDS,
    GpuInfo,
    NvlinkGpu,
    SmiFailure,
    classify_smi_failure,
    gpus_from_query,
    parse_module_version,
    parse_nvlink_errors,
    parse_nvlink_status,
    parse_topo_matrix,
)

_RC_MARK = "##hgxkit-rc="


def _with_status(command: str, program: str) -> str:
    """Run `command`, keep its stdout whatever its exit status, and append a status line.

    nvidia-smi prints its failures ("couldn't communicate with the NVIDIA driver", "Driver/library version
    mismatch") on stdout; stderr carries only noise such as warnings and banners, so it is dropped.
    """
    return (
        f"if command -v {program} >/dev/null 2>&1; then {command} 2>/dev/null; echo '{_RC_MARK}'$?; "
        f"else echo '{program}: not found'; echo '{_RC_MARK}127'; fi"
    )


def _split_status(lines: list[str]) -> tuple[list[str], int]:
    rc = 0
    body = []
    for line in lines:
        if line.startswith(_RC_MARK):
            rc = int(line[len(_RC_MARK) :] or 0)
        else:
            body.append(line)
    return body, rc


@dataclass(frozen=True)
class SmiResult:
    """An nvidia-smi run: the GPUs it listed, or why it failed (`failure`, with the tool's `message`)."""

    gpus: list[GpuInfo] = field(default_factory=list)
    failure: SmiFailure | None = None
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.failure is None


def _smi_failure(body: list[str], rc: int) -> SmiResult:
    text = "\n".join(body).strip()
    failure = classify_smi_failure(text) or ("not-installed" if rc == 127 else "unknown")
    return SmiResult(failure=failure, message=text.splitlines()[0] if text else "")


class NvidiaSmi(FactBase[SmiResult]):
    """GPUs from `nvidia-smi --query-gpu=<GPU_QUERY_FIELDS> --format=csv,noheader,nounits`, or the failure.

    Example: `host.get_fact(NvidiaSmi).gpus[0].fabric_state == "Completed"`
    """

    def command(self) -> str:
        fields = ",".join(GPU_QUERY_FIELDS)
        return _with_status(f"nvidia-smi --query-gpu={fields} --format=csv,noheader,nounits", "nvidia-smi")

    def process(self, output: list[str]) -> SmiResult:
        body, rc = _split_status(output)
        if rc != 0:
            return _smi_failure(body, rc)
        return SmiResult(gpus=gpus_from_query("\n".join(body)))


class NvidiaSmiXml(FactBase[str | None]):
    """The raw `nvidia-smi -q -x` document (for fingerprints), or None when nvidia-smi fails."""

    def command(self) -> str:
        return _with_status("nvidia-smi -q -x", "nvidia-smi")

    def process(self, output: list[str]) -> str | None:
        body, rc = _split_status(output)
        return "\n".join(body) if rc == 0 else None


class NvidiaTopology(FactBase[dict[tuple[str, str], str] | None]):
    """`nvidia-smi topo -m` as {(row, column): link}; None when nvidia-smi fails."""

    def command(self) -> str:
        return _with_status("nvidia-smi topo -m", "nvidia-smi")

    def process(self, output: list[str]) -> dict[tuple[str, str], str] | None:
        body, rc = _split_status(output)
        return parse_topo_matrix("\n".join(body)) if rc == 0 else None


@dataclass(frozen=True)
class NvlinkState:
    """Per GPU link speeds from `nvlink -s` and error counter sums from `nvlink -e`."""

    gpus: list[NvlinkGpu]
    errors: dict[int, dict[str, int]]

    def problems(self) -> list[str]:
        """Inactive links and non-zero error counters, one sentence each."""
        out = [f"GPU {g.index} link {link} is inactive" for g in self.gpus for link in g.inactive]
        for index, counters in sorted(self.errors.items()):
            out += [f"GPU {index} has {n} NVLink {kind} errors" for kind, n in sorted(counters.items()) if n]
        return out


class Nvlink(FactBase[NvlinkState | None]):
    """NVLink status and error counters; None when nvidia-smi fails."""

    def command(self) -> str:
        return _with_status("nvidia-smi nvlink -s && echo '##hgxkit-errors' && nvidia-smi nvlink -e", "nvidia-smi")

    def process(self, output: list[str]) -> NvlinkState | None:
        body, rc = _split_status(output)
        if rc != 0:
            return None
        text = "\n".join(body)
        status, _, errors = text.partition("##hgxkit-errors")
        return NvlinkState(parse_nvlink_status(status), parse_nvlink_errors(errors))


class NvidiaLoadedModule(FactBase[str | None]):
    """Version of the loaded nvidia kernel module (`/sys/module/nvidia/version`), None when none is loaded."""

    def command(self) -> str:
        return "cat /sys/module/nvidia/version 2>/dev/null || cat /proc/driver/nvidia/version 2>/dev/null || true"

    def process(self, output: list[str]) -> str | None:
        return parse_module_version("\n".join(output))


class NvidiaPci(FactBase[PciInventory | None]):
    """NVIDIA GPUs and NVSwitches on the PCI bus (`lspci -nn`); None when lspci is missing."""

    def command(self) -> str:
        return _with_status("lspci -nn", "lspci")

    def process(self, output: list[str]) -> PciInventory | None:
        body, rc = _split_status(output)
        return parse_lspci("\n".join(body)) if rc == 0 else None


class SecureBootState(FactBase[SecureBoot]):
    """`enabled`, `disabled`, `unsupported` (legacy BIOS boot) or `unknown` (no mokutil on an EFI host)."""

    def command(self) -> str:
        return (
            "if command -v mokutil >/dev/null 2>&1; then mokutil --sb-state 2>&1 || true; "
            "elif [ -d /sys/firmware/efi ]; then echo unknown; else echo 'EFI variables are not supported'; fi"
        )

    def process(self, output: list[str]) -> SecureBoot:
        return parse_secure_boot("\n".join(output))


class HeldPackages(FactBase[list[str]]):
    """Packages on hold (`apt-mark showhold`)."""

    def command(self) -> str:
        return "apt-mark showhold 2>/dev/null || true"

    @staticmethod
    def default() -> list[str]:
        return []

    def process(self, output: list[str]) -> list[str]:
        return sorted(line.strip() for line in output if line.strip())


class CgroupVersion(FactBase[int | None]):
    """1 or 2, from the filesystem type mounted at /sys/fs/cgroup."""

    def command(self) -> str:
        return "stat -fc %T /sys/fs/cgroup 2>/dev/null || true"

    def process(self, output: list[str]) -> int | None:
        kind = "".join(output).strip()
        return 2 if kind == "cgroup2fs" else (1 if kind == "tmpfs" else None)


class MemTotalBytes(FactBase[int | None]):
    """Host RAM in bytes (`MemTotal` of /proc/meminfo)."""

    def command(self) -> str:
        return "cat /proc/meminfo"

    def process(self, output: list[str]) -> int | None:
        return parse_meminfo_bytes("\n".join(output))


class FreeBytes(FactBase[int | None]):
    """Free bytes on the filesystem that holds `path` (or its nearest existing parent).

    Example: `host.get_fact(FreeBytes, path="/data/models/deepseek-v4-flash-dspark")`
    """

    def command(self, path: str) -> str:
        quoted = "'" + path.replace("'", "'\"'\"'") + "'"
        return (
            f"p={quoted}; while [ ! -e \"$p\" ] && [ \"$p\" != / ]; do p=$(dirname \"$p\"); done; "
            "df -PB1 \"$p\" | awk 'NR==2 {print $4}'"
        )

    def process(self, output: list[str]) -> int | None:
        text = "".join(output).strip()
        return int(text) if text.isdigit() else None


class OsRelease(FactBase[dict[str, str]]):
    """`/etc/os-release` as a dict (`ID`, `VERSION_ID`, `VERSION_CODENAME`, …)."""

    def command(self) -> str:
        return "cat /etc/os-release 2>/dev/null || true"

    @staticmethod
    def default() -> dict[str, str]:
        return {}

    def process(self, output: list[str]) -> dict[str, str]:
        return parse_os_release("\n".join(output))


class InstalledPackages(FactBase[dict[str, str]]):
    """Installed packages matching shell globs, `{name: version}` (e.g. `patterns="nvidia-* libnvidia-*"`)."""

    def command(self, patterns: str) -> str:
        globs = " ".join(f"'{p}'" for p in patterns.split())
        return f"dpkg-query -W -f='${{Package}} ${{Version}} ${{db:Status-Abbrev}}\\n' {globs} 2>/dev/null || true"

    @staticmethod
    def default() -> dict[str, str]:
        return {}

    def process(self, output: list[str]) -> dict[str, str]:
        return parse_dpkg_query("\n".join(output))


class PackagePolicies(FactBase[dict[str, str]]):
    """`apt-cache policy` text of each installed package matching `patterns` (see `bringup.package_origin`)."""

    def command(self, patterns: str) -> str:
        globs = " ".join(f"'{p}'" for p in patterns.split())
        return (
            # Only installed packages: dpkg also lists ones it merely knows of (status "un").
            f"for p in $(dpkg-query -W -f='${{db:Status-Abbrev}} ${{Package}}\\n' {globs} 2>/dev/null "
            "| awk '$1 ~ /^[ih]i/ {print $2}'); do "
            'echo "##package $p"; apt-cache policy "$p" 2>/dev/null; done'
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


class ServiceActive(FactBase[bool]):
    """True when the systemd unit is active (`systemctl is-active UNIT`)."""

    def command(self, unit: str) -> str:
        return f"systemctl is-active '{unit}' 2>/dev/null || true"

    def process(self, output: list[str]) -> bool:
        return "".join(output).strip() == "active"


class FileText(FactBase[str | None]):
    """A text file's content, or None when it does not exist (for small config files such as daemon.json)."""

    def command(self, path: str) -> str:
        return f"if [ -f '{path}' ]; then cat '{path}'; else echo '##hgxkit-absent'; fi"

    def process(self, output: list[str]) -> str | None:
        text = "\n".join(output)
        return None if text.strip() == "##hgxkit-absent" else text


class ModelSyncStatus(FactBase[dict]):
    """The model role's metadata-only check (`hgxkit_fetch.py status`): one JSON object with `state`
    complete | incomplete | running | error | absent (the role's program is not installed yet).

    Example: `host.get_fact(ModelSyncStatus, python="/opt/hgxkit/hf-venv/bin/python",
    script="/usr/local/lib/hgxkit/model/hgxkit_fetch.py", spec='{"repo_id": ...}', token=True, _stdin=token)`
    (the token goes on stdin, never on the command line).
    """

    def command(self, python: str, script: str, spec: str, token: bool = False) -> str:
        py, sc = shlex.quote(python), shlex.quote(script)
        flag = " --token-stdin" if token else ""
        failed = shlex.quote('{"state": "incomplete", "reason": "the status check failed"}')
        return (
            f"if [ -x {py} ] && [ -f {sc} ]; then {py} {sc} status --spec {shlex.quote(spec)}{flag} 2>/dev/null "
            f"|| echo {failed}; else echo '{{\"state\": \"absent\"}}'; fi"
        )

    def process(self, output: list[str]) -> dict:
        for line in reversed(output):
            if line.strip().startswith("{"):
                try:
                    return dict(json.loads(line))
                except ValueError:
                    break
        return {"state": "incomplete", "reason": "unreadable status: " + " ".join(output)[:120]}
