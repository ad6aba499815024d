"""The tokenizer a benchmark client loads on this machine: a copy of its data files, with no code in it.

SGLang's client loads every tokenizer with `trust_remote_code=True`. A tokenizer names Python code through
`auto_map` (in tokenizer_config.json, or config.json when the tokenizer class comes from the model's config),
and pickled files (`*.bin`, `*.pt`, `*.pkl`) run code when they are loaded. This machine holds the SSH keys to
every node, so `hgxkit verify --endpoint` never hands the client a tokenizer as a recipe, a Hub repository or
an endpoint names it. It copies the data files of a local directory the operator gives (`--tokenizer DIR`) into
a folder of its own, drops every `auto_map` from their JSON, and runs the client offline on that copy.
`--trust-tokenizer-code` hands the client the directory as it is, for a tokenizer whose code the operator has
read.

Example:
    >>> safe_file_name("tokenizer.json"), safe_file_name("tokenization_evil.py"), safe_file_name("model.bin")
    (True, False, False)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hgxkit.errors import InputError

# Data only: JSON, sentencepiece/tiktoken models and plain vocabularies. Python and pickles are code.
DATA_SUFFIXES = (".json", ".model", ".tiktoken", ".txt", ".jinja")
MAX_FILE_BYTES = 256 << 20  # a large tokenizer.json is tens of MB; weights are never tokenizer data
CODE_KEY = "auto_map"
# The client's environment: nothing it loads may come from the Hub (a tokenizer, or code `auto_map` names).
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


@dataclass(frozen=True)
class TokenizerCopy:
    """The folder the client reads, and what was left out of it (file names and `file: auto_map`)."""

    path: Path
    left_out: tuple[str, ...]


def safe_file_name(name: str) -> bool:
    """True for a file name that holds tokenizer data, never code (module doc)."""
    return name.endswith(DATA_SUFFIXES) and not name.startswith(".")


def without_code(value: Any) -> tuple[Any, bool]:
    """`value` (parsed JSON) with every `auto_map` key removed at any depth, and whether one was."""
    if isinstance(value, dict):
        found = CODE_KEY in value
        kept = {}
        for key, item in value.items():
            if key == CODE_KEY:
                continue
            kept[key], inner = without_code(item)
            found = found or inner
        return kept, found
    if isinstance(value, list):
        items = [without_code(item) for item in value]
        return [item for item, _ in items], any(inner for _, inner in items)
    return value, False


def copy_tokenizer(source: str, target: Path) -> TokenizerCopy:
    """Copy the tokenizer data of directory `source` into `target` (created), without code (module doc).

    InputError, naming `--tokenizer`, when `source` is not a directory on this machine or holds no tokenizer.
    """
    folder = Path(source)
    if not folder.is_dir():
        raise InputError(
            f"--tokenizer {source}: not a directory on this machine; give a local copy of the model's tokenizer "
            "files (e.g. `hf download REPO --include '*.json' '*.model' --local-dir DIR`)"
        )
    target.mkdir(parents=True, exist_ok=True)
    left_out: list[str] = []
    for path in sorted(folder.iterdir()):
        if not path.is_file():
            continue
        if not safe_file_name(path.name) or path.stat().st_size > MAX_FILE_BYTES:
            left_out.append(path.name)
            continue
        data = path.read_bytes()
        if path.suffix == ".json":
            data, dropped = _json_without_code(data)
            if dropped:
                left_out.append(f"{path.name}: {CODE_KEY}")
        (target / path.name).write_bytes(data)
    if not any((target / name).is_file() for name in ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")):
        raise InputError(
            f"--tokenizer {source}: no tokenizer.json, tokenizer_config.json or tokenizer.model in it; give the "
            "directory that holds the model's tokenizer files"
        )
    return TokenizerCopy(target, tuple(left_out))


def _json_without_code(data: bytes) -> tuple[bytes, bool]:
    try:
        parsed = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return data, False  # not JSON the client could follow to code either
    kept, dropped = without_code(parsed)
    return (json.dumps(kept, ensure_ascii=False, indent=2).encode() if dropped else data), dropped
