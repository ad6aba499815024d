"""The host fingerprint of a verify run, read through facts: everything that can change a benchmark result.

Example (execute time, in the verify role):
    fingerprint = collect_fingerprint(host.get_fact, system_name=host.name, recipe=recipe, rendered=[...],
                                      image="lmsysorg/sglang:dev-dspark", image_digest="sha256:…",
                                      server_info={...}, model_record={...}, gpu_health={...})
"""

from __future__ import annotations

import hashlib
import platform
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hgxkit import __version__
from hgxkit.kinds import DEFAULT_KIND, KINDS, legacy_version_keys
from hgxkit.node.facts_apt import InstalledPackages
from hgxkit.node.facts_docker import DockerInfo
from hgxkit.node.facts_driver import SecureBootState
from hgxkit.node.facts_gpu import NvidiaSmiXml, NvidiaTopology
from hgxkit.node.facts_system import CgroupVersion, KernelRelease, Lscpu, MemTotalBytes, OsRelease
from hgxkit.recipe.spec import Recipe
from hgxkit.results.fingerprint import UNKNOWN, Fingerprint, GpuFingerprint, hash_uuid

# Packages whose versions the fingerprint records (dpkg globs).
PACKAGE_PATTERNS = (
    "nvidia-open* cuda-drivers* nvidia-driver nvidia-fabricmanager* libnvidia-nscq* nvidia-container-toolkit "
    "datacenter-gpu-manager-4* docker-ce docker.io"
)


def _int(value: str | None) -> int | None:
    return int(value) if value and value.isdigit() else None


def _first(versions: dict[str, str], *prefixes: str) -> str | None:
    return next((v for k, v in sorted(versions.items()) if k.startswith(prefixes)), None)


def collect_fingerprint(
    get_fact: Callable[..., Any],
    *,
    system_name: str,
    recipe: Recipe,
    rendered: list[str],
    image: str,
    image_digest: str | None,
    server_info: dict,
    model_record: dict,
    gpu_health: dict,
    server_env_report: str | None = None,
    number_of_nodes: int = 1,
    node_group: dict | None = None,
) -> Fingerprint:
    """Read everything that can change a result from the host (one fact per source).

    The MLPerf system-description fields the host can tell are filled; the others stay "unknown".
    """
    os_release = get_fact(OsRelease)
    lscpu = get_fact(Lscpu)
    document = get_fact(NvidiaSmiXml)
    gpus = document.gpus if document else []
    topology = get_fact(NvidiaTopology) or {}
    versions = get_fact(InstalledPackages, patterns=PACKAGE_PATTERNS)
    docker = get_fact(DockerInfo)
    memory = get_fact(MemTotalBytes)
    driver = _driver_version(versions, document.versions.get("driver_version") if document else None)
    software = {
        "driver": driver,
        "CUDA": gpus[0].cuda_version if gpus else None,
        "Docker": docker.server_version,
        "container toolkit": versions.get("nvidia-container-toolkit"),
    }
    return Fingerprint(
        **_mlperf_fields(number_of_nodes, server_info, software, lscpu, topology, gpus),  # type: ignore[arg-type]
        server_env_report=server_env_report,
        system_name=system_name,
        simulated=bool(document and document.simulated) or bool(server_info.get("simulated")),
        operating_system=os_release.get("PRETTY_NAME"),
        kernel=get_fact(KernelRelease),
        host_processor_model_name=lscpu.get("Model name"),
        host_processors_per_node=_int(lscpu.get("Socket(s)")),
        host_processor_core_count=_int(lscpu.get("Core(s) per socket")),
        host_memory_capacity=f"{memory / 1024**3:.0f} GiB" if memory else None,
        numa_nodes=_int(lscpu.get("NUMA node(s)")),
        secure_boot=get_fact(SecureBootState),
        cgroup_version=get_fact(CgroupVersion),
        accelerator_model_name=gpus[0].name if gpus else None,
        accelerators_per_node=len(gpus) or None,
        accelerator_memory_capacity=f"{gpus[0].memory_total_mib} MiB" if gpus and gpus[0].memory_total_mib else None,
        gpus=[_gpu_fingerprint(g) for g in gpus],
        topology={f"{r}-{c}": v for (r, c), v in topology.items() if r.startswith("GPU")},
        node_group=node_group or {},
        packages=_package_versions(versions, driver),
        docker=_docker_record(docker),
        serving=_serving_record(image, image_digest, server_info),
        model=model_record,
        recipe=_recipe_record(recipe, rendered),
        gpu_health=gpu_health,
        hgxkit={"version": __version__, "git_commit": controller_git_commit(), "python": platform.python_version()},
    )


def _driver_version(versions: dict[str, str], smi_driver: str | None) -> str | None:
    """The NVIDIA driver's upstream version from its package (580.105.08-1 -> 580.105.08), else nvidia-smi's."""
    driver = _first(versions, "nvidia-open", "cuda-drivers", "nvidia-driver")
    return driver.split("-")[0] if driver else smi_driver


