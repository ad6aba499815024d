"""pyinfra facts from nvidia-smi: the GPUs (query and XML), their topology and NVLink, or why nvidia-smi failed.

Each fact always succeeds on the host and reports failures as data (nvidia-smi exits non-zero when no driver
is loaded or the versions mismatch; that is a state the roles act on, not an error): `with_status` keeps a
command's stdout and appends its exit status. Parsing is hgxkit.nvidia.smi's.

Example (in a deploy):
    from hgxkit.node.facts_gpu import NvidiaSmi
    smi = host.get_fact(NvidiaSmi)
    if smi.failure == "version-mismatch": ...
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyinfra.api import FactBase, StringCommand

from hgxkit.hostcmd import argv, script
from hgxkit.nvidia.smi import (
    GPU_QUERY_FIELDS,
    GpuInfo,
    NvlinkGpu,
    SmiFailure,
    classify_smi_failure,
    gpus_from_query,
    gpus_from_xml,
    parse_nvlink_errors,
    parse_nvlink_status,
    parse_topo_matrix,
)

_RC_MARK = "##hgxkit-rc="


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
