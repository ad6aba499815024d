"""A small, deterministic, *working* tokenizer for synthetic model repositories (simulated).

The tokenizer is a `tokenizers` WordLevel model over pronounceable pseudo-words, split on whitespace,
with a BOS token added in front of every sequence (as DeepSeek's tokenizer does). It is written as JSON by
hand, so it needs no third-party package and is byte-for-byte stable (stable file hashes, stable commit
hashes); `tokenizers.Tokenizer.from_file` and `transformers.AutoTokenizer` load it (checked in tests when
those packages are installed, and by SGLang's benchmark client).

Why WordLevel: decoding token ids gives words joined by single spaces, so the SGLang stand-in can count
the tokens of any text the benchmark client decoded from random ids with ``len(text.split())`` (+1 for
BOS) — exactly, with the standard library only.

Example:
    >>> tok = build_tokenizer_json(vocab_size=300)
    >>> tok["model"]["vocab"]["<｜begin▁of▁sentence｜>"]
    0
    >>> pseudo_word(0), pseudo_word(1)
    ('ba', 'be')
"""

from __future__ import annotations

import json
from typing import Any

BOS = "<｜begin▁of▁sentence｜>"
EOS = "<｜end▁of▁sentence｜>"
PAD = "<｜▁pad▁｜>"
UNK = "<unk>"
USER = "<｜User｜>"
ASSISTANT = "<｜Assistant｜>"
SPECIAL_TOKENS: tuple[str, ...] = (BOS, EOS, PAD, UNK, USER, ASSISTANT)

_CONSONANTS = "bdfghklmnprstvz"
_VOWELS = "aeiou"
_SYLLABLES = [c + v for c in _CONSONANTS for v in _VOWELS]  # 75 syllables

# A minimal chat template in DeepSeek's shape; enough for `apply_chat_template` and the chat endpoints.
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}"
    "{% if m['role'] == 'user' %}<｜User｜> {{ m['content'] }} "
    "{% elif m['role'] == 'assistant' %}<｜Assistant｜> {{ m['content'] }} <｜end▁of▁sentence｜> "
    "{% else %}{{ m['content'] }} {% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<｜Assistant｜>{% endif %}"
)


def pseudo_word(index: int) -> str:
    """Return the `index`-th pseudo-word: a bijective base-75 numeral spelled in syllables."""
    n = index
    parts: list[str] = []
    while True:
        parts.append(_SYLLABLES[n % len(_SYLLABLES)])
        n = n // len(_SYLLABLES) - 1
        if n < 0:
            break
    return "".join(reversed(parts))


def build_vocab(vocab_size: int) -> dict[str, int]:
    """Special tokens first (ids 0..5), then pseudo-words up to `vocab_size` entries in all."""
    if vocab_size <= len(SPECIAL_TOKENS):
        raise ValueError(f"vocab_size must exceed {len(SPECIAL_TOKENS)}")
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
    for i in range(vocab_size - len(SPECIAL_TOKENS)):
        vocab[pseudo_word(i)] = len(SPECIAL_TOKENS) + i
    return vocab


def build_tokenizer_json(vocab_size: int = 16384) -> dict[str, Any]:
    """The `tokenizer.json` document (a `tokenizers` serialisation, format version 1.0)."""
    vocab = build_vocab(vocab_size)
    added = [
        {
            "id": vocab[tok],
            "content": tok,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for tok in SPECIAL_TOKENS
    ]
    bos_ref = {"SpecialToken": {"id": BOS, "type_id": 0}}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "WhitespaceSplit"},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [bos_ref, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [
                bos_ref,
                {"Sequence": {"id": "A", "type_id": 0}},
                {"Sequence": {"id": "B", "type_id": 1}},
            ],
            "special_tokens": {BOS: {"id": BOS, "ids": [0], "tokens": [BOS]}},
        },
        "decoder": None,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": UNK},
    }


def build_tokenizer_config(max_length: int = 1048576) -> dict[str, Any]:
    """The `tokenizer_config.json` document that makes `AutoTokenizer` pick the fast tokenizer."""
    return {
        "add_bos_token": True,
        "add_eos_token": False,
        "bos_token": BOS,
        "eos_token": EOS,
        "pad_token": PAD,
        "unk_token": UNK,
        "clean_up_tokenization_spaces": False,
        "legacy": True,
        "model_max_length": max_length,
        "tokenizer_class": "PreTrainedTokenizerFast",
        "chat_template": CHAT_TEMPLATE,
    }


def dumps(doc: dict[str, Any]) -> bytes:
    """Stable JSON bytes (sorted keys would reorder the vocab; insertion order is already stable)."""
    return (json.dumps(doc, ensure_ascii=False, indent=1) + "\n").encode("utf-8")
