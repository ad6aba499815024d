"""Kubernetes exports ask for CPU and memory computed from the recipe (hgxkit/export/pod_resources.py), requests equal
to limits (QoS Guaranteed), with the arithmetic as a comment over each workload; and they are a kustomize base.

The kustomize base is checked two ways: a small structural check that runs everywhere (kustomization.yaml is a
`kustomize.config.k8s.io/v1beta1` Kustomization whose `resources` are the export's own files, each a YAML stream of
Kubernetes objects), and, where kubectl is installed, `kubectl kustomize` itself, offline, on the base and on the
overlay its comment shows (the memory patched, a namespace set). Without kubectl that second test skips, even in CI:
the structural check stands in for it.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from test_export import RECIPES, RUN, _allowances, _export

from hgxkit.export.common import ExportOptions
from hgxkit.export.pod_resources import CPUS, CPUS_PER_GPU, ENGINE_GIB, ENGINE_GIB_PER_GPU
from hgxkit.export.registry import export_recipe
from hgxkit.recipe.danger import DEFAULT_HOST_MEMORY
from hgxkit.recipe.judge import judge
from hgxkit.recipe.server_args import ServerCommand

_MEMORY = re.compile(r"^#   memory (\d+)Gi = (.*)$")


def _terms(text: str) -> list[float]:
    """The GiB of each `+` term of a comment's sum (parentheses explain a term; `A = B` gives B)."""
    terms, depth, current = [], 0, ""
    for part in re.split(r"( \+ |[()])", text):
        depth += {"(": 1, ")": -1}.get(part, 0)
        if part == " + " and depth == 0:
            terms.append(current)
            current = ""
        elif depth == 0 and part != ")":
            current += part
    terms.append(current)
    return [float(term.rpartition(" = ")[2].split()[-1]) for term in terms]


def _exported(key: str, **options) -> tuple[str, list[str]]:
    recipe = RECIPES[key]()
    exported = export_recipe(judge(recipe, _allowances(key)), "k8s", ExportOptions(run_id=RUN, **options))
    return exported.files["kubernetes.yaml"], exported.not_carried + exported.needs


def _pods(text: str) -> list[dict]:
    """Every pod's server container, in order (a LeaderWorkerSet: leader, then worker)."""
    out = []
    for document in yaml.safe_load_all(text):
        if document["kind"] == "Deployment":
            out.append(document["spec"]["template"]["spec"]["containers"][0])
        elif document["kind"] == "LeaderWorkerSet":
            template = document["spec"]["leaderWorkerTemplate"]
            out += [template[role]["spec"]["containers"][0] for role in ("leaderTemplate", "workerTemplate")]
    return out


def _comments(text: str) -> list[tuple[int, float]]:
    """(memory GiB the comment says, the sum of its terms) for each workload's comment."""
    return [(int(m.group(1)), sum(_terms(m.group(2)))) for line in text.splitlines() if (m := _MEMORY.match(line))]


@pytest.mark.parametrize("key", sorted(RECIPES))
def test_every_pod_is_guaranteed_and_its_memory_is_the_sum_the_comment_shows(key: str) -> None:
    text, _ = _exported(key)
    pods = _pods(text)
    for server in pods:
        requests, limits = server["resources"]["requests"], server["resources"]["limits"]
        assert requests == {name: limits[name] for name in ("cpu", "memory")}  # QoS Guaranteed
    gpus = [int(p["resources"]["limits"]["nvidia.com/gpu"]) for p in pods]
    assert [int(p["resources"]["requests"]["cpu"]) for p in pods] == [CPUS_PER_GPU * n + CPUS for n in gpus]
    # one comment per workload, over it: its pods' memory, the whole GiB above the sum of its terms
    workloads = [d for d in yaml.safe_load_all(text) if d["kind"] in ("Deployment", "LeaderWorkerSet")]
    comments = _comments(text)
    assert len(comments) == len(workloads)
    heads = [line for line in text.splitlines() if ", each pod: " in line]
    assert heads == [
        f"# {w['metadata']['name']}, each pod: requests = limits (QoS Guaranteed: evicted last under memory pressure)"
        for w in workloads
    ]
    memories = {int(p["resources"]["requests"]["memory"].removesuffix("Gi")) for p in pods}
    for memory, total in comments:
        assert memory == math.ceil(total) and memory in memories, (memory, total)


def _with_flags(key: str, *entries: tuple[str, ...]):
    recipe = RECIPES[key]()
    server = recipe.server
    return replace(recipe, server=ServerCommand(server.program, (*server.args, *entries), server.kind))


def _memory(recipe, key: str, **options) -> int:
    exported = export_recipe(judge(recipe, _allowances(key)), "k8s", ExportOptions(**options))
    (server, *_) = _pods(exported.files["kubernetes.yaml"])
    return int(server["resources"]["requests"]["memory"].removesuffix("Gi"))


def test_what_the_servers_flags_pin_in_host_memory_is_asked_for() -> None:
    """vLLM's --cpu-offload-gb is per GPU, --kv-offloading-size a TP group's whole buffer; the vLLM post runs
    TP1 on one GPU."""
    base = _memory(RECIPES["vllm"](), "vllm")
    assert base == ENGINE_GIB_PER_GPU + ENGINE_GIB  # no pool, no shm size, no weights: the engine alone
    assert _memory(_with_flags("vllm", ("--cpu-offload-gb", "24")), "vllm") == base + 24
    assert _memory(_with_flags("vllm", ("--kv-offloading-size", "64")), "vllm") == base + 64
    assert _memory(RECIPES["vllm"](), "vllm", model_gb=16) == base + 16  # the weights' page cache


