"""Start-up refusals of the vLLM stand-in, with vLLM 0.33's messages (simulated checks, in vLLM's order).

1. Arguments vLLM validates before start (``--enable-auto-tool-choice`` needs ``--tool-call-parser``,
   ``--enable-log-outputs`` needs ``--enable-log-requests``, ``--headless`` with ``--api-server-count``, …).
2. The model: a local directory with ``config.json``, or a Hub repo id resolved through the Hugging Face cache
   (`hfcache`); otherwise vLLM's ``Invalid repository ID or local directory specified: '…'``.
3. ``--max-model-len`` above the model's ``max_position_embeddings`` (unless ``VLLM_ALLOW_LONG_MAX_MODEL_LEN``).
4. Attention heads not divisible by ``--tensor-parallel-size``.
5. GPUs: world size = tensor × pipeline parallel (÷ ``--nnodes``) must fit the GPUs this container sees:
   ``NVIDIA_VISIBLE_DEVICES`` (what ``docker --gpus`` sets; ``all``/unset = ``HGXKIT_SIM_NODE_GPUS``, default
   8), narrowed by ``CUDA_VISIBLE_DEVICES`` with CUDA's rule (ordinals index the visible devices; enumeration
   stops at the first invalid one) and by ``--device-ids``. Unlike the SGLang stand-in, unused GPUs are fine,
   as in vLLM. With ``--distributed-executor-backend ray`` the check is Ray's, not done here. Local
   data-parallel ranks need their own GPUs each; no GPU at all fails vLLM's platform detection.
6. KV cache: per GPU, ``HGXKIT_SIM_GPU_MEM_GB`` (141, an H200) × ``--gpu-memory-utilization`` − weights per
   GPU − 4 GiB of activations/graphs must hold one request of ``max_model_len`` tokens. Weights are
   ``HGXKIT_SIM_WEIGHTS_GB`` when set, else estimated from config.json (parameter count × 1 byte for fp8
   checkpoints, 2 otherwise); KV bytes per token from the attention shape (MLA or GQA). ``--kv-cache-memory-bytes``
   overrides the budget. Every figure is simulated and logged as such.

Example:
    >>> visible_gpus({"NVIDIA_VISIBLE_DEVICES": "2,3", "CUDA_VISIBLE_DEVICES": "2,3"})
    0
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hgxkit.sim.standin.common.tokens import WordTokenizer
from hgxkit.sim.standin.vllm import hfcache

GIB = 1 << 30
DOCS = "See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."


class StartupError(Exception):
    """Refuses start-up; `exc_type` and the message are printed as the last line of a traceback."""

    def __init__(self, exc_type: str, message: str) -> None:
        super().__init__(message)
        self.exc_type = exc_type
        self.message = message

    def __str__(self) -> str:
        return f"{self.exc_type}: {self.message}"


# -- GPUs ----------------------------------------------------------------------------------------------------


def _nvidia_count(env: Mapping[str, str]) -> int:
    node = int(env.get("HGXKIT_SIM_NODE_GPUS", "8"))
    spec = env.get("NVIDIA_VISIBLE_DEVICES")
    if spec is None or spec.strip() in ("", "all"):
        return node
    if spec.strip() in ("none", "void", "NoDevFiles"):
        return 0
    return len([s for s in spec.split(",") if s.strip()])


def _cuda_narrow(count: int, spec: str) -> int:
    seen = 0
    for part in spec.split(","):
        part = part.strip()
        if not part.isdigit() or int(part) >= count:
            break  # CUDA stops enumerating at the first invalid ordinal
        seen += 1
    return seen


def visible_gpus(env: Mapping[str, str], device_ids: list[Any] | None = None) -> int:
    """GPUs this process can use (module doc, item 5)."""
    count = _nvidia_count(env)
    if env.get("CUDA_VISIBLE_DEVICES") is not None:
        count = _cuda_narrow(count, env["CUDA_VISIBLE_DEVICES"])
    if device_ids:
        count = _cuda_narrow(count, ",".join(str(d) for d in device_ids))
    return count


# -- model facts ---------------------------------------------------------------------------------------------


@dataclass
class ModelFacts:
    """What the stand-in reads from the resolved model directory."""

    path: Path
    config: dict[str, Any]
    tokenizer: WordTokenizer = field(default_factory=WordTokenizer)

    @classmethod
    def load(cls, path: Path) -> ModelFacts:
        return cls(path, json.loads((path / "config.json").read_text()), WordTokenizer.load(path))

    def _get(self, key: str, default: Any = None) -> Any:
        if key in self.config:
            return self.config[key]
        text = self.config.get("text_config")
        return text.get(key, default) if isinstance(text, dict) else default

    @property
    def heads(self) -> int:
        return int(self._get("num_attention_heads", 32))

    @property
    def max_position_embeddings(self) -> int:
        return int(self._get("max_position_embeddings", 8192))

    @property
    def fp8(self) -> bool:
        quant = self.config.get("quantization_config") or {}
        return "fp8" in json.dumps(quant).lower()

    def params(self) -> int:
        """Parameter count estimated from the shape (embeddings, attention, dense or MoE MLP)."""
        h = int(self._get("hidden_size", 4096))
        layers = int(self._get("num_hidden_layers", 32))
        vocab = int(self._get("vocab_size", 32000))
        attn = 4 * h * h
        experts = int(self._get("n_routed_experts", 0) or self._get("num_local_experts", 0) or 0)
        if experts:
            inter = int(self._get("moe_intermediate_size", self._get("intermediate_size", 4 * h)))
            mlp = (experts + int(self._get("n_shared_experts", 0) or 0)) * 3 * h * inter
        else:
            mlp = 3 * h * int(self._get("intermediate_size", 4 * h))
        return layers * (attn + mlp) + 2 * vocab * h

    def kv_bytes_per_token(self, kv_dtype: str) -> int:
        """KV cache bytes per token for the whole model (all layers, all KV heads)."""
        layers = int(self._get("num_hidden_layers", 32))
        size = 1 if kv_dtype.startswith("fp8") else 2
        if self._get("kv_lora_rank"):  # MLA: one compressed latent + rope part per layer
            return layers * (int(self._get("kv_lora_rank")) + int(self._get("qk_rope_head_dim", 64))) * size
        kv_heads = int(self._get("num_key_value_heads", self.heads))
        head_dim = int(self._get("head_dim", int(self._get("hidden_size", 4096)) // max(self.heads, 1)))
        return 2 * layers * kv_heads * head_dim * size


@dataclass(frozen=True)
class MemoryPlan:
    """Simulated per-GPU memory figures (bytes)."""

    weights_per_gpu: int
    kv_budget_per_gpu: int
    kv_bytes_per_token_per_gpu: int
    max_model_len: int

    @property
    def kv_tokens(self) -> int:
        return self.kv_budget_per_gpu // max(self.kv_bytes_per_token_per_gpu, 1)

    @property
    def max_concurrency(self) -> float:
        return self.kv_tokens / max(self.max_model_len, 1)


# -- the checks ----------------------------------------------------------------------------------------------


def check_arguments(ns: argparse.Namespace) -> None:
    """vLLM's quick checks before anything starts (`validate_parsed_serve_args` and `vllm serve`)."""
    if ns.enable_auto_tool_choice and not ns.tool_call_parser:
        raise StartupError("TypeError", "Error: --enable-auto-tool-choice requires --tool-call-parser")
    if ns.enable_log_outputs and not ns.enable_log_requests:
        raise StartupError("TypeError", "Error: --enable-log-outputs requires --enable-log-requests")
    if getattr(ns, "enable_per_request_metrics", False) and ns.disable_log_stats:
        raise StartupError(
            "ValueError",
            "Error: --enable-per-request-metrics requires engine statistics logging; remove --disable-log-stats "
            "to enable per-request metrics.",
        )
    if ns.headless and ns.api_server_count:
        raise StartupError(
            "ValueError",
            f"--api-server-count={ns.api_server_count} cannot be used with --headless (no API servers are "
            "started in headless mode).",
        )


