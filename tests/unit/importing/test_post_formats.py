"""Compose files and Kubernetes manifests (and the accelerators refused by name) imported as `docker run`s.

The real published files (tests/fixtures/posts/formats, index.yaml) are imported unedited and must give exactly
the recipe fields or the refusal the index records; the small cases below pin each translation rule of
`hgxkit.importing.compose` and `hgxkit.importing.kubernetes` with the exact words it gives.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
import yaml

from hgxkit.errors import InputError
from hgxkit.importing.importer import ImportOptions, import_post
from hgxkit.importing.outcome import ImportOutcome
from hgxkit.recipe.render import render_recipe

FORMATS = Path(__file__).resolve().parents[2] / "fixtures" / "posts" / "formats"
INDEX = yaml.safe_load((FORMATS / "index.yaml").read_text())
ENTRIES = {entry["file"]: entry for entry in INDEX}


def imported(name: str, text: str, **options: object) -> ImportOutcome:
    return import_post([(name, text)], ImportOptions(**options))  # type: ignore[arg-type]


def refusal(name: str, text: str, **options: object) -> str:
    with pytest.raises(InputError) as caught:
        imported(name, text, **options)
    return caught.value.message


def docker_words(outcome: ImportOutcome) -> str:
    return " ".join(w for entry in outcome.recipe.docker.entries for w in entry.words)


# --- the real published files ---


def test_index_lists_every_file_and_counts_by_format() -> None:
    assert sorted(p.name for p in FORMATS.iterdir() if p.name != "index.yaml") == sorted(ENTRIES)
    counts = Counter(entry["format"] for entry in INDEX)
    assert counts == {
        "compose": 6,
        "kubernetes": 19,
        "docker run": 6,
        "bare launch": 5,
        "slurm": 7,
        "vllm ray": 8,
        "vllm data parallel": 2,
        "skypilot": 5,
        "dstack": 6,
        "helm values": 6,
    }
    assert Counter(entry["expect"] for entry in INDEX) == {"import": 21, "refuse": 49}
    # a file at a commit, or an issue or pull request thread (the post is its text)
    assert all(
        re.match(r"https://github\.com/[^/]+/[^/]+/(?:blob/[0-9a-f]{40}/|issues/\d+$|pull/\d+$)", entry["source"])
        for entry in INDEX
    )


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_published_file_imports_or_refuses_exactly(name: str) -> None:
    entry = ENTRIES[name]
    text = (FORMATS / name).read_text()
    options = entry.get("options", {})
    if entry["expect"] == "refuse":
        message = refusal(name, text, **options)
        if "refusal" in entry:  # a first-contact entry names a part of the refusal, written before the import ran
            assert message.startswith(name) and "\n" not in message and entry["refusal"] in message, message
        else:
            assert message == entry["message"]
        return
    outcome = imported(name, text, **options)
    recipe = outcome.recipe
    assert recipe.server.kind == entry["server_kind"]
    if "recipe" in entry:  # a first-contact entry names the fields the import must give
        _gives_the_named_fields(outcome, entry["recipe"])
        return
    assert recipe.image.reference == entry["image"]
    assert recipe.model.repo_id == entry["model"]
    assert docker_words(outcome) == entry["docker"]
    assert " ".join(recipe.server.words()) == entry["server"]
    groups = recipe.groups
    expected = entry.get("groups")
    if expected is None:
        assert groups is None
    else:
        explicit = [list(g) for g in groups.explicit] if groups.explicit is not None else None
        assert {"size": groups.size, "explicit": explicit, "nodes": groups.nodes, "dist_port": groups.dist_port} == {
            "size": expected.get("size"),
            "explicit": expected.get("explicit"),
            "nodes": expected.get("nodes"),
            "dist_port": expected.get("dist_port"),
        }


def _gives_the_named_fields(outcome: ImportOutcome, wanted: dict) -> None:
    recipe = outcome.recipe
    assert recipe.image.reference == wanted["image"]
    assert recipe.model.repo_id == wanted["model"]
    options = [" ".join(entry.words) for entry in recipe.docker.entries]
    assert all(option in options for option in wanted.get("docker", [])), options
    for flag, value in wanted.get("server", {}).items():  # a switch is listed with no value (null)
        assert recipe.server.has(flag) and recipe.server.flag(flag) == value, flag


@pytest.mark.parametrize("name", sorted(n for n, e in ENTRIES.items() if e["expect"] == "import"))
def test_every_line_of_an_imported_document_is_accounted(name: str) -> None:
    """A YAML line is taken, changed or set aside with its reason; none is lost as prose but the post's prose."""
    text = (FORMATS / name).read_text()
    outcome = imported(name, text, **ENTRIES[name].get("options", {}))
    assert len(outcome.lines) == len(text.split("\n"))
    assert {line.fate for line in outcome.lines} <= {"taken", "changed", "set aside", "read"}
    if name.endswith((".yaml", ".yml")):
        assert not [line.line for line in outcome.lines if line.why == "prose, comments or output"]


