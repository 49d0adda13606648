"""Vector search for the engine: a background embedder and the `vector` source, whose signal is
fused with full text by scoring.fuse_relevance.

Embedding is the slowest step of ingest (MiniLM int8 embeds a few hundred short texts a second on
two threads), so `add` never waits for it: records are searchable by full text at once, and a
daemon thread embeds what the store reports as unembedded, in batches, as soon as it is told that
records arrived. Every trace says how far behind it is (`notes.vectors.lag`). An embedder that
fails to load, or a store without vector support, leaves the engine on full text alone, and every
trace says that too.

    engine = Engine.open("sqlite:///team.db", embedder="minilm")
    engine.add(project="p", author="ann", kind="note", content="the cache lives in redis")
    engine.wait_for_embeddings()
    engine.assemble(project="p", agent="bob", task="where is the key-value store?")
"""

from __future__ import annotations

import atexit
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

from . import ports
from .assembly.scoring import ScoringConfig
from .assembly.sources import Source
from .ports import Embedder, Store, VectorStore, capable
from .records import Record
from .vector_source import VectorSource, supports_vectors

if TYPE_CHECKING:
    from .assembly.run import Assembler
    from .traces.trace import Trace

BATCH = 64
# While the engine serves calls (one came in the last SERVING_S seconds), the worker rests
# REST_FACTOR times as long as its last batch took: a backlog embedded at full speed took both
# cores from the calls it shares them with (bench/load.py: 51 requests/s against 196 with
# vectors off, on a store of 100k records not yet embedded). Idle, it runs flat out.
SERVING_S = 1.0
REST_FACTOR = 7.0
# A lag up to this is counted on every call (a few index rows); a larger one, a scan of the
# whole backlog (35-75 ms at 100k), at most every LAG_TTL_S seconds.
LAG_EXACT = 256
LAG_TTL_S = 5.0
# While serving, vectors are staged (ports.Stages), written after FLUSH_IDLE_S without a call
# (longer than a model call between two turns), at STAGED_MAX held, and when the worker stops.
FLUSH_IDLE_S = 30.0
STAGED_MAX = 256
# How long the interpreter's exit waits for a model still loading (`_close_at_exit`).
EXIT_LOAD_WAIT_S = 60.0


def embed_text(r: Record) -> str:
    """What gets embedded: the author's name helps questions that name people ("what did Ann...")."""
    return f"{r.author}: {r.content}"


