"""A one-node prefill/decode split exported to Kubernetes: each side a Deployment and a Service on one node, the
kind's router in PD mode as a Deployment and a Service naming the sides by their Services, every manifest valid
against the real schemas, the router's wait run for real, the refusals by name, and the export imported back to the
same split."""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml
from test_export import K8S_VERSIONS, RUN, _renders, _validate_k8s
from test_export_pd import ROUTERS, SPLITS

from hgxkit.errors import InputError
from hgxkit.export.common import ExportOptions, provenance
from hgxkit.export.kubernetes import MANIFEST
from hgxkit.export.registry import SPLIT_TARGETS, export_recipe, write_export
from hgxkit.recipe.judge import Allowances, judge
from hgxkit.recipe.read import load_recipe, parse_recipe_text
from hgxkit.recipe.spec import Recipe

ROOT = Path(__file__).resolve().parents[3]
# On Kubernetes the sides listen beyond loopback (their Services and the kubelet's probes reach the node's address)
# and the router on its pod's address, neither with a key: a trusted network's allowances.
OPEN = Allowances(docker_options=("--network=host",), unauthenticated=True)
LISTEN = ("--host", "0.0.0.0", "--port", "30000", "--prometheus-host", "127.0.0.1")


def _open(kind: str) -> Recipe:
    return parse_recipe_text(SPLITS[kind].read_text().replace("--host 127.0.0.1", "--host 0.0.0.0"))


def _documents(kind: str, allowances: Allowances = OPEN) -> list[dict]:
    exported = export_recipe(judge(_open(kind), allowances), "k8s", ExportOptions(run_id=RUN))
    return list(yaml.safe_load_all(exported.files["kubernetes.yaml"]))


@pytest.mark.parametrize("kind", sorted(SPLITS))
def test_the_header_names_the_routers_service_and_that_nothing_takes_a_key(kind: str) -> None:
    judged, options = judge(_open(kind), OPEN), ExportOptions(run_id=RUN)
    exported = export_recipe(judged, "k8s", options)
    name = f"{_open(kind).name}-router"
    # the export's provenance as every export's, then where requests go and that no one takes a key
    header = [
        *provenance(judged, options).comment(),
        f"prefill/decode split: send requests to the router's Service, {name}:30000 (the groups alone fail)",
        "ALLOWED ON PURPOSE, allowed by allow_unauthenticated: the router and the sides take no API key, each behind "
        "a ClusterIP Service that every pod of the cluster reaches",
    ]
    assert exported.files["kubernetes.yaml"].startswith("".join(f"# {line}\n" for line in header))
    image = ROUTERS[kind][0]
    assert f"{image}: the router's image by its tag (the deploy runs the digest it pulled)" in exported.not_carried
    # vLLM's key variable is every group's optional Secret reference, gone from a split's (its router sends none)
    key = _open(kind).server.server_kind.api_key_env
    assert key is None or key not in exported.files["kubernetes.yaml"]
    assert (key is None) != any(
        line.startswith(f"{key}: a split's groups serve without a key") for line in exported.not_carried
    )


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("kind", sorted(SPLITS))
def test_a_split_is_three_deployments_and_services_that_validate(kind: str, version: str) -> None:
    documents = _documents(kind)
    assert [d["kind"] for d in documents] == ["Deployment", "Service"] * 3
    for document in documents:
        _validate_k8s(document, version)


