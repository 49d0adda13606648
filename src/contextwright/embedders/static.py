"""Static embeddings: one vector per WordPiece, distilled once from the packaged MiniLM; a text's
vector is the mean of its pieces' vectors. No model runs at embed time, so it is ~100x faster
than MiniLM (0.1 ms a query), at a small cost in quality once fused with BM25 (docs/vectors.md).

The table (30,522 x 384 int8, 11.7 MB) is not shipped: `distill(path)` builds it from the
`vectors` extra's ONNX model, once (a few minutes on CPU), and `StaticEmbedder(path)` loads it.
"""

from __future__ import annotations

import gzip
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import MissingExtra
from .minilm import TOKENIZER, MiniLMEmbedder, normalize

SPECIAL = (0, 100, 101, 102, 103)  # [PAD] [UNK] [CLS] [SEP] [MASK]


class StaticEmbedder:
    name = "minilm-static-i8"

    def __init__(self, path: str | Path) -> None:
        try:
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise MissingExtra("the static embedder", "vectors") from exc
        with np.load(Path(path)) as z:
            self._table = z["table"]
            self._scale = z["scale"].astype(np.float32)
        self.dim = int(self._table.shape[1])
        self._weights = np.ones(self._table.shape[0], dtype=np.float32)
        self._weights[list(SPECIAL)] = 0.0
        tok = Tokenizer.from_str(gzip.decompress(TOKENIZER.read_bytes()).decode("utf-8"))
        tok.enable_truncation(max_length=512)
        tok.no_padding()
        self._tokenizer = tok

    def embed(self, texts: Sequence[str]) -> np.ndarray[Any, np.dtype[np.float32]]:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encs = self._tokenizer.encode_batch(list(texts))
        lens = np.fromiter((len(e.ids) for e in encs), np.int64, len(encs))
        flat = np.fromiter((i for e in encs for i in e.ids), np.int64, int(lens.sum()))
        rows = self._table[flat].astype(np.float32) * self._weights[flat][:, None]
        starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
        nonempty = lens > 0
        if nonempty.any():
            out[nonempty] = np.add.reduceat(rows, starts[nonempty], axis=0)
        return normalize(out * self._scale)


def distill(
    path: str | Path,
    embedder: MiniLMEmbedder | None = None,
    batch: int = 512,
    vocab: int = 30_522,
) -> Path:
    """Write the static table: row t is MiniLM's mean-pooled vector of "[CLS] t [SEP]", from the
    packaged model in batches (the int8 build would quantize each batch's activations together)."""
    model = embedder or MiniLMEmbedder(compute="packaged", query_threads=None)
    table = np.zeros((vocab, model.dim), dtype=np.float32)
    for start in range(0, vocab, batch):
        ids = np.arange(start, min(vocab, start + batch), dtype=np.int64)
        x = np.stack([np.full_like(ids, 101), ids, np.full_like(ids, 102)], axis=1)
        table[ids] = model.hidden(x, np.ones_like(x)).mean(axis=1)
    scale = (np.abs(table).max(axis=0) / 127.0).astype(np.float32)
    scale[scale == 0] = 1.0
    out = Path(path)
    np.savez_compressed(out, table=np.rint(table / scale).astype(np.int8), scale=scale)
    return out
