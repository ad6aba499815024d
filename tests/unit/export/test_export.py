"""`hgxkit recipe export`: the shipped recipes, a multi-node SGLang post, a vLLM post, a two-node vLLM recipe, a
LeaderWorkerSet of one-GPU pods (formats k04), vLLM's data parallelism over two hosts (corpus 022) and vLLM on a
Ray cluster (formats r01), exported to every engine and checked by that engine's own tools; each export imported
back to the same render and judged deployable under the same allowances.

Kubernetes: every built-in kind against the real OpenAPI schemas (`kubernetes-validate`, strict), the
LeaderWorkerSet against its published CRD schema (tests/fixtures/lws, from kubernetes-sigs/lws) and its pod
templates as PodTemplates. Compose: `docker-compose config` (Debian's docker-compose). SkyPilot:
`sky.Task.from_yaml` in SkyPilot's own venv ($HGXKIT_SKYPILOT_VENV, default /var/lib/hgxkit/skypilot: 460 MB,
kept out of the project's venv). Slurm: `bash -n` and shellcheck. A missing tool fails under CI=true (.ci/run
installs them) and skips elsewhere.
"""

from __future__ import annotations

import ast
import doctest
import functools
import gzip
import importlib.util
import json
import os
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from hgxkit.cli import main
from hgxkit.cli.export import TARGETS
from hgxkit.errors import InputError
from hgxkit.export.common import ExportOptions, export_groups
from hgxkit.export.kubernetes import k8s_word
from hgxkit.export.registry import EXPORTERS, export_recipe, write_export
from hgxkit.importing.importer import ImportOptions, import_post
from hgxkit.recipe.check import parallel_size
from hgxkit.recipe.danger import docker_size_bytes
from hgxkit.recipe.docker_options import canonical
from hgxkit.recipe.dump import recipe_hash
from hgxkit.recipe.judge import Allowances, judge
from hgxkit.recipe.read import load_recipe, parse_recipe_text
from hgxkit.recipe.render import render_recipe
from hgxkit.recipe.spec import parse_mount, parse_volume

ROOT = Path(__file__).resolve().parents[3]
POSTS = ROOT / "tests" / "fixtures" / "posts"
LWS_CRD = ROOT / "tests" / "fixtures" / "lws" / "leaderworkerset.x-k8s.io_leaderworkersets.yaml.gz"
# Kubernetes versions the manifests are checked against (kubernetes-validate has 1.25 to 1.37)
K8S_VERSIONS = ("1.31.0", "1.33.0")
K8S_VERSION = K8S_VERSIONS[-1]
RUN = "20261201-120000-ab12"


def _post(number: str):
    path = next(POSTS.glob(f"{number}-*.txt"))
    return import_post([(path.name, path.read_text())], ImportOptions()).recipe


def _manifest(name: str):
    path = POSTS / "formats" / name
    return import_post([(path.name, path.read_text())], ImportOptions()).recipe


# vLLM's examples/online_serving/run_deepseek.sh (formats r01) imported as tests/e2e/test_vllm_multinode.py imports
# it (RAY_EXAMPLE_OPTIONS: what the script leaves to its reader; test_the_ray_example_is_imported_as_the_e2e_does).
RAY_EXAMPLE = ImportOptions(
    fill=(
        ("/path/to/the/huggingface/home/on/this/node", "/data/models/DeepSeek-V3"),
        ("/path/to/the/model/in/the/container", "/models/DeepSeek-V3"),
    ),
    model_repo="deepseek-ai/DeepSeek-V3",
    image="vllm/vllm-openai:latest",
)
RAY_POST = POSTS / "formats" / "r01-vllm-run-deepseek-ray-docker.sh"

RECIPES = {
    "marlin": lambda: load_recipe(str(ROOT / "recipes" / "deepseek-v4-flash-dspark-marlin.yaml")),
    "flashinfer": lambda: load_recipe(str(ROOT / "recipes" / "deepseek-v4-flash-dspark-flashinfer.yaml")),
    "sglang-two-node": lambda: _post("005"),  # docker, --network=host, TP16 over two nodes
    "vllm": lambda: _post("008"),  # vllm/vllm-openai, the model as the image entrypoint's argument
    "vllm-two-node": lambda: load_recipe(str(ROOT / "tests" / "fixtures" / "export" / "vllm-two-node.yaml")),
    # a LeaderWorkerSet of one-GPU pods: one group on GPU 0 of each of two hosts, on the host network
    "lws-two-node": lambda: _manifest("k04-lws-sglang.yaml"),
    # vLLM's data parallelism over hosts (corpus 022, Kimi-K2: 16 DP ranks, 8 per host; node 1 `--headless
    # --data-parallel-start-rank 8`) and vLLM on a Ray cluster (TP8 x PP2 over two hosts)
    "vllm-dp-two-node": lambda: _post("022"),
    "vllm-ray-two-node": lambda: import_post([(RAY_POST.name, RAY_POST.read_text())], RAY_EXAMPLE).recipe,
}


