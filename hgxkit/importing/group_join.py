"""Serving commands that differ only in their GPUs, port and name: the GPU groups of one recipe.

A post that starts one server per GPU group writes the command once per group (`CUDA_VISIBLE_DEVICES=0,1,2,3 …
--port 30000`, then `4,5,6,7 … --port 30001`). They become one command with `{{gpus}}`, `{{port}}` and
`{{name}}`, the groups listed explicitly (`groups.explicit`), the host ports `port_base + group`. Every group's
server listens on the first command's port inside its own container; only the published host port differs.

Example:
    >>> from hgxkit.recipe.docker_parse import parse_option_words
    >>> from hgxkit.recipe.spec import DockerSpec
    >>> docker = [DockerSpec(("docker", "run"), parse_option_words(["--gpus", f'"device={g}"', "-p", f"{p}:{p}"],
    ...           source="p")) for g, p in (("0,1", 30000), ("2,3", 30001))]
    >>> joined = join_groups(docker, where="p:1")
    >>> [e.words for e in joined.docker.entries], joined.groups.explicit, joined.groups.port_base
    ([('--gpus', '"device={{gpus}}"'), ('-p', '{{port}}:30000')], ((0, 1), (2, 3)), 30000)
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

from hgxkit.errors import InputError
from hgxkit.recipe.docker_options import canonical
from hgxkit.recipe.docker_parse import OptionEntry
from hgxkit.recipe.groups import gpu_ids_from_spec
from hgxkit.recipe.nodes import HGX_GPUS
from hgxkit.recipe.spec import DockerSpec, Grouping, parse_publish


@dataclass(frozen=True)
class GroupJoin:
    """The docker options of the template command, the grouping, and what was noted."""

    docker: DockerSpec
    groups: Grouping
    notes: tuple[str, ...]


def join_groups(dockers: Sequence[DockerSpec], *, where: str, sides: bool = False) -> GroupJoin:
    """One template for commands whose docker options differ in `--gpus`, published ports and `--name` only.
    `sides`: the commands are the prefill and decode sides of a split, whose names may say the side
    (`sglang-prefill`, `sglang-decode`): they become their common prefix and the group index, with a note."""
    lists = [gpu_ids_from_spec(d.last("--gpus")) for d in dockers]
    if any(ids is None for ids in lists):
        raise InputError(f"{where}: the commands differ but not every one names its GPUs (--gpus '\"device=…\"')")
    groups = tuple(tuple(ids) for ids in lists if ids is not None)
    flat = [gpu for group in groups for gpu in group]
    if len(set(flat)) != len(flat):
        raise InputError(f"{where}: the commands share GPUs ({', '.join(map(str, groups))}); give each its own")
    ports = [_host_port(d) for d in dockers]
    base = ports[0]
    if base is not None and ports != [base + i for i in range(len(ports))]:
        raise InputError(
            f"{where}: the commands publish ports {', '.join(map(str, ports))}; groups publish port_base + group "
            "index, so give them consecutive ports"
        )
    names = [d.last("--name") for d in dockers]
    notes = []
    if sides and any(names) and None not in names and not _numbered(names):
        template = (os.path.commonprefix([n for n in names if n]) or "group-") + "{{group}}"  # noqa: RUF071
        notes.append(f"{where}: container names {', '.join(n or '' for n in names)} become {template}")
    else:
        template = _name_template(names, where) if any(names) else None
    entries = [_template_entry(entry, template is not None) for entry in dockers[0].entries]
    listed = "; ".join(",".join(map(str, group)) for group in groups)
    notes.insert(0, f"{where}: {len(groups)} commands, one per GPU group ({listed}), are the groups of one recipe")
    grouping = Grouping(explicit=groups, gpus_per_node=HGX_GPUS, port_base=base, name_template=template)
    return GroupJoin(DockerSpec(dockers[0].invocation, tuple(entries)), grouping, tuple(notes))


def _host_port(docker: DockerSpec) -> int | None:
    ports = [p.host_port for p in docker.ports() if p.host_port]
    return int(ports[0]) if ports and ports[0].isdigit() else None


def _numbered(names: list[str | None]) -> bool:
    prefix = os.path.commonprefix([n for n in names if n])  # noqa: RUF071  (names, not paths)
    return all((n or "")[len(prefix) :].isdigit() for n in names)


def _name_template(names: list[str | None], where: str) -> str:
    if None in names:
        raise InputError(f"{where}: some of the commands name their container and some do not; name them all")
    prefix = os.path.commonprefix([n for n in names if n])  # noqa: RUF071  (names, not paths)
    tails = [n[len(prefix) :] for n in names if n]
    if not all(tail.isdigit() for tail in tails):
        raise InputError(f"{where}: container names {', '.join(n or '' for n in names)} differ in more than a number")
    return prefix + "{{group}}"


def _template_entry(entry: OptionEntry, named: bool) -> OptionEntry:
    for index, use in enumerate(entry.uses):
        option = canonical(use.option.name)
        if option == "--gpus":
            entry = entry.with_value(index, '"device={{gpus}}"')
        elif option == "--publish" and use.value and parse_publish(use.value).host_port:
            mapping = parse_publish(use.value)
            host = f"{mapping.host_ip}:" if mapping.host_ip else ""
            entry = entry.with_value(index, f"{host}{{{{port}}}}:{mapping.container_port}")
        elif option == "--name" and named:
            entry = entry.with_value(index, "{{name}}")
    return entry


_ORDINALS = re.compile(r"\d+(?:,\d+)*")


def visible_devices_as_gpus(docker: DockerSpec) -> tuple[DockerSpec, str] | None:
    """`--gpus all -e CUDA_VISIBLE_DEVICES=4,5,6,7` written as `--gpus '"device=4,5,6,7"'` (CUDA in the container
    then numbers the same four GPUs 0-3, as it numbers the chosen ones in either form), with the list; None for a
    command that chooses its GPUs otherwise."""
    if docker.last("--gpus") != "all":
        return None
    chosen = [e.value for e in docker.env() if e.name == "CUDA_VISIBLE_DEVICES"]
    if len(chosen) != 1 or chosen[0] is None or not _ORDINALS.fullmatch(chosen[0]):
        return None
    entries = []
    for entry in docker.entries:
        uses = [canonical(u.option.name) for u in entry.uses]
        if "--env" in uses and any((u.value or "").startswith("CUDA_VISIBLE_DEVICES=") for u in entry.uses):
            continue
        if uses == ["--gpus"]:
            entry = entry.with_value(0, f'"device={chosen[0]}"')
        entries.append(entry)
    return DockerSpec(docker.invocation, tuple(entries)), chosen[0]


# A GPU named by its UUID (`GPU-8cba8394-b5d6-…`) or a MIG device's (`MIG-…`): one machine's own GPU.
_GPU_UUID = re.compile(r"(?:GPU|MIG)-[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")
_DEVICE_NAMES = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")


def uuid_devices(docker: DockerSpec) -> tuple[DockerSpec, str] | None:
    """`docker` with GPUs named by the poster's machine's UUIDs (`-e NVIDIA_VISIBLE_DEVICES=GPU-…,GPU-…`, or
    `--gpus '"device=GPU-…"'`) named as the node's first ones, as many (`0,1`), and the UUIDs as posted; None where
    no GPU is named by UUID."""
    entries, shown = [], ""
    for entry in docker.entries:
        for index, use in enumerate(entry.uses):
            name = canonical(use.option.name)
            value = use.value or ""
            env, _, listed = value.partition("=") if name == "--env" else ("", "", value)
            if name == "--env" and env not in _DEVICE_NAMES:
                continue
            if name == "--gpus":
                listed = listed.strip("\"'").removeprefix("device=")
            parts = [p.strip().strip("\"'") for p in listed.strip("\"'").split(",")]
            if name not in ("--env", "--gpus") or not parts or not all(_GPU_UUID.fullmatch(p) for p in parts):
                continue
            ordinals = ",".join(str(i) for i in range(len(parts)))
            shown = listed.strip("\"'")
            entry = entry.with_value(index, f"{env}={ordinals}" if env else f'"device={ordinals}"')
        entries.append(entry)
    return (DockerSpec(docker.invocation, tuple(entries)), shown) if shown else None
