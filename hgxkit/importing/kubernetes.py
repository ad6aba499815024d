"""A Kubernetes manifest (Pod, Deployment, StatefulSet, Job, LeaderWorkerSet, KServe InferenceService or
ServingRuntime) as the `docker run` of its serving container, so that check, render and the node's policy judge
it like any posted `docker run`.

The serving container is the one that asks for `nvidia.com/gpu` (its count is the GPU group: `--gpus N`) or
launches a server; the pod around it gives the options a container feels: `hostNetwork` `--network host`,
`hostIPC` `--ipc host`, `hostPID` `--pid host`, `securityContext` `--privileged`/`--cap-add`/`--user`/
`--security-opt`, `runtimeClassName: nvidia` `--runtime nvidia`. `command` replaces the image's entrypoint and
`args` its command, as in Kubernetes; `$(VAR)` is expanded from the container's `env` as the kubelet does, and a
`sh -c "…"` that runs one plain launch runs it directly. `env` values become `-e NAME=value`, a `secretKeyRef`
the declared secret `-e NAME` (its value from the environment at run time). Volumes: a `hostPath` is a bind mount;
a PersistentVolumeClaim that holds the model the server reads is a directory under the models directory, any
other claim a named volume; an `emptyDir` of medium Memory at /dev/shm is `--shm-size` (its `sizeLimit`, else
`--ipc host`). A server over several pods (a StatefulSet's ordinals, a LeaderWorkerSet's leader and workers)
is read from its first pod: rank 0, the leader's address a name hgxkit replaces by the head node's
(`LWS_LEADER_ADDRESS`, `LWS_GROUP_SIZE`, `LWS_WORKER_INDEX`, the pod-index label); a LeaderWorkerSet's pods,
which reach each other on any port, run on the host network (`--network host`). What a manifest sets that a
`docker run` cannot give (a ConfigMap or Secret volume, an env value from the pod's status, AMD or Ascend
devices) is refused by name; what changes nothing the container runs with (probes, Services, scheduling) is a
note or set aside. The NIM Operator's NIMService is read as the one container of its `spec.image` (a NIM, which the
importer refuses by name); LWS's DisaggregatedSet (prefill and decode roles) and KServe's LLMInferenceService (whose
container KServe's presets write) are refused by name.

Example:
    >>> from hgxkit.importing.documents import load_documents, yaml_regions
    >>> from hgxkit.importing.post import read_post
    >>> post = read_post("pod.yaml", "apiVersion: v1\\nkind: Pod\\nmetadata: {name: llm}\\nspec:\\n  containers:\\n"
    ...     "  - name: s\\n    image: vllm/vllm-openai:v0.9.0\\n    args: [--model, org/m]\\n"
    ...     "    resources: {limits: {nvidia.com/gpu: 2}}\\n")
    >>> [simple] = KUBERNETES.simples(load_documents(post, yaml_regions(post)[0]))
    >>> " ".join(simple.texts)
    'docker run --gpus 2 vllm/vllm-openai:v0.9.0 --model org/m'
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from hgxkit.errors import InputError
from hgxkit.importing.commands import Simple
from hgxkit.importing.documents import (
    LINE,
    LINES,
    SHAPE_ERRORS,
    Document,
    WordAt,
    as_input_error,
    container_command,
    document_simple,
    literal,
    refused,
    take_document,
)
from hgxkit.importing.engine_refusal import DISAGGREGATION
from hgxkit.importing.model_placement import DEFAULT_MODELS_DIR
from hgxkit.importing.pd_roles import role_refusal
from hgxkit.importing.platform import ForeignSetup, foreign_in, message, shows_nvidia
from hgxkit.importing.provenance import Exported, exported_by_hgxkit
from hgxkit.importing.reading import Reading
from hgxkit.kinds import KINDS, UNSUPPORTED, image_matches, python_program
from hgxkit.recipe.nodes import HGX_GPUS

_KUBE_VARIABLE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")
_POD_TEMPLATE = ("Deployment", "StatefulSet", "Job", "DaemonSet", "ReplicaSet", "ReplicationController")
_RUNTIMES = ("ServingRuntime", "ClusterServingRuntime")
_LWS_HEAD = "lws-leader"  # the leader's address in the imported command; replaced by the head node's
_WORKER_INDEX = re.compile(r"metadata\.(?:labels|annotations)\[['\"]leaderworkerset\.sigs\.k8s\.io/worker-index['\"]\]")
_VOLUME_FILES = ("configMap", "secret", "projected", "downwardAPI", "csi", "nfs", "ephemeral")


class Kubernetes:
    """A Kubernetes manifest: its serving container a `docker run` (see the module docstring)."""

    name = "Kubernetes manifest"

    def claims(self, simple: Simple) -> bool:
        return simple.kind == "kubernetes"

    def take(self, simple: Simple, reading: Reading) -> None:
        take_document(simple, reading)

    def claims_document(self, data: Any) -> bool:
        return isinstance(data, dict) and "apiVersion" in data and "kind" in data

    def simples(self, documents: Sequence[Document]) -> list[Simple]:
        runtimes = {_meta(d.data).get("name"): d for d in documents if d.data.get("kind") in _RUNTIMES}
        used = {
            (d.data.get("spec") or {}).get("predictor", {}).get("model", {}).get("runtime")
            for d in documents
            if d.data.get("kind") == "InferenceService"
        }
        overlay = next((d for d in documents if _kustomizes(d.data)), None)
        if overlay is not None:  # its patches change the resources beside it: none is what the cluster runs
            return [
                refused(overlay, "kubernetes", InputError(_kustomize_refusal(overlay)), overlay.first, overlay.last)
            ]
        read: list[tuple[Document, list[_PodSpec] | Exception]] = []
        for document in documents:
            data = document.data
            kind = data.get("kind")
            name = _meta(data).get("name", "")
            if kind in _RUNTIMES and name in used:
                read.append((document, []))
                continue
            try:
                if kind in _RUNTIMES:
                    _lone_runtime(document, f"{kind} {name}".strip())
                read.append((document, _pods(document, runtimes)))
            except (InputError, *SHAPE_ERRORS) as err:
                read.append((document, err))
        _place_groups([(d, p) for d, p in read if not isinstance(p, Exception)], documents)
        out: list[Simple] = []
        for document, pods in read:
            data = document.data
            kind = data.get("kind")
            name = _meta(data).get("name", "")
            if kind in _RUNTIMES and name in used:
                out.append(_aside(document, f"{kind} {name}: read with the InferenceService that names it"))
                continue
            try:
                if isinstance(pods, Exception):
                    raise pods
                if not pods:
                    out.append(_aside(document, f"a {kind} ({name or 'unnamed'}): runs no container"))
                exported = exported_by_hgxkit(_meta(data).get("annotations") or {})
                for pod in pods:
                    out += _Pod(document, pod, exported).simples()
            except (InputError, *SHAPE_ERRORS) as err:
                error = as_input_error(err, document.where(), f"{kind} {name}".strip())
                out.append(refused(document, "kubernetes", error, document.first, document.last))
        return out


KUBERNETES = Kubernetes()


def _meta(data: dict) -> dict:
    return data.get("metadata") or {}


def _aside(document: Document, why: str, first: int | None = None, last: int | None = None) -> Simple:
    return document_simple(document, "kubernetes", (), first or document.first, last or document.last, [why])


def _place_groups(read: list[tuple[Document, list[_PodSpec]]], documents: Sequence[Document]) -> None:
    """Several single-pod workloads of one manifest, each asking for a number of GPUs that together fit one node:
    the GPU groups of one setup, placed in order on consecutive GPUs (`__devices__`), each published on the port
    of the Service that selects it (`__service_ports__`), so that the importer joins them as groups."""
    workloads = []
    for document, pods in read:
        if document.data.get("kind") not in ("Deployment", "Pod", "StatefulSet") or len(pods) != 1:
            continue
        pod = pods[0]
        counts = [_gpu_count(c) for c in pod.get("containers") or [] if isinstance(c, dict)]
        counts = [c for c in counts if c]
        if pod.get("__group__") is None and len(counts) == 1 and pod.get("__replicas__", 1) == 1:
            workloads.append((document, pod, counts[0]))
    if len(workloads) < 2 or sum(count for _, _, count in workloads) > HGX_GPUS:
        return
    services = [d.data for d in documents if d.data.get("kind") == "Service"]
    first = 0
    for document, pod, count in workloads:
        pod["__devices__"] = list(range(first, first + count))
        first += count
        labels = _meta((document.data.get("spec") or {}).get("template") or document.data).get("labels") or {}
        for service in services:
            selector = (service.get("spec") or {}).get("selector") or {}
            selector = {k: v for k, v in selector.items() if k not in (LINE, LINES)}
            if selector and all(labels.get(k) == v for k, v in selector.items()):
                pod["__service_ports__"] = {
                    p.get("targetPort", p.get("port")): p.get("port")
                    for p in (service.get("spec") or {}).get("ports") or []
                }


def _gpu_count(container: dict) -> int | None:
    resources = container.get("resources") or {}
    request = _gpu_request({**(resources.get("requests") or {}), **(resources.get("limits") or {})})
    count = _whole(request[1]) if request else None
    return count if count else None


def _gpu_request(limits: dict) -> tuple[str, Any] | None:
    """(key, count) of a container's GPU request: `nvidia.com/gpu`, else MIG slices (`nvidia.com/mig-4g.96gb`,
    each a part of one GPU, which hgxkit gives whole)."""
    if "nvidia.com/gpu" in limits:
        return "nvidia.com/gpu", limits["nvidia.com/gpu"]
    return next(((k, v) for k, v in limits.items() if isinstance(k, str) and k.startswith("nvidia.com/mig-")), None)


def _whole(value: Any) -> int | None:
    """A resource count as a whole number (`2`, `"2"`), or None."""
    text = str(value).strip()
    return int(text) if text.isdigit() else None


# A pod spec key that makes its first container the server whatever its image (a platform's app of one container
# whose GPUs its plan gives: hgxkit.importing.pod_shaped).
FIRST_SERVES = "__first_serves__"


class _PodSpec(dict):
    """A pod spec and what the workload around it says (name, role, group size, extra args, replicas)."""


def _pods(document: Document, runtimes: dict[str, Document]) -> list[_PodSpec]:
    data = document.data
    kind = data.get("kind")
    spec = data.get("spec") or {}
    name = _meta(data).get("name", "")
    found: list[tuple[dict, dict]] = []  # (pod spec, context)
    if kind == "Pod" or kind in _RUNTIMES:
        found.append((spec, {}))
    elif kind in _POD_TEMPLATE:
        found.append(((spec.get("template") or {}).get("spec") or {}, {"replicas": spec.get("replicas", 1)}))
    elif kind == "CronJob":
        job = (spec.get("jobTemplate") or {}).get("spec") or {}
        found.append(((job.get("template") or {}).get("spec") or {}, {}))
    elif kind == "LeaderWorkerSet":
        template = spec.get("leaderWorkerTemplate") or {}
        pod = template.get("leaderTemplate") or template.get("workerTemplate") or {}
        context = {
            "group": template.get("size", 1),
            "replicas": spec.get("replicas", 1),
            "workers": template.get("workerTemplate"),
        }
        found.append((pod.get("spec") or {}, context))
    elif kind == "InferenceService":
        found.append(_predictor(document, spec.get("predictor") or {}, runtimes))
    elif kind == "NIMService":  # the NIM Operator runs one container of spec.image: the NIM
        image = spec.get("image") or {}
        reference = f"{image.get('repository')}:{image.get('tag') or 'latest'}"
        container = {"name": "nim", "image": reference, "resources": spec.get("resources") or {}, LINE: image.get(LINE)}
        found.append(({"containers": [container]}, {"replicas": spec.get("replicas", 1)}))
    elif kind == "LLMInferenceService":  # KServe's llm-d service: its controller fills in the container
        raise InputError(
            f"{document.where(data.get(LINE))}: LLMInferenceService {name}: KServe's controller writes the server's "
            "image and command from its LLMInferenceServiceConfig presets, not this manifest; import the "
            "Deployment it creates (kubectl get deployment -o yaml)"
        )
    elif (refusal := _rendered_elsewhere(document)) is not None:
        raise InputError(refusal)
    elif (str(data.get("apiVersion", "")).partition("/")[0], kind) in _CONTROLLED:
        group = str(data.get("apiVersion", "")).partition("/")[0]
        raise InputError(f"{document.where(data.get(LINE))}: {kind} {name}: {_CONTROLLED[group, kind]}")
    elif kind == "RayService":  # KubeRay: Ray Serve applications, which start the engine from Python code
        raise InputError(
            f"{document.where(data.get(LINE))}: RayService {name}: a Ray Serve application ({_ray_imports(spec)}) "
            "starts the engine from its Python code, not from a command this manifest holds; hgxkit deploys "
            "SGLang and vLLM from their own commands: import the `vllm serve` or `sglang serve` command instead"
        )
    elif kind == "RoleBasedGroup" and (refused := role_refusal(data)) is not None:
        raise InputError(f"{document.where(data.get(LINE))}: {refused}")
    elif kind == "DisaggregatedSet":  # LWS's prefill and decode roles, each a LeaderWorkerSet
        roles = ", ".join(str(r.get("name")) for r in spec.get("roles") or [] if isinstance(r, dict))
        raise InputError(
            f"{document.where(data.get(LINE))}: DisaggregatedSet {name}: prefill/decode disaggregation (roles "
            f"{roles}) is not supported yet: {DISAGGREGATION}"
        )
    out = []
    for pod, context in found:
        item = _PodSpec(pod)
        item.update({"__name__": name, "__kind__": kind, **{f"__{k}__": v for k, v in context.items()}})
        out.append(item)
    return out


# Custom resources whose controller writes the server's pod (image and command) from presets this manifest only
# names: (API group, kind) -> what it is, with the way out.
_CONTROLLED = {
    ("kubeai.org", "Model"): (
        "KubeAI's Model: KubeAI's controller writes the server's pod from its engine, url and resource profile, "
        "not this manifest; import the pod it creates (kubectl get pod -o yaml)"
    ),
    ("nvidia.com", "DynamoGraphDeployment"): (
        "NVIDIA Dynamo's graph deployment: Dynamo's operator runs its own frontend and workers (python -m "
        "dynamo.…), which hgxkit does not deploy (NVIDIA Dynamo is not supported yet); import the engine's own "
        "command (vllm serve, python -m sglang.launch_server)"
    ),
}


# What a kustomization changes in the resources it lists (a bare list of resources changes nothing).
_KUSTOMIZE_CHANGES = ("patches", "patchesStrategicMerge", "patchesJson6902", "images", "replacements", "components")


def _kustomizes(data: Any) -> bool:
    """True for a kustomization.yaml that changes what it lists (patches, images, components, …)."""
    return (
        isinstance(data, dict)
        and data.get("kind") == "Kustomization"
        and str(data.get("apiVersion", "")).startswith("kustomize.config.k8s.io/")
        and any(data.get(key) for key in _KUSTOMIZE_CHANGES)
    )


def _kustomize_refusal(document: Document) -> str:
    changes = ", ".join(f"{key}:" for key in _KUSTOMIZE_CHANGES if document.data.get(key))
    return (
        f"{document.where(document.data.get(LINE))}: a kustomize overlay (its {changes}): kustomize lays it over "
        "the resources it lists and writes the manifests the cluster runs, which no file of the post is; render "
        "them (kubectl kustomize DIR) and import the output"
    )


def _rendered_elsewhere(document: Document) -> str | None:
    """The refusal of a GitOps resource whose controller renders the manifests from a source the post does not
    hold: Flux's HelmRelease (a chart and its values) and Kustomization, Argo CD's Application; None for any other.
    Another accelerator in its lines is named first, as everywhere."""
    data = document.data
    group, kind = str(data.get("apiVersion", "")).partition("/")[0], data.get("kind")
    spec = data.get("spec") or {}
    name = _meta(data).get("name", "")
    if group == "helm.toolkit.fluxcd.io" and kind == "HelmRelease":
        chart = ((spec.get("chart") or {}).get("spec") or {}).get("chart") or (spec.get("chartRef") or {}).get("name")
        what = f"Flux installs the Helm chart {chart} with its spec.values"
        way = f"spec.values as values.yaml, then helm template {name or 'RELEASE'} {chart or 'CHART'} -f values.yaml"
    elif group == "kustomize.toolkit.fluxcd.io" and kind == "Kustomization":
        what, way = f"Flux applies the kustomization at {spec.get('path')}", f"kubectl kustomize {spec.get('path')}"
    elif group == "argoproj.io" and kind == "Application":
        source = spec.get("source") or next(iter(spec.get("sources") or []), None) or {}
        at = source.get("chart") or source.get("path") or source.get("repoURL")
        what, way = f"Argo CD renders its source {at}", "helm template or kubectl kustomize of that source"
    else:
        return None
    lines = document.post.lines[document.first - 1 : document.last]
    if not shows_nvidia(document.post.lines):
        for number, line in enumerate(lines, document.first):
            if (found := foreign_in(line)) is not None:
                raise ForeignSetup(message(document.where(number), found))
    return (
        f"{document.where(data.get(LINE))}: {kind} {name}: {what}, and that writes the server's pods, not this file; "
        f"render them ({way}) and import the manifests"
    )


def _ray_imports(spec: dict) -> str:
    """`import_path` of a RayService's first Serve application, as its serveConfigV2 text writes it."""
    config = spec.get("serveConfigV2") or spec.get("serveConfig") or ""
    found = re.search(r"import_path:\s*(\S+)", config) if isinstance(config, str) else None
    return f"import_path {found.group(1)}" if found else "serveConfigV2"


