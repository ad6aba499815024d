"""End-to-end: the published two-node SGLang command (corpus 005: DeepSeek-V3 TP16 over two H200x8 nodes with
Docker, `--network=host`, `--dist-init-addr HEAD:20000 --nnodes 2 --node-rank 0|1`, `--host 0.0.0.0 --port
40000`), imported with `hgxkit recipe import` as pasted and deployed with `pyinfra -y inventories/sim.py
deploys/reproduce.py --data recipe=… --data api_key=auto` on two simulated nodes (issue "Multi-node groups").

Rank 0 runs on node1 and rank 1 on node2, the head's address coming from the inventory (`fabric_address`); the
run archives one benchmark cell with both nodes' fingerprints; a re-run changes nothing; one more flag replaces
both ranks; a rank that dies while the group starts puts the whole group back; a killed rank 1 fails verify
naming node2; a controller killed mid-rollout is recovered by the next run; a node with another driver
version is refused before anything changes. The SGLang stand-in forms the group by a simulated rendezvous
(rank 0 serves only when rank 1 joined).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sim_steps import (
    DRIVER_PACKAGES,
    apt_install,
    cluster_name,
    deploy_argv,
    deploy_env,
    driver_pins,
    node_sh,
    out,
    require,
    run_deploy,
    state_changes,
    why_changed,
)

from hgxkit.sim.standin import client_store

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
CLUSTER = cluster_name("multi")
POST = next((ROOT / "tests" / "fixtures" / "posts").glob("005-*.txt"))
NAME = "sglang_multinode1-0"  # the post's `--name sglang_multinode1`, as the name of group 0
OLD, NEW = "580.95.05", "580.105.08"


def hgxkit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hgxkit", *args], cwd=ROOT, capture_output=True, text=True, timeout=900, check=False
    )


# A server spanning nodes runs on the host's network, which the inventory allows by name, as a user's would.
HOST_NETWORK = 'allow_docker_options=["--network=host"]'


def deploy(name: str, deploy_file: str, *data: str) -> subprocess.CompletedProcess[str]:
    """`pyinfra -y inventories/sim.py <deploy_file> --data …` on the cluster; how long it took goes to stdout
    (`pytest -s` shows it)."""
    start = time.monotonic()
    result = run_deploy(CLUSTER, deploy_file, HOST_NETWORK, *data)
    print(f"{name}: {time.monotonic() - start:.0f} s")
    return result


def grand_total(result: subprocess.CompletedProcess[str]) -> tuple[int, int, int, int]:
    match = re.search(r"Grand total\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)", out(result))
    assert match, out(result)[-3000:]
    return tuple(0 if v == "-" else int(v) for v in match.groups())  # type: ignore[return-value]


def ranks() -> dict[str, dict[str, str]]:
    """node -> the serving container there: id, start time, running, spec and rank labels, server arguments."""
    found = {}
    for node in ("node1", "node2"):
        raw = node_sh(
            CLUSTER, "docker inspect $(docker ps -aq --filter label=hgxkit.serve) 2>/dev/null || echo []", node=node
        )
        items = json.loads(raw or "[]")
        assert len(items) <= 1, [i["Name"] for i in items]
        for item in items:
            labels = item["Config"]["Labels"]
            found[node] = {
                "name": item["Name"].lstrip("/"),
                "id": item["Id"],
                "started": item["State"]["StartedAt"],
                "running": str(item["State"]["Running"]),
                "spec": labels.get("hgxkit.spec", ""),
                "rank": labels.get("hgxkit.rank", ""),
                "args": " ".join(item["Args"]),
            }
    return found


def flag(args: str, name: str) -> str:
    words = args.split()
    return words[words.index(name) + 1]


def variant(tmp: Path, recipe: Path, after: str, extra: str, name: str) -> Path:
    """The imported recipe with one more line (a flag or an option) after `after`."""
    text = recipe.read_text()
    assert after in text
    path = tmp / f"{name}.yaml"
    path.write_text(text.replace(after, f"{after}\n{extra}", 1))
    return path


# What a refused run must leave as it was on a node: containers, images, hgxkit's and Docker's files, packages.
NODE_STATE = (
    "docker ps -a --no-trunc --format '{{.ID}} {{.Image}} {{.Names}} {{.CreatedAt}} {{.State}}' | sort; "
    "docker images --digests --no-trunc --format '{{.Repository}}:{{.Tag}} {{.Digest}} {{.ID}}' | sort; "
    "find /var/lib/hgxkit /etc/docker /etc/hgxkit -printf '%p %y %s %m %T@\\n' | sort; "
    "dpkg-query -W -f '${Package} ${Version}\\n' 'nvidia-*' 'libnvidia-*' | sort"
)


@pytest.fixture(scope="module")
def deployed(sim_nodes, tmp_path_factory):
    """Two nodes, the stand-in published as the post's image, the post imported as pasted and deployed."""
    require(shutil.which("docker-registry") is not None, "docker-registry is not installed")
    require(client_store.is_installed(), f"no benchmark clients in {client_store.store_path()}")
    sim_nodes(2, cluster=CLUSTER)
    built = hgxkit("sim", "image", "build", "--tag", "lmsysorg/sglang:latest")
    assert built.returncode == 0, out(built)[-3000:]
    tmp = tmp_path_factory.mktemp("multi")
    recipe, results = tmp / "005.yaml", tmp / "results"
    imported = hgxkit("recipe", "import", str(POST), "-o", str(recipe))
    assert imported.returncode == 0, out(imported)
    first = deploy(
        "first deploy (bring-up, model, serve, verify)",
        "deploys/reproduce.py",
        f"recipe={recipe}",
        "api_key=auto",
        f"results_dir={results}",
    )
    return {"recipe": recipe, "results": results, "first": first, "tmp": tmp}


