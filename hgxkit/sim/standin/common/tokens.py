"""Token counting and ids for the stand-ins, stdlib only (simulated tokenizer).

For the synthetic repositories of `hgxkit.sim.hub` (a `tokenizers` WordLevel model split on whitespace, BOS
added in front) this is EXACT: the same ids the real tokenizer gives, so a benchmark client that tokenizes
locally and the stand-in agree on every count. For any other `tokenizer.json` (BPE, …) it is an
approximation: one token per whitespace-separated word (+ BOS), ids from a stable hash of the word.

Example:
    >>> tok = WordTokenizer({"<s>": 0, "<unk>": 1, "ba": 2, "be": 3}, bos_id=0, unk_id=1)
    >>> tok.encode("ba be bo"), tok.decode([2, 3])
    ([0, 2, 3, 1], 'ba be')
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class WordTokenizer:
    """Whitespace word ↔ id mapping; `exact` is True when loaded from a WordLevel/WhitespaceSplit tokenizer."""

    vocab: dict[str, int] = field(default_factory=dict)
    bos_id: int | None = None
    unk_id: int = 0
    exact: bool = False
    special_ids: frozenset[int] = frozenset()

    def __post_init__(self) -> None:
        self._by_id = {i: w for w, i in self.vocab.items()}
        self._size = max(len(self.vocab), 1000)

    @classmethod
    def load(cls, model_dir: Path) -> WordTokenizer:
        """From ``model_dir/tokenizer.json``; a hash-based approximation when absent or not WordLevel."""
        path = model_dir / "tokenizer.json"
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return cls()
        model = doc.get("model") or {}
        vocab = model.get("vocab")
        if not isinstance(vocab, dict):
            return cls()
        special = frozenset(int(t["id"]) for t in doc.get("added_tokens") or [] if t.get("special"))
        post = doc.get("post_processor") or {}
        bos = None
        for item in post.get("single") or []:
            name = (item.get("SpecialToken") or {}).get("id")
            if name is not None:
                bos = vocab.get(name)
                break
        exact = model.get("type") == "WordLevel" and (doc.get("pre_tokenizer") or {}).get("type") == "WhitespaceSplit"
        unk = vocab.get(model.get("unk_token", ""), 0)
        return cls(
            vocab={str(k): int(v) for k, v in vocab.items()}, bos_id=bos, unk_id=unk, exact=exact, special_ids=special
        )

    @property
    def words(self) -> list[str]:
        """Plain vocabulary entries (no special tokens), in id order: what the stand-ins generate from."""
        return [w for w, i in sorted(self.vocab.items(), key=lambda kv: kv[1]) if i not in self.special_ids]

    def _id(self, word: str) -> int:
        if word in self.vocab:
            return self.vocab[word]
        if self.exact:
            return self.unk_id
        return zlib.crc32(word.encode()) % self._size

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        ids = [self._id(w) for w in text.split()]
        if add_special_tokens and self.bos_id is not None:
            ids.insert(0, self.bos_id)
        elif add_special_tokens and not self.exact:
            ids.insert(0, 0)  # approximate: most tokenizers add one BOS
        return ids

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        words = [self._by_id.get(i, f"<tok{i}>") for i in ids if not (skip_special_tokens and i in self.special_ids)]
        return " ".join(words)

    def count(self, text: str, add_special_tokens: bool = True) -> int:
        return len(text.split()) + (1 if add_special_tokens and (self.bos_id is not None or not self.exact) else 0)
