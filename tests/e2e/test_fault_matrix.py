"""End-to-end fault matrix (tests/faults/fault_matrix.py): each fault injected at each phase of a group replace on
one simulated node serving two groups, with real inference requests in flight to the untouched group.

Each case replaces group 0 (a `--log-level` flag that differs from what serves), holds the node's replace unit
at its phase (tests/faults/fault_inject.py), injects the fault, lets the unit go, then asserts: the end state
(what serves, what is on disk: no group on neither spec, the unit's status), the other group's service over the
whole window (every health check and inference request answered, samples covering it), and that the next run
converges with no manual step. One cluster for the module; cases run in sequence, each leaving it converged.

    HGXKIT_FAULTS=ci (default: the representative subset) | all | id,id,...    make faults / make soak
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sim_steps import (
    ServiceProbe,
    cluster_name,
    deploy_argv,
    deploy_env,
    node_sh,
    out,
    paused_deploy,
    reboot_node,
    run_deploy,
    service_problems,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "faults"))
import fault_inject
import soak_figures
from fault_matrix import CONTROLLER_AT, RESTART, Case, selected

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
CLUSTER = cluster_name("faults")
MODULE = "tests/e2e/test_fault_matrix.py"
MARLIN = "recipes/deepseek-v4-flash-dspark-marlin.yaml"
G0, G1 = "deepseek-v4-flash-0", "deepseek-v4-flash-1"
FAST = ("verify=false", "serve_health_interval=1")
LEVELS = ("info", "debug", "warning", "error")
COUNTS = soak_figures.new_counts()
CASES = selected(os.environ.get("HGXKIT_FAULTS", "ci"), MODULE)


def containers() -> dict[str, dict[str, str]]:
    """name -> {id, started, running, args} of every hgxkit serving container on the node (there always is one)."""
    raw = node_sh(CLUSTER, "docker inspect $(docker ps -aq --filter label=hgxkit.serve)", answer=True, check=True)
    return {
        item["Name"].lstrip("/"): {
            "id": item["Id"],
            "started": item["State"]["StartedAt"],
            "running": str(item["State"]["Running"]),
            "args": " ".join(item.get("Args") or []),
        }
        for item in json.loads(raw)
    }


def recipe(tmp_path: Path, level: str, bad: bool = False) -> str:
    """The marlin recipe with `--log-level LEVEL` (and an unknown flag when `bad`: the new spec then fails)."""
    extra = f"  - --log-level {level}\n" + ("  - --no-such-flag\n" if bad else "")
    text = (ROOT / MARLIN).read_text()
    assert "  - --enable-metrics\n" in text
    path = tmp_path / f"faults-{level}{'-bad' if bad else ''}.yaml"
    path.write_text(
        text.replace("  - --enable-metrics\n", "  - --enable-metrics\n" + extra).replace(
            "name: deepseek-v4-flash-dspark-", "name: faults-", 1
        )
    )
    return str(path)


class Node:
    """The module's node and the level it serves now (each case moves it to the next)."""

    def __init__(self) -> None:
        self.level = ""
        self.turn = 0

    def next_level(self) -> str:
        self.turn += 1
        return LEVELS[self.turn % len(LEVELS)]


@pytest.fixture(scope="module")
def node(sim_nodes, tmp_path_factory, request: pytest.FixtureRequest) -> Node:
    sim_nodes(1, cluster=CLUSTER, memory_gib=3072)
    first = run_deploy(CLUSTER, "deploys/dspark.py", *FAST, f"recipe={recipe(tmp_path_factory.mktemp('r'), 'error')}")
    assert first.returncode == 0, out(first)[-5000:]
    fault_inject.install_shim(node_sh, CLUSTER)
    state = Node()
    state.level = "error"
    yield state
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled():  # the soak's figures, on the terminal past pytest's capture
        print("\n" + soak_figures.line(COUNTS))
    soak_figures.record(COUNTS, MODULE, len(CASES))


