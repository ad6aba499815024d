"""End-to-end: a one-node prefill/decode split (a TP4 prefill group on GPUs 0-3, a TP4 decode group on GPUs 4-7, on
the host's network) deployed with `--data router=true` on a simulated node, for each engine:

- SGLang (tests/fixtures/pd/dspark-pd-one-node.yaml): the SGLang stand-ins run each side, the REAL sglang-router
  fronts them in PD mode, verify's chat completion and smoke cell go through the router (a worker refuses a request
  without a bootstrap room), and the run is archived; a second run changes nothing. Then a changed decode group
  (tests/fixtures/pd/dspark-pd-one-node-decode-changed.yaml): the plan refuses to leave the split without a decode
  unless pd_accept_gap says so; accepted, the decode is replaced while a client keeps asking the router, which
  answers 502/503 during the gap (never hangs) and 200 again after, each answer checked against the requests the
  prefill and the new decode served.
- vLLM over NIXL (tests/fixtures/pd/vllm-pd-one-node.yaml), then on the same node (one node start and bring-up for
  both): the vLLM stand-ins run each side, the REAL vllm-router (its own image) fronts them, verify's cell goes
  through it and the decode's telemetry holds the KV transfers it timed; a second run changes nothing, the
  split with an API key is refused before any change (vllm-router checks no client's key), and a changed decode
  group is replaced while a client keeps asking vllm-router, which answers again after the gap.
- First, a pasted one-node split (corpus 179, SGLang's docs: bare launches on GPUs 0 and 1), imported as pasted
  and deployed as its import notes say (`router_port=30002`): its sides listen on loopback, as posted, and
  verify's cell goes through the router; the splits above replace it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from router_client import RouterClient
from sim_steps import cluster_name, hgxkit_cli, node_sh, out, run_deploy

from hgxkit.sim import nodes as simnodes
from hgxkit.sim.standin import image as stand_in
from hgxkit.sim.standin import registry, router_image

pytestmark = pytest.mark.e2e
CLUSTER = cluster_name("pd")
PD = "tests/fixtures/pd/dspark-pd-one-node.yaml"
PD_DECODE_CHANGED = "tests/fixtures/pd/dspark-pd-one-node-decode-changed.yaml"
VLLM_PD = "tests/fixtures/pd/vllm-pd-one-node.yaml"
VLLM_IMAGE = "vllm/vllm-openai:v0.33.0"  # the vLLM recipe's image
HOST_NETWORK = 'allow_docker_options=["--network=host"]'
ROUTER = "deepseek-v4-flash-pd-one-node-router"  # `<recipe>-router`, as the groups are `<recipe>-<group>`
VLLM_ROUTER = "qwen3-vllm-pd-one-node-router"


def containers() -> dict[str, tuple[str, str, str]]:
    """name -> (id, start time, running) of the serving groups and the router."""
    fmt = "{{.Name}} {{.Id}} {{.State.StartedAt}} {{.State.Running}}"
    raw = node_sh(CLUSTER, f"docker inspect -f '{fmt}' $(docker ps -aq)", answer=True, check=True)
    return {
        name.lstrip("/"): (cid, started, running) for name, cid, started, running in map(str.split, raw.splitlines())
    }


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("pd-results")


@pytest.fixture(scope="module")
def deployed(sim_nodes, results):
    router_image.ensure_published(simnodes.client())
    sim_nodes(1, cluster=CLUSTER)
    return run_deploy(
        CLUSTER, "deploys/reproduce.py", f"recipe={PD}", HOST_NETWORK, "router=true", f"results_dir={results}"
    )


# A one-node split pasted from SGLang's docs (corpus 179: bare launches on GPUs 0 and 1, ports 30000 and 30001),
# imported as pasted and deployed as its import notes say, first on the node: its groups take port 30000, where
# a split deployed earlier keeps its router (the serving role refuses a port in use, whatever holds it), while
# the splits deployed after it remove its groups and router themselves.


def test_a_pasted_one_node_split_deploys_as_its_import_says(sim_nodes, tmp_path) -> None:
    client = simnodes.client()
    stand_in.ensure_image(client, ["lmsysorg/sglang:latest"], kind="sglang")
    registry.publish(client, ["lmsysorg/sglang:latest"])
    sim_nodes(1, cluster=CLUSTER)
    recipe = tmp_path / "179.yaml"
    root = Path(__file__).resolve().parents[2]
    post = next((root / "tests" / "fixtures" / "posts").glob("179-*.txt"))
    imported = hgxkit_cli("recipe", "import", str(post), "-o", str(recipe))
    assert imported.returncode == 0, imported.stderr
    assert "add `--data router_port=30002` to `--data router=true`" in imported.stderr
    results = tmp_path / "results"
    data = (f"recipe={recipe}", HOST_NETWORK, "router=true", "router_port=30002", f"results_dir={results}")
    done = run_deploy(CLUSTER, "deploys/reproduce.py", *data)
    assert done.returncode == 0, out(done)[-6000:]
    router = "llama-3.1-8b-instruct-router"
    assert f"router {router} answers on port 30002" in out(done)
    args = node_sh(CLUSTER, f"docker inspect -f '{{{{json .Args}}}}' {router}", answer=True, check=True)
    assert '"--prefill","http://127.0.0.1:30000","8998","--decode","http://127.0.0.1:30001"' in args.replace(" ", "")
    listening = node_sh(CLUSTER, "ss -Hltn 'sport = :30000 or sport = :30001'", answer=True)
    assert sorted(line.split()[3] for line in listening.splitlines()) == ["127.0.0.1:30000", "127.0.0.1:30001"]
    (run_dir,) = [p for p in results.glob("node1/*") if p.is_dir()]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["simulated"] is True and summary["gates"] == []
    assert [(c["group"], c["failed"]) for c in summary["cells"]] == [(1, 0)]  # from the decode's container


def test_the_split_serves_through_the_router_and_verify_benchmarks_it_there(deployed, results) -> None:
    assert deployed.returncode == 0, out(deployed)[-6000:]
    assert f"router {ROUTER} answers on port 30000" in out(deployed)
    args = node_sh(CLUSTER, f"docker inspect -f '{{{{json .Args}}}}' {ROUTER}", answer=True, check=True)
    assert "--pd-disaggregation" in args and '"--prefill","http://127.0.0.1:5000","8998"' in args.replace(" ", "")
    assert '"--decode","http://127.0.0.1:5001"' in args.replace(" ", "")
    direct = node_sh(
        CLUSTER,
        "curl -sS -m 30 -o /dev/null -w '%{http_code}' http://127.0.0.1:5001/v1/chat/completions "
        "-H 'Content-Type: application/json' "
        '-d \'{"model": "deepseek-v4-flash", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}\'',
        answer=True,
    )
    assert direct.strip() == "400"  # the decode alone: no bootstrap room
    (run_dir,) = [p for p in results.glob("node1/*") if p.is_dir()]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["simulated"] is True and summary["bench"] == "smoke" and summary["gates"] == []
    # one cell, the router's, measured from the decode group's container (group 1)
    assert [(c["group"], c["input_len"], c["concurrency"], c["failed"]) for c in summary["cells"]] == [(1, 1000, 1, 0)]
    prefill = node_sh(CLUSTER, "curl -sS -m 10 http://127.0.0.1:5000/metrics", answer=True)
    served = re.search(r"^sglang:prompt_tokens_total\S* (\S+)$", prefill, re.M)
    assert served and float(served.group(1)) > 0, prefill[-2000:]  # the prefill did the cell's prompts


def test_second_run_changes_nothing(deployed) -> None:
    assert deployed.returncode == 0, out(deployed)[-3000:]
    rerun_changes_nothing(PD)


def rerun_changes_nothing(recipe: str) -> None:
    """The recipe's split deployed again (no verify): no operation changes anything, no container restarts."""
    before = containers()
    again = run_deploy(CLUSTER, "deploys/reproduce.py", f"recipe={recipe}", HOST_NETWORK, "router=true", "verify=false")
    assert again.returncode == 0, out(again)[-4000:]
    match = re.search(r"Grand total\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)", out(again))
    assert match, out(again)[-3000:]
    ops, changed, errors, unchanged = (0 if v == "-" else int(v) for v in match.groups())
    assert (changed, errors) == (0, 0) and unchanged == ops, out(again)[-6000:]  # the output names what changed
    assert containers() == before