def _tool(name: str) -> str:
    path = shutil.which(name)
    if not path:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {name} is not installed (hgxkit/sim/host.py installs Debian's package)")
        pytest.skip(f"needs Debian's {name} (apt-get install -y {name})")
    return path


# What a node would have to allow for each recipe, by name, as its inventory would: the multi-node ones run on the
# host's network, and SGLang's TP16 post serves on 0.0.0.0 without a key (its own choice).
ALLOWED = {
    "sglang-two-node": Allowances(docker_options=("--network=host",), unauthenticated=True),
    "vllm-two-node": Allowances(docker_options=("--network=host",), api_key="auto"),
    "lws-two-node": Allowances(docker_options=("--network=host",), unauthenticated=True),
    "vllm-dp-two-node": Allowances(docker_options=("--network=host",), api_key="auto"),
    # RAY_EXAMPLE_ALLOW of tests/e2e/test_vllm_multinode.py: what run_deepseek.sh runs with, allowed by name
    "vllm-ray-two-node": Allowances(
        docker_options=("--privileged", "host-system-mount", "--network=host"), api_key="auto"
    ),
}


def _allowances(key: str, bind: str = "127.0.0.1", allow: bool = False) -> Allowances:
    """What the node (and so the export) judges recipe `key` under."""
    key_auto = "auto" if RECIPES[key]().server.server_kind.api_key_env else None
    base = ALLOWED.get(key, Allowances(api_key=key_auto))
    return replace(base, bind_address=bind, unauthenticated=base.unauthenticated or allow)


def _export(key: str, target: str, tmp_path: Path, bind: str = "127.0.0.1", allow: bool = False, **options) -> Path:
    judged = judge(RECIPES[key](), _allowances(key, bind, allow))
    write_export(export_recipe(judged, target, ExportOptions(run_id=RUN, **options)), tmp_path)
    return tmp_path


# --- Kubernetes -------------------------------------------------------------------------------------------


@functools.cache  # a large CRD: read once, not once per manifest
def _lws_crd() -> dict:
    return yaml.load(gzip.decompress(LWS_CRD.read_bytes()), Loader=yaml.CSafeLoader)


def _lws_schema() -> dict:
    version = next(v for v in _lws_crd()["spec"]["versions"] if v["name"] == "v1")
    return version["schema"]["openAPIV3Schema"]


def _strict(schema: object) -> object:
    """The schema as the API server applies it under strict field validation (`kubectl apply`'s default since
    1.27: an unknown field is an error, not pruned): every object with listed properties closed, unless the CRD
    keeps unknown fields there."""
    if isinstance(schema, list):
        return [_strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: _strict(value) for key, value in schema.items()}
    closed = "properties" in out and not out.get("x-kubernetes-preserve-unknown-fields")
    if closed and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


@functools.cache
def _lws_strict() -> dict:
    return _strict(_lws_schema())  # type: ignore[return-value]


@functools.cache  # checking the large schema against its metaschema once, not once per manifest
def _lws_validator(strict: bool) -> jsonschema.protocols.Validator:
    schema = _lws_strict() if strict else _lws_schema()
    validator = jsonschema.validators.validator_for(schema)
    validator.check_schema(schema)
    return validator(schema)


def _validate_k8s(document: dict, version: str = K8S_VERSION) -> None:
    if document["kind"] != "LeaderWorkerSet":
        kubernetes_validate.validate(document, version, strict=True)
        return
    crd = _lws_crd()["spec"]
    served = [f"{crd['group']}/{v['name']}" for v in crd["versions"] if v["served"]]
    assert document["apiVersion"] in served, f"{document['apiVersion']}: the CRD serves {served}"
    _lws_validator(strict=True).validate(document)
    # The pod templates are x-kubernetes-preserve-unknown-fields in the CRD: checked as pods, strictly.
    for role in ("leaderTemplate", "workerTemplate"):
        template = document["spec"]["leaderWorkerTemplate"][role]
        pod_template = {
            "apiVersion": "v1",
            "kind": "PodTemplate",
            "metadata": {"name": role.lower()},
            "template": template,
        }
        kubernetes_validate.validate(pod_template, version, strict=True)


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("key", sorted(RECIPES))
def test_kubernetes_manifests_validate_against_the_real_schemas(key: str, version: str, tmp_path: Path) -> None:
    out = _export(key, "k8s", tmp_path)
    documents = list(yaml.safe_load_all((out / "kubernetes.yaml").read_text()))
    for document in documents:
        _validate_k8s(document, version)
    kinds = [d["kind"] for d in documents]
    multi = key.endswith("two-node")
    assert kinds == (["LeaderWorkerSet", "Service"] if multi else ["Deployment", "Service"] * (len(kinds) // 2))


def test_the_validators_refuse_a_broken_manifest(tmp_path: Path) -> None:
    documents = list(yaml.safe_load_all((_export("marlin", "k8s", tmp_path) / "kubernetes.yaml").read_text()))
    deployment = documents[0]
    deployment["spec"]["template"]["spec"]["containers"][0]["gpus"] = 4  # no such field
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, K8S_VERSION, strict=True)
    lws = next(
        d for d in yaml.safe_load_all((_export("vllm-two-node", "k8s", tmp_path) / "kubernetes.yaml").read_text())
    )
    lws["spec"]["leaderWorkerTemplate"]["size"] = "two"
    with pytest.raises(jsonschema.ValidationError):
        _lws_validator(strict=False).validate(lws)
    lws["spec"]["leaderWorkerTemplate"]["size"] = 2
    lws["spec"]["replica"] = 1  # a misspelt field: pruned by the schema alone, an error under strict validation
    _lws_validator(strict=False).validate(lws)
    with pytest.raises(jsonschema.ValidationError, match="'replica' was unexpected"):
        _lws_validator(strict=True).validate(lws)


def test_a_deployment_carries_gpus_model_shm_probes_and_provenance(tmp_path: Path) -> None:
    documents = list(yaml.safe_load_all((_export("marlin", "k8s", tmp_path) / "kubernetes.yaml").read_text()))
    deployment, service = documents[0], documents[1]
    pod = deployment["spec"]["template"]["spec"]
    server = pod["containers"][0]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H200"}
    # replaced by stopping first: a rolling update's second pod would wait for the old one's GPUs for ever
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    assert "hostIPC" not in pod  # Pod Security baseline: the ranks share the memory-backed /dev/shm below
    assert server["resources"] == {
        "requests": {"cpu": "36", "memory": "1985Gi"},  # test_export_kubernetes_resources.py: the arithmetic
        "limits": {"cpu": "36", "memory": "1985Gi", "nvidia.com/gpu": 4},
    }
    assert server["args"][:4] == ["sglang", "serve", "--trust-remote-code", "--model-path"]
    assert server["readinessProbe"]["httpGet"] == {"path": "/health_generate", "port": 30000}
    assert server["livenessProbe"]["httpGet"] == {"path": "/health", "port": 30000}
    assert {"name": "model", "mountPath": "/model", "readOnly": True} in server["volumeMounts"]
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "32Gi"}} in pod["volumes"]
    assert {"name": "model", "hostPath": {"path": "/data/models/deepseek-v4-flash-dspark", "type": "Directory"}} in pod[
        "volumes"
    ]
    annotations = deployment["metadata"]["annotations"]
    assert annotations["hgxkit.io/verified-by-run"] == RUN
    assert annotations["hgxkit.io/model-repo"] == "deepseek-ai/DeepSeek-V4-Flash-DSpark"
    assert annotations["hgxkit.io/recipe-hash"].startswith("sha256:")
    assert service["spec"]["ports"] == [{"name": "http", "port": 5000, "targetPort": 30000, "protocol": "TCP"}]


