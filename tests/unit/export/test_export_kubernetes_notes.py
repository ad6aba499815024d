"""What a Kubernetes export says beside its manifest, and what its pods and volumes hold, to the word: the notes
that name what a cluster must grant (the model's hostPath and its remedy, a pod larger than a node), the Secret's
key file readable by its owner alone, and the variables a LeaderWorkerSet's controller sets, which alone are not
taken from the Secret."""

from __future__ import annotations

import re

import yaml
from test_export import RECIPES, RUN, _allowances
from test_export_key import POST
from test_export_secrets import RECIPES as SECRET_RECIPES

from hgxkit.export.common import KEY_CONFIG_FILE, KEY_CONFIG_IN_CONTAINER, ExportOptions
from hgxkit.export.kubernetes import LWS_ENV, SHM_VOLUME
from hgxkit.export.registry import export_recipe
from hgxkit.importing.importer import ImportOptions, import_post
from hgxkit.recipe.judge import judge


def _pods(text: str) -> list[dict]:
    """Every pod spec of the manifest, in order (a LeaderWorkerSet: leader, then worker)."""
    out = []
    for document in yaml.safe_load_all(text):
        spec = document["spec"]
        if document["kind"] == "Deployment":
            out.append(spec["template"]["spec"])
        elif document["kind"] == "LeaderWorkerSet":
            template = spec["leaderWorkerTemplate"]
            out += [template["leaderTemplate"]["spec"], template["workerTemplate"]["spec"]]
    return out


def test_the_model_on_a_host_path_alone_is_named_with_the_claim_that_meets_baseline() -> None:
    exported = export_recipe(judge(RECIPES["marlin"](), _allowances("marlin")), "k8s", ExportOptions(run_id=RUN))
    assert exported.needs == [
        "Pod Security: the model's hostPath needs level privileged; --model-pvc NAME meets baseline"
    ]
    # beside another grant (the host's network) a claim would not be enough: no remedy is offered
    two = export_recipe(judge(RECIPES["vllm-two-node"](), _allowances("vllm-two-node")), "k8s", ExportOptions())
    assert two.needs[-1] == "Pod Security: the model's hostPath needs level privileged"


def test_a_pod_larger_than_a_node_is_named_with_its_size_and_what_lowers_it() -> None:
    exported = export_recipe(judge(RECIPES["vllm"](), _allowances("vllm")), "k8s", ExportOptions(model_gb=5000))
    assert exported.needs[-1] == (
        "memory: a pod of llama-3-1-8b-instruct-0 (5016Gi) asks for more than an HGX H200 node's usual 2048Gi, so "
        "no such node schedules it: --model-gb GB (the HiCache estimate counts no weights without it) or smaller "
        "host pools (--hicache-size GB) lower it"
    )
    two = export_recipe(judge(RECIPES["marlin"](), _allowances("marlin")), "k8s", ExportOptions(model_gb=5000))
    assert two.needs[-1].startswith(
        "memory: a pod of deepseek-v4-flash-0 (5088Gi), deepseek-v4-flash-1 (5088Gi) asks for more than an HGX H200 "
        "node's usual 2048Gi, so "
    )


def test_the_key_file_is_mounted_from_the_secret_readable_by_its_owner_alone() -> None:
    recipe = import_post([("post.txt", POST)], ImportOptions(model_repo="org/m")).recipe
    text = export_recipe(judge(recipe), "k8s", ExportOptions()).files["kubernetes.yaml"]
    (pod,) = _pods(text)
    secret = re.search(r"^# secrets: kubectl create secret generic (\S+) ", text, re.M)
    assert secret is not None
    # the key file alone: one space between the Secret's name and its one source
    assert secret.group(0) + f"--from-file={KEY_CONFIG_FILE}=./{KEY_CONFIG_FILE}\n" in text
    item = {"key": KEY_CONFIG_FILE, "path": KEY_CONFIG_FILE}
    key_volume = {"name": "api-key", "secret": {"secretName": secret.group(1), "items": [item], "defaultMode": 0o400}}
    assert key_volume in pod["volumes"]
    mount = {"name": "api-key", "mountPath": KEY_CONFIG_IN_CONTAINER, "subPath": KEY_CONFIG_FILE, "readOnly": True}
    assert mount in pod["containers"][0]["volumeMounts"]


def test_only_the_leaderworkerset_controllers_variables_are_not_taken_from_the_secret() -> None:
    make, allowances, names = SECRET_RECIPES["lws-token-two-node"]
    text = export_recipe(judge(make(), allowances), "k8s", ExportOptions()).files["kubernetes.yaml"]
    header = next(line for line in text.splitlines() if line.startswith("# secrets: "))
    literals = " ".join(f"--from-literal={name}=..." for name in names)  # LWS_TOKEN among them
    assert header == f"# secrets: kubectl create secret generic qwen3-two-node-secrets {literals}"
    leader, worker = _pods(text)
    for pod in (leader, worker):
        from_secret = [e["name"] for e in pod["containers"][0]["env"] if "valueFrom" in e]
        assert from_secret == names
    # the worker's command expands the leader's address and its own index: the controller fills them
    assert {"$(LWS_LEADER_ADDRESS)", "$(LWS_WORKER_INDEX)"} <= set(worker["containers"][0]["args"])
    # the three the LeaderWorkerSet reference lists as set in every pod (its TPU ones only with TPUs)
    assert {"LWS_LEADER_ADDRESS", "LWS_GROUP_SIZE", "LWS_WORKER_INDEX"} == LWS_ENV


def test_shared_memory_is_a_memory_backed_volume_of_the_recipes_size() -> None:
    exported = export_recipe(judge(RECIPES["marlin"](), _allowances("marlin")), "k8s", ExportOptions())
    pods = _pods(exported.files["kubernetes.yaml"])
    assert len(pods) == 2  # one Deployment per GPU group
    for pod in pods:
        assert pod["volumes"][0] == {"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": "32Gi"}}
        assert pod["containers"][0]["volumeMounts"][0] == {"name": SHM_VOLUME, "mountPath": "/dev/shm"}


def test_the_startup_probe_allows_an_hour_as_a_whole_number_of_ten_second_periods() -> None:
    text = export_recipe(judge(RECIPES["marlin"](), _allowances("marlin")), "k8s", ExportOptions()).files[
        "kubernetes.yaml"
    ]
    for pod in _pods(text):
        probe = pod["containers"][0]["startupProbe"]
        assert (probe["periodSeconds"], probe["failureThreshold"]) == (10, 360)
        assert type(probe["failureThreshold"]) is int  # an int32 field: 360.0 is no Kubernetes integer
