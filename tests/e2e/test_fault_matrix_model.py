"""End-to-end fault matrix, model sync (tests/faults/fault_matrix.py, the `model-` phases): `deploys/model.py` on one
simulated node with a 64 MB model disk against its Hub stand-in, a fault injected mid-file or while files are
verified; each case asserts that no half or corrupt file is taken as whole (every file the sync took is on disk
with the Hub's own hash: the sha256 of an LFS file, the git blob id of any other) and that the next run finishes
with no manual step. One cluster; cases in sequence.

    HGXKIT_FAULTS=ci | all | id,id,...    (make faults / make soak)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sim_steps import cluster_name, deploy_argv, deploy_env, node_sh, out, reboot_node, run_deploy

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "faults"))
import fault_inject
import soak_figures
from fault_matrix import Case, selected

from hgxkit.sim import nodes as simnodes

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
MODULE = "tests/e2e/test_fault_matrix_model.py"
TINY = "/data/models/tiny"
FAST = (
    "model_disk_margin_gb=0.005",
    "model_poll_interval_s=0.5",
    "model_progress_every_s=1",
    "model_download_workers=1",
)
SLOW_HUB = {"rate_bps": 1_000_000}  # ~1 MB/s: a file is half downloaded for seconds
COUNTS = soak_figures.new_counts()  # no group serves here: no requests to count
CASES = selected(os.environ.get("HGXKIT_FAULTS", "ci"), MODULE)


@pytest.fixture(scope="module")
def cluster(sim_session, request: pytest.FixtureRequest) -> Iterator[str]:
    name = cluster_name("faults-model")
    sim_session.claim(name)
    simnodes.down(name)
    simnodes.up(1, cluster=name, model_disk="64m")
    yield name
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled():  # the soak's figures, on the terminal past pytest's capture
        print("\n" + soak_figures.line(COUNTS, "fault matrix, model sync"))
    soak_figures.record(COUNTS, MODULE, len(CASES))
    simnodes.down(name)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    base = (ROOT / "recipes" / "deepseek-v4-flash-dspark-marlin.yaml").read_text()
    text = base.replace("repo_id: deepseek-ai/DeepSeek-V4-Flash-DSpark", "repo_id: hgxkit-sim/tiny")
    path = tmp_path_factory.mktemp("recipes") / "tiny.yaml"
    path.write_text(text.replace("/data/models/deepseek-v4-flash-dspark", TINY))  # local_dir and its mount
    return str(path)


def hub(cluster: str, method: str, path: str, body: dict | None = None) -> object:
    data = f"-H 'Content-Type: application/json' -d '{json.dumps(body)}'" if body is not None else ""
    return json.loads(node_sh(cluster, f"curl -sS -X {method} {data} http://127.0.0.1:8088{path}", answer=True))


# Each file as the Hub names its content: path, git blob id (sha1 of `blob SIZE\0` + bytes), sha256 of the bytes.
_HASHES = (
    "cd {dir} && find . -path ./.cache -prune -o -type f -print | while IFS= read -r f; do "
    '  b=$({{ printf "blob %s\\0" "$(stat -c %s "$f")"; cat "$f"; }} | sha1sum); s=$(sha256sum < "$f"); '
    '  echo "${{f#./}} ${{b%% *}} ${{s%% *}}"; done'
)


def whole_files(cluster: str) -> list[str]:
    """Problems with the files the sync took as whole (its manifest), judged by the Hub's own listing of the
    commit it recorded: a file missing, one the Hub does not have, or bytes that are not what the Hub says (the
    sha256 of an LFS file, the git blob id of any other)."""
    manifest = json.loads(node_sh(cluster, f"cat {TINY}/.hgxkit-manifest.json", answer=True, check=True))
    listed = hub(cluster, "GET", f"/api/models/hgxkit-sim/tiny/revision/{manifest['commit']}?blobs=true")
    hub_files = {sibling["rfilename"]: sibling for sibling in listed["siblings"]}  # type: ignore[index]
    here = {}
    for line in node_sh(cluster, _HASHES.format(dir=TINY), answer=True, check=True).splitlines():
        path, blob, sha256 = line.rsplit(" ", 2)
        here[path] = (blob, sha256)
    problems = []
    for path in (f["path"] for f in manifest["files"]):
        got, sibling = here.get(path), hub_files.get(path)
        lfs = (sibling or {}).get("lfs")
        if sibling is None:
            problems.append(f"{path}: not in the Hub's listing of {manifest['commit'][:12]}")
        elif got is None:
            problems.append(f"{path}: missing")
        elif lfs and got[1] != lfs["sha256"]:
            problems.append(f"{path}: sha256 {got[1][:12]}, the Hub's {lfs['sha256'][:12]}")
        elif not lfs and got[0] != sibling["blobId"]:
            problems.append(f"{path}: git blob {got[0][:12]}, the Hub's {sibling['blobId'][:12]}")
    return problems


def wait_mid_file(cluster: str, controller: subprocess.Popen, timeout: float = 300) -> None:
    """Until a partial download has bytes on disk (a file is half downloaded)."""
    deadline = time.monotonic() + timeout
    while True:
        sizes = node_sh(cluster, f"stat -c %s {TINY}/.cache/hgxkit/partial/* 2>/dev/null").split()
        if any(int(n) > 0 for n in sizes):
            return
        assert controller.poll() is None and time.monotonic() < deadline, "no file was ever half downloaded"
        time.sleep(0.3)


@pytest.mark.parametrize("case", selected(os.environ.get("HGXKIT_FAULTS", "ci"), MODULE), ids=lambda c: c.id)
def test_fault(cluster: str, tiny: str, case: Case) -> None:
    try:
        model_case(cluster, tiny, case)
    finally:
        soak_figures.sample_load(COUNTS)


def model_case(cluster: str, tiny: str, case: Case) -> None:
    """Inject the case's fault into a model sync, then assert the files on disk and the next run."""
    node_sh(
        cluster,
        f"systemctl stop hgxkit-model-tiny 2>/dev/null; rm -rf {TINY} /var/lib/hgxkit/model/tiny.json "
        "/data/models/filler",
        check=True,
    )
    # The Hub's own faults pick their byte; the others need a slow Hub to find a file half downloaded.
    faults: dict = {} if case.fault.startswith("hub-") else dict(SLOW_HUB)
    if case.fault == "hub-drop":
        faults.update(drop_after_bytes=300_000, drop_count=1, paths="*.safetensors")
    if case.fault == "hub-corrupt":
        faults.update(corrupt_offset=4096, paths="*.safetensors")
    hub(cluster, "POST", "/_hubsim/faults", faults)
    controller = subprocess.Popen(
        deploy_argv("deploys/model.py", f"recipe={tiny}", *FAST),
        cwd=ROOT,
        env=deploy_env(cluster),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    second = None
    try:
        if not case.fault.startswith("hub-"):
            wait_mid_file(cluster, controller)
        if case.fault == "controller-kill":
            os.killpg(controller.pid, signal.SIGKILL)
        elif case.fault == "ssh-cut":
            fault_inject.cut_ssh(controller.pid)
        elif case.fault == "second-controller":
            second = run_deploy(cluster, "deploys/model.py", f"recipe={tiny}", *FAST)
        elif case.fault == "node-reboot":
            reboot_node(cluster)
        elif case.fault == "disk-full":
            node_sh(
                cluster,
                "fallocate -l $(( $(df --output=avail -B1 /data/models | tail -1) )) /data/models/filler "
                "|| dd if=/dev/zero of=/data/models/filler bs=1M 2>/dev/null; df -h /data/models",
            )
        COUNTS["faults"] += 1  # the Hub's faults were set before the run
        text, _ = controller.communicate(timeout=300)
    finally:
        if controller.poll() is None:
            os.killpg(controller.pid, signal.SIGKILL)
    if second is not None:
        assert second.returncode != 0 and "another hgxkit run holds /var/lib/hgxkit/run.lock" in out(second)
    if case.fault == "hub-drop":
        assert controller.returncode == 0, text[-4000:]  # retried and resumed within the run
        assert not whole_files(cluster), whole_files(cluster)
    if case.fault == "disk-full":
        assert controller.returncode != 0, text[-4000:]
        node_sh(cluster, "rm -f /data/models/filler", check=True)
    if case.fault == "hub-corrupt":
        sums = node_sh(cluster, f"ls {TINY}/.hgxkit-manifest.json 2>/dev/null")
        if controller.returncode == 0 or sums.strip():  # whatever the run says, no corrupt file is kept as whole
            assert not whole_files(cluster), whole_files(cluster)
    hub(cluster, "POST", "/_hubsim/faults", {})
    # The next run finishes with no manual step (it attaches to a sync the fault left running).
    again = run_deploy(cluster, "deploys/model.py", f"recipe={tiny}", *FAST)
    assert again.returncode == 0, out(again)[-4000:]
    assert not whole_files(cluster), whole_files(cluster)
    COUNTS["cases"] += 1