def test_a_model_pvc_replaces_the_host_path(tmp_path: Path) -> None:
    documents = list(
        yaml.safe_load_all((_export("marlin", "k8s", tmp_path, model_pvc="models") / "kubernetes.yaml").read_text())
    )
    volumes = documents[0]["spec"]["template"]["spec"]["volumes"]
    assert {"name": "model", "persistentVolumeClaim": {"claimName": "models", "readOnly": True}} in volumes


def test_a_leaderworkerset_gives_the_leader_address_and_the_worker_index(tmp_path: Path) -> None:
    lws = next(yaml.safe_load_all((_export("vllm-two-node", "k8s", tmp_path) / "kubernetes.yaml").read_text()))
    template = lws["spec"]["leaderWorkerTemplate"]
    leader = template["leaderTemplate"]["spec"]["containers"][0]
    worker = template["workerTemplate"]["spec"]["containers"][0]
    assert template["size"] == 2
    assert leader["image"] == "vllm/vllm-openai@sha256:" + "1" * 64
    assert "command" not in leader and "command" not in worker  # the image's entrypoint, `vllm serve`, runs them
    common = [
        "/model",
        "--served-model-name",
        "qwen3",
        "--tensor-parallel-size",
        "8",
        "--pipeline-parallel-size",
        "2",
        "--nnodes",
        "2",
        "--node-rank",
    ]
    tail = ["--master-addr", "$(LWS_LEADER_ADDRESS)", "--master-port", "29501", "--port", "8000"]
    assert leader["args"] == [*common, "0", *tail]
    assert worker["args"] == [*common, "$(LWS_WORKER_INDEX)", *tail, "--headless"]  # vLLM's worker flag
    assert "readinessProbe" in leader and "readinessProbe" not in worker
    # one group of `size` pods, restarted together: a server cannot go on with one of its ranks lost
    assert lws["spec"]["replicas"] == 1 and template["restartPolicy"] == "RecreateGroupOnPodRestart"
    hf = {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "qwen3-two-node-secrets", "key": "HF_TOKEN"}}}
    assert hf in leader["env"] and {"name": "NCCL_SOCKET_IFNAME", "value": "eth0"} in leader["env"]
    key = {
        "name": "VLLM_API_KEY",
        "valueFrom": {"secretKeyRef": {"name": "qwen3-two-node-secrets", "key": "VLLM_API_KEY", "optional": True}},
    }
    assert key in leader["env"]
    assert leader["resources"]["limits"]["nvidia.com/gpu"] == 8


def test_kubernetes_notation_expands_references_and_escapes_literal_dollars() -> None:
    assert k8s_word("--api-key=${KEY}") == "--api-key=$(KEY)"
    assert k8s_word("$HOME/x") == "$(HOME)/x"
    assert k8s_word("price$$(5)") == "price$$(5)"
    assert k8s_word("a$$b") == "a$b"


# --- compose ----------------------------------------------------------------------------------------------


def _compose_config(directory: Path, name: str, env: dict[str, str] | None = None) -> dict:
    result = subprocess.run(
        [_tool("docker-compose"), "-f", name, "config"],
        cwd=directory,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )
    assert result.returncode == 0, result.stderr
    return yaml.safe_load(result.stdout)


@pytest.mark.parametrize("key", sorted(RECIPES))
def test_compose_files_pass_docker_compose_config(key: str, tmp_path: Path) -> None:
    out = _export(key, "compose", tmp_path)
    names = sorted(p.name for p in out.glob("compose*.yaml"))
    assert names == (["compose.rank-1.yaml", "compose.yaml"] if key.endswith("two-node") else ["compose.yaml"])
    for name in names:
        config = _compose_config(out, name, {"HGXKIT_HEAD": "10.0.0.1"})
        assert config["services"]


def test_a_compose_service_pins_its_gpus_binds_loopback_and_mounts_the_model_read_only(tmp_path: Path) -> None:
    config = _compose_config(_export("marlin", "compose", tmp_path), "compose.yaml")
    service = config["services"]["deepseek-v4-flash-1"]
    devices = service["deploy"]["resources"]["reservations"]["devices"]
    assert devices == [{"driver": "nvidia", "capabilities": ["gpu"], "device_ids": ["4", "5", "6", "7"]}]
    assert service["ports"] == ["127.0.0.1:5001:30000/tcp"]  # docker-compose 1.29's normal form
    assert service["volumes"][0]["read_only"] is True
    assert service["ipc"] == "host" and service["shm_size"] == "32g"
    assert service["healthcheck"]["test"][-1].endswith("'http://127.0.0.1:30000/health_generate', timeout=10)")
    assert service["labels"]["hgxkit.io/verified-by-run"] == RUN


def test_an_env_file_the_recipe_reads_is_the_compose_services_env_file() -> None:
    text = (ROOT / "tests/fixtures/export/vllm-two-node.yaml").read_text()
    recipe = parse_recipe_text(
        text.replace("  - --ipc host\n", "  - --ipc host\n  - --env-file /srv/hgxkit/vllm.env\n")
    )
    allowed = Allowances(docker_options=("--network=host", "host-file-read"), api_key="auto")
    exported = export_recipe(judge(recipe, allowed), "compose", ExportOptions(run_id=RUN))
    assert yaml.safe_load(exported.files["compose.yaml"])["services"]["qwen3-0"]["env_file"] == ["/srv/hgxkit/vllm.env"]


