"""Generate synthetic model repositories for the simulated Hub (simulated: no real weights).

A generated repository has a `config.json`, a working tokenizer, `N` safetensors shards whose headers are valid
and whose payload is deterministic filler, `model.safetensors.index.json`, `.gitattributes` marking LFS
patterns, and a README. Two shapes: ``deepseek_v4_dspark`` (the default) is shaped like
`deepseek-ai/DeepSeek-V4-Flash-DSpark` — the DeepSeek-V4 keys and the DSpark keys that mark a bundled draft
(`dspark_block_size`, `dspark_markov_rank`, `dspark_noise_token_id`, `dspark_target_layer_ids`); ``generic``
is a Llama-shaped 8B-class decoder (what `auto_spec` gives any other repo id the Hub stand-in is asked for).
Everything is a pure function of the arguments, so file hashes and the commit hash are stable.

On disk (``--root DIR``): ``DIR/<org>/<name>/hubsim.json`` (repo settings: gated, tokens) and
``DIR/<org>/<name>/refs/<branch>/`` (the files of each branch).

Example:
    >>> import tempfile, pathlib
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> spec = RepoSpec(repo_id="deepseek-ai/DeepSeek-V4-Flash-DSpark", total_bytes=4 << 20, shards=2)
    >>> repo_dir = make_repo(root, spec)
    >>> sorted(p.name for p in (repo_dir / "refs" / "main").iterdir())[:3]
    ['.gitattributes', 'README.md', 'config.json']
"""

from __future__ import annotations

import hashlib
import json
import random
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hgxkit.sim.hub import tokenizer_gen

GITATTRIBUTES = (
    "*.bin filter=lfs diff=lfs merge=lfs -text\n"
    "*.safetensors filter=lfs diff=lfs merge=lfs -text\n"
    "*.pt filter=lfs diff=lfs merge=lfs -text\n"
    "*.gguf filter=lfs diff=lfs merge=lfs -text\n"
    "tokenizer.json filter=lfs diff=lfs merge=lfs -text\n"
)
_FILL_BLOCK = 1 << 20


@dataclass(frozen=True)
class RepoSpec:
    """What to generate. `total_bytes` is the approximate sum of the shard sizes."""

    repo_id: str
    total_bytes: int = 64 << 20
    shards: int = 4
    vocab_size: int = 16384
    branch: str = "main"
    gated: bool = False
    tokens: tuple[str, ...] = ()
    extra_branches: tuple[str, ...] = field(default=())
    seed: int = 0
    shape: str = "deepseek_v4_dspark"  # or "generic"


AUTO_TOTAL_BYTES = 3 << 20
AUTO_SHARDS = 3
AUTO_VOCAB = 4096


def auto_spec(repo_id: str) -> RepoSpec:
    """The synthetic repository served for a repo id nobody generated (same id → same spec → same commit)."""
    seed = int(hashlib.sha256(repo_id.encode()).hexdigest()[:8], 16) % 100000
    return RepoSpec(
        repo_id=repo_id,
        total_bytes=AUTO_TOTAL_BYTES,
        shards=AUTO_SHARDS,
        vocab_size=AUTO_VOCAB,
        seed=seed,
        shape="generic",
    )


def deepseek_v4_dspark_config(vocab_size: int) -> dict[str, Any]:
    """A DeepSeek-V4-Flash-DSpark-shaped config (values are plausible, not the real checkpoint's)."""
    return {
        "architectures": ["DeepseekV4ForCausalLM"],
        "model_type": "deepseek_v4",
        "hgxkit_simulated": True,
        "torch_dtype": "bfloat16",
        "vocab_size": vocab_size,
        "hidden_size": 4096,
        "intermediate_size": 2048,
        "moe_intermediate_size": 2048,
        "num_hidden_layers": 43,
        "num_attention_heads": 64,
        "num_key_value_heads": 1,
        "head_dim": 512,
        "kv_lora_rank": 512,
        "q_lora_rank": 1024,
        "qk_rope_head_dim": 64,
        "n_routed_experts": 256,
        "n_shared_experts": 1,
        "num_experts_per_tok": 6,
        "num_nextn_predict_layers": 3,
        "sliding_window": 128,
        "max_position_embeddings": 1048576,
        "rope_theta": 10000,
        "rms_norm_eps": 1e-06,
        "bos_token_id": 0,
        "eos_token_id": 1,
        "tie_word_embeddings": False,
        "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]},
        "dspark_block_size": 5,
        "dspark_markov_rank": 64,
        "dspark_noise_token_id": 2,
        "dspark_target_layer_ids": [1, 21, 41],
    }


