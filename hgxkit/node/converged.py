"""Skip bring-up when nothing it judges can have changed since every one of its roles and gates last passed.

A bring-up (preflight, driver, Docker, container toolkit, GPU health) that finished leaves a record on the node,
`<state_dir>/node/bringup-verified.json`: a digest of the node state those roles read and of what judged it (the
knobs they ran with and the source of the roles and hgxkit code that checks). The node state is read in one SSH
round trip (`BringupState`): the boot id, the versions and hold state of the packages bring-up manages, the files
it writes (apt sources and keys, modprobe, Docker's config, the GPU smoke record; by size, mtime and ctime), the
units it runs (load and active state, `systemctl list-units`) and their enablement, masks and drop-ins (their entries
under /etc/systemd/system and /run/systemd/system), the GPUs nvidia-smi lists, and how many XID events the kernel
logged this boot. A re-run
whose digests both match plans none of the bring-up roles and says why; `--data recheck=true` runs them anyway.

What this can miss, by design: a change outside what the digest reads (say, a GPU's NVLink going down without an
XID or a reboot). `recheck=true` is the answer, and any reboot (new boot id) re-checks everything.

Example:
    >>> state = NodeState(lines=("boot-1", "nvidia-open 580.105.08-1 hold ok installed"))
    >>> record = verified_record(state, "k1")
    >>> skip_reason(state, "k1", record, recheck=False)[:28]
    'bring-up unchanged since the'
    >>> skip_reason(state, "k2", record, recheck=False) is None   # a knob or the code changed
    True
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from pyinfra.api import StringCommand

from hgxkit.hostcmd import script, small_file

RECORD_NAME = "node/bringup-verified.json"
PACKAGE_PATTERNS = (
    "nvidia-*",
    "libnvidia-*",
    "cuda-*",
    "datacenter-gpu-manager*",
    "firmware-nvidia*",
    "libcuda*",
    "docker*",
    "containerd*",
    "runc",
    "dkms",
    "linux-headers-*",
    "unattended-upgrades",
)
STATE_DIRS = (
    "/etc/apt/sources.list.d",
    "/etc/apt/preferences.d",
    "/etc/apt/keyrings",
    "/usr/share/keyrings",
    "/etc/modprobe.d",
    "/etc/docker",
    "/etc/nvidia-container-runtime",
    "/etc/cdi",
)
UNITS = ("docker.service", "nvidia-fabricmanager.service", "nvidia-dcgm.service", "nvidia-persistenced.service")


@dataclass(frozen=True)
class NodeState:
    """The state bring-up judges, as the node printed it (`state_command`), one item per line."""

    lines: tuple[str, ...]

    @property
    def boot_id(self) -> str | None:
        return self.lines[0] if self.lines else None

    def digest(self) -> str:
        return hashlib.sha256("\n".join(self.lines).encode()).hexdigest()

    def parts(self) -> dict[str, list[str]]:
        """The lines of each part (`PART_NAMES`)."""
        parts: dict[str, list[str]] = {name: [] for name in PART_NAMES}
        for at, line in enumerate(self.lines):
            parts[_part(at, line)].append(line)
        return parts

    def part_digests(self) -> dict[str, str]:
        """A digest per part, so that a run can say which part changed."""
        return {
            name: hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16] for name, lines in self.parts().items()
        }


PART_NAMES = {
    "boot": "the boot",
    "packages": "bring-up's packages",
    "files": "its managed files",
    "xid": "the XID count",
    "units": "its units",
    "gpus": "the GPUs",
}


def _part(at: int, line: str) -> str:
    """Which part of `NodeState` a line is, by the shape `state_command`, `with_units` and `with_gpus` give it."""
    if at == 0:
        return "boot"
    if line.startswith("/"):
        return "files"
    if line.startswith("xid "):
        return "xid"
    if line.startswith(("Id=", "LoadState=", "ActiveState=")):
        return "units"
    if line.startswith(("gpu ", "gpus unknown")):
        return "gpus"
    return "packages"


def state_command(state_file: str) -> StringCommand:
    """One command that prints everything `NodeState` holds but the units and GPUs (in a stable order), then the
    last record.

    The units come from the run's one systemctl call (`units_command`, `with_units`) and the GPUs from its one
    nvidia-smi read (`with_gpus`): the serving role reads both too. Managed
    files are read by their metadata, not their bytes: size, mtime and ctime change with any write (ctime cannot be
    set back), so one `find -printf` stands for a sha256sum of each (~5 ms of the node's CPU against ~10); a file
    rewritten as it was only re-runs the checks. Packages stay a dpkg-query of bring-up's own: dpkg's status file
    changes with any package, and the model role installs python3-venv after bring-up's record is written. dpkg-query
    prints the packages in its own sorted order, whatever the patterns' order or the locale: no `sort` process."""
    return script(
        'read -r boot < /proc/sys/kernel/random/boot_id && echo "$boot"; '
        "dpkg-query -W -f '${{Package}} ${{Version}} ${{Status}}\\n' {patterns} 2>/dev/null; "
        "{files}; "
        'echo "xid $( (journalctl -k -b --no-pager -o cat 2>/dev/null || dmesg 2>/dev/null) | grep -c {xid})"; '
        "echo {mark}; {{ {record}; }} 2>/dev/null || true",
        patterns=list(PACKAGE_PATTERNS),
        files=managed_files_command(STATE_DIRS, [str(Path(state_file).parent / "gpu-smoke.json")], UNITS),
        xid="NVRM: Xid",
        mark=RECORD_MARK,
        record=small_file(state_file),
    )


RECORD_MARK = "##hgxkit-bringup-record"


# Where systemd reads a unit's enablement (the `.wants/` symlinks `systemctl enable` makes), its mask (a symlink to
# /dev/null), an override and drop-ins (`<unit>.d/*.conf`): the admin's and the runtime ones.
UNIT_CONFIG_DIRS = ("/etc/systemd/system", "/run/systemd/system")


def managed_files_command(
    dirs: Iterable[str],
    files: Iterable[str] = (),
    units: Iterable[str] = (),
    unit_dirs: Iterable[str] = UNIT_CONFIG_DIRS,
) -> StringCommand:
    """Every file under those of `dirs` that are folders, and each of `files` that is a file, as `path size mtime
    ctime`; with `units`, every entry under `unit_dirs` (`UNIT_CONFIG_DIRS`) named after one of them or in its
    drop-in folder, as `path type symlink-target size mtime ctime` (a symlink as itself): what `systemctl
    enable/disable/mask`, an override or a drop-in change, read by this find instead of asking systemd for each
    unit's UnitFileState. In find's order, which `parse_state` sorts (no `sort` process on the node); one find for
    them all (no process per file or folder); a missing folder, or a file where a folder belongs, adds nothing."""
    units = list(units)
    unit_tests: list[str] = []
    for unit in units:
        unit_tests += [*(["-o"] if unit_tests else []), "-name", unit, "-o", "-path", f"*/{unit}.d/*"]
    under: list[str] = []
    unit_dirs = list(unit_dirs) if units else []
    for folder in unit_dirs:
        under += [*(["-o"] if under else []), "-path", f"{folder}/*"]
    # A path under UNIT_CONFIG_DIRS is printed when it names a unit (else skipped); any other, when it is a file.
    select = (
        script(
            "\\( {under} \\) \\( \\( {tests} \\) -printf '%p %y %l %s %T@ %C@\\n' -o -true \\) -o ",
            under=under,
            tests=unit_tests,
        )
        if units
        else script("")
    )
    return script(
        'set --; for d in {dirs}; do [ -d "$d" ] && set -- "$@" "$d"; done; '
        'for f in {files}; do [ -f "$f" ] && set -- "$@" "$f"; done; '
        "[ $# -eq 0 ] || find \"$@\" {select}-type f -printf '%p %s %T@ %C@\\n' 2>/dev/null",
        dirs=[*dirs, *unit_dirs],
        files=list(files) or [""],
        select=select,
    )


# Loaded units a no-op reads in the same systemctl call as bring-up's: the serving role's replace units
# (hgxkit.serving.replace.UNIT_PREFIX), which hgxkit.serving.facts.ActiveUnits picks out of it.
UNIT_PATTERNS = ("hgxkit-serve-*",)


def units_command() -> StringCommand:
    """One systemctl for every unit a no-op reads: bring-up's units by name, then the loaded units `UNIT_PATTERNS`
    match; a row per loaded unit (name, load state, active state, sub state, description). `list-units` costs the
    node ~4 ms of CPU against ~9 for `systemctl show`, for which systemd serializes each unit's hundreds of
    properties; enablement comes from the unit files instead (`managed_files_command`)."""
    return script(
        "systemctl list-units --all --full --plain --no-legend {units} 2>/dev/null || true",
        units=[*UNITS, *UNIT_PATTERNS],
    )


def unit_blocks(output: Iterable[str]) -> dict[str, list[str]]:
    """`units_command`'s rows -> {unit: its `Id=`, `LoadState=` and `ActiveState=` lines}, in systemctl's order.

    >>> blocks = unit_blocks(["docker.service loaded active running Docker Engine", "x.service masked inactive dead x"])
    >>> blocks["x.service"]
    ['Id=x.service', 'LoadState=masked', 'ActiveState=inactive']
    """
    blocks: dict[str, list[str]] = {}
    for line in output:
        fields = line.split(None, 4)
        if len(fields) >= 4:
            unit, load, active = fields[:3]
            blocks[unit] = [f"Id={unit}", f"LoadState={load}", f"ActiveState={active}"]
    return blocks


def with_units(state: NodeState, blocks: dict[str, list[str]]) -> NodeState:
    """`state` with bring-up's units (`UNITS`, in that order) as `unit_blocks` read them, as its next lines."""
    return NodeState((*state.lines, *(line for unit in UNITS for line in blocks.get(unit, []))))


def with_gpus(state: NodeState, smi: object) -> NodeState:
    """`state` with the GPUs nvidia-smi listed (index, UUID, PCI bus id), or why it failed, as its last lines.

    `smi` is an `hgxkit.node.facts_gpu.SmiResult` (the `NvidiaSmi` fact).
    """
    failure = getattr(smi, "failure", None)
    if failure is not None:
        return NodeState((*state.lines, f"gpus unknown ({failure}): {getattr(smi, 'message', '')}"))
    gpus = [f"gpu {g.index} {g.uuid} {g.bus_id}" for g in getattr(smi, "gpus", [])]
    return NodeState((*state.lines, *gpus))


def parse_state(output: Iterable[str]) -> tuple[NodeState, dict | None]:
    """(the node state, the last record or None) from `state_command`'s output."""
    lines = [line.rstrip() for line in output]
    if RECORD_MARK in lines:
        at = lines.index(RECORD_MARK)
        state, record_text = lines[:at], "\n".join(lines[at + 1 :])
    else:
        state, record_text = lines, ""
    try:
        record = json.loads(record_text) if record_text.strip() else None
    except ValueError:
        record = None
    return NodeState(_files_sorted(state)), record if isinstance(record, dict) else None


def _files_sorted(lines: list[str]) -> tuple[str, ...]:
    """The managed files' lines (a path first) in code-point order, each other line where it was: find prints them
    in directory order, which a rewrite of a folder can change without a file changing."""
    files = iter(sorted(line for line in lines if line.startswith("/")))
    return tuple(next(files) if line.startswith("/") else line for line in lines)


def source_files(paths: Iterable[Path]) -> list[Path]:
    """The files `paths` name: a folder stands for every `*.py` under it, a file for itself."""
    files: list[Path] = []
    for path in paths:
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return files


def judged_by(knobs: Mapping[str, object], sources: Iterable[Path]) -> str:
    """A digest of what judges the node: the bring-up knobs' values and the source files of the code that checks.

    A changed knob (another driver version) or changed checks (an upgraded hgxkit) re-run every role.
    """
    h = hashlib.sha256(json.dumps(dict(sorted(knobs.items())), sort_keys=True, default=str).encode())
    for path in sorted(sources):
        h.update(str(path).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def verified_record(state: NodeState, judged: str, now: datetime | None = None) -> dict:
    """The record a passed bring-up leaves on the node."""
    when = (now or datetime.now(timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "schema_version": 1,
        "state": state.digest(),
        "parts": state.part_digests(),
        "lines": {name: state.parts()[name] for name in SAID_PARTS},
        "judged_by": judged,
        "boot_id": state.boot_id,
        "verified_at": when,
    }


# Parts short enough to keep in the record as lines, so that a run says what in them changed.
SAID_PARTS = ("xid", "gpus")


def _lines_changed(before: object, now: list[str]) -> str:
    """` (gone: …; new: …)`, at most 3 lines each, when the record kept the part's lines; else nothing."""
    if not isinstance(before, list):
        return ""
    gone = [line for line in before if line not in now][:3]
    new = [line for line in now if line not in before][:3]
    said = [f"{label}: {', '.join(lines)}" for label, lines in (("was", gone), ("now", new)) if lines]
    return f" ({'; '.join(said)})" if said else ""


def rerun_reason(state: NodeState, judged: str, record: dict | None) -> str | None:
    """What changed since the last passed bring-up, for a run that checks everything again (None: nothing did,
    or there is no record to compare with).

    >>> record = verified_record(NodeState(("boot-1", "xid 0")), "k1")
    >>> rerun_reason(NodeState(("boot-1", "xid 2")), "k1", record)[:51]
    'the XID count (was: xid 0; now: xid 2) changed sinc'
    """
    if not record:
        return None
    if record.get("judged_by") != judged:
        changed = ["the knobs or hgxkit's checks"]
    else:
        parts = record.get("parts")
        now = state.part_digests()
        if not isinstance(parts, dict):
            changed = [] if record.get("state") == state.digest() else ["the node's state"]
        else:
            said = record.get("lines") if isinstance(record.get("lines"), dict) else {}
            changed = [
                PART_NAMES[p] + _lines_changed(said.get(p), state.parts()[p])
                for p in PART_NAMES
                if parts.get(p) != now.get(p)
            ]
    if not changed:
        return None
    return f"{' and '.join(changed)} changed since the checks passed at {record.get('verified_at', '?')}"


def skip_reason(state: NodeState, judged: str, record: dict | None, *, recheck: bool) -> str | None:
    """Why bring-up can be skipped (a line to print), or None when it must run."""
    if recheck or not record or not state.lines:
        return None
    if record.get("state") != state.digest() or record.get("judged_by") != judged:
        return None
    return (
        f"bring-up unchanged since the checks passed at {record.get('verified_at', '?')} (same boot, packages, "
        "managed files, units, GPUs and XID count; same knobs and checks): skipped; --data recheck=true re-checks"
    )
