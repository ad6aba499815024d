"""The fault matrix: each fault injected at each phase where it can happen, with the outcome its test asserts.

The cases here are the parametrization of tests/e2e/test_fault_matrix.py (one test id per case, `fault@phase`)
and the source of the "What survives what" table in docs/faults.md (tools/faults_table.py;
tests/unit/project/test_faults_table.py checks both stay in step). Pure data: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

FAULTS = {
    "controller-kill": "controller killed (SIGKILL of its process group)",
    "ssh-cut": "controller's SSH connection dropped (its sockets closed, the process lives)",
    "hub-drop": "the Hub stand-in drops the connection mid-file",
    "hub-corrupt": "the Hub stand-in serves a file with one byte flipped",
    "disk-full": "models_dir filled to the last byte",
    "second-controller": "a second controller started on the same node",
    "container-killed": "the serving container being started is killed",
    "dockerd-restart": "dockerd restarted",
    "node-reboot": "node rebooted",
    "registry-drop": "the registry stand-in drops the connection mid-layer",
    "registry-corrupt": "the registry stand-in serves a layer with one byte flipped",
    "docker-disk-full": "/var/lib/docker full where Docker downloads layers (its tmp/: a full 1 MB tmpfs on the "
    "simulated node, whose /var/lib/docker is a volume on the host's shared disk)",
}
PHASES = {
    "serve-plan": "serving run: planned, the first group's replace about to start, nothing changed yet",
    "image-pull": "serving run: a layer of the recipe's new image being pulled, before any group is touched",
    "replace-set-aside": "group replace: old container stopped and set aside",
    "replace-start": "group replace: new container starting",
    "replace-health-wait": "group replace: waiting for the new container's health",
    "replace-put-back": "group replace: a failed new spec removed, the old container being put back",
    "model-mid-file": "model sync: a file half downloaded",
    "model-verification": "model sync: files hashed against the Hub's checksums",
    "verify-mid-cell": "verify: the benchmark unit running a cell",
    "verify-archive": "verify: the run's archive half written (.partial)",
}
# Where each phase is held: on the node (the docker shim holds the replace unit) or in the controller (the
# test-tree hook stops it at a function of hgxkit: tests/faults/hook).
CONTROLLER_AT = {
    "serve-plan": "roles.serve:_start_group",  # group 0's replace operation, before it changes anything
    "model-mid-file": "model sync: a file half downloaded",
    "model-verification": "model sync: files hashed against the Hub's checksums",
    "verify-mid-cell": "roles.verify:wait_for_progress",
    "verify-archive": "hgxkit.results.html_report:run_html",  # write_run's last file, in the .partial folder
}
# What the other groups see: "serve" = every health check and inference request answered throughout (sampled);
# "restart" = they restart with the node or the engine (the fault takes them down too), and are back after.
SERVE, RESTART = "serve", "restart"
MAIN_MODULE = "tests/e2e/test_fault_matrix.py"

NEW = "group 0 ends on the new spec"
OLD = "group 0 ends on the old spec (the previous container put back)"
CONVERGES = "the next run converges with no manual step, nothing set aside"


@dataclass(frozen=True)
class Case:
    fault: str
    phase: str
    outcome: str
    others: str = SERVE
    ci: bool = False  # in the representative subset CI runs

    @property
    def id(self) -> str:
        return f"{self.fault}@{self.phase}"

    @property
    def module(self) -> str:
        """The test module that runs the case (model sync has its own cluster: a small model disk, a Hub)."""
        return "tests/e2e/test_fault_matrix_model.py" if self.phase.startswith("model-") else MAIN_MODULE


def _cases() -> list[Case]:
    cases = []
    for phase in [p for p in PHASES if p.startswith("replace-")]:
        ends = OLD if phase == "replace-put-back" else NEW
        cases += [
            Case(
                "controller-kill",
                phase,
                f"the replace unit goes on without the controller; {ends}; {CONVERGES}",
                ci=phase == "replace-health-wait",
            ),
            Case("ssh-cut", phase, f"the run stops on the lost connection; the unit goes on; {ends}; {CONVERGES}"),
            Case(
                "second-controller",
                phase,
                f"the second run is refused, naming the first; the first goes on; {ends}; {CONVERGES}",
            ),
            Case(
                "dockerd-restart",
                phase,
                f"every container restarts with the engine (no live-restore); the unit goes on; {CONVERGES}",
                others=RESTART,
            ),
            Case(
                "node-reboot",
                phase,
                "the unit dies with the node; the next run finishes the interrupted replace "
                f"(the new copy if healthy, else the old put back); {CONVERGES}",
                others=RESTART,
            ),
        ]
    untouched = f"nothing changed; {CONVERGES}"
    cases += [
        Case("controller-kill", "serve-plan", untouched),
        Case("ssh-cut", "serve-plan", f"the run stops on the lost connection; {untouched}"),
        Case(
            "second-controller",
            "serve-plan",
            f"the second run is refused, naming the first; the first goes on; {CONVERGES}",
        ),
        Case(
            "controller-kill",
            "verify-mid-cell",
            "the benchmark unit goes on; the next verify archives one whole run; no .partial",
        ),
        Case(
            "ssh-cut",
            "verify-mid-cell",
            "the run stops on the lost connection; the benchmark unit goes on; the next "
            "verify archives one whole run; no .partial",
        ),
        Case(
            "second-controller",
            "verify-mid-cell",
            "the second run is refused, naming the first; the first archives one whole run",
        ),
        Case(
            "node-reboot",
            "verify-mid-cell",
            "the benchmark dies with the node; the groups come back; the next verify archives one whole run; "
            "no .partial",
            others=RESTART,
        ),
        Case(
            "ssh-cut",
            "verify-archive",
            "the archive is finished on the controller (whole, never .partial); the run stops on the lost "
            "connection; the next verify archives another whole run",
        ),
        Case(
            "controller-kill",
            "verify-archive",
            "the half-written run stays `.partial` (never listed as a run); the next verify archives one whole run",
        ),
        Case(
            "second-controller",
            "verify-archive",
            "the second run is refused, naming the first; the first archives one whole run",
        ),
    ]
    cases += [
        Case(
            "dockerd-restart",
            "serve-plan",
            f"every container restarts with the engine; the run goes on; {CONVERGES}",
            others=RESTART,
        ),
        Case(
            "node-reboot",
            "serve-plan",
            f"the run stops on the lost node; nothing half changed; {CONVERGES}",
            others=RESTART,
        ),
    ]
    whole = "every file on disk matches the Hub's sha256 (no half file taken as whole)"
    cases += [
        Case("controller-kill", "model-mid-file", f"the sync unit goes on; the next run attaches or finishes; {whole}"),
        Case("ssh-cut", "model-mid-file", f"the run stops on the lost connection; the sync unit goes on; {whole}"),
        Case("second-controller", "model-mid-file", f"the second run is refused, naming the first; {whole}"),
        Case("node-reboot", "model-mid-file", f"the sync dies with the node; the next run resumes it; {whole}"),
        Case(
            "hub-drop",
            "model-mid-file",
            f"the file is fetched again (retried, resumed); the run succeeds; {whole}",
            ci=True,
        ),
        Case(
            "disk-full",
            "model-mid-file",
            f"the sync fails saying the disk is full; once freed, the next run finishes; {whole}",
        ),
        Case(
            "hub-corrupt",
            "model-verification",
            f"the corrupt file is never kept as whole; once the Hub serves it right, the next run finishes; {whole}",
        ),
    ]
    cases += [
        Case(
            "registry-drop",
            "image-pull",
            f"Docker fetches the layer again; the run pulls the image by its digest and replaces the groups; {NEW}; "
            f"{CONVERGES}",
        ),
        Case(
            "registry-corrupt",
            "image-pull",
            "Docker refuses the layer by its digest, in the background pull and in the run's own pull after it; the "
            "run fails naming the pull; nothing changed, the image not kept; once the registry serves it right, "
            f"{CONVERGES}",
        ),
        Case(
            "docker-disk-full",
            "image-pull",
            "the pull fails saying no space is left on the device; nothing changed, the image not kept; once "
            f"freed, {CONVERGES}",
        ),
    ]
    cases.append(
        Case(
            "container-killed",
            "replace-health-wait",
            f"the unit sees it exit and puts the old one back; the run fails saying so; {CONVERGES}",
        )
    )
    return cases


CASES: list[Case] = _cases()


# Cases per part of the soak (`make soak-part PART=k`): one part's cluster, its first deploy and this many cases
# fit in 10 minutes under the stress knob's defaults on a shared 2-core host (load ~10): parts of 4 took 232-645 s,
# the verify cases' part 645 s.
PART_SIZE = 3


def parts(size: int = PART_SIZE) -> list[list[Case]]:
    """The matrix in parts of at most `size` cases, each part from one test module (one cluster per part)."""
    chunks: list[list[Case]] = []
    for module in dict.fromkeys(c.module for c in CASES):
        mine = [c for c in CASES if c.module == module]
        n = -(-len(mine) // size)  # as few parts as fit, their sizes within one of each other
        chunks += [mine[len(mine) * i // n : len(mine) * (i + 1) // n] for i in range(n)]
    return chunks


def selected(which: str, module: str | None = None) -> list[Case]:
    """The cases a run takes (of `module`'s, when given): `all`, `ci` (the representative subset), `part:K` (the
    K-th of `parts()`, from 1), or a comma list of ids."""
    mine = [c for c in CASES if module is None or c.module == module]
    if which == "all":
        return mine
    if which == "ci":
        return [c for c in mine if c.ci]
    if which.startswith("part:"):
        chunks = parts()
        k = which.removeprefix("part:")
        if not k.isdigit() or not 1 <= int(k) <= len(chunks):
            raise ValueError(f"HGXKIT_FAULTS: {which}: the parts are part:1 to part:{len(chunks)}; see {__file__}")
        return [c for c in chunks[int(k) - 1] if c in mine]
    ids = {w.strip() for w in which.split(",") if w.strip()}
    unknown = sorted(ids - {c.id for c in CASES})
    if unknown:
        raise ValueError(f"HGXKIT_FAULTS: unknown case(s) {', '.join(unknown)}; see tests/faults/fault_matrix.py")
    return [c for c in mine if c.id in ids]