class EmbeddingWorker:
    """A daemon thread that embeds unembedded records in batches until told to stop."""

    def __init__(self, store: VectorStore, embedder: Embedder, batch: int = BATCH) -> None:
        self.store, self.embedder, self.batch = store, embedder, batch
        self.embedded = 0
        self.error: str | None = None
        self.served_at = float("-inf")  # when the engine last served a call (`serving`)
        self._batch_s = 0.0  # how long the last batch took
        self._lag: tuple[float, int] | None = None  # (when, count) of the last large lag
        # Writes `notify` counted, and the count when the worker last had nothing left (a pass
        # found none, or a short batch took all; -1 while it has work): equal, the lag is 0
        # without an SQL count. Another process's writes are found by its poll within a second.
        self._notified = 0
        self._caught_up = -1
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="cw-embedder", daemon=True)
        self._wake.set()
        self._thread.start()

    def notify(self) -> None:
        self._notified += 1
        self._wake.set()

    def serving(self) -> None:
        """A call came in (an add, an assemble): the worker rests between batches for a while."""
        self.served_at = time.monotonic()

    def lag(self, counted: bool = False) -> int:
        """Records not yet searchable by vector (those being embedded included); past LAG_EXACT,
        as counted at most LAG_TTL_S seconds ago. `counted`: from the store, even caught up."""
        if self._caught_up == self._notified and not counted:
            return 0
        now = time.monotonic()
        last = self._lag
        if last is not None and now - last[0] < LAG_TTL_S:
            return last[1]
        n = self.store.unembedded_count(self.embedder.name)
        self._lag = (now, n) if n > LAG_EXACT else None
        return n

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every record stored so far has a vector; False on timeout or if the
        worker is failing. Not a write: one (`notify`) left the caught-up mark stale."""
        deadline = None if timeout is None else time.monotonic() + timeout
        self._wake.set()
        while self.lag(counted=True) > 0:
            late = deadline is not None and time.monotonic() >= deadline
            if late or not self._thread.is_alive():
                return False
            time.sleep(0.02)
        return True

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self.flush()  # what the worker staged reaches the store before the engine closes

    def flush(self) -> None:  # the vectors staged while serving, to the store
        if capable(self.store, ports.Stages):
            cast(ports.Stages, self.store).flush_vectors(self.embedder.name)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(timeout=1.0)
            self._wake.clear()
            try:
                while not self._stop.is_set() and self._step():
                    if time.monotonic() - self.served_at < SERVING_S:
                        self._stop.wait(min(self._batch_s * REST_FACTOR, 2.0))
                if time.monotonic() - self.served_at >= FLUSH_IDLE_S:
                    self.flush()
            except Exception as exc:  # keep the engine up; the trace shows the error
                self.error = f"{type(exc).__name__}: {exc}"
                time.sleep(0.5)
                continue

    def _stage(self, records: Sequence[Record], vecs: Any) -> bool:
        """Staged (`ports.Stages`) while the engine serves and under STAGED_MAX; False: write."""
        if not capable(self.store, ports.Stages) or time.monotonic() - self.served_at >= SERVING_S:
            return False
        store, model = cast(ports.Stages, self.store), self.embedder.name
        if store.staged_count(model) + len(records) > STAGED_MAX:
            store.flush_vectors(model)
            return False
        return store.stage_vectors(model, records, vecs)

    def _step(self) -> bool:
        t0 = time.perf_counter()
        seen = self._notified  # before the read: a write after it leaves the two unequal
        records = self.store.unembedded(self.embedder.name, self.batch)
        if not records:
            self._lag = None
            self._caught_up = seen
            return False
        self._caught_up = -1
        vecs = self.embedder.embed([embed_text(r) for r in records])
        if not self._stage(records, vecs):
            self.store.put_vectors(
                self.embedder.name, [(r.project, r.id, vecs[i]) for i, r in enumerate(records)]
            )
        self.embedded += len(records)
        self.error = None
        self._batch_s = time.perf_counter() - t0
        if len(records) < self.batch:  # all that was left: caught up, unless written since
            self._lag, self._caught_up = None, seen  # (the next pass came after the rest)
            return self._notified != seen
        return True


class Vectors:
    """The engine's vector side: loads the embedder, owns the worker and the source, and reports
    on every trace.

    A model given by name ("minilm", or "auto" where that resolves to it) loads on a background
    thread, so that no call waits for it: until it is ready each call runs on full text, and its
    warnings and trace (`notes.vectors.state`: "loading") say so. Records added meanwhile are
    embedded once it is. A name no embedder has raises at once; a missing extra or a model that
    fails to load leaves the engine on full text, with a warning on every call."""

    def __init__(
        self, store: Store, embedder: Embedder | str | None, scoring: ScoringConfig
    ) -> None:
        from .embedders import missing_reason, resolve_name

        self.store = store
        self.scoring = scoring
        self.embedder: Embedder | None = None
        self.worker: EmbeddingWorker | None = None
        self.source: VectorSource | None = None
        self.configured: str | None = None  # the embedder asked for, by name
        self.state = "off"  # "off", "loading", "on" or "failed"
        self.problem: str | None = "no embedder configured; relevance is full text alone"
        self._lock = threading.Lock()
        self._closed = False
        self._loaded = threading.Event()
        self._loaded.set()
        self.load_s: float | None = None
        self._assembler: Assembler | None = None  # where the source joins, once it exists
        self._before: tuple[Source | None, ...] = ()
        # What joins the assembler for the vector source (the pipelines that search by vector).
        self._wrap: Callable[[Source], Sequence[Source]] = lambda src: [src]
        self._joined: list[Source] | None = None
        if embedder is None:
            return
        _OPEN.add(self)
        if not isinstance(embedder, str):
            self.configured = embedder.name
            self._start(embedder)
            return
        given = embedder
        name = resolve_name(embedder)  # a name no embedder has raises here, before anything
        if name == "none":
            if given == "auto":
                self.problem = (
                    "vectors are off: the vectors extra is not installed "
                    "(pip install 'contextwright[vectors]'); relevance is full text alone"
                )
            return
        self.configured = name
        if not supports_vectors(store):
            self._fail(f"store {store.url} keeps no vectors; relevance is full text alone")
            return
        missing = missing_reason(name)
        if missing is not None:
            self._fail(
                f"embedder {name!r} failed to load ({missing}); relevance is full text alone"
            )
            return
        if name != "minilm":  # the hash and static tables load in milliseconds
            self._load(name)
            return
        self.state = "loading"
        self.problem = None
        self._loaded.clear()
        threading.Thread(
            target=self._load, args=(name,), name="cw-embedder-load", daemon=True
        ).start()

    def _load(self, name: str) -> None:
        from .embedders import load_embedder

        t0 = time.perf_counter()
        try:
            loaded = load_embedder(name)
        except Exception as exc:  # missing extra, corrupt model: fall back, loudly
            self._fail(
                f"embedder {name!r} failed to load ({type(exc).__name__}: {exc}); "
                "relevance is full text alone"
            )
        else:
            self.load_s = round(time.perf_counter() - t0, 3)
            if loaded is not None:
                self._start(loaded)
        finally:
            self._loaded.set()

    def _fail(self, problem: str) -> None:
        self.state, self.problem, self.embedder = "failed", problem, None

    def _start(self, embedder: Embedder) -> None:
        if not supports_vectors(self.store):
            self._fail(f"store {self.store.url} keeps no vectors; relevance is full text alone")
            return
        with self._lock:
            if self._closed:
                return
            self.embedder = embedder
            self.source = VectorSource(embedder)
            self.worker = EmbeddingWorker(self.store, embedder)  # type: ignore[arg-type]
            self.problem = None
            self.state = "on"
            self._insert()

    def join(
        self,
        assembler: Assembler,
        before: Sequence[Source | None],
        wrap: Callable[[Source], Sequence[Source]] | None = None,
    ) -> None:
        """Run the vector source in `assembler` (or the sources `wrap` makes of it: the
        pipelines that search by vector), ahead of the first of `before` there: now if the
        embedder is ready, else as soon as it has loaded in the background."""
        with self._lock:
            self._assembler, self._before = assembler, tuple(before)
            if wrap is not None:
                self._wrap, self._joined = wrap, None
            self._insert()

    def _insert(self) -> None:
        # Under self._lock. The list is swapped whole: a call that started before this sees the
        # old one (pick_sources copies it) and ran on full text, as its warnings say.
        a, src = self._assembler, self.source
        if a is None or src is None:
            return
        if self._joined is None:
            self._joined = list(self._wrap(src))
        if not self._joined or any(s in a.sources for s in self._joined):
            return
        at = [a.sources.index(s) for s in self._before if s is not None and s in a.sources]
        i = min(at, default=len(a.sources))
        a.sources[:] = [*a.sources[:i], *self._joined, *a.sources[i:]]

    @property
    def on(self) -> bool:
        return self.worker is not None

    @property
    def loading(self) -> bool:
        return self.state == "loading"

    def notify(self) -> None:
        """Records were written: the worker has work, and the engine is serving."""
        if self.worker is not None:
            self.worker.serving()
            self.worker.notify()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the embedder has loaded and every record stored so far has a vector;
        True at once when vectors are off; False on timeout or when the embedder failed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if not self._loaded.wait(timeout):
            return False
        if self.state == "failed":
            return False
        if self.worker is None:
            return True
        left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
        return self.worker.wait(left)

    def status(self) -> dict[str, Any]:
        if self.worker is None or self.embedder is None:
            out: dict[str, Any] = {"on": False, "state": self.state, "reason": self.problem}
            if self.configured is not None:
                out["configured"] = self.configured
            if self.state == "loading":
                out["reason"] = f"embedder {self.configured!r} is loading; full text alone"
            return out
        out = {
            "on": True,
            "state": "on",
            "embedder": self.embedder.name,
            "fusion": self.scoring.fusion,
            "lag": self.worker.lag(),
        }
        if self.load_s is not None:
            out["load_s"] = self.load_s
        compute = getattr(self.embedder, "compute", None)
        if compute is not None:  # MiniLM: the int8 build or the packaged model (quantized.py)
            out["compute"] = compute
            why = getattr(self.embedder, "compute_error", None)
            if why:
                out["compute_error"] = why
        if self.worker.error:
            out["error"] = self.worker.error
        return out

    def warnings(self) -> list[str]:
        """What a call ran on instead of its configuration: every call says it while true."""
        if self.state == "loading":
            return [
                f"the embedder {self.configured!r} is still loading: this window was ranked on "
                "full text alone, without vector search"
            ]
        if self.worker is None:
            return [self.problem] if self.state == "failed" and self.problem else []
        if self.worker.error:
            return [f"the embedder is failing ({self.worker.error}); vector results may be stale"]
        return []

    def annotate(self, trace: Trace) -> None:
        if self.worker is not None:
            self.worker.serving()  # every assemble call's trace comes through here
        trace.notes["vectors"] = self.status()

    def close(self) -> None:
        with self._lock:
            self._closed = True  # a model still loading is dropped when it arrives
        if self.worker is not None:
            self.worker.stop()


# A thread inside onnxruntime when the interpreter finalizes aborts the process ("terminate
# called without an active exception", exit 134): a script that adds records and ends without
# close() would crash after its work. So at exit every engine's vectors are closed (the worker
# finishes its batch and stops) and a model still loading is waited for; close() itself does not
# wait for the load, so an engine opened and closed at once stays quick.
_OPEN: weakref.WeakSet[Vectors] = weakref.WeakSet()


@atexit.register
def _close_at_exit() -> None:
    for vectors in list(_OPEN):
        try:  # one that fails to close (its store gone) must not leave the others running
            if not vectors._closed:  # closed by its engine already: its worker has stopped
                vectors.close()
        except Exception:  # nothing is left to report to at exit
            continue
        finally:
            vectors._loaded.wait(EXIT_LOAD_WAIT_S)