def resolve_model(ns: argparse.Namespace, env: Mapping[str, str]) -> ModelFacts:
    """Find the model's files like vLLM (via the HF cache); vLLM's error when it cannot."""
    try:
        found = hfcache.resolve_model(str(ns.model), env, ns.revision)
    except hfcache.ModelNotFound as err:
        raise StartupError(
            "ValueError",
            f"Invalid repository ID or local directory specified: '{ns.model}'.\n"
            "Please verify the following requirements:\n"
            "1. Provide a valid Hugging Face repository ID.\n"
            "2. Specify a local directory that contains a recognized configuration file.\n"
            "   - For Hugging Face models: ensure the presence of a 'config.json'.\n"
            "   - For Mistral models: ensure the presence of a 'params.json'.\n"
            f"(simulated: {err.detail})",
        ) from err
    return ModelFacts.load(found.path)


def check_quantization(ns: argparse.Namespace) -> None:
    """ModelConfig's check of `--quantization` against the registry of methods (the table's CONFIG_CHOICES, read
    from vLLM 0.33), which argparse does not make."""
    from hgxkit.engines.vllm_serve import CONFIG_CHOICES

    methods = list(CONFIG_CHOICES["--quantization"])
    if ns.quantization is not None and ns.quantization not in methods:
        raise StartupError("ValueError", f"Unknown quantization method: {ns.quantization}. Must be one of {methods}.")


def max_model_len(ns: argparse.Namespace, facts: ModelFacts, env: Mapping[str, str]) -> int:
    derived = facts.max_position_embeddings
    wanted = ns.max_model_len
    if wanted is None or wanted == -1:
        return derived
    if wanted > derived and env.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "") not in ("1", "true", "True"):
        raise StartupError(
            "ValueError",
            f"User-specified max_model_len ({wanted}) is greater than the derived max_model_len "
            f"(max_position_embeddings={derived} or model_max_length=None in model's config.json). To allow "
            "overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. VLLM_ALLOW_LONG_MAX_MODEL_LEN "
            "must be used with extreme caution. If the model uses relative position encoding (RoPE), positions "
            "exceeding derived_max_model_len lead to nan. If the model uses absolute position encoding, positions "
            "exceeding derived_max_model_len will cause a CUDA array out-of-bounds error.",
        )
    return int(wanted)