def inject(case: Case, controller: subprocess.Popen, tmp_path: Path, level: str) -> subprocess.CompletedProcess | None:
    """Do the case's fault while the unit holds at its phase; the second controller's result, if one ran."""
    if case.fault == "controller-kill":
        os.killpg(controller.pid, signal.SIGKILL)
    elif case.fault == "ssh-cut":
        fault_inject.cut_ssh(controller.pid)
    elif case.fault == "second-controller":
        return run_deploy(CLUSTER, "deploys/dspark.py", *FAST, f"recipe={recipe(tmp_path, level)}")
    elif case.fault == "container-killed":
        node_sh(CLUSTER, f"docker kill {G0}", check=True)
    elif case.fault in ("dockerd-restart", "node-reboot"):
        node_fault(case.fault)
    else:
        raise AssertionError(f"unknown fault {case.fault}")
    return None


def node_fault(fault: str, cluster: str = CLUSTER) -> None:
    """Restart the node's Docker engine, or reboot the node and wait until it is back."""
    if fault == "dockerd-restart":
        node_sh(cluster, "systemctl restart docker", check=True, timeout=180)
        return
    reboot_node(cluster)


def unit_done(timeout: int = 300) -> None:
    node_sh(
        CLUSTER,
        f"for i in $(seq 1 {timeout}); do systemctl is-active --quiet hgxkit-serve-{G0} || exit 0; "
        "sleep 1; done; exit 1",
        timeout=timeout + 60,
        check=True,
    )


@pytest.mark.parametrize("case", selected(os.environ.get("HGXKIT_FAULTS", "ci"), MODULE), ids=lambda c: c.id)
def test_fault(node: Node, case: Case, tmp_path: Path) -> None:
    try:
        if case.phase in CONTROLLER_AT:
            controller_case(node, case, tmp_path)
        elif case.phase == "image-pull":
            pull_case(node, case, tmp_path)
        else:
            replace_case(node, case, tmp_path)
    finally:
        soak_figures.sample_load(COUNTS)


def converged(node: Node, tmp_path: Path) -> dict[str, dict[str, str]]:
    """The node's containers, both groups on `node.level`; a case that failed before may have left it otherwise:
    then one run converges it first (said on the terminal), so one failure does not fail every case after it."""
    now = containers()
    if sorted(now) == [G0, G1] and all(f"--log-level {node.level}" in c["args"] for c in now.values()):
        return now
    print(f"fault matrix: the node was left unconverged ({sorted(now)}); converging before the case")
    fixed = run_deploy(CLUSTER, "deploys/dspark.py", *FAST, f"recipe={recipe(tmp_path, node.level)}")
    assert fixed.returncode == 0, out(fixed)[-4000:]
    return containers()