# Where KServe puts the model an InferenceService names (its storageUri, or a modelcar image's files).
_KSERVE_MODEL = "/mnt/models"


def _mounted(word: object, served: str) -> object:
    """A runtime's argument with KServe's model folder (`--model=/mnt/models`, `/mnt/models/`) as the model it
    holds."""
    if not isinstance(word, str):
        return word
    flag, equals, value = word.rpartition("=") if word.startswith("-") else ("", "", word)
    if value.rstrip("/") != _KSERVE_MODEL:
        return word
    return f"{flag}{equals}{served}"


def _lone_runtime(document: Document, title: str) -> None:
    """Refuse a KServe runtime without the InferenceService that uses it when it serves KServe's model folder: the
    model and the GPUs are that InferenceService's, which the post does not show."""
    containers = (document.data.get("spec") or {}).get("containers") or []
    for container in containers if isinstance(containers, list) else []:
        words = [str(w) for key in ("command", "args") for w in (container.get(key) or [])]
        if any(_KSERVE_MODEL in w for w in words):
            raise InputError(
                f"{document.where(container.get(LINE))}: {title} is a KServe runtime: the model it serves "
                f"({_KSERVE_MODEL}) and its GPUs come from an InferenceService that names it, which the post does not "
                "have; give that InferenceService with it, or a `docker run` of the model"
            )