def test_an_earlier_runs_sglang_router_is_replaced_by_the_recipes_router(deployed) -> None:
    """An earlier hgxkit named its router `sglang-router` whatever its engine (made here by renaming the router):
    the next run finds it by its label, removes it (it holds port 30000) and starts `<recipe>-router`; the run after
    changes nothing."""
    assert deployed.returncode == 0, out(deployed)[-3000:]
    node_sh(CLUSTER, f"docker rename {ROUTER} sglang-router", check=True)
    data = (f"recipe={PD}", HOST_NETWORK, "router=true", "verify=false")
    migrated = run_deploy(CLUSTER, "deploys/reproduce.py", *data)
    assert migrated.returncode == 0, out(migrated)[-4000:]
    assert "removing hgxkit's router sglang-router that holds its port" in out(migrated), out(migrated)[-4000:]
    now = containers()
    assert "sglang-router" not in now and now[ROUTER][2] == "true"
    rerun_changes_nothing(PD)


def test_without_the_router_the_split_is_refused_before_any_change(deployed) -> None:
    before = containers()
    refused = run_deploy(CLUSTER, "deploys/reproduce.py", f"recipe={PD}", HOST_NETWORK, "verify=false")
    assert refused.returncode != 0
    assert "[pd-router]" in out(refused) and "--data router=true" in out(refused)
    assert containers() == before


