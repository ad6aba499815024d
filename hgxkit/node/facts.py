"""pyinfra facts about a GPU node: GPUs, driver versions, fabric, NVLink, PCI, Secure Boot, packages, services,
CPU, Docker, DCGM and the kernel log. Every read of a node's state that any role or the fingerprint needs is
one of these facts (pyinfra runs facts afresh on every `host.get_fact`, at plan and at execute time).

Each fact always succeeds on the host and reports failures as data (nvidia-smi exits non-zero when no driver
is loaded or the versions mismatch; that is a state the roles act on, not an error). Every command is built
with `hgxkit.hostcmd`, so argument values are quoted.

Example (in a deploy):
    from hgxkit.node.facts import NvidiaSmi
    smi = host.get_fact(NvidiaSmi)
    if smi.failure == "version-mismatch": ...
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from pyinfra.api import FactBase, StringCommand

from hgxkit.hostcmd import argv, script
from hgxkit.node.converged import NodeState, parse_state, state_command
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
    gpus_from_xml,
    parse_module_version,
    parse_nvlink_errors,
    parse_nvlink_status,
    parse_topo_matrix,
)

_RC_MARK = "##hgxkit-rc="
_ABSENT = "##hgxkit-absent"


def with_status(command: StringCommand, program: str) -> StringCommand:
    """Run `command`, keep its stdout whatever its exit status, and append a status line.

    nvidia-smi prints its failures ("couldn't communicate with the NVIDIA driver", "Driver/library version
    mismatch") on stdout; stderr carries only noise such as warnings and banners, so it is dropped.
    """
    return script(
        "if command -v {program} >/dev/null 2>&1; then {command} 2>/dev/null; echo {mark}$?; "
        "else echo {missing}; echo {mark}127; fi",
        program=program,
        command=command,
        mark=_RC_MARK,
        missing=f"{program}: not found",
    )


def split_status(lines: list[str]) -> tuple[list[str], int]:
    """The body of a `with_status` command's output, and the command's exit status."""
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

    def command(self) -> StringCommand:
        query = argv("nvidia-smi", "--query-gpu=" + ",".join(GPU_QUERY_FIELDS), "--format=csv,noheader,nounits")
        return with_status(query, "nvidia-smi")

    @staticmethod
    def default() -> SmiResult:
        """No output at all (the command always prints a status line on a real host): nothing is known."""
        return SmiResult(failure="unknown", message="no output")

    def process(self, output: list[str]) -> SmiResult:
        body, rc = split_status(output)
        if rc != 0:
            return _smi_failure(body, rc)
        return SmiResult(gpus=gpus_from_query("\n".join(body)))


@dataclass(frozen=True)
class SmiDocument:
    """`nvidia-smi -q -x` parsed: per-GPU details, the document's top-level versions, and whether the
    document says it comes from a simulated node."""

    gpus: list[GpuInfo]
    versions: dict[str, str]
    simulated: bool


class NvidiaSmiXml(FactBase[SmiDocument | None]):
    """`nvidia-smi -q -x` (VBIOS, ECC, power limits, clocks, fabric), or None when nvidia-smi fails.

    Example: `host.get_fact(NvidiaSmiXml).gpus[0].vbios_version`
    """

    def command(self) -> StringCommand:
        return with_status(argv("nvidia-smi", "-q", "-x"), "nvidia-smi")

    def process(self, output: list[str]) -> SmiDocument | None:
        body, rc = split_status(output)
        text = "\n".join(body)
        if rc != 0 or "<nvidia_smi_log" not in text:
            return None
        gpus, versions = gpus_from_xml(text)
        return SmiDocument(gpus, versions, "<simulated>true</simulated>" in text)


class NvidiaTopology(FactBase[dict[tuple[str, str], str] | None]):
    """`nvidia-smi topo -m` as {(row, column): link}; None when nvidia-smi fails or prints no matrix."""

    def command(self) -> StringCommand:
        return with_status(argv("nvidia-smi", "topo", "-m"), "nvidia-smi")

    def process(self, output: list[str]) -> dict[tuple[str, str], str] | None:
        body, rc = split_status(output)
        if rc != 0:
            return None
        try:
            return parse_topo_matrix("\n".join(body))
        except ValueError:
            return None


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

    def command(self) -> StringCommand:
        both = script(
            "{status} && echo {mark} && {errors}",
            status=argv("nvidia-smi", "nvlink", "-s"),
            mark="##hgxkit-errors",
            errors=argv("nvidia-smi", "nvlink", "-e"),
        )
        return with_status(both, "nvidia-smi")

    def process(self, output: list[str]) -> NvlinkState | None:
        body, rc = split_status(output)
        if rc != 0:
            return None
        status, _, errors = "\n".join(body).partition("##hgxkit-errors")
        return NvlinkState(parse_nvlink_status(status), parse_nvlink_errors(errors))


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


class HeldPackages(FactBase[list[str]]):
    """Packages on hold (`apt-mark showhold`)."""

    def command(self) -> StringCommand:
        return script("apt-mark showhold 2>/dev/null || true")

    @staticmethod
    def default() -> list[str]:
        return []

    def process(self, output: list[str]) -> list[str]:
        return sorted(line.strip() for line in output if line.strip())


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
        return argv("cat", "/proc/meminfo")

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


class ServiceActive(FactBase[bool]):
    """True when the systemd unit is active (`systemctl is-active UNIT`)."""

    def command(self, unit: str) -> StringCommand:
        return script("systemctl is-active {unit} 2>/dev/null || true", unit=unit)

    def process(self, output: list[str]) -> bool:
        return "".join(output).strip() == "active"


class FileText(FactBase[str | None]):
    """A text file's content, or None when it does not exist (for small config and record files)."""

    def command(self, path: str) -> StringCommand:
        return script("if [ -f {path} ]; then cat {path}; else echo {absent}; fi", path=path, absent=_ABSENT)

    def process(self, output: list[str]) -> str | None:
        text = "\n".join(output)
        return None if text.strip() == _ABSENT else text


class JsonFile(FactBase[dict | None]):
    """A JSON object file (a record hgxkit wrote), or None when it is absent or not a JSON object.

    Example: `host.get_fact(JsonFile, path="/var/lib/hgxkit/serve/image.json")`
    """

    def command(self, path: str) -> StringCommand:
        return FileText().command(path)

    def process(self, output: list[str]) -> dict | None:
        text = FileText().process(output)
        try:
            data = json.loads(text) if text else None
        except json.JSONDecodeError:
            return None
        return data if isinstance(data, dict) else None


@dataclass(frozen=True)
class DockerEngine:
    """`docker info` as the fingerprint and the checks need it (None fields when Docker does not answer)."""

    server_version: str | None = None
    storage_driver: str | None = None
    cgroup_driver: str | None = None
    cgroup_version: str | None = None
    runtimes: tuple[str, ...] = ()
    default_runtime: str | None = None


class DockerInfo(FactBase[DockerEngine]):
    """The Docker engine's version and configuration (`docker info --format '{{json .}}'`)."""

    def command(self) -> StringCommand:
        return script("docker info --format {format} 2>/dev/null || true", format="{{json .}}")

    @staticmethod
    def default() -> DockerEngine:
        return DockerEngine()

    def process(self, output: list[str]) -> DockerEngine:
        try:
            info = json.loads(output[0]) if output and output[0].startswith("{") else {}
        except json.JSONDecodeError:
            info = {}
        if not isinstance(info, dict):
            return DockerEngine()
        return DockerEngine(
            server_version=info.get("ServerVersion"),
            storage_driver=info.get("Driver"),
            cgroup_driver=info.get("CgroupDriver"),
            cgroup_version=info.get("CgroupVersion"),
            runtimes=tuple(sorted(info.get("Runtimes") or {})),
            default_runtime=info.get("DefaultRuntime"),
        )


class DcgmDiagText(FactBase[str]):
    """The output of `dcgmi diag -r LEVEL -j` (stderr merged in for its error messages); see node.health."""

    def command(self, level: int) -> StringCommand:
        return script("dcgmi diag -r {level} -j 2>&1 || true", level=int(level))

    @staticmethod
    def default() -> str:
        return ""

    def process(self, output: list[str]) -> str:
        return "\n".join(output)


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


class BootId(FactBase[str | None]):
    """This boot's id (`/proc/sys/kernel/random/boot_id`): changes at every reboot."""

    def command(self) -> StringCommand:
        return script("cat /proc/sys/kernel/random/boot_id 2>/dev/null || true")

    def process(self, output: list[str]) -> str | None:
        return "".join(output).strip() or None


class SnapInstalled(FactBase[bool]):
    """True when the snap `snap` is installed (False without snapd)."""

    def command(self, snap: str) -> StringCommand:
        return script(
            "if command -v snap >/dev/null 2>&1 && snap list {snap} >/dev/null 2>&1; then echo present; fi",
            snap=snap,
        )

    def process(self, output: list[str]) -> bool:
        return "present" in output


class IsFile(FactBase[bool]):
    """True when `path` is a regular file (read-only; e.g. a model's config.json)."""

    def command(self, path: str) -> StringCommand:
        return script("if [ -f {path} ]; then echo yes; else echo no; fi", path=path)

    def process(self, output: list[str]) -> bool:
        return output[-1:] == ["yes"]


class RealPath(FactBase[str | None]):
    """`path` with every symlink resolved on the node (`realpath -m`: the path need not exist yet)."""

    def command(self, path: str) -> StringCommand:
        return script("realpath -m -- {path} 2>/dev/null || true", path=path)

    def process(self, output: list[str]) -> str | None:
        return output[-1].strip() if output and output[-1].startswith("/") else None


class BringupState(FactBase[tuple[NodeState, dict | None]]):
    """What bring-up judges, read in one round trip, and the record its last pass left (see node.converged)."""

    def command(self, state_file: str) -> StringCommand:
        return state_command(state_file)

    @staticmethod
    def default() -> tuple[NodeState, dict | None]:
        return NodeState(()), None

    def process(self, output: list[str]) -> tuple[NodeState, dict | None]:
        return parse_state(output)