def test_two_nodes_serve_the_post_as_one_group(deployed) -> None:
    first = deployed["first"]
    assert first.returncode == 0, out(first)[-6000:]
    head = f"hgxkit-sim-{CLUSTER}-node1"  # the inventory's fabric_address of node1
    assert f"every member reaches the head at {head}:20000" in out(first)
    now = ranks()
    assert {node: (c["name"], c["rank"], c["running"]) for node, c in now.items()} == {
        "node1": (NAME, "0", "True"),
        "node2": (NAME, "1", "True"),
    }
    assert now["node1"]["spec"] == now["node2"]["spec"]  # one hash over both ranks
    for node, rank in (("node1", "0"), ("node2", "1")):
        args = now[node]["args"]
        assert flag(args, "--node-rank") == rank and flag(args, "--nnodes") == "2" and flag(args, "--tp") == "16"
        assert flag(args, "--dist-init-addr") == f"{head}:20000"
    # Rank 0 serves (SGLang's own health check); the API wants the node's key (--host 0.0.0.0 without a key is
    # refused by the exposure policy, so the run asked for api_key=auto).
    assert node_sh(CLUSTER, "curl -s -o /dev/null -w '%{http_code}' -m 30 http://127.0.0.1:40000/health") == "200"
    models = node_sh(CLUSTER, "curl -s -o /dev/null -w '%{http_code}' -m 30 http://127.0.0.1:40000/v1/models")
    assert models == "401"
    # One benchmark cell, archived with both nodes' fingerprints and the group's topology.
    results = deployed["results"]
    (run,) = [p for p in results.glob("node1/*") if p.is_dir()]
    assert not list(results.glob("node2/*"))
    summary = json.loads((run / "summary.json").read_text())
    assert summary["simulated"] is True and summary["gates"] == []
    assert [(c["group"], c["input_len"], c["concurrency"], c["failed"]) for c in summary["cells"]] == [(0, 1, 1, 0)]
    fingerprint = json.loads((run / "fingerprint.json").read_text())
    member = json.loads((run / "members" / "node2.json").read_text())
    assert [(r["rank"], r["host"], r["address"]) for r in fingerprint["node_group"]["ranks"]] == [
        (0, "node1", head),
        (1, "node2", f"hgxkit-sim-{CLUSTER}-node2"),
    ]
    assert fingerprint["number_of_nodes"] == member["number_of_nodes"] == 2
    assert (fingerprint["system_name"], member["system_name"], member["serving"]["node_rank"]) == ("node1", "node2", 1)
    assert member["simulated"] is True and member["packages"]["driver"] == fingerprint["packages"]["driver"] == NEW
    assert member["serving"]["image_digest"] == fingerprint["serving"]["image_digest"]
    assert member["model"]["commit"] == fingerprint["model"]["commit"]
    assert "--node-rank 1" in member["recipe"]["rendered"][0]
    run_id = str(run.relative_to(results))
    shown = hgxkit("results", "--root", str(results), "show", run_id)
    assert shown.returncode == 0, out(shown)
    assert "multi-node group: 2 nodes" in shown.stdout and "- node2: same setup as node1" in shown.stdout
    as_json = hgxkit("results", "--root", str(results), "show", run_id, "--json")
    assert list(json.loads(as_json.stdout)["members"]) == ["node2"]
    compared = hgxkit("results", "--root", str(results), "compare", run_id, run_id)
    assert compared.returncode == 0 and "rank 1" not in compared.stdout, out(compared)