@pytest.mark.parametrize("kind", sorted(SPLITS))
def test_the_sides_share_one_node_and_the_router_names_their_services(kind: str) -> None:
    prefill, prefill_service, decode, decode_service, router, router_service = _documents(kind)
    recipe = _open(kind)
    for index, side in enumerate((prefill, decode)):
        server = side["spec"]["template"]["spec"]["containers"][0]
        assert server["resources"]["limits"]["nvidia.com/gpu"] == 4
        own = [word for entry in recipe.groups.server_args[index] for word in entry]
        assert server["args"][-len(own) :] == own  # the side's own flags, after the server's
    # required on one node (the decode fetches the KV at the prefill's node), the router beside them
    pods = [d["spec"]["template"]["spec"] for d in (prefill, decode, router)]
    (term,) = pods[0]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchExpressions"] == [{"key": "hgxkit.io/group", "operator": "Exists"}]
    assert all(pod["affinity"] == pods[0]["affinity"] for pod in pods)
    assert [pod.get("hostNetwork") for pod in pods] == [True, True, None]
    ports = [s["spec"]["ports"][0]["port"] for s in (prefill_service, decode_service)]
    urls = [f"http://{d['metadata']['name']}:{port}" for d, port in zip((prefill, decode), ports, strict=True)]
    image, entrypoint, program, workers = ROUTERS[kind]
    # The router's Deployment and Service whole: no GPU (the router holds no model), ready on its own /readiness,
    # after an init container that waits, in the sides' image (python3 is there, pulled on the node), for each
    # side's Service to answer; labelled as the router of its recipe (the hash short, as a label value takes it).
    name = f"{recipe.name}-router"
    recipe_keys = ("hgxkit.io/recipe", "hgxkit.io/recipe-hash")
    meta = {
        "name": name,
        "labels": {
            "app.kubernetes.io/name": name,
            "hgxkit.io/router": "prefill-decode",
            **{k: prefill["metadata"]["labels"][k] for k in recipe_keys},
        },
        "annotations": {
            "hgxkit.io/router": "prefill-decode",
            **{k: prefill["metadata"]["annotations"][k] for k in recipe_keys},
        },
    }
    assert len(meta["labels"]["hgxkit.io/recipe-hash"]) == 16
    wait = pods[2]["initContainers"][0]["command"][2]  # the program: run in the test below
    health = [f"{url}{recipe.server.server_kind.health_path}" for url in urls]
    container = {
        "name": "router",
        "image": image,
        "command": entrypoint,
        "args": [*program, *_served(workers, ports, urls), *LISTEN],
        "ports": [{"name": "http", "containerPort": 30000, "protocol": "TCP"}],
        "readinessProbe": {
            "httpGet": {"path": "/readiness", "port": 30000},
            "periodSeconds": 10,
            "timeoutSeconds": 10,
            "failureThreshold": 3,
        },
    }
    image_of_sides = pods[0]["containers"][0]["image"]
    assert router == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta,
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
            "template": {
                "metadata": {"labels": meta["labels"], "annotations": meta["annotations"]},
                "spec": {
                    "affinity": pods[0]["affinity"],
                    "initContainers": [
                        {"name": "wait-for-sides", "image": image_of_sides, "command": ["python3", "-c", wait, *health]}
                    ],
                    "containers": [container],
                },
            },
        },
    }
    assert router_service == {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {
            "type": "ClusterIP",
            "selector": {"app.kubernetes.io/name": name},
            "ports": [{"name": "http", "port": 30000, "targetPort": 30000, "protocol": "TCP"}],
        },
    }


@pytest.mark.parametrize("kind", sorted(SPLITS))
def test_the_prefills_service_serves_its_bootstrap_port_where_its_kind_has_one(kind: str) -> None:
    prefill, prefill_service, _, decode_service, _, _ = _documents(kind)
    split = _open(kind).server.server_kind.prefill_decode
    assert split is not None
    extra = [p for p in prefill_service["spec"]["ports"] if p["name"] != "http"]
    declared = [p for p in prefill["spec"]["template"]["spec"]["containers"][0]["ports"] if p["name"] != "http"]
    if split.bootstrap_flag is None:  # vLLM's NIXL: the decode reaches the prefill's side channel on the node
        assert extra == declared == []
    else:
        port = split.default_bootstrap_port
        assert extra == [{"name": "bootstrap", "port": port, "targetPort": "bootstrap", "protocol": "TCP"}]
        assert declared == [{"name": "bootstrap", "containerPort": port, "protocol": "TCP"}]
    assert [p["name"] for p in decode_service["spec"]["ports"]] == ["http"]


def _served(workers: list[str], ports: list[int], urls: list[str]) -> list[str]:
    """The one-node export's worker arguments with each side's loopback URL its Service's."""
    by_url = {f"http://127.0.0.1:{port}": url for port, url in zip(ports, urls, strict=True)}
    return [by_url.get(word, word) for word in workers]


class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()

    def log_message(self, *_: object) -> None:
        pass