def generic_config(vocab_size: int) -> dict[str, Any]:
    """A Llama-shaped 8B-class decoder config (plausible values, not any real checkpoint's)."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hgxkit_simulated": True,
        "torch_dtype": "bfloat16",
        "vocab_size": vocab_size,
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "max_position_embeddings": 131072,
        "rope_theta": 500000.0,
        "rms_norm_eps": 1e-05,
        "bos_token_id": 0,
        "eos_token_id": 1,
        "tie_word_embeddings": False,
    }


CONFIGS = {"deepseek_v4_dspark": deepseek_v4_dspark_config, "generic": generic_config}


def _tensor_plan(shard: int, nbytes: int) -> list[tuple[str, list[int]]]:
    """Tensor names and bf16 shapes filling about `nbytes`: one big expert weight, one norm."""
    layer = shard
    norm = 4096
    rest = max(nbytes - norm * 2, 4096 * 2)
    rows = max(rest // (4096 * 2), 1)
    name_prefix = f"mtp.{shard}" if shard >= 3 else f"model.layers.{layer}"
    return [
        (f"{name_prefix}.mlp.experts.weight", [rows, 4096]),
        (f"{name_prefix}.input_layernorm.weight", [norm]),
    ]


def write_safetensors(path: Path, tensors: list[tuple[str, list[int]]], seed: int) -> None:
    """Write a safetensors file: u64 header length, JSON header (8-byte aligned), deterministic payload."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt", "hgxkit_simulated": "true"}}
    offset = 0
    for name, shape in tensors:
        size = 2
        for dim in shape:
            size *= dim
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    rng = random.Random(seed)
    block = rng.randbytes(_FILL_BLOCK)
    with path.open("wb") as fh:
        fh.write(struct.pack("<Q", len(raw)))
        fh.write(raw)
        remaining, index = offset, 0
        while remaining > 0:
            # Stamp the block index so no two blocks are equal (a resume that re-sends the wrong range shows).
            chunk = struct.pack("<Q", index) + block[8:]
            fh.write(chunk[: min(remaining, _FILL_BLOCK)])
            remaining -= _FILL_BLOCK
            index += 1


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def write_branch(tree: Path, spec: RepoSpec, variant: str = "") -> None:
    """Write one branch's files into `tree`. `variant` changes README.md only (distinct commits)."""
    tree.mkdir(parents=True, exist_ok=True)
    _write(tree / ".gitattributes", GITATTRIBUTES.encode())
    if spec.shape not in CONFIGS:
        raise ValueError(f"unknown repo shape {spec.shape!r}: use one of {sorted(CONFIGS)}")
    config = CONFIGS[spec.shape](spec.vocab_size)
    _write(tree / "config.json", (json.dumps(config, indent=2) + "\n").encode())
    gen_config = {"bos_token_id": 0, "eos_token_id": 1, "do_sample": True, "temperature": 1.0, "top_p": 1.0}
    _write(tree / "generation_config.json", (json.dumps(gen_config, indent=2) + "\n").encode())
    _write(tree / "tokenizer.json", tokenizer_gen.dumps(tokenizer_gen.build_tokenizer_json(spec.vocab_size)))
    _write(tree / "tokenizer_config.json", tokenizer_gen.dumps(tokenizer_gen.build_tokenizer_config()))
    readme = (
        f"# {spec.repo_id} (SIMULATED)\n\nSynthetic repository generated by"
        " `python3 -m hgxkit.sim.hub make-repo`. The weights are filler bytes with valid safetensors"
        f" headers; nothing here is a real model.\n{variant}"
    )
    _write(tree / "README.md", readme.encode())
    per_shard = max(spec.total_bytes // spec.shards, 16 << 10)
    weight_map: dict[str, str] = {}
    total = 0
    for i in range(spec.shards):
        name = f"model-{i + 1:05d}-of-{spec.shards:05d}.safetensors"
        tensors = _tensor_plan(i, per_shard)
        write_safetensors(tree / name, tensors, seed=spec.seed * 1000 + i)
        for tname, shape in tensors:
            weight_map[tname] = name
            size = 2
            for dim in shape:
                size *= dim
            total += size
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    _write(tree / "model.safetensors.index.json", (json.dumps(index, indent=2) + "\n").encode())


def make_repo(root: Path, spec: RepoSpec) -> Path:
    """Create (or overwrite) repository `spec.repo_id` under `root`; return its directory."""
    repo_dir = root / spec.repo_id
    write_branch(repo_dir / "refs" / spec.branch, spec)
    for branch in spec.extra_branches:
        write_branch(repo_dir / "refs" / branch, spec, variant=f"\nBranch {branch}.\n")
    settings = {"gated": "manual" if spec.gated else False, "tokens": list(spec.tokens), "simulated": True}
    _write(repo_dir / "hubsim.json", (json.dumps(settings, indent=2) + "\n").encode())
    return repo_dir
