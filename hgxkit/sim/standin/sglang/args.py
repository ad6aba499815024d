"""SGLang 0.5.23's server command line, as the stand-in parses it (simulated; stdlib only).

The options come from `hgxkit.engines.sglang_serve` (names, aliases, kinds, types, choices, defaults and the
required ``--model-path``, read from sglang 0.5.23's real parser by tools/gen_engine_options.py); this module
builds a stdlib argparse parser from that table, with SGLang's value types written from their documented
behaviour (no SGLang code). So the stand-in refuses what the real parser refuses:

- argparse abbreviations stay on: ``--tp 4`` means ``--tp-size 4`` (the only ``--tp*`` option);
- a prefix of several options is ambiguous and exits 2: ``--cuda-graph-max-bs`` (0.5.23 has only
  ``--cuda-graph-max-bs-decode`` and ``--cuda-graph-max-bs-prefill``), ``--pp`` (``--pp-size`` and two more);
- an unknown flag, an underscore spelling included, exits 2 with argparse's ``unrecognized arguments`` message;
- aliases: ``--model`` = ``--model-path``, ``--tensor-parallel-size`` = ``--tp-size``,
  ``--data-parallel-size`` = ``--dp-size``, ``--enable-hicache`` = ``--enable-hierarchical-cache``.

`resolve` then applies the documented auto-overrides for DeepSeek-V4 and DSpark (page size 256, SWA ratio
0.1, fp8_e4m3 KV, DSpark's default of 48 running requests, draft tokens = block size + 1, …).

Example:
    >>> ns = build_parser("sglang").parse_args(["--model-path", "/model", "--tp", "4", "--context-length", "32k"])
    >>> ns.tp_size, ns.context_length
    (4, 32000)
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from hgxkit.engines.sglang_serve import REQUIRED, SERVE_OPTIONS
from hgxkit.sim.standin.common.options import add_table_options

# -- value types (named like SGLang's, because argparse quotes a failing type's __name__) ----------------------

_SI = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
_IEC = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def human_readable_int(value: str) -> int:
    """``32k`` = 32000, ``1.5M`` = 1500000 (SI, decimals allowed), ``1Ki`` = 1024 (IEC, integers only); the
    suffixes are case-sensitive."""
    value = value.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)", value)
    if match:
        number, suffix = match.groups()
        if suffix in _IEC:
            if "." in number:
                raise argparse.ArgumentTypeError(
                    f"Decimals are not allowed with IEC suffixes like '{suffix}'. Use an integer IEC value such "
                    f"as '{int(Decimal(number))}{suffix}', or an SI value such as '{number}{suffix[0]}'."
                )
            return int(number) * _IEC[suffix]
        return int(Decimal(number) * _SI[suffix])
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"Invalid integer value: '{value}'. Use a plain integer, SI suffixes (1k, 1M), or IEC suffixes "
            "(1Ki, 1Mi). Suffixes are case-sensitive."
        ) from None


def json_list_type(value: str) -> Any:
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        raise argparse.ArgumentTypeError(f"Invalid JSON list: {value}. Please provide a valid JSON list.") from None


def nullable_str(value: str) -> str | None:
    return None if value in ("", "None") else value


def parse_cuda_graph_backend_arg(raw: str) -> str:
    if raw == "tc_piecewise":
        raise argparse.ArgumentTypeError("tc_piecewise was removed; select breakable, full, or disabled")
    return raw


def parse_cuda_graph_config_arg(raw: str) -> dict[str, Any]:
    """A JSON object of phase -> settings object; SGLang also checks the phases and keys, which the stand-in
    does not know."""
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(f"--cuda-graph-config must be JSON: {err}") from None
    if not isinstance(parsed, dict):
        raise argparse.ArgumentTypeError(f"--cuda-graph-config must be a JSON object, got {type(parsed).__name__}")
    for phase, settings in parsed.items():
        if not isinstance(settings, dict):
            raise argparse.ArgumentTypeError(
                f"--cuda-graph-config['{phase}'] must be a JSON object, got {type(settings).__name__}"
            )
    return parsed


_TYPES: dict[str, Callable[[str], Any]] = {
    "str": str,
    "int": int,
    "float": float,
    "json": json.loads,
    "hrint": human_readable_int,
    "json_list": json_list_type,
    "nullable_str": nullable_str,
    "cuda_graph_backend": parse_cuda_graph_backend_arg,
    "cuda_graph_config": parse_cuda_graph_config_arg,
}


def value_type(code: str) -> Callable[[str], Any] | None:
    """The argparse `type` for an option table type code (``hrint``, ``json_list``, …); None for none."""
    if code == "":
        return None
    if code not in _TYPES:
        raise KeyError(f"unknown option table type code {code!r}")
    return _TYPES[code]


class _LoRAPaths(argparse.Action):
    """``--lora-paths`` items: a JSON object (with ``lora_name`` and ``lora_path``) or the text, as given."""

    def __call__(self, parser: argparse.ArgumentParser, ns: argparse.Namespace, values: Any, opt: Any = None) -> None:
        paths: list[Any] = []
        for item in (value.strip() for value in values or []):
            if item.startswith("{") and item.endswith("}"):
                obj = json.loads(item)
                if "lora_path" not in obj or "lora_name" not in obj:
                    raise argparse.ArgumentTypeError(
                        f"{item!r} looks like a JSON str, but it does not contain 'lora_name' and 'lora_path' keys."
                    )
                paths.append(obj)
            else:
                paths.append(item)
        setattr(ns, self.dest, paths)


def build_parser(prog: str) -> argparse.ArgumentParser:
    """The server argument parser. `prog` is what error messages start with, as argparse prints it."""
    parser = argparse.ArgumentParser(prog=prog, description="SGLang server (hgxkit stand-in, SIMULATED)")
    return add_table_options(parser, SERVE_OPTIONS, value_type, {"lora_paths": _LoRAPaths}, required=REQUIRED)


@dataclass
class ModelFacts:
    """What the stand-in reads from `config.json` (and `tokenizer.json`) of the model directory."""

    model_type: str = "unknown"
    architectures: list[str] = field(default_factory=list)
    context_length: int = 163840
    dspark_block_size: int | None = None
    kv_bytes_per_token: int = 25000
    vocab: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, model_dir: Path) -> ModelFacts:
        cfg = json.loads((model_dir / "config.json").read_text())
        layers = int(cfg.get("num_hidden_layers", 43))
        # MLA-style cache: (kv_lora_rank + rope dims) per layer at 1 byte (fp8); a rough, documented guess.
        per_layer = int(cfg.get("kv_lora_rank", 512)) + int(cfg.get("qk_rope_head_dim", 64))
        facts = cls(
            model_type=str(cfg.get("model_type", "unknown")),
            architectures=list(cfg.get("architectures", [])),
            context_length=int(cfg.get("max_position_embeddings", 163840)),
            dspark_block_size=cfg.get("dspark_block_size"),
            kv_bytes_per_token=max(layers * per_layer, 1),
        )
        tok = model_dir / "tokenizer.json"
        if tok.exists():
            try:
                vocab = json.loads(tok.read_text()).get("model", {}).get("vocab", {})
                # Output words: plain vocabulary entries only (no special tokens), in id order.
                facts.vocab = [w for w, _ in sorted(vocab.items(), key=lambda kv: kv[1]) if not w.startswith("<")]
            except (ValueError, AttributeError):
                facts.vocab = []
        return facts


def resolve(ns: argparse.Namespace, facts: ModelFacts) -> dict[str, Any]:
    """Resolved server args as `/server_info` reports them (flat), after the documented auto-overrides."""
    args = dict(vars(ns))
    args["served_model_name"] = args["served_model_name"] or args["model_path"]
    args["tokenizer_path"] = args["tokenizer_path"] or args["model_path"]
    args["context_length"] = args["context_length"] or facts.context_length
    is_dsv4 = facts.model_type.startswith("deepseek_v4")
    if is_dsv4:
        args["page_size"] = args["page_size"] or 256
        args["swa_full_tokens_ratio"] = 0.1
        if args["kv_cache_dtype"] == "auto":
            args["kv_cache_dtype"] = "fp8_e4m3"
        if args["moe_runner_backend"] == "auto":
            args["moe_runner_backend"] = "flashinfer_mxfp4"
    args["page_size"] = args["page_size"] or 1
    algo = args["speculative_algorithm"]
    if algo is not None:
        algo = algo.upper()
        args["speculative_algorithm"] = algo
    if algo == "DSPARK":
        block = args["speculative_dspark_block_size"] or facts.dspark_block_size or 5
        args["speculative_dspark_block_size"] = block
        args["speculative_num_steps"] = 1
        args["speculative_eagle_topk"] = 1
        args["speculative_num_draft_tokens"] = block + 1
        args["speculative_draft_model_path"] = args["speculative_draft_model_path"] or args["model_path"]
        if args["max_running_requests"] is None:
            args["max_running_requests"] = 48
    elif algo is not None:
        args["speculative_num_steps"] = args["speculative_num_steps"] or 3
        args["speculative_eagle_topk"] = args["speculative_eagle_topk"] or 1
        args["speculative_num_draft_tokens"] = args["speculative_num_draft_tokens"] or 4
    if args["enable_hierarchical_cache"] and args["hicache_ratio"] is None:
        args["hicache_ratio"] = 2.0
    if args["mem_fraction_static"] is None:
        args["mem_fraction_static"] = 0.85
    if args["chunked_prefill_size"] is None:
        args["chunked_prefill_size"] = 8192
    if args["cuda_graph_max_bs_decode"] is None:
        args["cuda_graph_max_bs_decode"] = args["max_running_requests"] or 256
    if args["random_seed"] is None:
        args["random_seed"] = 42
    return args


def merge_config(argv: list[str]) -> list[str]:
    """SGLang's `--config FILE.yaml`: the file's keys become flags placed before the command line's (which win),
    as `ConfigArgumentMerger` does in sglang 0.5.23. The stand-in is stdlib-only, so it reads the flat
    `key: value` mappings hgxkit and people write (scalars; `true` for a switch), not every YAML form.

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "c.yaml")
    >>> _ = open(path, "w").write("api-key: k1\\nenable_metrics: true\\n")
    >>> merge_config(["--model-path", "/m", "--config", path])
    ['--api-key', 'k1', '--enable-metrics', '--model-path', '/m']
    """
    if "--config" not in argv:
        return argv
    at = argv.index("--config")
    if argv.count("--config") > 1:
        raise SystemExit("ValueError: Multiple config files specified! Only one allowed.")
    if at == len(argv) - 1:
        raise SystemExit("ValueError: No config file specified after --config flag!")
    path = argv[at + 1]
    if not path.endswith((".yaml", ".yml")):
        raise SystemExit(f"ValueError: Config file must be YAML format: {path}")
    config_args: list[str] = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            line = line.split("#", 1)[0].rstrip()
            if not line.strip():
                continue
            key, sep, value = line.partition(":")
            if not sep:
                raise SystemExit(f"ValueError: Config file must contain a dictionary at root level: {path}")
            flag, value = "--" + key.strip().replace("_", "-"), value.strip().strip("'\"")
            if value.lower() == "true":
                config_args.append(flag)
            elif value.lower() not in ("false", ""):
                config_args += [flag, value]
    return config_args + argv[:at] + argv[at + 2 :]
