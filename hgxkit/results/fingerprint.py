"""The host fingerprint: everything that can change a benchmark result, versioned, with MLPerf's names.

Field names follow MLPerf Inference's `systems/<system>.json` (system_desc) where they overlap
(`host_processor_model_name`, `host_memory_capacity`, `accelerator_model_name`, `accelerators_per_node`, …);
hgxkit's own fields are grouped under `gpus`, `packages`, `docker`, `serving`, `model`, `recipe`, `hgxkit`.
GPU UUIDs are stored hashed. `simulated` is true on simulated nodes, and every view says so.

Schema 2 adds the rest of MLPerf Inference's required system_desc fields (`SYSTEM_DESC_REQUIRED_FIELDS` of
mlcommons/inference `tools/submission/submission_checker.py`: division, submitter, status, system_type,
number_of_nodes, host storage/networking, accelerator interconnect and memory configuration, framework,
other_software_stack, cooling, notes …), each "unknown" where hgxkit cannot tell, and `server_env_report`
(the text of `python3 -m sglang.check_env`, or `vllm collect-env` for vLLM). `mlperf_system_desc()` gives them
under MLPerf's own key names. Schema-1 fingerprints load (the new fields read "unknown").

Example:
    >>> fp = Fingerprint(system_name="node1", simulated=True)
    >>> fp.to_json()["schema_version"], fp.to_json()["simulated"], fp.division
    (2, True, 'unknown')
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from hgxkit.results.versions import check_schema_version

FINGERPRINT_SCHEMA_VERSION = 2
READABLE_FINGERPRINT_VERSIONS = (1, 2)
UNKNOWN = "unknown"

# MLPerf Inference's required system_desc keys (mlcommons/inference, tools/submission/submission_checker.py),
# in its order; `accelerator_on-chip_memories` is not a Python name, so the field drops the hyphen.
MLPERF_SYSTEM_DESC_FIELDS = (
    "division",
    "submitter",
    "status",
    "system_name",
    "number_of_nodes",
    "host_processor_model_name",
    "host_processors_per_node",
    "host_processor_core_count",
    "host_memory_capacity",
    "host_storage_capacity",
    "host_storage_type",
    "accelerators_per_node",
    "accelerator_model_name",
    "accelerator_memory_capacity",
    "framework",
    "operating_system",
    "system_type",
    "other_software_stack",
    "host_processor_frequency",
    "host_processor_caches",
    "host_memory_configuration",
    "host_processor_interconnect",
    "host_networking",
    "host_networking_topology",
    "accelerator_frequency",
    "accelerator_host_interconnect",
    "accelerator_interconnect",
    "accelerator_interconnect_topology",
    "accelerator_memory_configuration",
    "accelerator_on-chip_memories",
    "cooling",
    "hw_notes",
    "sw_notes",
    "host_network_card_count",
    "system_type_detail",
)


def hash_uuid(uuid: str) -> str:
    """A stable, non-reversible stand-in for a GPU UUID (so archives can be shared)."""
    return "sha256:" + hashlib.sha256(uuid.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class GpuFingerprint:
    index: int
    name: str
    uuid_hash: str
    vbios_version: str | None = None
    driver_version: str | None = None
    cuda_version: str | None = None
    ecc_enabled: bool | None = None
    power_limit_w: float | None = None
    clocks_max_sm_mhz: int | None = None
    clocks_max_mem_mhz: int | None = None
    fabric_state: str | None = None
    fabric_status: str | None = None


@dataclass(frozen=True)
class Fingerprint:
    """Versioned host fingerprint (see module docstring)."""

    system_name: str
    simulated: bool
    schema_version: int = FINGERPRINT_SCHEMA_VERSION
    operating_system: str | None = None
    kernel: str | None = None
    host_processor_model_name: str | None = None
    host_processors_per_node: int | None = None
    host_processor_core_count: int | None = None
    host_memory_capacity: str | None = None
    numa_nodes: int | None = None
    secure_boot: str | None = None
    cgroup_version: int | None = None
    accelerator_model_name: str | None = None
    accelerators_per_node: int | None = None
    accelerator_memory_capacity: str | None = None
    gpus: list[GpuFingerprint] = field(default_factory=list)
    topology: dict[str, str] = field(default_factory=dict)
    # A server spanning nodes: {"nodes", "dist_port", "ranks": [{"rank", "host", "address"}]}; {} on one node.
    node_group: dict[str, Any] = field(default_factory=dict)
    packages: dict[str, str] = field(default_factory=dict)
    docker: dict[str, str] = field(default_factory=dict)
    serving: dict[str, Any] = field(default_factory=dict)
    model: dict[str, Any] = field(default_factory=dict)
    recipe: dict[str, Any] = field(default_factory=dict)
    gpu_health: dict[str, Any] = field(default_factory=dict)
    hgxkit: dict[str, str] = field(default_factory=dict)
    # MLPerf system_desc fields hgxkit cannot (yet) read from a host; "unknown" until someone fills them in.
    division: str = UNKNOWN
    submitter: str = UNKNOWN
    status: str = UNKNOWN
    number_of_nodes: int | str = 1
    host_storage_type: str = UNKNOWN
    host_storage_capacity: str = UNKNOWN
    host_processor_frequency: str = UNKNOWN
    host_processor_caches: str = UNKNOWN
    host_memory_configuration: str = UNKNOWN
    host_processor_interconnect: str = UNKNOWN
    host_networking: str = UNKNOWN
    host_networking_topology: str = UNKNOWN
    host_network_card_count: str = UNKNOWN
    accelerator_frequency: str = UNKNOWN
    accelerator_host_interconnect: str = UNKNOWN
    accelerator_interconnect: str = UNKNOWN
    accelerator_interconnect_topology: str = UNKNOWN
    accelerator_memory_configuration: str = UNKNOWN
    accelerator_on_chip_memories: str = UNKNOWN
    framework: str = UNKNOWN
    other_software_stack: str = UNKNOWN
    system_type: str = UNKNOWN
    system_type_detail: str = UNKNOWN
    cooling: str = UNKNOWN
    hw_notes: str = UNKNOWN
    sw_notes: str = UNKNOWN
    server_env_report: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any], *, source: str = "fingerprint.json") -> Fingerprint:
        """A fingerprint from its JSON: schema 1 and 2 load; an unknown or newer schema raises InputError."""
        check_schema_version(data, READABLE_FINGERPRINT_VERSIONS, source)
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["gpus"] = [GpuFingerprint(**gpu) for gpu in data.get("gpus", [])]
        values["schema_version"] = FINGERPRINT_SCHEMA_VERSION  # schema 1 lacks only fields that have defaults
        return cls(**values)

    def mlperf_system_desc(self) -> dict[str, str]:
        """MLPerf's system_desc under its own key names, every value a string ("unknown" where not known)."""
        out = {}
        for key in MLPERF_SYSTEM_DESC_FIELDS:
            value = getattr(self, key.replace("-", "_"), None)
            out[key] = UNKNOWN if value is None or value == "" else str(value)
        if self.simulated:
            notes = out["hw_notes"]
            out["hw_notes"] = "SIMULATED node: no real GPU" + ("" if notes == UNKNOWN else f"; {notes}")
        return out


