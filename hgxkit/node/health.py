"""GPU health as data: DCGM diagnostics, ECC mode and errors, XID events, persistence mode.

The gpu_health role gates on `GpuHealthReport.problems()`; the verify role stores the report in the host
fingerprint.

Example:
    >>> parse_xids("NVRM: Xid (PCI:0000:18:00): 79, pid=1234, GPU has fallen off the bus.")
    [XidEvent(bus='0000:18:00', code=79, text='GPU has fallen off the bus.')]
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from hgxkit.node.facts_driver import DcgmDiagText, XidLines
from hgxkit.node.facts_gpu import NvidiaSmiXml
from hgxkit.nvidia.smi import GpuInfo
from hgxkit.problems import Problem

_XID = re.compile(r"NVRM: Xid \(PCI:([0-9a-fA-F:.]+)\): (\d+),(?:\s*pid=[^,]*,)?(?:\s*name=[^,]*,)?\s*(.*)$")


@dataclass(frozen=True)
class XidEvent:
    """One XID line of the kernel log: the GPU's PCI address, the XID code and its text."""

    bus: str
    code: int
    text: str


@dataclass(frozen=True)
class DcgmDiag:
    """A `dcgmi diag -r N -j` result: passed, and one line per failed test and GPU."""

    level: int
    passed: bool
    failures: list[str] = field(default_factory=list)
    simulated: bool = False


@dataclass(frozen=True)
class GpuHealthReport:
    """Everything the gpu_health role checks, as data."""

    dcgm: DcgmDiag | None
    gpus: list[GpuInfo]
    xids: list[XidEvent]
    expected_gpus: int | None = None

    def problems(self, *, require_persistence: bool = True) -> list[Problem]:
        out: list[Problem] = []
        if self.dcgm is None:
            out.append(Problem("dcgm", "dcgmi diag produced no result", "check `systemctl status nvidia-dcgm`"))
        elif not self.dcgm.passed:
            found = "; ".join(self.dcgm.failures) or "failed"
            out.append(Problem("dcgm", f"dcgmi diag -r {self.dcgm.level}: {found}", "drain the node; see DCGM's log"))
        if self.expected_gpus is not None and len(self.gpus) != self.expected_gpus:
            out.append(Problem("gpu-count", f"{len(self.gpus)} GPUs report health", f"expected {self.expected_gpus}"))
        for gpu in self.gpus:
            if gpu.ecc_enabled is False:
                out.append(Problem("ecc", f"ECC is off on GPU {gpu.index}", "nvidia-smi -i N -e 1, then reboot"))
            if gpu.ecc_errors_uncorrected:
                out.append(
                    Problem(
                        "ecc",
                        f"GPU {gpu.index} has {gpu.ecc_errors_uncorrected} uncorrected ECC errors",
                        "drain the node and reset the GPU; RMA if they recur",
                    )
                )
            if require_persistence and gpu.persistence_mode is False:
                out.append(
                    Problem("persistence", f"persistence mode is off on GPU {gpu.index}", "start nvidia-persistenced")
                )
        for xid in self.xids:
            out.append(Problem("xid", f"XID {xid.code} on {xid.bus}: {xid.text}", "see NVIDIA's XID catalog"))
        return out

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def parse_dcgm_diag(text: str, level: int) -> DcgmDiag:
    """Parse `dcgmi diag -r N -j` (DCGM 4 JSON); output that is not JSON is a failed run with its first line."""
    start = text.find("{")  # stderr (merged in, for its error messages) may come before the document
    try:
        doc = json.loads(text[start:]) if start >= 0 else None
    except json.JSONDecodeError:
        doc = None
    if not isinstance(doc, dict):
        first = text.strip().splitlines()[0] if text.strip() else "no output"
        return DcgmDiag(level, False, [first])
    failures = []
    for category in doc.get("DCGM Diagnostic", {}).get("test_categories", []):
        for test in category.get("tests", []):
            for result in test.get("results", []):
                if result.get("status") == "Fail":
                    messages = [w.get("message", "") for w in result.get("warnings", [])]
                    failures.append(f"{test.get('name')} on GPU {result.get('entity_id')}: {'; '.join(messages)}")
            if test.get("test_summary", {}).get("status") == "Fail" and not test.get("results"):
                failures.append(f"{test.get('name')} failed")
    runtime = doc.get("runtime_error")
    if runtime:
        failures.insert(0, str(runtime))
    return DcgmDiag(level, not failures, failures, bool(doc.get("simulated")))


def parse_xids(text: str) -> list[XidEvent]:
    """XID events from kernel log lines (`journalctl -k` or `dmesg`)."""
    events = []
    for line in text.splitlines():
        match = _XID.search(line)
        if match:
            events.append(XidEvent(match.group(1), int(match.group(2)), match.group(3).strip()))
    return events


def gpu_health_report(get_fact: Callable[..., Any], *, level: int = 1, expected_gpus: int | None) -> GpuHealthReport:
    """Read DCGM's diagnostics, the GPUs' health fields and this boot's XIDs through `get_fact` (pyinfra's
    `host.get_fact`) and collect the report."""
    dcgm = parse_dcgm_diag(get_fact(DcgmDiagText, level=level), level)
    document = get_fact(NvidiaSmiXml)
    xids = parse_xids("\n".join(get_fact(XidLines)))
    return GpuHealthReport(dcgm, document.gpus if document else [], xids, expected_gpus)