def test_the_engines_own_compose_file_renders_its_docker_run() -> None:
    """SGLang's docker/compose.yaml: the GPU its device_ids names, the host network, ipc, ulimits, one line."""
    name = "c01-sglang-docker-compose.yaml"
    outcome = imported(name, (FORMATS / name).read_text())
    [group] = render_recipe(outcome.recipe)
    assert group.shell_argv[:12] == [
        "docker",
        "run",
        "--name",
        "sglang",
        "--gpus",
        '"device=0"',
        "--ipc",
        "host",
        "--network",
        "host",
        "-e",
        "HF_TOKEN",
    ]
    assert (
        "c01-sglang-docker-compose.yaml:23: services.sglang.healthcheck not carried: hgxkit checks the server's "
        "health itself" in outcome.notes
    )


# --- compose: each key's `docker run` option ---

SERVICE = """services:
  llm:
    image: lmsysorg/sglang:v0.5.6
{body}    command: python3 -m sglang.launch_server --model-path org/m --port 30000
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              count: 2
              capabilities: [gpu]
"""


def compose(body: str, name: str = "compose.yaml", **options: object) -> ImportOutcome:
    return imported(name, SERVICE.format(body=body), **options)


def test_compose_long_forms_of_ports_volumes_environment_and_ulimits() -> None:
    body = """    ports:
      - target: 30000
        published: 8080
        host_ip: 127.0.0.1
    volumes:
      - type: bind
        source: /srv/templates
        target: /templates
        read_only: true
      - type: tmpfs
        target: /scratch
    environment:
      - NCCL_DEBUG=INFO
    env_file: [llm.env]
    ulimits:
      nofile: {soft: 65535, hard: 65535}
    shm_size: 32g
    ipc: host
    cap_add: [SYS_NICE]
"""
    words = docker_words(compose(body))
    assert words == (
        "--gpus 2 --ipc host --shm-size 32g --cap-add SYS_NICE -p 127.0.0.1:8080:30000 -v /srv/templates:/templates:ro "
        "--tmpfs /scratch -e NCCL_DEBUG=INFO --env-file llm.env --ulimit nofile=65535:65535 "
        "-v /data/models/m:/models/m:ro"
    )


def test_compose_interpolates_from_the_posts_env_lines_and_defaults() -> None:
    post = (
        "Put this in `.env`:\n\n```\nMODEL=org/tiny\n```\n\n```yaml\nservices:\n  llm:\n"
        "    image: lmsysorg/sglang:${TAG:-v0.5.6}\n    command: python3 -m sglang.launch_server --model-path ${MODEL}"
        " --port $${PORT}\n    gpus: all\n```\n"
    )
    outcome = imported("post.md", post)
    assert outcome.recipe.image.reference == "lmsysorg/sglang:v0.5.6"
    assert outcome.recipe.model.repo_id == "org/tiny"
    assert "post.md:11: llm.command: ${MODEL} is the post's MODEL=org/tiny" in outcome.notes
    assert outcome.recipe.server.flag("--port") == "$${PORT}"  # `$$` is a literal dollar, for the container


