"""End-to-end: vLLM over two simulated nodes from real published posts, imported unedited with `hgxkit recipe
import` and deployed with `pyinfra -y inventories/sim.py deploys/reproduce.py --data recipe=… --data api_key=auto`.

- Data parallelism over hosts: corpus 022 (vllm-project/recipes, Kimi-K2: `--data-parallel-size 16
  --data-parallel-size-local 8 --data-parallel-address $MASTER_IP`, node 1 `--headless --data-parallel-start-rank
  8`). Rank 0 on node1 runs the API server and waits (the stand-in's simulated DP rendezvous) until node2 brought
  ranks 8-15; the run is verified with `vllm bench serve` and archived with both nodes' fingerprints; a re-run
  changes nothing.
- vLLM on a Ray cluster: formats/r03 (vLLM issue 16692: `ray start --head --port=6379 && vllm serve $MODELPATH …
  --tensor-parallel-size 16 --distributed-executor-backend=ray` on the head, `ray start --block
  --address=$HEADPODIP:6379` on the worker), imported with --model-repo. Every host runs the post's image with
  `--entrypoint /bin/bash`: the head `ray start --head … && exec vllm serve …`, the worker `ray start --block
  --address=HEAD:6379`; the simulated Ray cluster forms over both nodes. The post was written for vLLM 0.7.2:
  its `--enable-reasoning` is gone from vLLM 0.33's options, so the import onto the default image (`latest`, 0.33)
  refuses it by name; imported with the image the post names (`--image vllm/vllm-openai:v0.7.2`, whose options
  hgxkit does not have: the flag is noted as not checked), the head's server (the stand-in parses 0.33's CLI
  whatever the tag) exits 2 naming it and the rollout fails saying so. (No real two-node Ray post with concrete
  values and flags vLLM 0.33 reads was found: r01 below is served instead.)
- vLLM on a Ray cluster, served: formats/r01 (vLLM's own examples/online_serving/run_deepseek.sh: `docker run -d
  … --entrypoint /bin/bash … -c "ray start --block --head --port=6379"` on the head, `… -c "ray start --block
  --address=192.168.0.1:6379"` on the worker, then in the head's container `VLLM_USE_V1=1 python3 -m
  vllm.entrypoints.openai.api_server … --tensor-parallel-size 8 --pipeline-parallel-size 2
  --distributed-executor-backend ray`), imported unedited with what the script leaves to its reader given as a user
  would: the two `/path/to/…` it tells you to replace (`--fill`), which Hub repo the weights are (`--model-repo`;
  it says "DeepSeek V3 or R1") and a current image (`--image`: its own pins 0.8.4); the deploy allows the two
  options the script runs with (`--privileged`, the /var/run/nvidia-topologyd mount) by name. The worker joins the
  head's Ray cluster, the head's server opens its port only when the placement group of 16 GPUs over both nodes is
  ready; verified with `vllm bench serve`, archived with both nodes, a re-run changes nothing.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sim_steps import cluster_name, node_sh, out, require, run_deploy, why_changed

from hgxkit.sim.standin import client_store

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
CLUSTER = cluster_name("vllmmn")
POSTS = ROOT / "tests" / "fixtures" / "posts"
DP_POST = next(POSTS.glob("022-*.txt"))
RAY_POST = POSTS / "formats" / "r03-vllm-issue-16692-ray-tp16-two-h800.md"
RAY_EXAMPLE = POSTS / "formats" / "r01-vllm-run-deepseek-ray-docker.sh"
# What run_deepseek.sh leaves to its reader ("say /path/to/the/huggingface/home/on/this/node"), given as a user would.
RAY_EXAMPLE_OPTIONS = (
    "--fill",
    "/path/to/the/huggingface/home/on/this/node=/data/models/DeepSeek-V3",
    "--fill",
    "/path/to/the/model/in/the/container=/models/DeepSeek-V3",
    "--model-repo",
    "deepseek-ai/DeepSeek-V3",
    "--image",
    "vllm/vllm-openai:latest",
)
# A server spanning nodes runs on the host's network, which the inventory allows by name, as a user's would.
HOST_NETWORK = 'allow_docker_options=["--network=host"]'
RAY_EXAMPLE_ALLOW = 'allow_docker_options=["--privileged", "host-system-mount", "--network=host"]'


def hgxkit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hgxkit", *args], cwd=ROOT, capture_output=True, text=True, timeout=900, check=False
    )


def deploy(name: str, *data: str) -> subprocess.CompletedProcess[str]:
    start = time.monotonic()
    result = run_deploy(CLUSTER, "deploys/reproduce.py", HOST_NETWORK, *data)  # a later allow_docker_options wins
    print(f"{name}: {time.monotonic() - start:.0f} s")
    return result


def grand_total(result: subprocess.CompletedProcess[str]) -> tuple[int, int, int, int]:
    match = re.search(r"Grand total\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)", out(result))
    assert match, out(result)[-3000:]
    return tuple(0 if v == "-" else int(v) for v in match.groups())  # type: ignore[return-value]


def containers() -> dict[str, dict[str, str]]:
    """node -> its serving container: name, id, start time, running, rank label, command words."""
    found = {}
    for node in ("node1", "node2"):
        raw = node_sh(
            CLUSTER, "docker inspect $(docker ps -aq --filter label=hgxkit.serve) 2>/dev/null || echo []", node=node
        )
        items = json.loads(raw or "[]")
        assert len(items) <= 1, [i["Name"] for i in items]
        for item in items:
            found[node] = {
                "name": item["Name"].lstrip("/"),
                "id": item["Id"],
                "started": item["State"]["StartedAt"],
                "running": str(item["State"]["Running"]),
                "rank": item["Config"]["Labels"].get("hgxkit.rank", ""),
                "args": item["Args"],
            }
    return found


@pytest.fixture(scope="module")
def cluster(sim_nodes, tmp_path_factory) -> Path:
    """Two nodes, the vLLM stand-in published as vllm/vllm-openai:latest; the results directory."""
    require(shutil.which("docker-registry") is not None, "docker-registry is not installed")
    require(client_store.is_installed(), f"no benchmark clients in {client_store.store_path()}")
    sim_nodes(2, cluster=CLUSTER)
    built = hgxkit("sim", "image", "build", "--tag", "vllm/vllm-openai:latest")
    assert built.returncode == 0, out(built)[-3000:]
    return tmp_path_factory.mktemp("vllmmn")


@pytest.fixture(scope="module")
def dp(cluster: Path) -> dict[str, object]:
    recipe, results = cluster / "022.yaml", cluster / "results"
    imported = hgxkit("recipe", "import", str(DP_POST), "-o", str(recipe))
    assert imported.returncode == 0, out(imported)
    first = deploy(
        "DP over two hosts: bring-up, model, serve, verify",
        f"recipe={recipe}",
        "api_key=auto",
        f"results_dir={results}",
    )
    return {"recipe": recipe, "results": results, "first": first}


def test_dp_ranks_over_two_nodes_serve_the_post_as_one_group(dp) -> None:
    first = dp["first"]
    assert first.returncode == 0, out(first)[-6000:]
    head = f"hgxkit-sim-{CLUSTER}-node1"
    now = containers()
    assert {n: (c["rank"], c["running"]) for n, c in now.items()} == {"node1": ("0", "True"), "node2": ("1", "True")}
    one, two = now["node1"]["args"], now["node2"]["args"]
    assert one[one.index("--data-parallel-address") + 1] == two[two.index("--data-parallel-address") + 1] == head
    assert one[one.index("--data-parallel-rpc-port") + 1] == "29550"  # $PORT is not set by the post
    assert "--headless" not in one and two[-3:] == ["--headless", "--data-parallel-start-rank", "8"]
    logs = node_sh(CLUSTER, f"docker logs {now['node1']['name']} 2>&1")
    assert "[simulated] data parallel ranks 8..15 joined from" in logs and "(16/16)" in logs, logs[-3000:]
    assert node_sh(CLUSTER, "curl -s -o /dev/null -w '%{http_code}' -m 30 http://127.0.0.1:8000/health") == "200"
    (run,) = [p for p in Path(dp["results"]).glob("node1/*") if p.is_dir()]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["simulated"] is True and summary["tool"] == "vllm bench serve"
    assert summary["cells"] and all(c["failed"] == 0 for c in summary["cells"])
    fingerprint = json.loads((run / "fingerprint.json").read_text())
    assert [(r["rank"], r["host"]) for r in fingerprint["node_group"]["ranks"]] == [(0, "node1"), (1, "node2")]
    member = json.loads((run / "members" / "node2.json").read_text())
    assert "--data-parallel-start-rank 8" in member["recipe"]["rendered"][0]


def test_dp_a_second_run_changes_nothing(dp) -> None:
    before = containers()
    again = deploy("DP second run (no change)", f"recipe={dp['recipe']}", "api_key=auto", "verify=false")
    assert again.returncode == 0, out(again)[-4000:]
    ops, changed, errors, unchanged = grand_total(again)
    assert (changed, errors) == (0, 0) and unchanged == ops, why_changed(again)
    assert containers() == before


def test_vllm_on_ray_deploys_both_hosts_and_the_033_image_refuses_the_posts_v072_flag(dp, cluster: Path) -> None:
    """After the DP group: the import onto `latest` (0.33) refuses the post's `--enable-reasoning` (vLLM 0.7.2);
    imported with the post's v0.7.2, the Ray post replaces the DP group on both nodes, and the head's vLLM 0.33
    (the stand-in's CLI) refuses the flag, so the rollout fails naming it."""
    before = containers()
    recipe = cluster / "r03.yaml"
    refused = hgxkit("recipe", "import", str(RAY_POST), "--model-repo", "deepseek-ai/DeepSeek-R1", "-o", str(recipe))
    assert (
        refused.returncode != 0
        and "line 19, column 5: the engine would refuse: `--enable-reasoning` is not an "
        "option of vLLM 0.33 (the image vllm/vllm-openai:latest;"
        in out(refused)
    ), out(refused)
    built = hgxkit("sim", "image", "build", "--tag", "vllm/vllm-openai:v0.7.2")
    assert built.returncode == 0, out(built)[-3000:]
    imported = hgxkit(
        "recipe",
        "import",
        str(RAY_POST),
        "--model-repo",
        "deepseek-ai/DeepSeek-R1",
        "--image",
        "vllm/vllm-openai:v0.7.2",
        "-o",
        str(recipe),
    )
    assert imported.returncode == 0, out(imported)
    assert "`--enable-reasoning` was not checked: vLLM 0.33 has no such option" in out(imported), out(imported)
    rendered = hgxkit("recipe", "render", str(recipe), "--rank", "1", "--head", "node1")
    assert "exec ray start --block --address=node1:6379" in rendered.stdout, out(rendered)
    result = deploy("Ray over two hosts", f"recipe={recipe}", "api_key=auto", "verify=false")
    text = out(result)
    assert result.returncode != 0, text[-4000:]
    assert "unrecognized arguments: --enable-reasoning" in text, text[-6000:]
    assert before  # the DP group served before; what a failed rollout of another recipe leaves: see the report


@pytest.fixture(scope="module")
def ray_example(cluster: Path) -> dict[str, object]:
    """vLLM's run_deepseek.sh imported unedited and deployed over both nodes (after the tests above)."""
    recipe, results = cluster / "r01.yaml", cluster / "ray-results"
    imported = hgxkit("recipe", "import", str(RAY_EXAMPLE), *RAY_EXAMPLE_OPTIONS, "-o", str(recipe))
    assert imported.returncode == 0, out(imported)
    first = deploy(
        "Ray example over two hosts: serve, verify",
        f"recipe={recipe}",
        "api_key=auto",
        f"results_dir={results}",
        RAY_EXAMPLE_ALLOW,
    )
    why = ""
    if first.returncode != 0:  # what the node saw: the client's log, the containers, the head's last lines
        why = node_sh(
            CLUSTER,
            "for f in $(find /var/lib/hgxkit/verify -name '*.log' 2>/dev/null); do echo \"== $f\"; "
            'tail -n 30 "$f"; done; ls -la /var/lib/hgxkit/verify/*/; c=$(docker ps -aq --filter '
            "label=hgxkit.serve); docker exec $c sh -c 'ls -laR /tmp/hgxkit-verify; tail -n 40 "
            "/tmp/hgxkit-verify/*/*.log'; journalctl --no-pager -n 60 -u 'hgxkit-verify*' 2>&1; "
            "docker ps -a; docker logs --tail 30 $c 2>&1 || true",
        )
    return {"recipe": recipe, "results": results, "first": first, "why": why}


def test_vllm_examples_ray_script_serves_tp8_pp2_over_two_nodes_verified_and_archived(ray_example) -> None:
    first = ray_example["first"]
    assert first.returncode == 0, out(first)[-3000:] + ray_example["why"]
    now = containers()
    assert {n: (c["rank"], c["running"]) for n, c in now.items()} == {"node1": ("0", "True"), "node2": ("1", "True")}
    head, worker = now["node1"]["args"], now["node2"]["args"]
    assert head[0] == "-c" and head[1].startswith("ray start --head ") and "--port=6379" in head[1], head
    assert head[3:6] == ["vllm", "serve", "--model"] and "--pipeline-parallel-size" in head, head
    assert worker == ["-c", f"exec ray start --block --address=hgxkit-sim-{CLUSTER}-node1:6379"], worker
    logs = node_sh(CLUSTER, f"docker logs {now['node1']['name']} 2>&1")
    assert "[simulated Ray] placement group of 16 GPU(s) ready over 2 node(s)" in logs, logs[-3000:]
    joined = node_sh(CLUSTER, f"docker logs {now['node2']['name']} 2>&1", node="node2")
    assert "this node joined the cluster at" in joined and "with 8 GPU(s)" in joined, joined[-2000:]
    env = node_sh(CLUSTER, f"docker inspect -f '{{{{json .Config.Env}}}}' {now['node1']['name']}")
    assert "VLLM_USE_V1=1" in json.loads(env), env  # the launch's own prefix, kept
    assert node_sh(CLUSTER, "curl -s -o /dev/null -w '%{http_code}' -m 30 http://127.0.0.1:8000/health") == "200"
    (run,) = [p for p in Path(ray_example["results"]).glob("node1/*") if p.is_dir()]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["simulated"] is True and summary["tool"] == "vllm bench serve", summary
    assert summary["cells"] and all(c["failed"] == 0 for c in summary["cells"])
    fingerprint = json.loads((run / "fingerprint.json").read_text())
    assert [(r["rank"], r["host"]) for r in fingerprint["node_group"]["ranks"]] == [(0, "node1"), (1, "node2")]
    assert (run / "members" / "node2.json").is_file()


def test_vllm_examples_ray_script_a_second_run_changes_nothing(ray_example) -> None:
    before = containers()
    again = deploy(
        "Ray example second run (no change)",
        f"recipe={ray_example['recipe']}",
        "api_key=auto",
        "verify=false",
        RAY_EXAMPLE_ALLOW,
    )
    assert again.returncode == 0, out(again)[-4000:]
    ops, changed, errors, unchanged = grand_total(again)
    assert (changed, errors) == (0, 0) and unchanged == ops, why_changed(again)
    assert containers() == before