def _predictor(document: Document, predictor: dict, runtimes: dict[str, Document]) -> tuple[dict, dict]:
    """The pod a KServe predictor runs: its own containers, or its model's ServingRuntime with the model's args."""
    model = predictor.get("model")
    if model is None:
        return predictor, {}
    line = model.get(LINE, document.first)
    runtime = model.get("runtime")
    if runtime not in runtimes:
        model_format = (model.get("modelFormat") or {}).get("name", "?")
        raise InputError(
            f"{document.where(line)}: predictor.model: modelFormat {model_format} runs KServe's own "
            f"runtime ({runtime or 'chosen by KServe'}), whose container the manifest does not show; "
            "give the ServingRuntime with it, or a predictor with `containers`"
        )
    pod = dict(runtimes[runtime].data.get("spec") or {})
    containers = [dict(c) for c in pod.get("containers") or []]
    uri = model.get("storageUri")
    if containers and isinstance(uri, str) and uri:
        # KServe fetches the storageUri into /mnt/models: the model the runtime serves is the URI's
        served = uri.removeprefix("hf://")
        for key in ("command", "args"):
            if containers[0].get(key):
                containers[0][key] = [_mounted(w, served) for w in containers[0][key]]
    if containers:
        containers[0]["args"] = [*(containers[0].get("args") or []), *(model.get("args") or [])]
        if model.get("resources"):
            containers[0]["resources"] = model["resources"]
    pod["containers"] = containers
    return pod, {}