@pytest.mark.parametrize(
    ("first", "named"),
    [("    command: --model-path ${MODEL} ${EXTRA}\n", "llm.command: ${MODEL}"), ("", "llm.image: ${TAG}")],
)
def test_compose_names_the_model_or_image_variable_before_a_name_or_port(first: str, named: str) -> None:
    service = (
        "services:\n  llm:\n    container_name: ${PREFIX}.llm\n    ports: ['${PORT}:30000']\n"
        f"    image: lmsysorg/sglang:${{TAG}}\n{first}    gpus: all\n"
    )
    assert f"{named} is not set by the post" in refusal("c.yaml", service)


def test_compose_refuses_an_unset_variable_naming_it() -> None:
    message = refusal("c.yaml", "services:\n  llm:\n    image: vllm/vllm-openai:${VLLM_TAG}\n    gpus: all\n")
    assert message == (
        "c.yaml:3: llm.image: ${VLLM_TAG} is not set by the post and has no default; give its value in the post's "
        ".env lines (VLLM_TAG=…) or write ${VLLM_TAG:-default}"
    )
    message = refusal("c.yaml", "services:\n  llm:\n    image: vllm/vllm-openai:${TAG:?pin a tag}\n    gpus: all\n")
    assert message == (
        "c.yaml:3: llm.image: ${TAG} is required (pin a tag) and the post does not set it; add NAME=value to the "
        ".env lines"
    )


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            "    extends: {file: base.yaml, service: llm}\n",
            "compose.yaml:4: services.llm.extends: the service extends "
            "another file's service: give the merged file (`docker compose config`)",
        ),
        (
            "    secrets: [hf_token]\n",
            "compose.yaml:4: services.llm.secrets: compose secrets are files mounted at "
            "/run/secrets: pass the value as an environment variable",
        ),
        (
            "    network_mode: service:vpn\n",
            "compose.yaml:4: services.llm.network_mode: service:vpn shares another "
            "container's network, which the recipe does not start",
        ),
        (
            "    blkio_config: {weight: 300}\n",
            "compose.yaml:4: services.llm.blkio_config: a compose key hgxkit does not "
            "carry into a `docker run`; remove it or run the container by hand",
        ),
    ],
)
def test_compose_refuses_what_a_recipe_cannot_hold_by_key(body: str, message: str) -> None:
    assert refusal("compose.yaml", SERVICE.format(body=body)) == message


def test_compose_entrypoint_list_and_a_web_ui_set_aside() -> None:
    text = """services:
  vllm:
    image: vllm/vllm-openai:v0.10.0
    entrypoint: ["vllm", "serve"]
    command: ["org/m", "--tensor-parallel-size", "2"]
    deploy: {resources: {reservations: {devices: [{driver: nvidia, device_ids: ["0", "1"], capabilities: [gpu]}]}}}
  ui:
    image: ghcr.io/open-webui/open-webui:main
    ports: ["3000:8080"]
"""
    outcome = imported("compose.yaml", text)
    assert docker_words(outcome).startswith('--gpus "device=0,1"')
    assert outcome.recipe.server.words()[:3] == ["/models/m", "--tensor-parallel-size", "2"]
    assert "compose.yaml:4: `vllm serve` is the image's entrypoint; the container gets its arguments" in outcome.notes
    assert [r.line() for r in outcome.report if r.action == "skipped"] == [
        "compose.yaml:7-9: skipped service ui (ghcr.io/open-webui/open-webui:main): no GPUs and no server, not imported"
    ]


