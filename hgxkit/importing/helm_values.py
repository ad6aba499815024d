"""A Helm chart's values file (the vLLM production-stack's, llm-d's modelservice's, or any other chart's: a model
key beside a pod's `nvidia.com/gpu` request or a replica count) known by its shape and refused by name: the chart's
templates write the server command, which the values file does not hold.

The way out is the chart's own output: `helm template RELEASE CHART -f VALUES` renders the Deployments (or
LeaderWorkerSets) the chart would apply, and those manifests import (see `kubernetes`).

Example:
    >>> from hgxkit.importing.documents import load_documents, yaml_regions
    >>> from hgxkit.importing.post import read_post
    >>> post = read_post("values.yaml", "servingEngineSpec:\\n  modelSpec:\\n  - name: m\\n")
    >>> [simple] = HELM_VALUES.simples(load_documents(post, yaml_regions(post)[0]))
    >>> simple.error().message.split(":")[2]
    ' a Helm values file of the vLLM production-stack chart (servingEngineSpec.modelSpec)'
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hgxkit.errors import InputError
from hgxkit.importing.commands import Simple
from hgxkit.importing.documents import LINE, LINES, Document, refused, take_document
from hgxkit.importing.reading import Reading

# (chart, the chart as `helm template` names it, the keys that show its values, the key its refusal points at)
_CHARTS = (
    ("the vLLM production-stack chart", "vllm/vllm-stack", ("servingEngineSpec",), "servingEngineSpec"),
    (
        "the llm-d modelservice chart",
        "llm-d-modelservice/llm-d-modelservice",
        ("modelArtifacts", "decode|prefill"),
        "modelArtifacts",
    ),
    # KubeAI's models chart: a catalog of Model resources (url, engine, resourceProfile), each enabled or not
    ("the KubeAI models chart", "kubeai/models", ("catalog",), "catalog"),
)


class HelmValues:
    """A chart's values file: recognised, and refused with the command that renders its manifests."""

    name = "Helm values file"

    def claims(self, simple: Simple) -> bool:
        return simple.kind == "helm-values"

    def take(self, simple: Simple, reading: Reading) -> None:
        take_document(simple, reading)

    def claims_document(self, data: Any) -> bool:
        return _chart(data) is not None

    def simples(self, documents: Sequence[Document]) -> list[Simple]:
        out = []
        for document in documents:
            chart = _chart(document.data)
            assert chart is not None
            title, reference, keys, key = chart
            shown = ", ".join(k.replace("|", "/") for k in keys)
            shown = "servingEngineSpec.modelSpec" if key == "servingEngineSpec" else shown
            line = document.data.get(LINES, {}).get(key, document.data.get(LINE))
            error = InputError(
                f"{document.where(line)}: a Helm values file of {title} ({shown}): the chart writes the server "
                f"command, not this file; render it (helm template RELEASE {reference} -f {document.post.name}) "
                "and import the manifests"
            )
            out.append(refused(document, "helm-values", error, document.first, document.last))
        return out


HELM_VALUES = HelmValues()


def _chart(data: Any) -> tuple[str, str, tuple[str, ...], str] | None:
    """The chart whose values `data` are, by their top-level keys; None for any other YAML."""
    if not isinstance(data, dict) or any(k in data for k in ("apiVersion", "kind", "services", "run", "type")):
        return None
    for chart in _CHARTS:
        if all(any(k in data for k in key.split("|")) for key in chart[2]):
            return chart
    # Any other chart's values: a model key beside a pod's GPU request (or replica count), and no command; at the
    # top, or one level down (`vllm: {model: …, resources: …}`, a chart that keeps its server's values under a key).
    for parent, values in [
        ("", data),
        *((k, v) for k, v in data.items() if isinstance(k, str) and isinstance(v, dict)),
    ]:
        model = next((k for k in values if isinstance(k, str) and "model" in k.lower()), None)
        if model is not None and (_asks_gpus(values.get("resources")) or "replicaCount" in values):
            named = f"{parent}.{model}" if parent else model
            return ("a chart hgxkit has no reader for", "CHART", (named, "resources"), parent or model)
    return None


def _asks_gpus(resources: Any) -> bool:
    """Whether a values file's `resources` (a pod's limits/requests) ask for NVIDIA GPUs."""
    if not isinstance(resources, dict):
        return False
    return any(isinstance(v, dict) and "nvidia.com/gpu" in v for v in resources.values())