class _Pod:
    """The serving container of one pod spec as `docker run` words; the other containers set aside."""

    def __init__(self, document: Document, pod: _PodSpec, exported: Exported | None = None) -> None:
        self.document = document
        self.pod = pod
        self.exported = exported
        self.name = pod["__name__"]
        self.notes: list[str] = []
        self.indexes: set[str] = set()  # env names that hold the pod index (rank 0 here)

    def where(self, line: int | None) -> str:
        return self.document.where(line)

    def simples(self) -> list[Simple]:
        containers = [c for c in self.pod.get("containers") or [] if isinstance(c, dict)]
        serving = [c for c in containers if _gpus(c) or _launches(c)]
        if not serving and len(containers) == 1 and _is_engine_image(containers[0]):
            serving = containers
        if (
            not serving
            and containers
            and (self.pod["__kind__"] in ("InferenceService", *_RUNTIMES) or FIRST_SERVES in self.pod)
        ):
            serving = containers[:1]  # a predictor's first container is its model server, whatever its image
        out: list[Simple] = []
        for container in containers:
            line = container.get(LINE, self.document.first)
            if container not in serving:
                out.append(
                    _aside(
                        self.document,
                        f"container {container.get('name')} ({container.get('image')}): "
                        "no GPUs and no server, not imported",
                        line,
                        line,
                    )
                )
                continue
            try:
                words = self._run(container)
            except (InputError, *SHAPE_ERRORS) as err:  # this container cannot be imported; another may be
                error = as_input_error(err, self.where(line), f"container {container.get('name')}")
                out.append(refused(self.document, "kubernetes", error, self.document.first, self.document.last))
                continue
            finally:
                notes, self.notes = self.notes, []
            # the whole document is the command's (its other lines are the pod around the container)
            out.append(
                document_simple(
                    self.document, "kubernetes", words, self.document.first, self.document.last, notes, self.exported
                )
            )
        for container in self.pod.get("initContainers") or []:
            line = container.get(LINE, self.document.first)
            out.append(_aside(self.document, f"init container {container.get('name')}: not run by hgxkit", line, line))
        if not containers:
            out.append(_aside(self.document, f"{self.pod['__kind__']} {self.name}: no containers"))
        return out

    def _run(self, container: dict) -> list[WordAt]:
        lines = container.get(LINES, {})
        line = container.get(LINE, self.document.first)
        at = self.where(line)
        words: list[WordAt] = [("docker", line), ("run", line)]  # no --name: a workload's name is no container's
        # the hardware first: a CPU or another accelerator's container is refused whatever its template would write
        gpus = self._gpus(container, lines.get("resources", line))
        refuse_template_variables(container, line, self.where)
        environment = self._variables(container)
        words += gpus
        words += self._pod_options(line)
        words += self._security(container, line)
        if container.get("workingDir"):
            words += [("--workdir", lines["workingDir"]), (literal(container["workingDir"]), lines["workingDir"])]
        words += self._env(container, lines.get("env", line))
        command = [self._expand(w, environment, at) for w in container.get("command") or []]
        args = [self._expand(w, environment, at) for w in container.get("args") or []]
        program = [*command, *args]
        words += self._ports(container, lines.get("ports", line))
        words += self._volumes(container, program, lines.get("volumeMounts", line))
        image = container.get("image")
        if not image:
            raise InputError(f"{at}: container {container.get('name')}: no image")
        if container.get("imagePullPolicy") == "Never" and self.document.image is None:
            raise InputError(
                f"{self.where(lines.get('imagePullPolicy', line))}: imagePullPolicy: Never: the image {image} is one "
                "the cluster's nodes already hold (a local build), which a node here cannot pull: give --image REF "
                "of a pullable image"
            )
        if command and len(command[0].split()) > 1:
            shown = command[0] if len(command[0]) <= 60 else command[0][:57] + "…"
            raise InputError(
                f"{self.where(lines.get('command', line))}: command's first item `{shown}` is one string with "
                "spaces, which Kubernetes runs as the name of a program (no shell splits it), so the container cannot "
                'start; write each word as an item of its own (command: ["python3", "-m", …])'
            )
        option, after, notes = container_command(image, command if "command" in container else None, args, at)
        self.notes += notes
        if option is not None:
            words += [("--entrypoint", lines.get("command", line)), (literal(option), lines.get("command", line))]
        words.append((literal(image), lines.get("image", line)))
        where_args = lines.get("args", lines.get("command", line))
        # each word at its own item's line where it is an item as written (a `sh -c` string's words are not)
        items = dict(
            reversed(
                [
                    *zip(command, getattr(container.get("command"), "lines", []), strict=False),
                    *zip(args, getattr(container.get("args"), "lines", []), strict=False),
                ]
            )
        )
        words += [(literal(w), items.get(w, where_args)) for w in after]
        self._multinode(line)
        return words

    def _variables(self, container: dict) -> dict[str, str]:
        """The values `$(NAME)` expands to: the container's plain env, LeaderWorkerSet's and the pod index."""
        values: dict[str, str] = {}
        if self.pod.get("__group__") is not None:
            values.update(
                LWS_LEADER_ADDRESS=_LWS_HEAD,
                LWS_GROUP_SIZE=str(self.pod["__group__"]),
                LWS_WORKER_INDEX="0",
                LWS_NAME=self.name,
            )
        for item in container.get("env") or []:
            if "value" in item:
                values[item["name"]] = "" if item["value"] is None else str(item["value"])
            elif _pod_index(item):
                values[item["name"]] = "0"
                self.indexes.add(item["name"])
        return values

    def _expand(self, text: Any, values: dict[str, str], where: str) -> str:
        """`$(NAME)` as the kubelet expands it (`$$` is a literal `$`); one nothing defines is refused."""
        text = str(text)

        def one(match: re.Match[str]) -> str:
            if match.group(0) == "$$":
                return "$"
            name = match.group(1)
            if name not in values:
                raise InputError(f"{where}: $({name}) is not defined by the container's env; write its value")
            if name.startswith("LWS_"):
                self.notes.append(f"{where}: $({name}) is {values[name]} (the leader pod, rank 0)")
            return values[name]

        expanded = _KUBE_VARIABLE.sub(one, text)
        for name in self.indexes:  # a shell in the container would expand these from the pod's env
            if re.search(rf"\${{?{name}\b", expanded):
                self.notes.append(f"{where}: ${name} is the pod index, 0 for the first pod (rank 0)")
                expanded = re.sub(rf"\${{{name}}}|\${name}\b", "0", expanded)
        return expanded

    def _gpus(self, container: dict, line: int) -> list[WordAt]:
        resources = container.get("resources") or {}
        limits = {**(resources.get("requests") or {}), **(resources.get("limits") or {})}
        for key in limits:
            if isinstance(key, str) and (found := foreign_in(key)) is not None:
                at = next(
                    (
                        m[LINES][key]
                        for m in (resources.get("limits"), resources.get("requests"))
                        if isinstance(m, dict) and key in m.get(LINES, {})
                    ),
                    line,
                )
                raise ForeignSetup(
                    f"{self.where(at)}: {key}: {limits[key]} asks for {found.title} accelerators; "
                    "hgxkit serves NVIDIA HGX-H200 nodes"
                )
        request = _gpu_request(limits)
        if request is None:
            raise InputError(
                f"{self.where(line)}: container {container.get('name')} asks for no nvidia.com/gpu "
                "(a CPU deployment?); hgxkit serves GPUs: set its nvidia.com/gpu limit"
            )
        key, count = request
        if key != "nvidia.com/gpu":
            self.notes.append(
                f"{self.where(line)}: {key}: {count} asks for MIG slices, each a part of one GPU; hgxkit gives the "
                f"server whole GPUs: {count} of them"
            )
        noted = [k for k in limits if k not in (key, LINE, LINES)]
        if noted:
            self.notes.append(
                f"{self.where(line)}: resources {', '.join(map(str, noted))} not carried (the node's "
                "are the container's)"
            )
        devices = self.pod.get("__devices__")
        if devices:
            listed = ",".join(map(str, devices))
            self.notes.append(
                f"{self.where(line)}: {self.pod['__kind__']} {self.name} asks for {count} GPU(s), one of "
                f"the manifest's GPU groups on one node: GPUs {listed} (on Kubernetes the device "
                "plugin chooses)"
            )
            return [("--gpus", line), (f'"device={listed}"', line)]
        return [("--gpus", line), (str(count), line)]

    def _pod_options(self, line: int) -> list[WordAt]:
        pod = self.pod
        lines = pod.get(LINES, {})
        words: list[WordAt] = []
        for key, option in (
            ("hostNetwork", ("--network", "host")),
            ("hostIPC", ("--ipc", "host")),
            ("hostPID", ("--pid", "host")),
        ):
            if pod.get(key) is True:
                words += [(option[0], lines.get(key, line)), (option[1], lines.get(key, line))]
        if self._spans_pods() and pod.get("hostNetwork") is not True:
            at = lines.get("hostNetwork", line)
            words += [("--network", at), ("host", at)]
            self.notes.append(
                f"{self.where(line)}: the {pod['__group__']} pods of {pod['__kind__']} {self.name} reach "
                "the leader on ports the manifest does not publish (the rendezvous's, NCCL's), as pods "
                "reach each other on Kubernetes: across docker hosts that is the host network "
                "(--network host), where the server's ports are its own"
            )
        runtime = pod.get("runtimeClassName")
        if runtime == "nvidia":
            at = lines.get("runtimeClassName", line)
            words += [("--runtime", at), ("nvidia", at)]
        elif runtime:
            self.notes.append(f"{self.where(lines.get('runtimeClassName'))}: runtimeClassName {runtime} not carried")
        replicas = pod.get("__replicas__", 1)
        if isinstance(replicas, int) and replicas > 1 and pod.get("__group__") is None:
            self.notes.append(
                f"{self.where(line)}: {pod['__kind__']} {self.name} runs {replicas} pods; this is the "
                "first (the recipe's groups place the others)"
            )
        return words

    def _security(self, container: dict, line: int) -> list[WordAt]:
        words: list[WordAt] = []
        for context in (self.pod.get("securityContext") or {}, container.get("securityContext") or {}):
            at = context.get(LINE, line)
            if context.get("privileged"):
                words += [("--privileged", at)]
            for cap in (context.get("capabilities") or {}).get("add") or []:
                words += [("--cap-add", at), (literal(cap), at)]
            for cap in (context.get("capabilities") or {}).get("drop") or []:
                words += [("--cap-drop", at), (literal(cap), at)]
            if "runAsUser" in context:
                group = f":{context['runAsGroup']}" if "runAsGroup" in context else ""
                words += [("--user", at), (f"{context['runAsUser']}{group}", at)]
            elif "runAsGroup" in context:
                words += [("--group-add", at), (str(context["runAsGroup"]), at)]
            if (context.get("seccompProfile") or {}).get("type") == "Unconfined":
                words += [("--security-opt", at), ("seccomp=unconfined", at)]
            if context.get("allowPrivilegeEscalation") is False:
                words += [("--security-opt", at), ("no-new-privileges", at)]
            if context.get("readOnlyRootFilesystem"):
                words += [("--read-only", at)]
        return words

    def _env(self, container: dict, line: int) -> list[WordAt]:
        words: list[WordAt] = []
        for item in container.get("env") or []:
            at = item.get(LINE, line)
            name = item.get("name")
            if "value" in item:
                words += [("-e", at), (literal(f"{name}={'' if item['value'] is None else item['value']}"), at)]
                continue
            source = item.get("valueFrom") or {}
            if "secretKeyRef" in source:
                ref = source["secretKeyRef"]
                self.notes.append(
                    f"{self.where(at)}: {name} is the key {ref.get('key')!r} of the Secret {ref.get('name')}, "
                    f"declared as a secret, taken from the environment ({name}) at run time"
                )
                words += [("-e", at), (name, at)]
            elif _pod_index(item):
                path = source["fieldRef"]["fieldPath"]
                what = "the LeaderWorkerSet's worker index" if _WORKER_INDEX.fullmatch(path) else "the pod index"
                self.notes.append(
                    f"{self.where(at)}: {name} is {what} ({path}), which the command reads as its rank: "
                    "hgxkit gives each host its rank"
                )
            elif _identity(source, name) and not self._spans_pods() and not _reads(container, name):
                self.notes.append(
                    f"{self.where(at)}: env {name} (the pod's {source['fieldRef'].get('fieldPath')}) left out: the "
                    f"container's command never reads ${name}, and a docker host has no pod to describe"
                )
            else:
                what = ", ".join(k for k in source if k not in (LINE, LINES)) or "valueFrom"
                raise InputError(
                    f"{self.where(at)}: env {name} comes from {what}, which a docker host does not "
                    "give; write its value"
                )
        for item in container.get("envFrom") or []:
            at = item.get(LINE, line)
            ref = item.get("secretRef") or item.get("configMapRef") or {}
            what = "Secret" if "secretRef" in item else "ConfigMap"
            raise InputError(
                f"{self.where(at)}: envFrom {what} {ref.get('name')}: its keys are not in the "
                "manifest; list each as env (a secretKeyRef is taken from the environment)"
            )
        return words

    def _spans_pods(self) -> bool:
        """True for a pod of a group of several pods (a LeaderWorkerSet's leader and workers)."""
        size = self.pod.get("__group__")
        return isinstance(size, int) and size > 1

    def _ports(self, container: dict, line: int) -> list[WordAt]:
        if self.pod.get("hostNetwork") is True or self._spans_pods():
            return []
        words: list[WordAt] = []
        for port in container.get("ports") or []:
            at = port.get(LINE, line)
            target = port.get("containerPort")
            host = port.get("hostPort", (self.pod.get("__service_ports__") or {}).get(target, target))
            protocol = f"/{port['protocol'].lower()}" if port.get("protocol") not in (None, "TCP") else ""
            words += [("-p", at), (f"{host}:{target}{protocol}", at)]
        return words

    def _volumes(self, container: dict, program: list[str], line: int) -> list[WordAt]:
        volumes = {v.get("name"): v for v in self.pod.get("volumes") or [] if isinstance(v, dict)}
        words: list[WordAt] = []
        for mount in container.get("volumeMounts") or []:
            at = mount.get(LINE, line)
            target = mount.get("mountPath", "")
            volume = volumes.get(mount.get("name"))
            if volume is None:
                raise InputError(
                    f"{self.where(at)}: volumeMount {mount.get('name')}: no volume of that name in the "
                    "pod (a volumeClaimTemplate?); mount a hostPath"
                )
            mode = ":ro" if mount.get("readOnly") else ""
            sub = f"/{mount['subPath']}" if mount.get("subPath") else ""
            if "hostPath" in volume:
                source = volume["hostPath"].get("path", "")
                words += [("-v", at), (literal(f"{source}{sub}:{target}{mode}"), at)]
            elif "persistentVolumeClaim" in volume:
                claim = volume["persistentVolumeClaim"].get("claimName", mount.get("name"))
                words += self._claim(claim, target, mode, program, at)
            elif "emptyDir" in volume:
                words += self._empty_dir(volume["emptyDir"] or {}, target, at)
            else:
                kind = next((k for k in volume if k in _VOLUME_FILES), next(iter(k for k in volume if k != "name")))
                raise InputError(
                    f"{self.where(at)}: volume {mount.get('name')} is a {kind}: its files are not in the "
                    f"manifest; mount the host directory that holds them at {target}"
                )
        return words

    def _claim(self, claim: str, target: str, mode: str, program: list[str], at: int) -> list[WordAt]:
        holds_model = any(w == target or w.startswith(target.rstrip("/") + "/") for w in program)
        if holds_model:
            source = f"{DEFAULT_MODELS_DIR}/{claim}"
            self.notes.append(
                f"{self.where(at)}: the PersistentVolumeClaim {claim} holds the model at {target}: "
                f"it is the host directory {source}"
            )
            return [("-v", at), (literal(f"{source}:{target}{mode}"), at)]
        self.notes.append(
            f"{self.where(at)}: the PersistentVolumeClaim {claim} at {target} is the named volume {claim}"
        )
        return [("-v", at), (literal(f"{claim}:{target}{mode}"), at)]

    def _empty_dir(self, empty: dict, target: str, at: int) -> list[WordAt]:
        memory = empty.get("medium") == "Memory"
        size = empty.get("sizeLimit")
        if target.rstrip("/") == "/dev/shm" and memory:
            if size:
                return [("--shm-size", at), (_docker_size(str(size)), at)]
            self.notes.append(f"{self.where(at)}: /dev/shm without a sizeLimit: the host's (--ipc host)")
            return [("--ipc", at), ("host", at)]
        if memory:
            return [("--tmpfs", at), (literal(f"{target}:size={_docker_size(str(size))}" if size else target), at)]
        return [("-v", at), (literal(target), at)]

    def _multinode(self, line: int) -> None:
        workers = self.pod.get("__workers__")
        if workers:
            self.notes.append(
                f"{self.where(line)}: the LeaderWorkerSet's workerTemplate runs ranks 1..; hgxkit "
                "renders each rank from the leader's command"
            )
        replicas = self.pod.get("__replicas__", 1)
        if self.pod.get("__group__") is not None and isinstance(replicas, int) and replicas > 1:
            self.notes.append(
                f"{self.where(line)}: replicas: {replicas} groups of the LeaderWorkerSet; the recipe is one"
            )


