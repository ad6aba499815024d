"""End-to-end: a prefill/decode split over two nodes, pasted from a post (corpus 170, Mooncake's docs: the prefill
on one node with `--host 192.168.0.137`, the decode on another, the router naming both), imported with `hgxkit
recipe import` as pasted and deployed on two simulated nodes as its import notes say (`--data router=true
--data router_port=30002`, on a private network without an API key).

The prefill runs on node1 and the decode on node2, each a SGLang stand-in on the host's network; the REAL
sglang-router on node1 reaches each side at its node's fabric address, and the decode fetches each request's KV
from the prefill's bootstrap port on node1 (preflighted before any change). Verify's cell goes through the router
and both sides serve it; a second run changes nothing; the router's default port, which the prefill holds, is
refused before any change; a changed decode group on node2 is replaced while a client keeps asking the router,
which answers 502/503 during the gap (never hangs) and 200 again after. `--dry` shows the split's plan.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from router_client import RouterClient
from sim_steps import cluster_name, hgxkit_cli, node_sh, out, run_deploy

from hgxkit.sim import nodes as simnodes
from hgxkit.sim.standin import router_image

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
CLUSTER = cluster_name("pd2")
POST = next((ROOT / "tests" / "fixtures" / "posts").glob("170-*.txt"))
NAME = "qwen2.5-7b-instruct-gptq-int4"  # from the model, the post naming no container
ROUTER = f"{NAME}-router"
# The post's sides listen on 30000/30001, the router's default port held by the prefill (the import says so).
DATA = ('allow_docker_options=["--network=host"]', "router=true", "allow_unauthenticated=true")
ROUTER_PORT = "router_port=30002"


def containers() -> dict[str, tuple[str, str, str]]:
    """`node/name` -> (id, start time, running) of every container on both nodes."""
    fmt = "{{.Name}} {{.Id}} {{.State.StartedAt}} {{.State.Running}}"
    found = {}
    for node in ("node1", "node2"):
        raw = node_sh(CLUSTER, f"docker inspect -f '{fmt}' $(docker ps -aq)", answer=True, check=True, node=node)
        for name, cid, started, running in map(str.split, raw.splitlines()):
            found[f"{node}/{name.lstrip('/')}"] = (cid, started, running)
    return found


def served(node: str, port: int) -> list[str]:
    """The rids of the requests the stand-in on `node` at `port` served (its ground-truth records)."""
    raw = node_sh(CLUSTER, f"curl -sS -m 30 http://127.0.0.1:{port}/hgxkit_sim/requests", answer=True, node=node)
    return [str(t.get("rid", "")) for t in json.loads(raw)]


@pytest.fixture(scope="module")
def deployed(sim_nodes, tmp_path_factory):
    router_image.ensure_published(simnodes.client())
    sim_nodes(2, cluster=CLUSTER)
    built = hgxkit_cli("sim", "image", "build", "--tag", "lmsysorg/sglang:latest")
    assert built.returncode == 0, out(built)[-3000:]
    tmp = tmp_path_factory.mktemp("pd2")
    recipe, results = tmp / "170.yaml", tmp / "results"
    imported = hgxkit_cli("recipe", "import", str(POST), "-o", str(recipe))
    assert imported.returncode == 0, out(imported)
    assert "add `--data router_port=30002` to `--data router=true`" in imported.stderr, imported.stderr
    first = run_deploy(
        CLUSTER, "deploys/reproduce.py", f"recipe={recipe}", *DATA, ROUTER_PORT, f"results_dir={results}"
    )
    return {"recipe": recipe, "results": results, "first": first, "tmp": tmp}


def test_the_split_over_two_nodes_serves_through_the_router_and_verify_benchmarks_it(deployed) -> None:
    first = deployed["first"]
    assert first.returncode == 0, out(first)[-6000:]
    node1, node2 = (f"hgxkit-sim-{CLUSTER}-{n}" for n in ("node1", "node2"))  # the inventory's fabric addresses
    said = out(first)
    assert f"[node2] prefill/decode split: the decode reaches prefill group 0 on node1 at {node1}:8998" in said
    assert f"router {ROUTER} answers on port 30002" in said
    args = node_sh(CLUSTER, f"docker inspect -f '{{{{json .Args}}}}' {ROUTER}", answer=True, check=True)
    assert f'"--prefill","http://{node1}:30000","8998","--decode","http://{node2}:30001"' in args.replace(" ", "")
    now = containers()
    assert now[f"node1/{NAME}-0"][2] == now[f"node2/{NAME}-1"][2] == now[f"node1/{ROUTER}"][2] == "true"
    assert f"node2/{NAME}-0" not in now and f"node1/{NAME}-1" not in now  # one side per node
    decode_alone = node_sh(
        CLUSTER,
        "curl -sS -m 30 -o /dev/null -w '%{http_code}' http://127.0.0.1:30001/generate "
        '-H \'Content-Type: application/json\' -d \'{"text": "hi", "sampling_params": {"max_new_tokens": 4}}\'',
        answer=True,
        node="node2",
    )
    assert decode_alone.strip() == "400"  # no bootstrap room: only the router's requests complete
    (run,) = [p for p in deployed["results"].glob("node1/*") if p.is_dir()]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["simulated"] is True and summary["gates"] == []
    assert [(c["input_len"], c["concurrency"], c["completed"], c["failed"]) for c in summary["cells"]] == [
        (512, 1, 4, 0)
    ]
    # The cell's four prompts, each done by the prefill on node1 and completed by the decode on node2.
    prefill, decode = served("node1", 30000), served("node2", 30001)
    assert len(prefill) >= 4 and len(decode) >= 4, (prefill, decode)


def test_a_second_run_changes_nothing(deployed) -> None:
    assert deployed["first"].returncode == 0, out(deployed["first"])[-3000:]
    before = containers()
    again = run_deploy(
        CLUSTER, "deploys/reproduce.py", f"recipe={deployed['recipe']}", *DATA, ROUTER_PORT, "verify=false"
    )
    assert again.returncode == 0, out(again)[-4000:]
    match = re.search(r"Grand total\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)", out(again))
    assert match, out(again)[-3000:]
    ops, changed, errors, unchanged = (0 if v == "-" else int(v) for v in match.groups())
    assert (changed, errors) == (0, 0) and unchanged == ops, out(again)[-6000:]
    plan = "prefill/decode split: node1 runs group port 30000 as prefill (bootstrap port 8998)"
    assert plan in out(again) and "prefill/decode split: node2 runs group port 30001 as decode" in out(again)
    dry = run_deploy(
        CLUSTER, "deploys/reproduce.py", f"recipe={deployed['recipe']}", *DATA, ROUTER_PORT, flags=("-y", "--dry")
    )
    assert dry.returncode == 0 and plan in out(dry), out(dry)[-3000:]
    node1, node2 = (f"hgxkit-sim-{CLUSTER}-{n}" for n in ("node1", "node2"))
    router = (
        f"the router on node1: .*--pd-disaggregation --prefill http://{node1}:30000 8998 --decode http://{node2}:30001"
    )
    assert re.search(router, out(dry)), out(dry)[-3000:]
    assert containers() == before


def test_the_routers_default_port_held_by_the_prefill_is_refused_before_any_change(deployed) -> None:
    before = containers()
    refused = run_deploy(CLUSTER, "deploys/reproduce.py", f"recipe={deployed['recipe']}", *DATA, "verify=false")
    assert refused.returncode != 0
    assert "[router-port] the router's port 30000 on node1 is a serving group's port there" in out(refused)
    assert "--data router_port=30001" in out(refused), out(refused)[-3000:]
    assert containers() == before


def test_replacing_the_decode_on_its_node_keeps_the_router_answering(deployed) -> None:
    assert deployed["first"].returncode == 0, out(deployed["first"])[-3000:]
    text = deployed["recipe"].read_text()
    decode = "  - - --disaggregation-mode decode\n"
    assert decode in text
    changed_recipe = deployed["tmp"] / "170-decode-changed.yaml"
    changed_recipe.write_text(text.replace(decode, decode + "    - --max-running-requests 32\n", 1))
    before = containers()
    client = RouterClient(CLUSTER, 30002)
    try:
        client.wait_for_200()
        data = (f"recipe={changed_recipe}", *DATA, ROUTER_PORT, "verify=false", "pd_accept_gap=true")
        replaced = run_deploy(CLUSTER, "deploys/reproduce.py", *data)
        done = len(client.answers)
        client.wait_for_200(after=done)  # the router sends to the new decode once its circuit reopens
    finally:
        answers = client.stop()
    assert replaced.returncode == 0, out(replaced)[-4000:]
    assert f"replace container {NAME}-1 (--max-running-requests (absent) -> 32)" in out(replaced), out(replaced)[-4000:]
    after = containers()
    assert after[f"node1/{NAME}-0"] == before[f"node1/{NAME}-0"]  # the prefill was not touched
    assert after[f"node1/{ROUTER}"] == before[f"node1/{ROUTER}"]  # nor the router
    assert after[f"node2/{NAME}-1"][0] != before[f"node2/{NAME}-1"][0] and after[f"node2/{NAME}-1"][2] == "true"
    statuses = {status for _, status, _ in answers}
    assert statuses <= {200, 502, 503}, [a for a in answers if a[1] not in (200, 502, 503)][:10]  # none hung
    ok = {rid for rid, status, _ in answers if status == 200}
    new_decode = {rid for rid in served("node2", 30001) if rid.startswith("gap-")}
    assert new_decode and new_decode <= ok  # the new decode answered through the router
    print(
        f"{len(answers)} answers, {len(answers) - len(ok)} errors {sorted(statuses)}, {len(new_decode)} by the new decode"
    )