def test_the_routers_wait_ends_once_every_side_answers_and_not_before(tmp_path: Path) -> None:
    """The init container's program, run here: it returns once both URLs answer, and is still waiting while one
    side is refused (no server on its port)."""
    (_, _, _, _, router, _) = _documents("sglang")
    wait = router["spec"]["template"]["spec"]["initContainers"][0]["command"]
    server = http.server.HTTPServer(("127.0.0.1", 0), _Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        up = f"http://127.0.0.1:{server.server_port}/health"
        done = subprocess.run([sys.executable, *wait[1:3], up, up], capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        with pytest.raises(subprocess.TimeoutExpired):
            subprocess.run([sys.executable, *wait[1:3], up, "http://127.0.0.1:9/health"], timeout=3)
    finally:
        server.shutdown()


def test_a_split_kubernetes_cannot_reach_or_that_would_drop_a_key_is_refused_by_name() -> None:
    hosts = Allowances(docker_options=("--network=host",))
    with pytest.raises(InputError) as caught:
        export_recipe(judge(load_recipe(str(SPLITS["sglang"])), hosts), "k8s", ExportOptions())
    assert (
        "\n  - [pd-export-reach] the split's servers listen on 127.0.0.1, which neither each side's Service nor the "
        "kubelet's probes reach (each side's pod is on its node's network); set --host 0.0.0.0 in server.args (with "
        "--allow-unauthenticated on a trusted network)"
    ) in caught.value.message
    assert (caught.value.message + "\n").count(
        "\n  - [pd-export-exposure] the router would listen on 0.0.0.0 and takes no API key in an export; pass "
        "--allow-unauthenticated on a trusted network (the router's ClusterIP Service reaches every pod of the cluster)\n"
    ) == 1
    # vLLM's key variable passed on from the Secret (what `recipe export` asks of every vLLM export) is dropped with
    # a note; a key the recipe gives its sides itself is refused, as the deploy refuses a keyed vLLM split
    auto = Allowances(docker_options=("--network=host",), unauthenticated=True, api_key="auto")
    assert "VLLM_API_KEY" not in export_recipe(judge(_open("vllm"), auto), "k8s", ExportOptions()).files[MANIFEST]
    keyed = parse_recipe_text(
        SPLITS["vllm"]
        .read_text()
        .replace("--host 127.0.0.1", "--host 0.0.0.0")
        .replace("  - --network=host\n", "  - --network=host\n  - -e VLLM_API_KEY\n")
    )
    with pytest.raises(InputError, match=r"\[pd-router-key\] qwen3-vllm-pd-one-node splits prefill and decode behind "):
        export_recipe(judge(keyed, auto), "k8s", ExportOptions())


def test_a_side_named_as_the_routers_deployment_is_refused_by_name() -> None:
    # The router's Deployment and Service are the recipe's name and "router"; a side's name template can give one
    # side that very name (recipe pd0, template pd{{group}}-router: side 0 is pd0-router).
    clash = parse_recipe_text(
        SPLITS["sglang"]
        .read_text()
        .replace("--host 127.0.0.1", "--host 0.0.0.0")
        .replace("name: deepseek-v4-flash-pd-one-node", "name: pd0")
        .replace("name_template: deepseek-v4-flash-pd-{{group}}", "name_template: pd{{group}}-router")
    )
    with pytest.raises(InputError) as caught:
        export_recipe(judge(clash, OPEN), "k8s", ExportOptions())
    assert caught.value.message == (
        "pd0: the split's router cannot be exported:\n  - [pd-export-name] a group is named pd0-router, the router's; "
        "rename it"
    )


@pytest.mark.parametrize("target", SPLIT_TARGETS)
def test_a_split_laid_over_hosts_is_refused_by_name_by_every_target_that_writes_its_router(target: str) -> None:
    judged = judge(load_recipe(str(ROOT / "tests/fixtures/pd/dspark-pd-two-nodes.yaml")), OPEN)
    with pytest.raises(
        InputError,
        match=r"\[pd-export-hosts\] the split is laid over 2 hosts \(groups\.hosts\); export a split on one node$",
    ):
        export_recipe(judged, target, ExportOptions())


@pytest.mark.parametrize("kind", sorted(SPLITS))
def test_the_kubernetes_export_imports_back_to_the_same_split(kind: str, tmp_path: Path) -> None:
    recipe = _open(kind)
    write_export(export_recipe(judge(recipe, OPEN), "k8s", ExportOptions(run_id=RUN)), tmp_path / "out")
    back_path = tmp_path / "back.yaml"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "hgxkit",
            "recipe",
            "import",
            str(tmp_path / "out" / "kubernetes.yaml"),
            "-o",
            str(back_path),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0, result.stderr
    assert "skipped container router" in result.stderr and "skipped init container wait-for-sides" in result.stderr
    back = load_recipe(str(back_path))
    assert _renders(back) == _renders(recipe)  # the router is not a group: it comes from `--data router=true`
    assert back.groups.server_args == recipe.groups.server_args
    judge(back, OPEN)  # the same split, deployable under the same allowances