def replace_case(node: Node, case: Case, tmp_path: Path) -> None:
    """A fault while the node's replace unit holds at `case.phase` (the docker shim)."""
    before = converged(node, tmp_path)
    level = node.next_level()
    bad = case.phase == "replace-put-back"  # only a failed new spec is put back
    fault_inject.arm(node_sh, CLUSTER, case.phase, "gate-group-1")
    serve = case.others != RESTART
    probe = ServiceProbe(CLUSTER, [5001]) if serve else None
    with probe or contextlib.nullcontext():
        opened = time.time_ns()
        controller = subprocess.Popen(
            deploy_argv("deploys/dspark.py", *FAST, f"recipe={recipe(tmp_path, level, bad)}"),
            cwd=ROOT,
            env=deploy_env(CLUSTER),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        fault_inject.wait_reached(node_sh, CLUSTER, case.phase, controller)
        second = inject(case, controller, tmp_path, level)
        COUNTS["faults"] += 1
        if case.fault != "node-reboot":
            fault_inject.release(node_sh, CLUSTER, case.phase)
            unit_done()
        closed = time.time_ns()  # group 0's replace is over; a run that goes on waits at group 1's gate
        now = containers()
    fault_inject.release(node_sh, CLUSTER)
    try:
        text, _ = controller.communicate(timeout=300)
    finally:
        if controller.poll() is None:
            os.killpg(controller.pid, signal.SIGKILL)
    if second is not None:
        assert second.returncode != 0 and "another hgxkit run holds /var/lib/hgxkit/run.lock" in out(second)
    if case.fault == "second-controller" and not bad:
        assert controller.returncode == 0, text[-4000:]  # the first run was never disturbed
    if case.fault == "container-killed" or (bad and case.fault in ("second-controller", "controller-kill", "ssh-cut")):
        status = node_sh(CLUSTER, f"cat /var/lib/hgxkit/serve/replace/{G0}/status", check=True).strip()
        assert status.startswith("failed: exited before it became healthy") and status.endswith("restarted"), status
    # Never neither: group 0 has a container (new, old, or the old one set aside by an interrupted unit).
    assert G0 in now or f"{G0}-hgxkit-previous" in now, now
    if probe:
        count_requests(probe, (opened, closed))
        assert now[G1] == before[G1]  # never restarted
    # The next run converges with no manual step: both groups on a good spec, nothing set aside, no unit left.
    final = node.next_level() if bad else level
    again = run_deploy(CLUSTER, "deploys/dspark.py", *FAST, f"recipe={recipe(tmp_path, final)}")
    assert again.returncode == 0, out(again)[-4000:]
    after = containers()
    assert sorted(after) == [G0, G1], after
    assert all(c["running"] == "True" and f"--log-level {final}" in c["args"] for c in after.values()), after
    node.level = final
    COUNTS["cases"] += 1


def count_requests(probe: ServiceProbe, window: tuple[int, int]) -> None:
    problems = service_problems(probe.samples, 5001, window)
    mine = [s for s in probe.samples if s.port == 5001]
    COUNTS["requests"] += len(mine)
    COUNTS["failed"] += sum(s.code != "200" for s in mine)
    assert not problems, problems


def controller_case(node: Node, case: Case, tmp_path: Path) -> None:
    """A fault while the controller holds at `case.phase` (stopped by the test-tree hook at a function)."""
    serving = case.phase == "serve-plan"
    before = converged(node, tmp_path)
    level = node.next_level() if serving else node.level
    results = tmp_path / "results"
    deploy = "deploys/dspark.py" if serving else "deploys/verify.py"
    data = (
        (*FAST, f"recipe={recipe(tmp_path, level)}")
        if serving
        else (f"recipe={recipe(tmp_path, level)}", f"results_dir={results}", "bench_output_len=16")
    )
    probe = ServiceProbe(CLUSTER, [5001]) if case.others != RESTART else None
    with probe or contextlib.nullcontext():
        opened = time.time_ns()
        first = paused_deploy(CLUSTER, deploy, *data, at=CONTROLLER_AT[case.phase])
        first.wait_paused()
        second = None
        if case.fault == "controller-kill":
            first.kill()
        elif case.fault == "ssh-cut":
            fault_inject.cut_ssh(first.proc.pid)
            first.resume()
            assert first.finish(timeout=600) != 0, first.text[-4000:]
        elif case.fault == "second-controller":
            second = run_deploy(CLUSTER, deploy, *data)
        elif case.fault in ("dockerd-restart", "node-reboot"):
            node_fault(case.fault)
            first.resume()
            rc = first.finish(timeout=900)  # goes on (engine restarted) or stops (node gone): the next run decides
            if case.fault == "node-reboot" and not serving:
                # The benchmark died with the node: the run stops on the dropped connection or, when its SSH
                # outlived the reboot, on the unit gone without a status; it never waits out verify_timeout.
                assert rc != 0, first.text[-4000:]
        else:
            raise AssertionError(f"no {case.fault} at {case.phase}")
        COUNTS["faults"] += 1
        if second is not None and not serving:
            first.resume()  # verify restarts nothing: the window runs to its end
            assert first.finish(timeout=900) == 0, first.text[-4000:]
        closed = time.time_ns()
    if probe:
        count_requests(probe, (opened, closed))
    if second is not None:
        assert second.returncode != 0 and "another hgxkit run holds /var/lib/hgxkit/run.lock" in out(second)
        if serving:  # the first goes on and replaces both groups (group 1 too: after the window)
            first.resume()
            assert first.finish(timeout=900) == 0, first.text[-4000:]
    elif serving and case.fault in ("controller-kill", "ssh-cut"):
        assert containers() == before  # killed or cut before any change: nothing changed
    from hgxkit.results.archive import PARTIAL_SUFFIX, scan_runs

    if case.fault == "controller-kill" and case.phase == "verify-archive":
        partial = [p.name for p in results.glob("node1/*") if p.name.endswith(PARTIAL_SUFFIX)]
        assert len(partial) == 1, list(results.rglob("*"))
        runs, damaged = scan_runs(results)
        assert runs == [] and len(damaged) == 1, (runs, damaged)  # half an archive is never taken as a run
    # The next run converges with no manual step.
    if serving:
        again = run_deploy(CLUSTER, "deploys/dspark.py", *FAST, f"recipe={recipe(tmp_path, level)}")
        assert again.returncode == 0, out(again)[-4000:]
        after = containers()
        assert sorted(after) == [G0, G1] and all(f"--log-level {level}" in c["args"] for c in after.values()), after
        node.level = level
    else:
        kept, _ = scan_runs(results)
        if case.fault == "node-reboot":
            # The simulated node's models_dir is a tmpfs that its reboot empties (a real disk keeps it), so its
            # groups cannot come back by themselves here: the serving run syncs the model again first.
            served = run_deploy(CLUSTER, "deploys/dspark.py", *FAST, f"recipe={recipe(tmp_path, level)}")
            assert served.returncode == 0, out(served)[-4000:]
        if second is None:
            again = run_deploy(CLUSTER, deploy, *data)
            assert again.returncode == 0, out(again)[-4000:]
        runs, damaged = scan_runs(results)
        assert len(runs) == len(kept) + (second is None) and all(r.summary.cells for r in runs), runs  # whole runs
        assert len(runs) == 1 + (case.id == "ssh-cut@verify-archive"), runs  # that one archived before the cut
        assert len(damaged) == (case.id == "controller-kill@verify-archive"), damaged
        if case.others != RESTART:
            assert containers() == before  # verify restarts nothing
    COUNTS["cases"] += 1


DOCKER_TMP = "/var/lib/docker/tmp"
REGISTRY, FRONT = 15001, 15002  # the node's own writable registry, and its faulty front (registry_proxy.py)
PULL_SETUP = """set -e
mkdir -p /var/tmp/faults-registry /var/tmp/faults-image /run/hgxkit-fault
cat > /var/tmp/faults-registry.yml <<'HGXKIT_EOF'
version: 0.1
storage:
  filesystem:
    rootdirectory: /var/tmp/faults-registry
http:
  addr: 127.0.0.1:{registry}
HGXKIT_EOF
systemctl is-active --quiet hgxkit-faults-registry || \\
  systemd-run --unit hgxkit-faults-registry --collect docker-registry serve /var/tmp/faults-registry.yml
cat > /var/tmp/registry_proxy.py <<'HGXKIT_EOF'
{proxy}HGXKIT_EOF
systemctl is-active --quiet hgxkit-faults-front || systemd-run --unit hgxkit-faults-front --collect \\
  python3 /var/tmp/registry_proxy.py {front} {registry} /run/hgxkit-fault/registry.json
for i in $(seq 1 30); do curl -fsS http://127.0.0.1:{front}/v2/ >/dev/null 2>&1 && break; sleep 1; done
head -c 8M /dev/urandom > /var/tmp/faults-image/blob
printf 'FROM lmsysorg/sglang:dev-dspark\\nCOPY blob /blob\\n' > /var/tmp/faults-image/Dockerfile
docker build -q -t 127.0.0.1:{registry}/{repo} /var/tmp/faults-image >/dev/null
docker push -q 127.0.0.1:{registry}/{repo} >/dev/null
docker rmi -f 127.0.0.1:{registry}/{repo} >/dev/null
echo '{fault}' > /run/hgxkit-fault/registry.json
"""


def fresh_image(tag: str, mode: str, count: int) -> str:
    """A new image in the node's registry (the stand-in plus a layer of 8 MB of random bytes, so the pull must
    download it), its front armed to spoil that layer `count` times (`mode`); the reference through the front."""
    repo = f"lmsysorg/sglang:{tag}"
    fault = json.dumps({"mode": mode, "count": count, "min_size": 4_000_000})
    proxy = (ROOT / "tests" / "faults" / "registry_proxy.py").read_text()
    node_sh(
        CLUSTER,
        PULL_SETUP.format(registry=REGISTRY, front=FRONT, proxy=proxy, repo=repo, fault=fault),
        check=True,
        timeout=300,
    )
    return f"127.0.0.1:{FRONT}/{repo}"


def spoiled() -> list[str]:
    """The answers the registry's front spoiled in the run (its fault file's `done`, kept when it was disarmed)."""
    text = node_sh(CLUSTER, "cat /run/hgxkit-fault/registry.json.off", answer=True, check=True)
    return json.loads(text).get("done", [])


def pull_case(node: Node, case: Case, tmp_path: Path) -> None:
    """The recipe's image changes to a new one whose layer the registry's front spoils while it is pulled."""
    before = converged(node, tmp_path)
    level = node.next_level()
    fault_inject.arm(node_sh, CLUSTER, "gate-group-1")  # group 1 is replaced only after its window closes
    mode = case.fault.removeprefix("registry-") if case.fault.startswith("registry-") else "none"
    # A drop is spoiled once (Docker fetches the layer again within the pull); a corrupt layer every time it is
    # asked for during the run: the background pull (prefetch) fails, and so does the run's own pull after it.
    reference = fresh_image(f"faults-{level}-{time.time_ns()}", mode, {"drop": 1, "corrupt": 99}.get(mode, 0))
    text = Path(recipe(tmp_path, level)).read_text()
    assert "  reference: lmsysorg/sglang:dev-dspark\n" in text
    path = tmp_path / "pulled.yaml"
    path.write_text(text.replace("  reference: lmsysorg/sglang:dev-dspark\n", f"  reference: {reference}\n"))
    refused = case.fault != "registry-drop"
    run = None
    if case.fault == "docker-disk-full":  # Docker downloads layers into its TMPDIR, /var/lib/docker/tmp
        node_sh(
            CLUSTER,
            f"mount -t tmpfs -o size=1m hgxkit-faults-full {DOCKER_TMP} && "
            f"head -c 2M /dev/zero > {DOCKER_TMP}/filler; df -h {DOCKER_TMP}",
            check=True,
        )
    try:
        with ServiceProbe(CLUSTER, [5001]) as probe:  # closed before group 1's replace goes on
            opened = time.time_ns()
            run = subprocess.Popen(
                deploy_argv("deploys/dspark.py", *FAST, f"recipe={path}"),
                cwd=ROOT,
                env=deploy_env(CLUSTER),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,
            )
            if refused:
                output, _ = run.communicate(timeout=600)
            else:  # until group 0 is replaced and group 1's replace waits at its gate
                fault_inject.wait_reached(node_sh, CLUSTER, "gate-group-1", run)
            COUNTS["faults"] += 1
            now = containers()
            closed = time.time_ns()
    finally:
        fault_inject.release(node_sh, CLUSTER)
        node_sh(
            CLUSTER,
            "rm -f /run/hgxkit-fault/registry.json.off; cp /run/hgxkit-fault/registry.json "
            "/run/hgxkit-fault/registry.json.off; echo '{}' > /run/hgxkit-fault/registry.json",
        )
        if case.fault == "docker-disk-full":  # freed: Docker's own tmp/ again
            node_sh(CLUSTER, f"umount -l {DOCKER_TMP}", check=True)  # lazily: a failed pull may hold a file
        if run is not None and run.poll() is None:
            output, _ = run.communicate(timeout=600)
    done = spoiled()
    expected = {"drop": [1], "corrupt": [1, 2], "none": [0]}[mode]  # corrupt: the prefetch's pull and the run's
    assert len(done) in expected, done
    count_requests(probe, (opened, closed))
    assert now[G1] == before[G1]  # never restarted in the window
    if refused:
        why = "no space left on device" if case.fault == "docker-disk-full" else "verification failed"
        assert run.returncode != 0 and "the pull of" in output and why in output, output[-4000:]
        assert now == before  # nothing changed
        assert node_sh(CLUSTER, f"docker image inspect {reference} >/dev/null 2>&1 || echo absent").strip() == "absent"
    else:
        assert run.returncode == 0, output[-4000:]
        assert f"--log-level {level}" in now[G0]["args"], now  # group 0 replaced on the pulled image
    # The next run converges with no manual step (the front serves the image right now: its one fault is spent).
    again = run_deploy(CLUSTER, "deploys/dspark.py", *FAST, f"recipe={path}")
    assert again.returncode == 0, out(again)[-4000:]
    after = containers()
    assert sorted(after) == [G0, G1], after
    assert all(c["running"] == "True" and f"--log-level {level}" in c["args"] for c in after.values()), after
    images = node_sh(CLUSTER, f"docker inspect -f '{{{{.Config.Image}}}}' {G0} {G1}", answer=True, check=True).split()
    repo = reference.rsplit(":", 1)[0]
    assert images[0] == images[1] and images[0].startswith(f"{repo}@sha256:"), images  # by digest, from the front
    node.level = level
    COUNTS["cases"] += 1