# What differs between two fingerprints, in the order people look for it; each key is a dotted path.
COMPARED_FIELDS = (
    ("simulated", "simulated"),
    ("accelerator", "accelerator_model_name"),
    ("GPUs", "accelerators_per_node"),
    ("driver", "packages.driver"),
    ("fabric manager", "packages.fabricmanager"),
    ("CUDA", "gpus.0.cuda_version"),
    ("VBIOS", "gpus.0.vbios_version"),
    ("power limit", "gpus.0.power_limit_w"),
    ("container toolkit", "packages.container_toolkit"),
    ("docker", "docker.server_version"),
    ("server kind", "serving.kind"),
    ("image", "serving.image"),
    ("image digest", "serving.image_digest"),
    ("server version", "serving.server_version"),
    ("SGLang", "serving.sglang_version"),
    ("model", "model.repo_id"),
    ("model commit", "model.commit"),
    ("recipe", "recipe.name"),
    ("recipe hash", "recipe.hash"),
    ("kernel", "kernel"),
    ("OS", "operating_system"),
    ("CPU", "host_processor_model_name"),
    ("RAM", "host_memory_capacity"),
    ("hgxkit", "hgxkit.version"),
    ("framework", "framework"),
    ("interconnect", "accelerator_interconnect"),
    ("storage", "host_storage_type"),
    ("networking", "host_networking"),
)


