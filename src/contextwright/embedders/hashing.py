"""A deterministic embedder with no model: hashed word and character-trigram features.

It exists for tests and for machines without the `vectors` extra that still want the vector
code path exercised. Texts that share words get similar vectors; it knows no synonyms.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from .minilm import normalize

_WORD = re.compile(r"\w+", re.UNICODE)


class HashEmbedder:
    name = "hash"

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim

    def _slot(self, feature: str) -> tuple[int, float]:
        h = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")
        return h % self.dim, 1.0 if (h >> 63) & 1 else -1.0

    def embed(self, texts: Sequence[str]) -> np.ndarray[Any, np.dtype[np.float32]]:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                slot, sign = self._slot(word)
                out[row, slot] += sign
                padded = f"#{word}#"
                for i in range(len(padded) - 2):
                    slot, sign = self._slot(padded[i : i + 3])
                    out[row, slot] += 0.3 * sign
        return normalize(out)