def test_compose_services_that_differ_in_more_than_gpus_need_pick() -> None:
    text = """services:
  small:
    image: lmsysorg/sglang:v0.5.6
    command: python3 -m sglang.launch_server --model-path org/small --port 30000
    gpus: all
  big:
    image: lmsysorg/sglang:v0.5.6
    command: python3 -m sglang.launch_server --model-path org/big --port 30000
    gpus: all
"""
    message = refusal("compose.yaml", text)
    assert message == (
        "compose.yaml:3: 2 serving commands that are not one setup: they differ in server --model-path: org/small "
        "(line 3) vs org/big (line 7); import one with --pick N (1: line 3, 2: line 7)"
    )
    assert imported("compose.yaml", text, pick=2).recipe.model.repo_id == "org/big"


# --- Kubernetes ---

POD = """apiVersion: v1
kind: Pod
metadata:
  name: llm
spec:
  hostPID: true
  securityContext:
    runAsUser: 1000
  containers:
  - name: server
    image: vllm/vllm-openai:v0.10.0
    args: ["--model", "/models/m", "--port", "8000"]
    env:
    - name: HF_TOKEN
      valueFrom:
        secretKeyRef: {name: hf, key: token}
{extra}    securityContext:
      capabilities:
        add: [IPC_LOCK]
    resources:
      limits:
        nvidia.com/gpu: 4
    ports:
    - containerPort: 8000
    volumeMounts:
    - {name: weights, mountPath: /models}
    - {name: shm, mountPath: /dev/shm}
  volumes:
  - name: weights
    persistentVolumeClaim: {claimName: llm-weights}
  - name: shm
    emptyDir: {medium: Memory}
"""


def test_kubernetes_pod_options_the_container_feels() -> None:
    outcome = imported("pod.yaml", POD.replace("{extra}", ""))
    assert docker_words(outcome) == (
        "--gpus 4 --pid host --user 1000 --cap-add IPC_LOCK -e HF_TOKEN -p 8000:8000 "
        "-v /data/models/llm-weights:/models --ipc host"
    )
    assert (
        "pod.yaml:14: HF_TOKEN is the key 'token' of the Secret hf, declared as a secret, taken from the environment "
        "(HF_TOKEN) at run time" in outcome.notes
    )
    assert (
        "pod.yaml:26: the PersistentVolumeClaim llm-weights holds the model at /models: it is the host directory "
        "/data/models/llm-weights" in outcome.notes
    )


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            "    envFrom:\n    - secretRef: {name: keys}\n",
            "pod.yaml:18: envFrom Secret keys: its keys are not in the "
            "manifest; list each as env (a secretKeyRef is taken from the environment)",
        ),
        (
            "    - name: VLLM_HOST_IP\n      valueFrom: {fieldRef: {fieldPath: status.hostIP}}\n",
            "pod.yaml:17: env VLLM_HOST_IP comes from fieldRef, which a docker host does not give; write its value",
        ),
    ],
)
def test_kubernetes_refuses_values_a_docker_host_does_not_give(extra: str, message: str) -> None:
    assert refusal("pod.yaml", POD.replace("{extra}", extra)) == message


def test_kubernetes_config_map_volume_and_amd_gpus_are_refused() -> None:
    text = POD.replace("{extra}", "").replace("persistentVolumeClaim: {claimName: llm-weights}", "configMap: {name: w}")
    assert refusal("pod.yaml", text) == (
        "pod.yaml:26: volume weights is a configMap: its files are not in the manifest; mount the host directory that "
        "holds them at /models"
    )
    text = POD.replace("{extra}", "").replace("nvidia.com/gpu: 4", "amd.com/gpu: 4")
    assert refusal("pod.yaml", text) == (
        "pod.yaml:22: amd.com/gpu: 4 asks for AMD ROCm accelerators; hgxkit serves NVIDIA HGX-H200 nodes"
    )