# `${NAME}`: not the kubelet's `$(NAME)`; a template tool (envsubst, a deploy script) writes it before `kubectl apply`.
_TEMPLATE_VARIABLE = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")
_SCRIPT_ASSIGNMENT = re.compile(r"(?:^|[\s;&|(])(?:export[ \t]+|local[ \t]+)?([A-Za-z_][A-Za-z0-9_]*)=")


def refuse_template_variables(container: dict, line: int, where: Callable[[int | None], str]) -> None:
    """Refuse a container whose image, command, args or resources hold a `${NAME}` (a manifest written as a
    template): Kubernetes passes it on as text, and the value it stands for is not in the post."""
    lines = container.get(LINES, {})
    resources = container.get("resources") or {}
    fields: list[tuple[Any, int]] = [(container.get("image"), lines.get("image", line))]
    for part in ("limits", "requests"):
        values = resources.get(part) or {}
        at = getattr(values, "get", lambda *_: {})(LINES, {})
        fields += [(v, at.get(k, lines.get("resources", line))) for k, v in values.items() if k not in (LINE, LINES)]
    for key in ("command", "args"):
        items = container.get(key) or []
        item_lines = getattr(items, "lines", [])
        fields += [(v, item_lines[i] if i < len(item_lines) else lines.get(key, line)) for i, v in enumerate(items)]
    env = {item.get("name") for item in container.get("env") or [] if isinstance(item, dict)}
    # and one a script of the container sets (`sh -c "MY_IP=$(hostname -i); … ${MY_IP}"`) is that script's own
    scripts = " ".join(str(v) for key in ("command", "args") for v in container.get(key) or [])
    env |= {m.group(1) for m in _SCRIPT_ASSIGNMENT.finditer(scripts)}
    for value, at in sorted(fields, key=lambda field: field[1]):
        found = next((m for m in _TEMPLATE_VARIABLE.finditer(str(value)) if m.group()[2:-1] not in env), None)
        if found and value is not None:  # one the container's env sets is a shell's there (`sh -c "…${NAME}…"`)
            raise InputError(
                f"{where(at)}: {found.group()} is not set by the post: the manifest is a template whose "
                f"variables a tool such as envsubst writes before `kubectl apply` (Kubernetes expands only "
                f"$(NAME) from the container's env); write its value into the manifest"
            )