def _mlperf_fields(
    number_of_nodes: int,
    server_info: dict,
    software: dict[str, str | None],
    lscpu: dict[str, str],
    topology: dict[tuple[str, str], str],
    gpus: list,
) -> dict[str, Any]:
    """The MLPerf system-description fields the host can tell ("unknown" for each it cannot)."""
    kind = str(server_info.get("kind") or DEFAULT_KIND)
    version = server_info.get("version")
    links = {v for (r, c), v in topology.items() if r.startswith("GPU") and c.startswith("GPU") and r != c}
    caches = (f"{k.split()[0]}: {lscpu[k]}" for k in ("L1d cache", "L2 cache", "L3 cache") if lscpu.get(k))
    return {
        "number_of_nodes": number_of_nodes,
        "system_type": "datacenter",
        "framework": f"{KINDS[kind].title} {version}" if kind in KINDS and version else UNKNOWN,
        "other_software_stack": ", ".join(f"{k} {v}" for k, v in software.items() if v) or UNKNOWN,
        "host_processor_frequency": f"{lscpu['CPU max MHz']} MHz" if lscpu.get("CPU max MHz") else UNKNOWN,
        "host_processor_caches": ", ".join(caches) or UNKNOWN,
        **_interconnect(links),
        "accelerator_memory_configuration": "HBM3e" if gpus and "H200" in gpus[0].name else UNKNOWN,
    }


def _interconnect(links: set[str]) -> dict[str, str]:
    """The GPU interconnect from the link types between GPU pairs: one NVLink type between every pair is NVSwitch."""
    return {
        "accelerator_interconnect": "NVLink" if links and all(v.startswith("NV") for v in links) else UNKNOWN,
        "accelerator_interconnect_topology": f"all-to-all {sorted(links)[0]} (NVSwitch)"
        if len(links) == 1 and next(iter(links)).startswith("NV")
        else UNKNOWN,
    }


def _gpu_fingerprint(gpu: Any) -> GpuFingerprint:
    """One GPU's record, its UUID hashed."""
    return GpuFingerprint(
        index=gpu.index,
        name=gpu.name,
        uuid_hash=hash_uuid(gpu.uuid),
        vbios_version=gpu.vbios_version,
        driver_version=gpu.driver_version,
        cuda_version=gpu.cuda_version,
        ecc_enabled=gpu.ecc_enabled,
        power_limit_w=gpu.power_limit_w,
        clocks_max_sm_mhz=gpu.clocks_max_sm_mhz,
        clocks_max_mem_mhz=gpu.clocks_max_mem_mhz,
        fabric_state=gpu.fabric_state,
        fabric_status=gpu.fabric_status,
    )


def _package_versions(versions: dict[str, str], driver: str | None) -> dict[str, str | None]:
    """The versions of the host packages a result depends on (None: not installed)."""
    fabric = _first(versions, "nvidia-fabricmanager")
    return {
        "driver": driver,
        "fabricmanager": fabric.split("-")[0] if fabric else None,
        "container_toolkit": versions.get("nvidia-container-toolkit"),
        "dcgm": _first(versions, "datacenter-gpu-manager"),
        "docker": versions.get("docker-ce") or versions.get("docker.io"),
    }


def _docker_record(docker: Any) -> dict[str, str | None]:
    """The Docker engine's settings (empty when no server answered)."""
    if not docker.server_version:
        return {}
    return {
        "server_version": docker.server_version,
        "storage_driver": docker.storage_driver,
        "cgroup_driver": docker.cgroup_driver,
        "cgroup_version": docker.cgroup_version,
        "runtimes": ",".join(docker.runtimes),
        "default_runtime": docker.default_runtime,
    }


def _serving_record(image: str, image_digest: str | None, server_info: dict) -> dict[str, Any]:
    """The image and what the server reported about itself."""
    own = KINDS.get(server_info.get("kind", DEFAULT_KIND))  # type: ignore[arg-type]
    own_keys = own.version_keys if own else ()
    return {
        "image": image,
        "image_digest": image_digest,
        "kind": server_info.get("kind"),
        "server_version": server_info.get("version"),
        # Stored fingerprints name the version by kind (SGLang's `sglang_version`), so it is written there too,
        # to keep them comparable. Every kind's key is written: the running kind's holds the version, the rest None.
        **{key: server_info.get("version") if key in own_keys else None for key in legacy_version_keys()},
        "speculative_algorithm": server_info.get("speculative_algorithm"),
        "moe_runner_backend": server_info.get("moe_runner_backend"),
        **({"node_rank": server_info["node_rank"]} if "node_rank" in server_info else {}),
    }


def _recipe_record(recipe: Recipe, rendered: list[str]) -> dict[str, Any]:
    """The recipe's name, path and file hash, and the commands rendered from it."""
    recipe_text = Path(recipe.path).read_bytes() if recipe.path else b""
    return {
        "name": recipe.name,
        "path": recipe.path,
        "hash": "sha256:" + hashlib.sha256(recipe_text).hexdigest(),
        "rendered": rendered,
    }


def controller_git_commit() -> str | None:
    """The hgxkit checkout's commit on the controller (None outside a git checkout)."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
            cwd=Path(__file__).resolve().parent,
        )
    except OSError:
        return None
    commit = out.stdout.strip()
    return commit if re.fullmatch(r"[0-9a-f]{40}", commit) else None