def world_size(ns: argparse.Namespace) -> int:
    return int(ns.tensor_parallel_size) * int(ns.pipeline_parallel_size) * int(ns.prefill_context_parallel_size or 1)


def check_parallel(ns: argparse.Namespace, facts: ModelFacts, env: Mapping[str, str]) -> int:
    """Heads divisible by TP; the world size fits the visible GPUs. Returns the GPUs used on this node."""
    tp = int(ns.tensor_parallel_size)
    if facts.heads % tp:
        raise StartupError(
            "ValueError",
            f"Total number of attention heads ({facts.heads}) must be divisible by tensor parallel size ({tp}).",
        )
    size = world_size(ns)
    gpus = visible_gpus(env, ns.device_ids)
    if gpus == 0:  # no CUDA device at all: vLLM's platform detection ends at UnspecifiedPlatform
        raise StartupError(
            "RuntimeError",
            "Failed to infer device type, please set the environment variable `VLLM_LOGGING_LEVEL=DEBUG` to turn "
            "on verbose logging to help debug the issue.",
        )
    if ns.distributed_executor_backend == "ray":
        return size  # Ray places the workers (and fails its own way); not simulated here
    nnodes = int(ns.nnodes or 1)
    per_node = size // nnodes if nnodes > 1 else size
    if nnodes == 1 and size > gpus:
        raise StartupError(
            "ValueError",
            f"World size ({size}) is larger than the number of available GPUs ({gpus}) in this node. If this is "
            "intentional and you are using:\n- ray, set '--distributed-executor-backend ray'.\n"
            "- multiprocessing, set '--nnodes' appropriately.",
        )
    dp_local = ns.data_parallel_size_local
    if dp_local is None:
        dp_local = 1 if ns.data_parallel_rank is not None else int(ns.data_parallel_size)
    need = per_node * max(int(dp_local), 1)
    if need > gpus:
        raise StartupError(
            "RuntimeError",
            f"CUDA error: invalid device ordinal (simulated: {dp_local} local data-parallel rank(s) × "
            f"{per_node} GPUs each need {need} GPUs, {gpus} visible)",
        )
    return need


def memory_plan(ns: argparse.Namespace, facts: ModelFacts, length: int, env: Mapping[str, str]) -> MemoryPlan:
    """The simulated KV budget (module doc, item 6); refuses when one max-length request does not fit."""
    tp, pp = int(ns.tensor_parallel_size), int(ns.pipeline_parallel_size)
    if env.get("HGXKIT_SIM_WEIGHTS_GB"):
        weights = float(env["HGXKIT_SIM_WEIGHTS_GB"]) * GIB
    else:
        weights = facts.params() * (1 if facts.fp8 else 2)
    weights_per_gpu = int(weights / (tp * pp))
    if ns.kv_cache_memory_bytes:
        budget = int(ns.kv_cache_memory_bytes)
    else:
        gpu = float(env.get("HGXKIT_SIM_GPU_MEM_GB", "141")) * GIB
        budget = int(gpu * float(ns.gpu_memory_utilization) - weights_per_gpu - 4 * GIB)
    kv_dtype = str(ns.kv_cache_dtype or "auto")
    if kv_dtype == "auto" and facts.fp8 and facts._get("kv_lora_rank"):
        kv_dtype = "fp8"
    per_token = facts.kv_bytes_per_token(kv_dtype)
    # TP splits KV heads (MLA's latent is replicated on every TP rank); PP splits the layers.
    kv_heads = int(facts._get("num_key_value_heads", facts.heads))
    tp_split = 1 if facts._get("kv_lora_rank") else min(tp, max(kv_heads, 1))
    per_token_gpu = max(per_token // (tp_split * pp), 1)
    if budget <= 0:
        raise StartupError(
            "ValueError",
            "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing "
            "the engine (this flag also controls CPU memory reservation on the CPU backend, despite its name). " + DOCS,
        )
    needed = length * per_token_gpu
    if needed > budget:
        estimate = budget // per_token_gpu
        raise StartupError(
            "ValueError",
            f"To serve at least one request with the model's max seq len ({length}), "
            f"({round(needed / GIB, 2)} GiB KV cache is needed, which is larger than the available KV cache memory "
            f"({round(budget / GIB, 2)} GiB). Based on the available memory, the estimated maximum model length is "
            f"{estimate}. Try increasing `gpu_memory_utilization` (which also controls CPU memory on the CPU backend) "
            f"or decreasing `max_model_len` when initializing the engine. {DOCS}",
        )
    return MemoryPlan(weights_per_gpu, budget, per_token_gpu, length)