def _gpus(container: dict) -> bool:
    resources = container.get("resources") or {}
    limits = {**(resources.get("requests") or {}), **(resources.get("limits") or {})}
    return _gpu_request(limits) is not None or any(isinstance(key, str) and foreign_in(key) for key in limits)


def _launches(container: dict) -> bool:
    words = [str(w) for w in [*(container.get("command") or []), *(container.get("args") or [])]]
    text = " ".join(words)
    return any(
        k.launches(python_program(words)) or any(" ".join(p) in text for p in k.programs) for k in KINDS.values()
    )


def _is_engine_image(container: dict) -> bool:
    image = str(container.get("image") or "")
    return any(image_matches(image, k.images) for k in (*KINDS.values(), *UNSUPPORTED))


def _identity(source: dict, name: str) -> bool:
    """Whether an env value is the pod's name, namespace, labels or node, or its address under a name no program of
    the container reads by itself (`POD_IP`; an engine's, NCCL's, torch's or Ray's own variable, `VLLM_HOST_IP`,
    `MASTER_ADDR`, is how a server reaches its peers whether or not its command names it)."""
    path = (source.get("fieldRef") or {}).get("fieldPath", "")
    if path in ("status.podIP", "status.hostIP", "status.podIPs", "status.hostIPs"):
        return not name.startswith((*(f"{k.name.upper()}_" for k in KINDS.values()), *_PROGRAM_ENV))
    return path.startswith("metadata.") or path in ("spec.nodeName", "spec.serviceAccountName")