def field_value(data: dict[str, Any], path: str) -> Any:
    """A dotted path's value in a fingerprint's JSON (`gpus.0.cuda_version`), None when absent."""
    value: Any = data
    for part in path.split("."):
        if isinstance(value, list):
            index = int(part)
            value = value[index] if index < len(value) else None
        elif isinstance(value, dict):
            value = value.get(part)
        else:
            return None
    return value


def fingerprint_differences(a: Fingerprint, b: Fingerprint) -> list[str]:
    """One line per differing field, e.g. `driver 580.95.05 vs 580.105.08`, `image digest differs`."""
    da, db = a.to_json(), b.to_json()
    out = []
    for label, path in COMPARED_FIELDS:
        va, vb = field_value(da, path), field_value(db, path)
        if va == vb:
            continue
        if label in ("image digest", "recipe hash", "model commit"):
            out.append(f"{label} differs ({_short(va)} vs {_short(vb)})")
        elif label == "simulated":
            out.append(f"simulated: {va} vs {vb}")
        else:
            out.append(f"{label} {va if va is not None else '?'} vs {vb if vb is not None else '?'}")
    where_a, where_b = (f.serving.get("endpoint") or f"{f.system_name} (deployed by hgxkit)" for f in (a, b))
    if where_a != where_b and (a.serving.get("endpoint") or b.serving.get("endpoint")):
        out.insert(0, f"ran at {where_a} vs {where_b}")  # a server hgxkit did not deploy (verify --endpoint)
    if a.simulated and b.simulated:
        out.insert(0, "simulated: both runs ran on simulated nodes (no real GPU)")
    return out


def member_differences(
    a_members: dict[str, Fingerprint], b_members: dict[str, Fingerprint], a: Fingerprint, b: Fingerprint
) -> list[str]:
    """What differs between two multi-node runs' members, rank by rank (`rank 1 (node2 vs node4): driver …`);
    a rank only one run has is said once. Empty for two single-node runs.

    >>> one, two = Fingerprint("n2", True, packages={"driver": "1"}), Fingerprint("n4", True, packages={"driver": "2"})
    >>> group = lambda h: {"ranks": [{"rank": 0, "host": "n1"}, {"rank": 1, "host": h}]}
    >>> member_differences({"n2": one}, {"n4": two}, Fingerprint("n1", True, node_group=group("n2")),
    ...                    Fingerprint("n3", True, node_group=group("n4")))
    ['rank 1 (n2 vs n4): driver 1 vs 2']
    """

    def by_rank(members: dict[str, Fingerprint], head: Fingerprint) -> dict[int, Fingerprint]:
        ranks = {r.get("host"): r.get("rank") for r in head.node_group.get("ranks", [])}
        return {int(ranks[h]): fp for h, fp in members.items() if isinstance(ranks.get(h), int)}

    ra, rb = by_rank(a_members, a), by_rank(b_members, b)
    out = []
    for rank in sorted(set(ra) | set(rb)):
        if rank not in ra or rank not in rb:
            have = ra.get(rank) or rb.get(rank)
            assert have is not None
            out.append(f"rank {rank} ({have.system_name}) only in {'A' if rank in ra else 'B'}")
            continue
        lines = [d for d in fingerprint_differences(ra[rank], rb[rank]) if not d.startswith("simulated: both")]
        out += [f"rank {rank} ({ra[rank].system_name} vs {rb[rank].system_name}): {d}" for d in lines]
    return out


def _short(value: Any) -> str:
    text = str(value) if value is not None else "?"
    return text.split(":", 1)[-1][:12] if text.startswith("sha256:") else text[:12]
