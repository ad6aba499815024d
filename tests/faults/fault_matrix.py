"""The fault matrix: each fault injected at each phase where it can happen, with the outcome its test asserts.

The cases here are the parametrization of tests/e2e/test_fault_matrix.py (one test id per case, `fault@phase`)
and the source of README's "What survives what" table (tools/faults_table.py; tests/unit/test_faults_table.py
checks both stay in step). Pure data: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

FAULTS = {
    "controller-kill": "controller killed (SIGKILL of its process group)",
    "ssh-cut": "controller's SSH connection dropped (its sockets closed, the process lives)",
    "second-controller": "a second controller started on the same node",
    "container-killed": "the serving container being started is killed",
    "dockerd-restart": "dockerd restarted",
    "node-reboot": "node rebooted",
}
PHASES = {
    "serve-plan": "serving run: facts gathered, nothing changed yet",
    "replace-set-aside": "group replace: old container stopped and set aside",
    "replace-start": "group replace: new container starting",
    "replace-health-wait": "group replace: waiting for the new container's health",
    "replace-put-back": "group replace: a failed new spec removed, the old container being put back",
    "verify-mid-cell": "verify: the benchmark unit running a cell",
    "verify-archive": "verify: the run's archive half written (.partial)",
}
# Where each phase is held: on the node (the docker shim holds the replace unit) or in the controller (the
# test-tree hook stops it at a function of hgxkit: tests/faults/hook).
CONTROLLER_AT = {
    "serve-plan": "roles.serve:_rollout",
    "verify-mid-cell": "roles.verify:wait_for_progress",
    "verify-archive": "hgxkit.results.archive:run_html",
}
# What the other groups see: "serve" = every health check and inference request answered throughout (sampled);
# "restart" = they restart with the node or the engine (the fault takes them down too), and are back after.
SERVE, RESTART = "serve", "restart"

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
                ci=phase == "replace-start",
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
    cases.append(Case("container-killed", "replace-health-wait", f"the unit sees it exit and puts the old one back; "
                      f"the run fails saying so; {CONVERGES}"))  # fmt: skip
    return cases


CASES: list[Case] = _cases()


def selected(which: str) -> list[Case]:
    """The cases a run takes: `all`, `ci` (the representative subset), or a comma list of ids."""
    if which == "all":
        return list(CASES)
    if which == "ci":
        return [c for c in CASES if c.ci]
    ids = {w.strip() for w in which.split(",") if w.strip()}
    unknown = sorted(ids - {c.id for c in CASES})
    if unknown:
        raise ValueError(f"HGXKIT_FAULTS: unknown case(s) {', '.join(unknown)}; see tests/faults/fault_matrix.py")
    return [c for c in CASES if c.id in ids]