# Prefixes of the variables the libraries under an engine read for their addresses and interfaces.
_PROGRAM_ENV = ("NCCL_", "GLOO_", "MASTER_", "RAY_", "TORCH_", "UCX_", "NVSHMEM_", "MC_", "MOONCAKE_")


def _reads(container: dict, name: str) -> bool:
    """Whether the container's command or args name variable `name` (`$NAME`, `${NAME}`, Kubernetes' `$(NAME)`)."""
    text = " ".join(str(w) for w in [*(container.get("command") or []), *(container.get("args") or [])])
    return re.search(rf"\$(?:{name}\b|\{{{name}\}}|\({name}\))", text) is not None


def _pod_index(item: dict) -> bool:
    """True for an env value that is the pod's index in its group: a StatefulSet's pod-index label, or the worker
    index LWS publishes as a label and an annotation (`leaderworkerset.sigs.k8s.io/worker-index`)."""
    path = ((item.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath", "")
    return "pod-index" in path or bool(_WORKER_INDEX.fullmatch(path))


def _docker_size(size: str) -> str:
    """A Kubernetes quantity (10Gi, 2G, 512Mi) as docker writes sizes (10g, 2g, 512m)."""
    match = re.fullmatch(r"(\d+)([KMGT]i?)?", size.strip())
    if not match:
        return size
    return match.group(1) + (match.group(2) or "b")[0].lower()