def test_a_compose_service_is_what_docker_run_would_start() -> None:
    """Capabilities, a relative bind, a named volume, an IPv6 bind address, every GPU, and the health check on the
    head only (a worker serves no API)."""
    text = (ROOT / "tests/fixtures/export/vllm-two-node.yaml").read_text()
    options = "  - --ipc host\n  - --cap-add SYS_NICE\n  - -v ./cache:/root/.cache\n  - -v hf:/root/hf\n"
    recipe = parse_recipe_text(text.replace("  - --ipc host\n", options))
    allowed = Allowances(docker_options=("--network=host", "host-system-mount", "--cap-add"), api_key="auto")
    files = export_recipe(judge(recipe, allowed), "compose", ExportOptions(run_id=RUN)).files
    head, worker = (yaml.safe_load(files[n]) for n in ("compose.yaml", "compose.rank-1.yaml"))
    service = head["services"]["qwen3-0"]
    assert service["cap_add"] == ["SYS_NICE"]
    assert service["volumes"][:2] == [
        {"type": "bind", "source": "./cache", "target": "/root/.cache", "read_only": False},
        {"type": "volume", "target": "/root/hf", "read_only": False, "source": "hf"},
    ]
    assert head["volumes"] == {"hf": {}}
    gpus = {"driver": "nvidia", "capabilities": ["gpu"], "device_ids": [str(n) for n in range(8)]}
    assert service["deploy"]["resources"]["reservations"]["devices"] == [gpus]
    every = export_recipe(judge(RECIPES["vllm"](), _allowances("vllm")), "compose", ExportOptions()).files
    (alone,) = yaml.safe_load(every["compose.yaml"])["services"].values()  # `--gpus all`, no GPU groups
    assert alone["deploy"]["resources"]["reservations"]["devices"] == [
        {"driver": "nvidia", "capabilities": ["gpu"], "count": "all"}
    ]
    probe = "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=10)"
    assert service["healthcheck"] == {
        "test": ["CMD", "python3", "-c", probe],
        "interval": "30s",
        "timeout": "15s",
        "retries": 3,
        "start_period": "3600s",
    }
    assert "healthcheck" not in worker["services"]["qwen3-0"]
    ipv6 = export_recipe(judge(RECIPES["marlin"](), _allowances("marlin", bind="::1")), "compose", ExportOptions())
    assert yaml.safe_load(ipv6.files["compose.yaml"])["services"]["deepseek-v4-flash-0"]["ports"] == [
        "[::1]:5000:30000"
    ]


def test_compose_says_that_a_server_on_the_hosts_network_is_bound_by_its_own_flags() -> None:
    host = "network_mode host: the server's port is the host's; --bind does not apply"
    for key, said in (("vllm-two-node", True), ("marlin", False)):
        exported = export_recipe(judge(RECIPES[key](), _allowances(key)), "compose", ExportOptions(run_id=RUN))
        assert (host in exported.not_carried) == said, key


def test_compose_takes_secrets_and_the_head_from_the_environment_with_no_file_to_write(tmp_path: Path) -> None:
    out = _export("vllm-two-node", "compose", tmp_path / "two")
    text = (out / "compose.yaml").read_text()
    environment = yaml.safe_load(text)["services"]["qwen3-0"]["environment"]
    assert (environment["HF_TOKEN"], environment["VLLM_API_KEY"]) == (None, None)  # docker-compose up's own
    # the head's address is no secret: it is the rank line's
    for rank, name in enumerate(("compose.yaml", "compose.rank-1.yaml")):
        lines = (out / name).read_text().splitlines()
        assert "# secrets from the environment of docker-compose up: export HF_TOKEN VLLM_API_KEY" in lines
        assert f"# node rank {rank} of 2: run on that node with HGXKIT_HEAD=<rank 0's address>" in lines
    assert "# node rank" not in (_export("marlin", "compose", tmp_path / "one") / "compose.yaml").read_text()
    assert sorted(p.name for p in out.iterdir()) == ["compose.rank-1.yaml", "compose.yaml"]
    worker = _compose_config(out, "compose.rank-1.yaml", {"HGXKIT_HEAD": "10.9.8.7"})["services"]["qwen3-0"]
    assert worker["command"][-9:] == [
        "--node-rank",
        "1",
        "--master-addr",
        "10.9.8.7",
        "--master-port",
        "29501",
        "--port",
        "8000",
        "--headless",
    ]
    assert worker["ulimits"] == {"memlock": {"soft": -1, "hard": -1}}
    assert worker["network_mode"] == "host" and "ports" not in worker
    unset = subprocess.run(
        [_tool("docker-compose"), "-f", "compose.rank-1.yaml", "config"],
        cwd=out,
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "HGXKIT_HEAD"},
    )
    assert unset.returncode != 0 and "set HGXKIT_HEAD" in unset.stderr


def test_binding_beyond_loopback_needs_a_key_the_kind_can_take(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"\[exposure\] bind_address 0\.0\.0\.0 publishes the API"):
        _export("marlin", "compose", tmp_path, bind="0.0.0.0")
    out = _export("marlin", "compose", tmp_path, bind="0.0.0.0", allow=True)
    text = (out / "compose.yaml").read_text()
    assert "0.0.0.0:5000:30000" in text
    assert "# ALLOWED ON PURPOSE, allowed by allow_unauthenticated: the API on 0.0.0.0 takes no key" in text
    assert "10.1.2.3:8000:8000" in (_export("vllm", "compose", tmp_path, bind="10.1.2.3") / "compose.yaml").read_text()


# --- SkyPilot ---------------------------------------------------------------------------------------------

_SKY_LOAD = """
import json, sys
import sky
out = {}
for path in sys.argv[1:]:
    task = sky.Task.from_yaml(path)
    (resources,) = list(task.resources)
    out[path] = {"nodes": task.num_nodes, "accelerators": resources.accelerators, "image": resources.image_id,
                 "ports": resources.ports, "envs": task.envs, "secrets": task.to_yaml_config().get("secrets"), "run": task.run,
                 "setup": task.setup}
print(json.dumps(out))
"""