def served(port: int) -> set[str]:
    """The client's requests a stand-in on the node served (its ground-truth records)."""
    raw = node_sh(CLUSTER, f"curl -sS -m 30 http://127.0.0.1:{port}/hgxkit_sim/requests", answer=True, check=True)
    return {t["rid"] for t in json.loads(raw) if str(t.get("rid", "")).startswith("gap-")}


def test_replacing_the_decode_group_keeps_the_router_answering(deployed) -> None:
    assert deployed.returncode == 0, out(deployed)[-3000:]
    before = containers()
    changed = (f"recipe={PD_DECODE_CHANGED}", HOST_NETWORK, "router=true", "verify=false")
    planned = run_deploy(CLUSTER, "deploys/reproduce.py", *changed, flags=("-y", "--dry"))
    assert planned.returncode != 0 and containers() == before
    assert "[pd-gap] group 1 (deepseek-v4-flash-pd-1) is the split's only serving decode group" in out(planned)
    assert "--data pd_accept_gap=true" in out(planned), out(planned)[-3000:]

    client = RouterClient(CLUSTER, 30000)
    try:
        client.wait_for_200()
        replaced = run_deploy(CLUSTER, "deploys/reproduce.py", *changed, "pd_accept_gap=true")
        done = len(client.answers)
        client.wait_for_200(after=done)  # the router sends to the new decode (its circuits reopen after 5 s)
    finally:
        answers = client.stop()
    assert replaced.returncode == 0, out(replaced)[-4000:]
    line = "group 1: replace container deepseek-v4-flash-pd-1 (--max-running-requests (absent) -> 32); no decode"
    assert line in out(replaced) and "WARNING: group 1 (deepseek-v4-flash-pd-1) is the split's" in out(replaced)
    after = containers()
    assert after["deepseek-v4-flash-pd-0"] == before["deepseek-v4-flash-pd-0"]  # the prefill was not touched
    assert after[ROUTER] == before[ROUTER]  # nor the router
    assert after["deepseek-v4-flash-pd-1"][0] != before["deepseek-v4-flash-pd-1"][0]

    statuses = {status for _, status, _ in answers}
    assert statuses <= {200, 502, 503}, [a for a in answers if a[1] not in (200, 502, 503)][:10]  # none hung
    ok = [rid for rid, status, _ in answers if status == 200]
    order = {rid: i for i, (rid, _, _) in enumerate(answers)}
    new_decode, prefill = served(5001), served(5000)
    assert new_decode and new_decode <= set(ok)  # every request the new decode served was answered 200
    assert set(ok) <= prefill  # and every 200 went through the prefill
    first_new = min(order[rid] for rid in new_decode)
    old_decode = [rid for rid in ok if rid not in new_decode]
    assert old_decode and all(order[rid] < first_new for rid in old_decode)  # the old decode served before it
    last_old = max(order[rid] for rid in old_decode)
    gap = [a for a in answers if a[1] != 200]
    assert all(last_old < order[rid] < first_new for rid, _, _ in gap), gap[:10]  # errors only during the gap
    assert all(order[rid] >= first_new for rid in ok if order[rid] > last_old)
    print(
        f"{len(answers)} answers: {len(old_decode)} by the old decode, {len(gap)} errors {sorted(statuses)}, then"
        f" {len(new_decode)} by the new one; the gap's answers took {sum(a[2] for a in gap):.1f} s"
    )


# vLLM's NIXL split, on the same node after SGLang's (its tests run after those above, in file order).


@pytest.fixture(scope="module")
def vllm_deployed(sim_nodes, results):
    client = simnodes.client()
    router_image.ensure_published(client, "vllm")
    stand_in.ensure_image(client, [VLLM_IMAGE], kind="vllm")
    registry.publish(client, [VLLM_IMAGE])
    sim_nodes(1, cluster=CLUSTER)
    before = set(results.glob("node1/*"))
    done = run_deploy(
        CLUSTER, "deploys/reproduce.py", f"recipe={VLLM_PD}", HOST_NETWORK, "router=true", f"results_dir={results}"
    )
    return done, [p for p in results.glob("node1/*") if p.is_dir() and p not in before]