def test_a_second_run_changes_nothing(deployed) -> None:
    before = ranks()
    again = deploy(
        "second run (no change)", "deploys/reproduce.py", f"recipe={deployed['recipe']}", "api_key=auto", "verify=false"
    )
    assert again.returncode == 0, out(again)[-4000:]
    ops, changed, errors, unchanged = grand_total(again)
    assert (changed, errors) == (0, 0) and unchanged == ops, why_changed(again)
    assert ranks() == before  # same containers, same start times, on both nodes


def test_one_more_flag_replaces_both_ranks(deployed) -> None:
    before = ranks()
    changed = variant(deployed["tmp"], deployed["recipe"], "  - --trust-remote-code", "  - --log-level info", "flag")
    result = deploy(
        "changed flag (both ranks replaced)",
        "deploys/reproduce.py",
        f"recipe={changed}",
        "api_key=auto",
        "verify=false",
    )
    assert result.returncode == 0, out(result)[-4000:]
    after = ranks()
    assert all(after[n]["id"] != before[n]["id"] and after[n]["running"] == "True" for n in ("node1", "node2"))
    assert after["node1"]["spec"] == after["node2"]["spec"] != before["node1"]["spec"]
    assert all("--log-level info" in after[n]["args"] for n in ("node1", "node2"))
    deployed["serving"] = changed