def _sky_python() -> str:
    venv = Path(os.environ.get("HGXKIT_SKYPILOT_VENV", "/var/lib/hgxkit/skypilot"))
    python = venv / "bin" / "python"
    if not python.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {python} is missing (.ci/run installs SkyPilot into its own venv)")
        pytest.skip(f"needs SkyPilot in {venv} (python3 -m venv {venv} && {venv}/bin/pip install skypilot)")
    return str(python)


def _sky_load(paths: list[Path]) -> dict:
    env = {**os.environ, "HOME": str(paths[0].parent)}  # SkyPilot writes its state under ~/.sky
    result = subprocess.run([_sky_python(), "-c", _SKY_LOAD, *map(str, paths)], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_skypilot_tasks_load_with_skypilots_own_parser(tmp_path: Path) -> None:
    paths = []
    for key in sorted(RECIPES):
        paths += sorted(_export(key, "skypilot", tmp_path / key).glob("skypilot-*.yaml"))
    broken = tmp_path / "broken.yaml"
    broken.write_text(paths[0].read_text().replace("num_nodes", "nodes") + "not_a_field: 1\n")
    loaded = _sky_load(paths)
    assert len(loaded) == len(paths) == 10
    two = loaded[str(tmp_path / "vllm-two-node" / "skypilot-qwen3-0.yaml")]
    assert (two["nodes"], two["accelerators"], two["ports"]) == (2, {"H200": 8}, ["8000"])
    assert two["image"] == {"null": "docker:vllm/vllm-openai@sha256:" + "1" * 64}  # SkyPilot's {region: image}
    assert two["secrets"] == ["secrets:HF_TOKEN", "secrets:VLLM_API_KEY"]  # null: no value here, given at launch
    assert two["envs"]["HGXKIT_VERIFIED_BY_RUN"] == RUN and two["envs"]["NCCL_SOCKET_IFNAME"] == "eth0"
    assert "--revision 0123456789abcdef0123456789abcdef01234567 --local-dir /model" in two["setup"]
    assert "exec vllm serve /model" in two["run"] and '--node-rank "${SKYPILOT_NODE_RANK}"' in two["run"]
    marlin = loaded[str(tmp_path / "marlin" / "skypilot-deepseek-v4-flash-1.yaml")]
    # SGLang takes no key from a secret and the recipe gives none: no port opened to the world
    assert (marlin["nodes"], marlin["accelerators"], marlin["ports"]) == (1, {"H200": 4}, None)
    refused = subprocess.run(
        [_sky_python(), "-c", _SKY_LOAD, str(broken)],
        capture_output=True,
        text=True,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    assert refused.returncode != 0 and "not_a_field" in refused.stderr


# --- Slurm ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", sorted(RECIPES))
def test_sbatch_scripts_pass_bash_n_and_shellcheck(key: str, tmp_path: Path) -> None:
    (script,) = _export(key, "slurm", tmp_path).glob("*.sbatch")
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True).returncode == 0
    checked = subprocess.run([_tool("shellcheck"), "-S", "warning", str(script)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout


def test_an_sbatch_script_runs_one_task_per_node_with_rank_and_head_from_slurm(tmp_path: Path) -> None:
    (script,) = _export("sglang-two-node", "slurm", tmp_path).glob("*.sbatch")
    text = script.read_text()
    assert [line for line in text.splitlines() if line.startswith("#SBATCH")] == [
        "#SBATCH --job-name=sglang_multinode1",
        "#SBATCH --nodes=2",
        "#SBATCH --ntasks-per-node=1",
        "#SBATCH --gpus-per-node=8",
        "#SBATCH --exclusive",
        "#SBATCH --time=7-00:00:00",
    ]
    assert 'HGXKIT_HEAD=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)' in text
    assert '--dist-init-addr "${HGXKIT_HEAD}:20000" --nnodes 2 --node-rank "${SLURM_NODEID}"' in text
    assert "HF_TOKEN" not in text.replace(" -e HF_TOKEN ", " ")  # the name only: its value from the task's env
    assert "until curl -fsS -o /dev/null --max-time 10 http://127.0.0.1:40000/health_generate; do" in text
    assert (
        "docker exec -e HF_HUB_OFFLINE=1 sglang-multinode1-0 python3 -m sglang.benchmark.serving --backend sglang"
        in text
    )
    assert ":/models/DeepSeek-V3:ro " in text and " -it " not in text


def test_the_sbatch_script_starts_both_groups_on_one_node_and_stops_them_with_the_job(tmp_path: Path) -> None:
    """Run the script's node function with stand-ins for docker, srun and scontrol: what each node would run."""
    (script,) = _export("marlin", "slurm", tmp_path).glob("*.sbatch")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.log"
    (bin_dir / "docker").write_text(f'#!/bin/sh\necho "docker $*" >> {log}\n')
    (bin_dir / "scontrol").write_text("#!/bin/sh\necho node1; echo node2\n")
    # bash, like srun, passes the exported function on (dash drops `BASH_FUNC_…` variables).
    (bin_dir / "srun").write_text('#!/bin/bash\nfor a; do last="$a"; done\nSLURM_NODEID=0 bash -c "$last"\n')
    (bin_dir / "curl").write_text("#!/bin/sh\nexit 0\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "SLURM_JOB_NODELIST": "node[1-2]",
        "SLURM_JOB_NUM_NODES": "1",
        "SLURM_SUBMIT_DIR": str(tmp_path),
    }
    result = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    calls = log.read_text().splitlines()
    runs = [c for c in calls if c.startswith("docker run")]
    runs.sort(key=lambda r: r.split("--name ")[1])  # both start at once
    assert [r.split("--name ")[1].split()[0] for r in runs] == ["deepseek-v4-flash-0", "deepseek-v4-flash-1"]
    assert all(" -d " not in r and "--restart" not in r for r in runs)
    assert "-p 127.0.0.1:5001:30000" in runs[1] and '--gpus "device=4,5,6,7"' in runs[1]
    assert "docker stop deepseek-v4-flash-0 deepseek-v4-flash-1" in calls  # the node's trap, when its task ends
    assert "docker rm deepseek-v4-flash-0 deepseek-v4-flash-1" in calls  # a next job reuses the names
    assert (
        sum(
            c.startswith("docker exec -e HF_HUB_OFFLINE=1 deepseek-v4-flash-") and "benchmark.serving" in c
            for c in calls
        )
        == 2
    )


# --- every target, every recipe -----------------------------------------------------------------------------


def test_every_export_names_the_image_the_model_and_the_run(tmp_path: Path) -> None:
    assert tuple(sorted(EXPORTERS)) == TARGETS  # the CLI's choices, kept without loading the exporters
    for target in EXPORTERS:
        out = _export("vllm-two-node", target, tmp_path / target)
        text = "".join(p.read_text() for p in sorted(out.iterdir()))
        assert "vllm/vllm-openai@sha256:" + "1" * 64 in text, target
        assert "Qwen/Qwen3-235B-A22B at 0123456789abcdef0123456789abcdef01234567" in text, target
        assert RUN in text, target


def test_a_rank_written_outside_the_rank_flag_is_refused() -> None:
    path = ROOT / "tests" / "fixtures" / "export" / "vllm-two-node.yaml"
    text = path.read_text().replace("  - --port 8000\n", "  - --port 8000\n  - --log-prefix 'node{{rank}}'\n")
    broken = parse_recipe_text(text, source=str(path))
    export_groups(RECIPES["vllm-two-node"](), ExportOptions())  # as written: the rank only in --node-rank
    with pytest.raises(InputError, match="group 0: the ranks' commands differ other than in --node-rank"):
        export_groups(broken, ExportOptions())


# --- round trip ------------------------------------------------------------------------------------------


def _renders(recipe) -> list[list[tuple]]:
    """What an export carries of every group's render at every rank: the image, the number of GPUs (a group's,
    else what its parallelism uses on a node: `--gpus all` for TP1 is one GPU) and the container's command word
    for word (the docker wrapper is the engine's own: bind address, `:ro`, env file)."""
    nodes = recipe.node_count()
    ranks = [dict(rank=r, head="10.0.0.1") for r in range(nodes)] if nodes > 1 else [{}]
    used = max(parallel_size(recipe) // nodes, 1)
    return [
        [
            (g.image, len(g.gpus) if g.gpus is not None else used, g.server_argv)
            for g in render_recipe(recipe, total_gpus=8, **rank)
        ]
        for rank in ranks
    ]


def _provenance(recipe) -> tuple:
    """What the export's `hgxkit.io/*` labels carry back: the name, the image by tag and digest, the model's commit."""
    image, model = recipe.image, recipe.model
    return recipe.name, image.reference, image.digest, model.repo_id, model.revision, model.local_dir


# Docker options that say how hgxkit runs the container, not what the server gets: the name, detaching, a
# terminal, removal, the restart policy (hgxkit starts and watches the container), labels, published ports (the
# inventory's bind address; the server's port is in its command) and the GPUs (compared by `_renders`).
_RUNNING = {
    "--name",
    "--detach",
    "--interactive",
    "--tty",
    "--rm",
    "--restart",
    "--label",
    "--publish",
    "--gpus",
}
FROM_ENVIRONMENT = "<from the environment>"


def _settings(recipe) -> list[dict[str, object]]:
    """What the container gets at every rank and group, as the engine applies it: environment (a secret as "from
    the environment" however written), mounts by target, /dev/shm in bytes, namespaces and privileges, ulimits."""
    nodes = recipe.node_count()
    ranks = [dict(rank=r, head="10.0.0.1") for r in range(nodes)] if nodes > 1 else [{}]
    out = []
    for rank in ranks:
        for group in render_recipe(recipe, total_gpus=8, **rank):
            found: dict[str, object] = {}
            for entry in group.options:
                for use in entry.uses:
                    name, value = canonical(use.option.name), use.value or ""
                    if name in _RUNNING:
                        continue
                    if name == "--env":
                        key, equals, text = value.partition("=")
                        unset = not equals or text in (f"${{{key}}}", f"${key}")
                        found[f"env {key}"] = FROM_ENVIRONMENT if unset else text
                    elif name in ("--volume", "--mount"):
                        mount = parse_volume(value) if name == "--volume" else parse_mount(value)
                        found[f"mount {mount.target}"] = (mount.source, mount.read_only)
                    elif name == "--shm-size":
                        found["shm"] = docker_size_bytes(value)
                    elif name == "--ulimit":
                        limit, _, size = value.partition("=")
                        soft, _, hard = size.partition(":")
                        found[f"ulimit {limit}"] = (soft, hard or soft)
                    else:
                        found[name] = (found.get(name, ()) or ()) + (value,)  # type: ignore[operator]
            out.append(found)
    return out


def _settings_lost(recipe, back, notes: list[str], target: str) -> list[str]:
    """Each setting of `recipe`'s containers that `back` (its export imported back) does not have the same, and
    the export did not name as not carried; and each setting `back` has that `recipe` did not (the API key the
    export passes from the environment aside)."""
    model = recipe.model.mount_point
    key_env = recipe.server.server_kind.api_key_env
    lost = []
    for before, after in zip(_settings(recipe), _settings(back), strict=True):
        for name, value in before.items():
            again = after.get(name)
            if name == f"mount {model}" and again is not None:
                # the model is mounted read-only either way; SkyPilot's task downloads it into the container
                value, again = value[0], again[0]  # type: ignore[index]
                if target == "skypilot":
                    continue
            if again == value:
                continue
            kind, _, what = name.partition(" ")
            # a note names the variable, the mount's source or target, the option, or all ulimits at once
            words = {"env": [what], "mount": [what, value[0]], "ulimit": ["ulimit"]}.get(kind, [kind])  # type: ignore[index]
            if not any(word and word in note for word in words for note in notes):
                lost.append(f"{name}: {value!r} came back as {again!r}, and the export does not say so")
        lost += [f"{name}: {after[name]!r} added" for name in after.keys() - before.keys() if name != f"env {key_env}"]
    return lost


@pytest.mark.parametrize(
    "target,file",
    [("compose", "compose.yaml"), ("k8s", "kubernetes.yaml"), ("skypilot", "skypilot-*.yaml"), ("slurm", "*.sbatch")],
)
@pytest.mark.parametrize("key", sorted(RECIPES))
def test_an_export_imports_back_to_the_same_render(key: str, target: str, file: str, tmp_path: Path, capsys) -> None:
    recipe = RECIPES[key]()
    out = _export(key, target, tmp_path)
    imported = tmp_path / "imported.yaml"
    exported = sorted(out.glob(file))  # SkyPilot: one task per GPU group, imported together as the groups
    assert exported
    # `hgxkit recipe import` in this process: a process per case cost each about a second of start-up
    assert main(["recipe", "import", *map(str, exported), "-o", str(imported)]) == 0, capsys.readouterr().err
    back = load_recipe(str(imported))
    assert _renders(back) == _renders(recipe)
    judge(back, _allowances(key))  # deployable: what `recipe check` and a node judge, under the same allowances
    notes = export_recipe(judge(recipe, _allowances(key)), target, ExportOptions(run_id=RUN)).not_carried
    assert _settings_lost(recipe, back, notes, target) == []
    if target == "slurm":  # the Slurm importer takes the render; it does not read the hgxkit.io labels back yet
        return
    if target == "skypilot":  # the task downloads the model into the container: the host's directory is not carried
        assert _provenance(back)[:5] == _provenance(recipe)[:5]
    else:
        assert _provenance(back) == _provenance(recipe)
    assert back.source.notes.endswith(
        f"Exported by hgxkit from recipe {recipe.name} ({recipe_hash(recipe)}); verified by run {RUN}."
    )
    # SkyPilot opens each task's own server port: the host port base is not carried (the export says so)
    if recipe.groups is not None and recipe.groups.port_base is not None and target != "skypilot":
        assert back.groups.port_base == recipe.groups.port_base  # compose: the ports; Kubernetes: each Service's


def test_an_edited_export_keeps_the_files_own_image_and_says_so(tmp_path: Path) -> None:
    out = _export("vllm-two-node", "k8s", tmp_path)
    text = (out / "kubernetes.yaml").read_text()
    edited = text.replace("image: vllm/vllm-openai@sha256:" + "1" * 64, "image: vllm/vllm-openai:v0.40.0")
    outcome = import_post([("kubernetes.yaml", edited)], ImportOptions())
    assert (outcome.recipe.image.reference, outcome.recipe.image.digest) == ("vllm/vllm-openai:v0.40.0", None)
    assert any(
        "the file runs vllm/vllm-openai:v0.40.0, not the exported vllm/vllm-openai@sha256:1111…" in n
        for n in outcome.notes
    )


def test_two_deployments_of_a_manifest_are_gpu_groups_on_the_ports_of_their_services() -> None:
    """Any manifest, not only hgxkit's: two one-pod Deployments asking 4 GPUs each, each with a Service."""

    def deployment(name: str, port: int) -> str:
        return f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}}}
spec:
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers:
      - name: server
        image: vllm/vllm-openai:v0.9.0
        args: [--model, org/m, --tensor-parallel-size, "4"]
        ports: [{{containerPort: 8000}}]
        resources: {{limits: {{nvidia.com/gpu: 4}}}}
---
apiVersion: v1
kind: Service
metadata: {{name: {name}}}
spec:
  selector: {{app: {name}}}
  ports: [{{port: {port}, targetPort: 8000}}]
"""

    text = deployment("a", 9000) + "---\n" + deployment("b", 9001)
    recipe = import_post([("two.yaml", text)], ImportOptions()).recipe
    assert (recipe.groups.explicit, recipe.groups.port_base) == (((0, 1, 2, 3), (4, 5, 6, 7)), 9000)


# --- docstring examples -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["registry", "common", "compose", "kubernetes", "pod_resources", "pd_router", "skypilot", "slurm", "slurm_pyxis"],
)
def test_docstring_examples(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    module = importlib.import_module(f"hgxkit.export.{name}")
    monkeypatch.chdir(ROOT)  # examples read recipes/… relative to the repository
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert (result.failed, result.attempted > 0) == (0, True)


def test_the_ray_example_is_imported_as_the_e2e_does() -> None:
    """RAY_EXAMPLE and the Ray recipe's allowances are tests/e2e/test_vllm_multinode.py's RAY_EXAMPLE_OPTIONS and
    RAY_EXAMPLE_ALLOW (read from its source: the e2e module needs the simulator to import)."""
    tree = ast.parse((ROOT / "tests" / "e2e" / "test_vllm_multinode.py").read_text())
    values = {
        target.id: ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name) and target.id in ("RAY_EXAMPLE_OPTIONS", "RAY_EXAMPLE_ALLOW")
    }
    words = list(values["RAY_EXAMPLE_OPTIONS"])
    options = dict(zip(words[::2], words[1::2], strict=True))
    fills = tuple(tuple(w.split("=", 1)) for flag, w in zip(words[::2], words[1::2], strict=True) if flag == "--fill")
    assert (fills, options["--model-repo"], options["--image"]) == (
        RAY_EXAMPLE.fill,
        RAY_EXAMPLE.model_repo,
        RAY_EXAMPLE.image,
    )
    allowed = values["RAY_EXAMPLE_ALLOW"].removeprefix("allow_docker_options=")
    assert tuple(json.loads(allowed)) == ALLOWED["vllm-ray-two-node"].docker_options


def test_data_parallel_workers_start_headless_at_their_first_rank_on_every_target(tmp_path: Path) -> None:
    """The head runs DP ranks 0-7 and the API server; the other host `--headless --data-parallel-start-rank 8`."""
    tail = ["--headless", "--data-parallel-start-rank", "8"]
    lws = next(yaml.safe_load_all((_export("vllm-dp-two-node", "k8s", tmp_path / "k8s") / "kubernetes.yaml").open()))
    template = lws["spec"]["leaderWorkerTemplate"]
    leader = template["leaderTemplate"]["spec"]["containers"][0]["args"]
    worker = template["workerTemplate"]["spec"]["containers"][0]["args"]
    assert worker == [*leader, *tail] and "--headless" not in leader
    assert leader[leader.index("--data-parallel-address") + 1] == "$(LWS_LEADER_ADDRESS)"
    compose = _export("vllm-dp-two-node", "compose", tmp_path / "compose")
    rank1 = _compose_config(compose, "compose.rank-1.yaml", {"HGXKIT_HEAD": "10.0.0.1"})["services"]
    assert next(iter(rank1.values()))["command"][-3:] == tail
    (script,) = _export("vllm-dp-two-node", "slurm", tmp_path / "slurm").glob("*.sbatch")
    assert "--tool-call-parser kimi_k2 --headless --data-parallel-start-rank 8 &" in script.read_text()
    (task,) = _export("vllm-dp-two-node", "skypilot", tmp_path / "sky").glob("skypilot-*.yaml")
    run = yaml.safe_load(task.read_text())["run"]
    assert "--tool-call-parser kimi_k2 --headless --data-parallel-start-rank 8\n" in run


def _dp_over(hosts: int):
    """Corpus 022 with its 8 DP ranks per host spread over `hosts` hosts."""
    recipe = RECIPES["vllm-dp-two-node"]()
    size = ("--data-parallel-size", str(8 * hosts))
    args = tuple(size if entry[0] == "--data-parallel-size" else entry for entry in recipe.server.args)
    return replace(recipe, server=replace(recipe.server, args=args), groups=replace(recipe.groups, nodes=hosts))


def test_data_parallelism_over_four_hosts_computes_each_workers_first_rank(tmp_path: Path) -> None:
    """A shell computes rank x 8 (Slurm, SkyPilot); compose writes each rank's file; a LeaderWorkerSet, whose one
    worker template Kubernetes cannot compute it in, refuses by name."""
    judged = judge(_dp_over(4), ALLOWED["vllm-dp-two-node"])
    files = export_recipe(judged, "compose", ExportOptions()).files
    assert sorted(files) == ["compose.rank-1.yaml", "compose.rank-2.yaml", "compose.rank-3.yaml", "compose.yaml"]
    assert "- --data-parallel-start-rank\n    - '24'" in files["compose.rank-3.yaml"]
    (script,) = export_recipe(judged, "slurm", ExportOptions()).files.values()
    assert '--headless --data-parallel-start-rank "$((SLURM_NODEID * 8))" &' in script
    (task,) = export_recipe(judged, "skypilot", ExportOptions()).files.values()
    assert '--headless --data-parallel-start-rank "$((SKYPILOT_NODE_RANK * 8))"' in yaml.safe_load(task)["run"]
    path = tmp_path / "job.sbatch"
    path.write_text(script)
    checked = subprocess.run([_tool("shellcheck"), "-S", "warning", str(path)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout
    refusal = (
        "kimi-k2-instruct: group 0: data parallelism over 4 hosts: a LeaderWorkerSet starts every worker from one "
        "template, "
        "and each worker's first DP rank (its index x 8) is a product Kubernetes cannot write into its arguments; "
        "export it over 2 hosts, or --to compose, slurm or skypilot"
    )
    with pytest.raises(InputError, match=f"^{re.escape(refusal)}$"):
        export_recipe(judged, "k8s", ExportOptions())


@pytest.mark.parametrize("key", [k for k in sorted(RECIPES) if k.endswith("two-node")])
def test_a_leaderworkersets_service_selects_its_leader_alone(key: str, tmp_path: Path) -> None:
    """The server answers on the leader; a worker rank has no API. The Service selects the leader by LWS's own
    name label and the role, as LWS's documentation does."""
    lws, service = yaml.safe_load_all((_export(key, "k8s", tmp_path) / "kubernetes.yaml").read_text())
    template = lws["spec"]["leaderWorkerTemplate"]
    leader, worker = (template[role]["metadata"]["labels"] for role in ("leaderTemplate", "workerTemplate"))
    name = lws["metadata"]["name"]
    assert service["spec"]["selector"] == {"leaderworkerset.sigs.k8s.io/name": name, "role": "leader"}
    assert leader == {**lws["metadata"]["labels"], "role": "leader"}
    assert worker == {**lws["metadata"]["labels"], "role": "worker"}


def test_on_a_ray_cluster_the_head_starts_ray_then_the_server_and_every_worker_joins_it(tmp_path: Path) -> None:
    lws = next(yaml.safe_load_all((_export("vllm-ray-two-node", "k8s", tmp_path / "k8s") / "kubernetes.yaml").open()))
    template = lws["spec"]["leaderWorkerTemplate"]
    leader = template["leaderTemplate"]["spec"]["containers"][0]
    worker = template["workerTemplate"]["spec"]["containers"][0]
    start = 'ray start --head --node-ip-address=$(LWS_LEADER_ADDRESS) --port=6379 && exec "$@"'
    assert (leader["command"], leader["args"][:5]) == (["/bin/bash"], ["-c", start, "ray-head", "vllm", "serve"])
    assert "--distributed-executor-backend" in leader["args"]
    assert worker["args"] == ["-c", "exec ray start --block --address=$(LWS_LEADER_ADDRESS):6379"]
    assert leader["resources"] == worker["resources"] and leader["resources"]["limits"]["nvidia.com/gpu"] == 8
    (task,) = _export("vllm-ray-two-node", "skypilot", tmp_path / "sky").glob("skypilot-*.yaml")
    run = yaml.safe_load(task.read_text())["run"]
    assert "exec /bin/bash -c 'ray start --head --node-ip-address='\"${HGXKIT_HEAD}\"' --port=6379" in run
    assert 'exec /bin/bash -c "exec ray start --block --address=${HGXKIT_HEAD}:6379"' in run
