"""A Kubernetes export of a recipe that asks for everything a pod can be asked for (an env file, capabilities, a
privileged container, the host's network and IPC, ulimits, a named volume, a host directory): every document valid
under the real schemas, strictly; each setting where Kubernetes reads it, in its spelling; and every option the
manifest cannot carry, and every grant beyond a cluster's defaults, named in a line of its own."""

from __future__ import annotations

import re

import pytest
import yaml
from test_export import _validate_k8s

from hgxkit.export.common import ExportOptions
from hgxkit.export.kubernetes import STARTUP_SECONDS, _dns
from hgxkit.export.registry import export_recipe
from hgxkit.importing.docker_run import import_docker_run
from hgxkit.recipe.judge import Allowances, judge

POST = (
    "docker run --gpus all --privileged --network host --ipc host --ulimit memlock=-1 --cap-add cap_sys_ptrace "
    "--cap-add IPC_LOCK --cap-add CHOWN --env-file /etc/hgx/hf.env -v hfcache:/root/.cache -v /data/x:/x "
    "vllm/vllm-openai:v0.11.0 --model org/m --tensor-parallel-size 8"
)
ALLOWED = Allowances(
    docker_options=("--privileged", "--network=host", "--cap-add", "host-file-read", "host-mount"), api_key="auto"
)


def _exported():
    return export_recipe(judge(import_docker_run(POST), ALLOWED), "k8s", ExportOptions(run_id="r1"))


def test_every_setting_is_where_kubernetes_reads_it() -> None:
    documents = list(yaml.safe_load_all(_exported().files["kubernetes.yaml"]))
    for document in documents:
        _validate_k8s(document)
    deployment, service = documents
    assert service["spec"]["type"] == "ClusterIP"
    pod = deployment["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is True and pod["dnsPolicy"] == "ClusterFirstWithHostNet"  # Services still resolve
    assert deployment["metadata"]["labels"]["hgxkit.io/group"] == "0"
    (server,) = pod["containers"]
    secrets = "vllm-openai-v0-11-0-secrets"
    assert server["name"] == "server" and server["envFrom"] == [{"secretRef": {"name": secrets}}]  # the env file
    assert server["securityContext"] == {
        "privileged": True,
        "capabilities": {"add": ["SYS_PTRACE", "IPC_LOCK", "CHOWN"]},
    }
    assert server["ports"] == [{"name": "http", "containerPort": 8000, "protocol": "TCP"}]

    def probe(failures: int) -> dict:
        return {
            "httpGet": {"path": "/health", "port": 8000},
            "periodSeconds": 10,
            "timeoutSeconds": 10,
            "failureThreshold": failures,
        }

    # liveness waits for the first answer through the startup probe's hour; then three misses in 30 s
    assert server["startupProbe"] == probe(STARTUP_SECONDS // 10) and STARTUP_SECONDS // 10 == 360
    assert server["readinessProbe"] == probe(3) and server["livenessProbe"] == probe(3)
    assert pod["volumes"] == [
        {"name": "dshm", "emptyDir": {"medium": "Memory"}},
        {"name": "vol-0", "emptyDir": {}},
        {"name": "vol-1", "hostPath": {"path": "/data/x", "type": "DirectoryOrCreate"}},
    ]


def test_what_a_pod_cannot_carry_and_what_it_needs_beyond_the_defaults_are_each_named() -> None:
    exported = _exported()
    assert exported.not_carried == [
        "--ipc host: the ranks share /dev/shm, a memory-backed emptyDir (Pod Security baseline forbids host "
        "namespaces)",
        "the named volume hfcache: an emptyDir, empty on every new pod (a PersistentVolumeClaim keeps it)",
        "ulimits: set on the node's container runtime (Kubernetes has no per-pod ulimits)",
        "--bind 127.0.0.1: each Service is a ClusterIP; expose it with your ingress",
    ]
    assert exported.needs == [
        "Pod Security: hostNetwork (allowed by --network=host) needs a namespace at level privileged",
        "Pod Security: a privileged container (allowed by --privileged) needs level privileged",
        "Pod Security: the capabilities IPC_LOCK, SYS_PTRACE (allowed by --cap-add) need level privileged",
        "Pod Security: the hostPath volume(s) /data/x need level privileged",
    ]


def test_gpu_ids_are_said_not_carried_only_for_a_recipe_that_pins_them() -> None:
    pinned = POST.replace("--gpus all", "--gpus '\"device=0,1,2,3,4,5,6,7\"'")
    notes = export_recipe(judge(import_docker_run(pinned), ALLOWED), "k8s", ExportOptions()).not_carried
    assert notes[0] == "GPU ids: a pod asks for a number of GPUs; the device plugin chooses which"
    assert not any(note.startswith("GPU ids") for note in _exported().not_carried)


@pytest.mark.parametrize(
    ("name", "dns"),
    [
        ("DeepSeek_V4.Flash", "deepseek-v4-flash"),
        ("--a--", "a"),
        ("x" * 62 + "_y", "x" * 62),  # cut at 63, no dash left at the end
        ("x" * 64, "x" * 63),
    ],
)
def test_a_name_becomes_a_dns_label(name: str, dns: str) -> None:
    assert _dns(name) == dns and re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", dns)


def test_the_overlay_the_kustomization_shows_patches_a_path_the_base_has() -> None:
    exported = _exported()
    comment = [line.removeprefix("#").removeprefix(" ") for line in exported.files["kustomization.yaml"].splitlines()]
    comment = [line for line in comment if not line.startswith(("apiVersion", "kind", "resources", "- "))]
    start = comment.index("this directory written as base/ (-o base), my-cluster/kustomization.yaml:")
    assert comment[start - 1] == (
        "A kustomize base: kubectl apply -k DIR. A cluster's own settings are an overlay that patches it, e.g. with"
    )
    overlay = yaml.safe_load("\n".join(line.removeprefix("  ") for line in comment[start + 1 :]))
    assert overlay["resources"] == ["../base"] and overlay["namespace"] == "llm"
    (patch,) = overlay["patches"]
    deployment = next(yaml.safe_load_all(exported.files["kubernetes.yaml"]))
    assert patch["target"] == {"kind": "Deployment", "name": deployment["metadata"]["name"]}
    operations = yaml.safe_load(patch["patch"])
    assert len(operations) == 2  # the requests and the limits, kept equal
    for operation in operations:
        assert operation["op"] == "replace"
        node = deployment
        for key in operation["path"].strip("/").split("/"):
            node = node[int(key)] if isinstance(node, list) else node[key]
        assert node.endswith("Gi")