def test_vllms_split_serves_through_vllm_router_and_verify_benchmarks_it_there(vllm_deployed) -> None:
    deployed, runs = vllm_deployed
    assert deployed.returncode == 0, out(deployed)[-6000:]
    assert f"router {VLLM_ROUTER} answers on port 30000" in out(deployed)
    assert f"removing hgxkit's router {ROUTER} that holds its port" in out(deployed)  # SGLang's split's
    fmt = "{{.Config.Image}} {{json .Config.Entrypoint}} {{json .Args}}"
    image, entrypoint, args = node_sh(
        CLUSTER, f"docker inspect -f '{fmt}' {VLLM_ROUTER}", answer=True, check=True
    ).split(" ", 2)
    assert image.startswith("vllm/vllm-router@sha256:") and entrypoint == '["vllm-router"]'
    expected = '"--vllm-pd-disaggregation","--prefill","http://127.0.0.1:8100","--decode","http://127.0.0.1:8101"'
    assert args.startswith(f"[{expected}") and '"--kv-connector","nixl"' in args, args
    serving = {name for name, (_, _, running) in containers().items() if running == "true"}
    assert serving == {"qwen3-pd-0", "qwen3-pd-1", VLLM_ROUTER}  # SGLang's split and its router are gone
    (run_dir,) = runs
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["simulated"] is True and summary["bench"] == "smoke" and summary["gates"] == []
    assert summary["tool"] == "vllm bench serve"
    # one cell, the router's, measured from the decode group's container (group 1), whose telemetry it samples
    [cell] = summary["cells"]
    assert (cell["group"], cell["input_len"], cell["concurrency"], cell["failed"]) == (1, 1000, 1, 0)
    server = cell["telemetry"]["server"]
    assert server["kv_transfers"] > 0 and server["kv_transfer_mean_s"] > 0, server
    prefill = node_sh(CLUSTER, "curl -sS -m 10 http://127.0.0.1:8100/metrics", answer=True)
    served = re.search(r"^vllm:prompt_tokens_total\S* (\S+)$", prefill, re.M)
    assert served and float(served.group(1)) > 0, prefill[-2000:]  # the prefill did the cell's prompts


def test_vllms_second_run_changes_nothing(vllm_deployed) -> None:
    assert vllm_deployed[0].returncode == 0, out(vllm_deployed[0])[-3000:]
    rerun_changes_nothing(VLLM_PD)


def test_vllms_split_with_an_api_key_is_refused_before_any_change(vllm_deployed) -> None:
    before = containers()
    keyed = ("router=true", "api_key=auto", "verify=false")
    refused = run_deploy(CLUSTER, "deploys/reproduce.py", f"recipe={VLLM_PD}", HOST_NETWORK, *keyed)
    assert refused.returncode != 0
    assert "[pd-router-key]" in out(refused) and "checks no client's API key" in out(refused), out(refused)[-3000:]
    assert containers() == before


def test_replacing_vllms_decode_group_keeps_vllm_router_answering(vllm_deployed, tmp_path) -> None:
    """A changed decode group of vLLM's split (one more flag), accepted with pd_accept_gap, is replaced while a
    client keeps asking vllm-router's /v1/completions: errors only while no decode serves (never a hang), 200
    again after, and the new decode serves the router's requests."""
    assert vllm_deployed[0].returncode == 0, out(vllm_deployed[0])[-3000:]
    consumer = """  - - --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'\n"""
    text = Path(VLLM_PD).read_text()
    assert consumer in text
    changed = tmp_path / "vllm-pd-one-node-decode-changed.yaml"
    changed.write_text(text.replace(consumer, consumer + "    - --max-num-seqs 32\n", 1))
    before = containers()
    client = RouterClient(CLUSTER, 30000, model="qwen3")
    try:
        client.wait_for_200()
        data = (f"recipe={changed}", HOST_NETWORK, "router=true", "verify=false", "pd_accept_gap=true")
        replaced = run_deploy(CLUSTER, "deploys/reproduce.py", *data)
        done = len(client.answers)
        client.wait_for_200(after=done)
    finally:
        answers = client.stop()
    assert replaced.returncode == 0, out(replaced)[-4000:]
    assert "group 1: replace container qwen3-pd-1 (--max-num-seqs (absent) -> 32)" in out(replaced), out(replaced)[
        -4000:
    ]
    after = containers()
    assert after["qwen3-pd-0"] == before["qwen3-pd-0"] and after[VLLM_ROUTER] == before[VLLM_ROUTER]
    assert after["qwen3-pd-1"][0] != before["qwen3-pd-1"][0] and after["qwen3-pd-1"][2] == "true"
    statuses = {status for _, status, _ in answers}
    assert 0 not in statuses and statuses <= {200, 500, 502, 503}, sorted(statuses)  # none hung
    raw = node_sh(CLUSTER, "curl -sS -m 30 http://127.0.0.1:8101/hgxkit_sim/requests", answer=True, check=True)
    assert json.loads(raw), "the new decode served nothing through the router"
    print(
        f"{len(answers)} answers through vllm-router, {sum(s != 200 for _, s, _ in answers)} errors {sorted(statuses)}"
    )