def test_the_weights_count_once_per_host_and_lower_hicaches_estimate() -> None:
    two = _memory(RECIPES["vllm-two-node"](), "vllm-two-node")
    assert _memory(RECIPES["vllm-two-node"](), "vllm-two-node", model_gb=400) == two + 200  # each host reads half
    # SGLang's HiCache pools are a ratio of the device KV pool, which the weights leave smaller
    text, _ = _exported("marlin", model_gb=160)
    unknown, _ = _exported("marlin")
    assert (
        "weights 160 (--model-gb 160 over 1 host)" in text and "weights 0 (their size is not in the recipe" in unknown
    )
    assert _comments(text)[0][0] < _comments(unknown)[0][0]


def test_a_pod_no_node_can_hold_is_said() -> None:
    recipe = _with_flags("marlin", ("--hicache-ratio", "8"))
    exported = export_recipe(judge(recipe, _allowances("marlin")), "k8s", ExportOptions())
    assert any(
        note.startswith("memory: a pod of deepseek-v4-flash-0 (")
        and "more than an HGX H200 node's usual 2048Gi" in note
        for note in exported.needs
    )
    assert not any(note.startswith("memory: ") for note in _exported("marlin")[1])


def test_a_pod_of_exactly_a_nodes_memory_fits() -> None:
    """The vLLM post's pod is the engine alone; the weights' page cache makes it any size, to the GiB."""
    node = DEFAULT_HOST_MEMORY // 2**30
    engine = ENGINE_GIB_PER_GPU + ENGINE_GIB
    for weights, said in ((node - engine, False), (node - engine + 1, True)):
        exported = export_recipe(judge(RECIPES["vllm"](), _allowances("vllm")), "k8s", ExportOptions(model_gb=weights))
        assert _memory(RECIPES["vllm"](), "vllm", model_gb=weights) == node + said
        assert any(note.startswith("memory: a pod of ") for note in exported.needs) == said


# --- kustomize ------------------------------------------------------------------------------------------------


def _check_kustomization(directory: Path) -> list[dict]:
    """The structural check: a Kustomization listing the export's own files, each Kubernetes objects; returns
    them."""
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    assert (kustomization["apiVersion"], kustomization["kind"]) == ("kustomize.config.k8s.io/v1beta1", "Kustomization")
    assert set(kustomization) == {"apiVersion", "kind", "resources"}
    documents = []
    for name in kustomization["resources"]:
        path = directory / name
        assert path.is_file() and path.parent == directory, name
        documents += list(yaml.safe_load_all(path.read_text()))
    assert documents and all({"apiVersion", "kind", "metadata"} <= set(d) for d in documents)
    return documents


@pytest.mark.parametrize("key", ["marlin", "vllm-two-node"])
def test_the_export_is_a_kustomize_base(key: str, tmp_path: Path) -> None:
    out = _export(key, "k8s", tmp_path)
    assert sorted(p.name for p in out.iterdir()) == ["kubernetes.yaml", "kustomization.yaml"]
    documents = _check_kustomization(out)
    assert documents == list(yaml.safe_load_all((out / "kubernetes.yaml").read_text()))


def _kubectl() -> str:
    path = shutil.which("kubectl")
    if not path:
        pytest.skip("kubectl is not installed: the structural check of the kustomize base stands in for it")
    return path


def _kustomize(directory: Path) -> list[dict]:
    result = subprocess.run([_kubectl(), "kustomize", str(directory)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return list(yaml.safe_load_all(result.stdout))


@pytest.mark.parametrize("key", ["marlin", "vllm-two-node"])
def test_kubectl_kustomize_builds_the_base_and_the_overlay_its_comment_shows(key: str, tmp_path: Path) -> None:
    base = _export(key, "k8s", tmp_path / "base")
    built = _kustomize(base)
    assert sorted(d["metadata"]["name"] + d["kind"] for d in built) == sorted(
        d["metadata"]["name"] + d["kind"] for d in yaml.safe_load_all((base / "kubernetes.yaml").read_text())
    )
    # The overlay the base's comment shows, as a cluster would write it beside the base.
    comment = (base / "kustomization.yaml").read_text().split("my-cluster/kustomization.yaml:\n", 1)[1]
    overlay = "".join(line[4:] + "\n" for line in comment.splitlines() if line.startswith("#   "))
    (tmp_path / "my-cluster").mkdir()
    (tmp_path / "my-cluster" / "kustomization.yaml").write_text(overlay)
    patched = _kustomize(tmp_path / "my-cluster")
    workload = next(d for d in patched if d["kind"] in ("Deployment", "LeaderWorkerSet"))
    spec = (
        workload["spec"]["template"]["spec"]
        if workload["kind"] == "Deployment"
        else workload["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]
    )
    resources = spec["containers"][0]["resources"]
    assert resources["requests"]["memory"] == resources["limits"]["memory"] == "1600Gi"
    assert {d["metadata"].get("namespace") for d in patched} == {"llm"}


@pytest.mark.parametrize(
    ("docker", "quantity"),
    [
        ("1048576", "1048576"),
        ("100b", "100"),
        ("64k", "64Ki"),
        ("512MB", "512Mi"),
        ("32g", "32Gi"),
        ("10.24G", "10.24Gi"),
        ("1t", "1Ti"),
    ],
)
def test_a_docker_size_is_the_same_kubernetes_quantity_in_binary_units(docker: str, quantity: str) -> None:
    from hgxkit.export.kubernetes import _quantity

    assert _quantity(docker) == quantity