def test_a_rank_dying_while_the_group_starts_puts_every_rank_back(deployed) -> None:
    """Rank 0 waits 120 s before it is ready (a stand-in setting); rank 1 is killed meanwhile: the rollout fails
    and both nodes run their previous containers again."""
    before = ranks()
    slow = variant(
        deployed["tmp"], deployed["serving"], "  - --ipc=host", "  - -e HGXKIT_SIM_READY_DELAY_S=120", "slow"
    )
    proc = subprocess.Popen(
        deploy_argv("deploys/reproduce.py", f"recipe={slow}", "api_key=auto", "verify=false", HOST_NETWORK),
        cwd=ROOT,
        env=deploy_env(CLUSTER),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    seen = []
    assert proc.stdout is not None
    for line in proc.stdout:
        seen.append(line)
        if "starting the new spec on every rank" in line:
            break
    time.sleep(3)
    node_sh(CLUSTER, f"docker kill {NAME}", node="node2")
    seen += proc.stdout.readlines()
    assert proc.wait(timeout=600) != 0, "".join(seen)[-4000:]
    text = "".join(seen)
    assert "rank 1 on node2: exited" in text and "Every rank was put back (node1: restored; node2: restored)" in text
    after = ranks()
    assert {n: (c["id"], c["spec"], c["running"]) for n, c in after.items()} == {
        n: (c["id"], c["spec"], "True") for n, c in before.items()
    }


def test_a_controller_killed_mid_rollout_is_recovered_by_the_next_run(deployed) -> None:
    """The controller drives a group's rollout, so killing it leaves the ranks set aside and the new ones
    starting; the next run puts every rank back (rank 0 of the new spec never became healthy) and keeps them."""
    before = ranks()
    slow = deployed["tmp"] / "slow.yaml"
    proc = subprocess.Popen(
        deploy_argv("deploys/reproduce.py", f"recipe={slow}", "api_key=auto", "verify=false", HOST_NETWORK),
        cwd=ROOT,
        env=deploy_env(CLUSTER),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if re.search(rf"multi-node group {NAME}, \d+ s: rank 0 on node1", line):
            break  # every rank was set aside and started; the controller waits for rank 0
    os.killpg(proc.pid, 9)
    proc.wait(timeout=60)
    assert "starting the new spec" in "".join(seen), "".join(seen)[-3000:]
    names = node_sh(CLUSTER, "docker ps -a --filter label=hgxkit.serve --format '{{.Names}}' | sort")
    assert names.split() == [NAME, f"{NAME}-hgxkit-previous"]  # cut off: the old rank 0 is set aside
    again = deploy(
        "run after a killed rollout (recovery)",
        "deploys/reproduce.py",
        f"recipe={deployed['serving']}",
        "api_key=auto",
        "verify=false",
    )
    assert again.returncode == 0, out(again)[-4000:]
    assert "an earlier rollout was cut off; put every rank back as it was" in out(again)
    after = ranks()  # one container per node again: nothing set aside is left
    assert {n: (c["id"], c["spec"], c["running"]) for n, c in after.items()} == {
        n: (c["id"], c["spec"], "True") for n, c in before.items()
    }


def test_killing_rank_1_fails_verify_naming_node2(deployed) -> None:
    node_sh(CLUSTER, f"docker kill {NAME}", node="node2")
    result = deploy(
        "verify with rank 1 killed",
        "deploys/verify.py",
        f"recipe={deployed['serving']}",
        "api_key=auto",
        f"results_dir={deployed['results']}",
    )
    assert result.returncode != 0
    assert re.search(rf"the multi-node group {NAME} \(node1 \(rank 0\), node2 \(rank 1\)\) is not whole", out(result))
    assert "  - rank 1 on node2: exited" in out(result), out(result)[-3000:]


def test_a_node_with_another_driver_is_refused_before_any_change(deployed) -> None:
    downgrade = f"apt-mark unhold {' '.join(DRIVER_PACKAGES)} >/dev/null && {apt_install(*driver_pins(OLD))}"
    node_sh(CLUSTER, downgrade, node="node2", timeout=600)
    assert node_sh(CLUSTER, "dpkg-query -W -f '${Version}' nvidia-open", node="node2") == f"{OLD}-1"
    before = {n: node_sh(CLUSTER, NODE_STATE, node=n) for n in ("node1", "node2")}
    result = deploy(
        "refused (driver differs)",
        "deploys/reproduce.py",
        f"recipe={deployed['serving']}",
        "api_key=auto",
        "verify=false",
    )
    assert result.returncode != 0
    text = out(result)
    assert "multi-node preflight failed on node1; nothing was changed on any node" in text, text[-3000:]
    assert re.search(rf"driver\s+{re.escape(NEW)}\s+{re.escape(OLD)}", text) and "node2 (rank 1)" in text
    assert "Starting operation" not in text  # refused while planning: no operation ran on any node
    after = {n: node_sh(CLUSTER, NODE_STATE, node=n) for n in ("node1", "node2")}
    assert after == before, state_changes(before, after)