def test_kserve_serving_runtime_and_inference_service_are_one_container() -> None:
    text = """apiVersion: serving.kserve.io/v1alpha1
kind: ServingRuntime
metadata:
  name: vllm-runtime
spec:
  containers:
  - name: kserve-container
    image: vllm/vllm-openai:v0.10.0
    args: ["--port", "8080"]
---
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: tiny
spec:
  predictor:
    model:
      runtime: vllm-runtime
      modelFormat: {name: vLLM}
      args: ["--model", "org/tiny"]
      resources:
        limits: {nvidia.com/gpu: "1"}
"""
    outcome = imported("isvc.yaml", text)
    assert outcome.recipe.model.repo_id == "org/tiny"
    assert outcome.recipe.server.words()[:3] == ["--port", "8080", "--model"]
    assert docker_words(outcome).startswith("--gpus 1")
    skipped = [r.line() for r in outcome.report if r.action == "skipped"]
    assert skipped == [
        "isvc.yaml:1-10: skipped ServingRuntime vllm-runtime: read with the InferenceService that names it"
    ]


def test_a_manifest_in_an_indented_markdown_fence_and_its_job_kind() -> None:
    post = (
        "Run it as a Job:\n\n1. Apply\n\n   ```yaml\n   apiVersion: batch/v1\n   kind: Job\n   metadata: {name: bench}\n"
        "   spec:\n     template:\n       spec:\n         containers:\n         - name: s\n"
        '           image: lmsysorg/sglang:v0.5.6\n           command: [sh, -c, "sglang serve --model-path org/m"]\n'
        "           resources: {limits: {nvidia.com/gpu: 8}}\n   ```\n"
    )
    outcome = imported("post.md", post)
    assert outcome.recipe.server.words()[:2] == ["sglang", "serve"]
    assert docker_words(outcome).startswith("--gpus 8")
    assert "post.md:13: `sh -c '…'` runs one server launch: the container runs it directly" in outcome.notes


def test_a_script_in_sh_c_is_refused_not_kept() -> None:
    name = "k05-lws-vllm-gpu-ray.yaml"
    assert "(a Ray cluster is not imported)" in ENTRIES[name]["message"]


# --- accelerators refused by name ---

ANOTHER_ACCELERATOR = ": the post is for another accelerator, and hgxkit serves NVIDIA GPUs (HGX nodes); --image cannot change that: import a post for NVIDIA GPUs"


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (
            "docker run --device /dev/davinci0 -p 30000:30000 lmsysorg/sglang:v0.5.5-cann8.3.rc1-a3 python3 -m "
            "sglang.launch_server --model-path org/m",
            "p.txt:1: /dev/davinci0 is Huawei Ascend (NPU)" + ANOTHER_ACCELERATOR,
        ),
        (
            "docker run --device=/dev/kfd --device=/dev/dri -p 8000:8000 vllm/vllm-openai-rocm:v0.14.1 --model org/m",
            "p.txt:1: /dev/kfd is AMD ROCm" + ANOTHER_ACCELERATOR,
        ),
        (
            "docker run --gpus all -p 8080:8080 kserve/huggingfaceserver:latest --model_id=org/m",
            "p.txt:1: KServe Hugging Face runtime (kserve-huggingface) is not supported: hgxkit serves SGLang and vLLM; "
            "import a post that launches one of them",
        ),
        (
            "docker run --gpus all -p 30000:30000 lmsysorg/sglang:v0.5.6 python3 -m sglang_router.launch_server "
            "--model-path org/m --dp-size 2",
            "p.txt:1: SGLang's router launcher (sglang-router) is not supported yet: python -m "
            "sglang_router.launch_server starts --dp-size SGLang servers and sglang-router in front of them in one "
            "process, which a recipe (one server command) does not hold; serve with SGLang's own data parallelism "
            "instead (python -m sglang.launch_server, the same flags without --router-*)",
        ),
    ],
)
def test_other_accelerators_and_runtimes_are_refused_by_name(command: str, message: str) -> None:
    assert refusal("p.txt", command) == message


