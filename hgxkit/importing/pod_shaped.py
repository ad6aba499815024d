"""Deployment files of platforms whose containers are Kubernetes-shaped under other keys, read as the Pods they
stand for, which the Kubernetes reader then reads (image, `command` the entrypoint and `args` its arguments, env,
ports, GPUs, template variables): an Akash SDL (`services:` beside `profiles:` and `deployment:`, its GPUs in
`profiles.compute.<service>.resources.gpu.units`) and an Azure Container App (`properties.template.containers`, its
GPUs a workload profile's, which the file only names). What such a file holds besides its containers (an Akash
placement's pricing, an app's ingress and scale rules) is no setting of the server.

Example:
    >>> sdl = {"version": "2.0", "services": {"web": {"image": "x", "env": ["A=1"]}}, "profiles": {}, "deployment": {}}
    >>> AKASH_SDL.claims_document(sdl), CONTAINER_APP.claims_document(sdl)
    (True, False)
    >>> _akash_pods(Document(None, None, sdl, 1, 1, {}))[0]["spec"]["containers"][0]["env"]
    [{'name': 'A', 'value': '1'}]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from hgxkit.errors import InputError
from hgxkit.importing.commands import Simple
from hgxkit.importing.documents import LINE, LINES, Document
from hgxkit.importing.kubernetes import FIRST_SERVES, KUBERNETES, refuse_template_variables


@dataclass(frozen=True)
class PodShaped:
    """A document format that hands Kubernetes the Pods its documents stand for."""

    name: str
    claims: Callable[[dict], bool]
    pods: Callable[[Document], list[dict]]

    def claims_document(self, data: Any) -> bool:
        return isinstance(data, dict) and self.claims(data)

    def simples(self, documents: Sequence[Document]) -> list[Simple]:
        pods = [replace(d, data=pod) for d in documents for pod in self.pods(d)]
        return KUBERNETES.simples(pods)


def _mapping(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _pod(name: str, containers: list[dict], line: Any, platform: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{name} ({platform})"},
        "spec": {"containers": containers},
        LINE: line,
    }


def _akash_pods(document: Document) -> list[dict]:
    """One Pod per Akash service: its image, command and args, `NAME=value` env, exposed ports, and its profile's
    GPU units as `nvidia.com/gpu`."""
    data = document.data
    compute = _mapping(_mapping(data.get("profiles")).get("compute"))
    pods = []
    for name, service in _mapping(data.get("services")).items():
        if name in (LINE, LINES):  # the loader's line keys
            continue
        service = _mapping(service)
        gpu = _mapping(_mapping(_mapping(compute.get(name)).get("resources")).get("gpu"))
        container: dict[str, Any] = {key: service[key] for key in ("image", "command", "args") if key in service}
        container["name"] = name
        container["env"] = [
            {"name": n, "value": v} for n, _, v in (str(e).partition("=") for e in service.get("env") or [])
        ]
        container["ports"] = [
            {"containerPort": _mapping(p).get("port")} for p in service.get("expose") or [] if _mapping(p).get("port")
        ]
        if gpu.get("units"):
            container["resources"] = {"limits": {"nvidia.com/gpu": gpu["units"]}}
        container[LINE] = service.get(LINE)
        pods.append(_pod(str(name), [container], service.get(LINE), "an Akash SDL service"))
    return pods


def _akash(data: dict) -> bool:
    return isinstance(data.get("services"), dict) and isinstance(data.get("profiles"), dict) and "deployment" in data


def _app_template(data: dict) -> dict:
    return _mapping(_mapping(data.get("properties")).get("template"))


def _app_pods(document: Document) -> list[dict]:
    """The app's containers as one Pod: env `secretRef`s as Kubernetes secret references, the GPUs of its workload
    profile as each container's `nvidia.com/gpu`; volume mounts (Azure Files shares) left out, as the app's storage
    is no file hgxkit can place. A template's `${NAME}` in a container is named first, as in a manifest."""
    data = document.data
    properties = _mapping(data.get("properties"))
    profile = str(properties.get("workloadProfileName") or "")
    containers = []
    for item in _app_template(data).get("containers") or []:
        container = {k: v for k, v in _mapping(item).items() if k != "volumeMounts"}
        container["env"] = [
            {"name": e.get("name"), "valueFrom": {"secretKeyRef": {"name": e["secretRef"], "key": e["secretRef"]}}}
            if "secretRef" in e
            else {"name": e.get("name"), "value": e.get("value")}
            for e in map(_mapping, container.get("env") or [])
        ]
        refuse_template_variables(container, container.get(LINE, document.first), document.where)
        if "${" in profile:
            line = _mapping(properties.get(LINES)).get("workloadProfileName", document.first)
            raise InputError(
                f"{document.where(line)}: {profile} (workloadProfileName, which gives the app its GPUs) is not set "
                "by the post: the file is a template; write the workload profile's name"
            )
        if _GPU_PROFILES.get(profile):
            container["resources"] = {
                **_mapping(container.get("resources")),
                "limits": {"nvidia.com/gpu": _GPU_PROFILES[profile]},
            }
        containers.append(container)
    pod = _pod(str(data.get("name") or "app"), containers, data.get(LINE), "an Azure Container App")
    if len(containers) == 1:  # its GPUs are the workload profile's, which no container names: it is the server
        pod["spec"][FIRST_SERVES] = True
    return [pod]


# Azure's GPU workload profiles and the GPUs each gives a replica (learn.microsoft.com, "Workload profiles in Azure
# Container Apps").
_GPU_PROFILES = {
    "NC24-A100": 1,
    "NC48-A100": 2,
    "NC96-A100": 4,
    "Consumption-GPU-NC24-A100": 1,
    "Consumption-GPU-NC8as-T4": 1,
}


def _container_app(data: dict) -> bool:
    return isinstance(_app_template(data).get("containers"), list)


AKASH_SDL = PodShaped("Akash SDL", _akash, _akash_pods)
CONTAINER_APP = PodShaped("Azure Container App", _container_app, _app_pods)
