"""What one Kubernetes pod of a recipe asks for besides its GPUs: CPU and memory, each computed from the recipe, with
the arithmetic the manifest shows as a comment. Requests equal limits (QoS Guaranteed): under memory pressure the
kubelet evicts such a pod last, and its static CPU manager can give it whole cores.

Memory, for one pod (one host of its group), in GiB:
- the weights' page cache: the model's size on disk (`--model-gb`: the recipe does not hold it) over the hosts the
  group spans, as each host reads its share; left out, and said so, when it is not given;
- the host pools the server's flags pin on the pod's GPUs (hgxkit.serving.policy.host_pools: SGLang's HiCache,
  estimated from the weights like `doctor` does, so an upper bound without `--model-gb`; vLLM's CPU and KV
  offloading);
- /dev/shm, a memory-backed emptyDir whose pages are charged to the pod (its size limit, the recipe's --shm-size);
- the engine itself: ENGINE_GIB_PER_GPU for each GPU's rank process and ENGINE_GIB for the rest.
CPU: CPUS_PER_GPU for each GPU's rank and CPUS for the API server and its tokenizer.

The constants are estimates for an HGX H200 node: a cluster's own numbers are a patch of the kustomize base
(hgxkit/export/kubernetes.py).

Example:
    >>> from hgxkit.recipe.read import load_recipe
    >>> marlin = load_recipe("recipes/deepseek-v4-flash-dspark-marlin.yaml")
    >>> sized = pod_resources(marlin, gpus=4, hosts=1, shm_size="32g", model_gb=160)
    >>> sized.resources()
    {'cpu': '36', 'memory': '1505Gi'}
    >>> sized.comment()[1]
    'memory 1505Gi = weights 160 (--model-gb 160 over 1 host) + HiCache 4 ranks x 318.2 = 1272.8 + /dev/shm 32 + \
engine 40 (4 GPUs x 8 + 8)'
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hgxkit.recipe.danger import docker_size_bytes
from hgxkit.recipe.spec import Recipe
from hgxkit.serving.policy import H200_MEMORY_GB, host_pools

GIB = 1024**3
# Host memory of each GPU's rank process beyond what its flags pin (the CUDA context and libraries, pinned staging
# buffers, NCCL's host buffers, CUDA graph bookkeeping), and of the pod's other processes (the API server, tokenizer
# and detokenizer, each a Python interpreter with the tokenizer loaded).
ENGINE_GIB_PER_GPU = 8
ENGINE_GIB = 8
# CPUs: each rank's scheduler loop and NCCL's proxy threads keep a core busy and then some; the API server tokenizes.
CPUS_PER_GPU = 8
CPUS = 4


@dataclass(frozen=True)
class PodResources:
    """A pod's CPUs and memory (GiB, whole), and the terms the memory is the sum of: (what, GiB)."""

    cpus: int
    memory_gib: int
    terms: tuple[tuple[str, float], ...]
    gpus: int

    def resources(self) -> dict[str, str]:
        """The container's requests (and, the same, its limits) besides its GPUs."""
        return {"cpu": str(self.cpus), "memory": f"{self.memory_gib}Gi"}

    def comment(self) -> list[str]:
        """The arithmetic, as comment lines for the manifest."""
        memory = " + ".join(what for what, _ in self.terms)
        return [
            "requests = limits (QoS Guaranteed: evicted last under memory pressure)",
            f"memory {self.memory_gib}Gi = {memory}",
            f"cpu {self.cpus} = {_gpus(self.gpus)} x {CPUS_PER_GPU} + {CPUS}",
        ]


def pod_resources(
    recipe: Recipe, *, gpus: int, hosts: int, shm_size: str | None, model_gb: float | None
) -> PodResources:
    """The CPUs and memory of one pod running `gpus` GPUs of the recipe's group over `hosts` hosts (module doc)."""
    terms: list[tuple[str, float]] = []
    if model_gb:
        share = model_gb / hosts
        terms.append(
            (f"weights {share:g} (--model-gb {model_gb:g} over {hosts} host{'s' if hosts > 1 else ''})", share)
        )
    else:
        terms.append(("weights 0 (their size is not in the recipe: --model-gb GB counts their page cache)", 0.0))
    pools = host_pools(recipe, gpus=gpus, gpu_memory_gb=H200_MEMORY_GB, weights_gb=model_gb or 0.0)
    terms += [(f"{what} = {gib:g}", gib) for what, gib in pools] or [("host pools 0 (no HiCache or offload flag)", 0.0)]
    shm = docker_size_bytes(shm_size) / GIB if shm_size else 0.0
    terms.append((f"/dev/shm {shm:g}" if shm_size else "/dev/shm 0 (no --shm-size: within the pod's limit)", shm))
    engine = ENGINE_GIB_PER_GPU * gpus + ENGINE_GIB
    terms.append((f"engine {engine} ({_gpus(gpus)} x {ENGINE_GIB_PER_GPU} + {ENGINE_GIB})", float(engine)))
    memory = math.ceil(sum(gib for _, gib in terms))
    return PodResources(CPUS_PER_GPU * gpus + CPUS, memory, tuple(terms), gpus)


def _gpus(count: int) -> str:
    return f"{count} GPU" + ("s" if count != 1 else "")