def test_compose_services_that_differ_only_in_gpus_and_ports_are_gpu_groups() -> None:
    service = """  llm{n}:
    image: lmsysorg/sglang:v0.5.6
    container_name: llm{n}
    command: python3 -m sglang.launch_server --model-path org/m --tp 4 --host 0.0.0.0 --port 30000
    ports: ["3000{n}:30000"]
    deploy: {{resources: {{reservations: {{devices: [{{driver: nvidia, device_ids: [{ids}], capabilities: [gpu]}}]}}}}}}
"""
    text = "services:\n" + service.format(n=0, ids='"0","1","2","3"') + service.format(n=1, ids='"4","5","6","7"')
    outcome = imported("compose.yaml", text)
    groups = outcome.recipe.groups
    assert (
        docker_words(outcome)
        == '--name {{name}} --gpus "device={{gpus}}" -p {{port}}:30000 --ipc=host -v /data/models/m:/models/m:ro'
    )
    assert (groups.explicit, groups.port_base, groups.name_template) == (
        ((0, 1, 2, 3), (4, 5, 6, 7)),
        30000,
        "llm{{group}}",
    )


def test_leader_worker_set_is_read_from_the_leader_as_rank_zero() -> None:
    name = "k04-lws-sglang.yaml"
    outcome = imported(name, (FORMATS / name).read_text())
    assert "k04-lws-sglang.yaml:16: $(LWS_LEADER_ADDRESS) is lws-leader (the leader pod, rank 0)" in outcome.notes
    assert (
        "k04-lws-sglang.yaml:16: the LeaderWorkerSet's workerTemplate runs ranks 1..; hgxkit renders each rank "
        "from the leader's command" in outcome.notes
    )
    (rank1,) = render_recipe(outcome.recipe, rank=1, head="10.0.0.1", total_gpus=8)  # one group, not eight
    server = rank1.shell_argv[rank1.shell_argv.index("lmsysorg/sglang:latest") + 1 :]
    assert server[server.index("--dist-init-addr") + 1] == "10.0.0.1:20000"
    assert server[server.index("--node-rank") + 1] == "1"


def test_a_leader_worker_set_of_one_gpu_pods_is_one_group_on_the_host_network() -> None:
    """Its pods reach the leader on ports no `ports:` lists; a second group on the node would reuse the server's
    port and the one rendezvous port (the sweep found eight groups publishing 40000:40000)."""
    name = "k04-lws-sglang.yaml"
    outcome = imported(name, (FORMATS / name).read_text())
    assert docker_words(outcome).startswith("--gpus 1 --network host -e HF_TOKEN --ipc host -v ")
    assert (outcome.recipe.groups.explicit, outcome.recipe.groups.nodes) == (((0,),), 2)
    assert [g.gpus for g in render_recipe(outcome.recipe, rank=0, head="10.0.0.1", total_gpus=8)] == [[0]]
    assert (
        "k04-lws-sglang.yaml:16: the server takes 1 GPU(s) on each of its 2 hosts: one group, on GPU(s) 0 (a "
        "second group over the same hosts would need a rendezvous port of its own; groups.dist_port is one)"
        in outcome.notes
    )
    assert (
        "k04-lws-sglang.yaml:16: the 2 pods of LeaderWorkerSet sglang reach the leader on ports the manifest does "
        "not publish (the rendezvous's, NCCL's), as pods reach each other on Kubernetes: across docker hosts that is "
        "the host network (--network host), where the server's ports are its own" in outcome.notes
    )


def test_a_kubernetes_argument_is_placed_at_its_own_line() -> None:
    name = "k10-vllm-k8s-monitoring-deployment.yaml"
    assert refusal(name, (FORMATS / name).read_text()).startswith(
        f"{name}: line 62, column 1: "
    )  # `- "--log-requests"`


def test_a_yaml_fence_no_format_claims_stays_with_the_shell_scan() -> None:
    post = "```yaml\ntype: service\nport: 8000\n```\n\n```bash\nvllm serve org/Tiny-1B --port 8000\n```\n"
    outcome = imported("post.md", post, image="vllm/vllm-openai:v0.10.0")
    assert outcome.recipe.model.repo_id == "org/Tiny-1B"


def test_an_ascend_device_in_a_compose_service_is_refused_by_name() -> None:
    text = SERVICE.replace("{body}", "    devices: [/dev/davinci0, /dev/davinci_manager]\n")
    assert refusal("compose.yaml", text) == (
        "compose.yaml:3: Huawei Ascend NPU (ascend) is not supported: hgxkit serves NVIDIA HGX-H200 nodes; import a "
        "post for NVIDIA GPUs"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - image: vllm/vllm-openai:v1\n    env: [{value: x}]\n"
            "    resources: {limits: {nvidia.com/gpu: 1}}\n",
            "m.yaml:5: a value of the wrong shape in this container None "
            "(KeyError: 'name'); give it as its spec writes it",
        ),
        (
            "services:\n  s:\n    image: vllm/vllm-openai:v1\n    gpus: all\n    environment: 5\n",
            "m.yaml:2: a value of "
            "the wrong shape in this service s (TypeError: 'int' object is not iterable); give it as its spec writes it",
        ),
    ],
)
def test_a_value_of_the_wrong_shape_is_one_line_not_a_traceback(text: str, message: str) -> None:
    assert refusal("m.yaml", text) == message


@pytest.mark.parametrize("field", ["labels", "annotations"])
def test_a_leader_worker_sets_worker_index_from_a_field_ref_is_the_rank(field: str) -> None:
    """LWS publishes the worker index as a label and an annotation; a container reads it through a fieldRef as it
    reads $(LWS_WORKER_INDEX)."""
    name = "k11-sglang-docs-lws-roce-fieldref-worker-index.md"
    text = (FORMATS / name).read_text().replace("metadata.labels[", f"metadata.{field}[")
    outcome = imported(name, text, image="lmsysorg/sglang:latest")  # the file's sglang:latest is no pullable image
    assert (
        f"{name}:43: LWS_WORKER_INDEX is the LeaderWorkerSet's worker index (metadata.{field}['leaderworkerset.sigs."
        "k8s.io/worker-index']), which the command reads as its rank: hgxkit gives each host its rank" in outcome.notes
    )
    (rank1,) = render_recipe(outcome.recipe, rank=1, head="10.0.0.1", total_gpus=8)
    server = rank1.shell_argv[rank1.shell_argv.index("lmsysorg/sglang:latest") + 1 :]
    assert server[server.index("--node-rank") + 1] == "1"
    assert server[server.index("--dist-init-addr") + 1] == "10.0.0.1:20000"


@pytest.mark.parametrize(
    ("post", "message"),
    [
        (
            "python -m sglang.launch_server --model-path org/m --disaggregation-mode prefill --port 30000\n"
            "python -m sglang.launch_server --model-path org/m --disaggregation-mode decode --port 30001\n"
            "python -m sglang_router.launch_router --pd-disaggregation --prefill http://127.0.0.1:30000 "
            "--decode http://127.0.0.1:30001\n",
            "p.sh:1: the prefill and decode commands do not give each side GPUs of its own (--gpus '\"device=…\"'); "
            "hgxkit deploys a split as groups of one node's GPUs",
        ),
        (
            'vllm serve org/m --kv-transfer-config \'{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}\'\n',
            "p.sh: line 1, column 18: --kv-transfer-config decode: the post runs the decode side of a "
            "prefill/decode split alone, which answers no request; import the post's prefill and decode commands "
            "together (the router comes from `--data router=true`)",
        ),
    ],
    ids=["sglang-prefill-and-decode", "vllm-kv-consumer"],
)
def test_prefill_decode_disaggregation_that_is_not_deployed_is_refused_naming_why(post: str, message: str) -> None:
    assert refusal("p.sh", post) == message


def test_a_kv_connector_of_both_roles_is_a_cache_not_a_split() -> None:
    post = 'vllm serve org/m --kv-transfer-config \'{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}\'\n'
    assert imported("p.sh", post).recipe.server.flag("--kv-transfer-config") is not None
