"""Trace persistence off the assemble hot path.

Every assemble call keeps a trace of ~150-200 items (~70 KB of JSON at 100k records, its items
stored as rows: rows.py); encoding and writing it was about a tenth of the call. `assemble` now
hands the trace to this writer and returns; one background thread encodes and stores it in the
`traces` collection, in call order.

`put` wakes nobody: the thread looks for new traces every TICK_S. Waking it from `put` (a
condition's notify) made it ask for the GIL at once, while the call that woke it, or the next one,
still ran: each SQLite statement of that call then let it in, and on a busy 2-core machine a call
waited for it (the notify's p90 was 4 ms, the call's p50 1.06-1.3 times that of a writer that
looks on its own, in one process; docs/assembly.md).

Read-your-writes: a trace stays in memory until its row is committed, so `engine.trace(project, id)` finds
it the moment `assemble` returns, and `engine.traces(...)` waits for the writer first. `flush()`
waits for every pending trace; `close()` (called by `engine.close()`) flushes, and an exit hook
flushes an engine that was never closed. Readers of the store itself (another process, a direct
`store.list_docs("traces", ...)`) see a trace up to TICK_S later; call `engine.flush()` first
when that matters.
"""

from __future__ import annotations

import atexit
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import cast

from ..ports import PutsDocs, Store, capable
from .trace import Trace

# A trace whose encoding races a caller's edit of it (e.g. sessions adding notes) is retried.
RETRIES = 3
# Past this many unwritten traces, `put` writes on the caller's thread: memory stays bounded.
MAX_PENDING = 256
# The thread ends after this long without work (an engine never closed leaves no thread behind).
IDLE_S = 2.0
# The newest failed writes kept in `errors`.
MAX_ERRORS = 100
# How often the thread looks for traces to write (`put` does not wake it).
TICK_S = 0.05


class TraceWriter:
    """Stores traces on one background thread, in the order they were put."""

    def __init__(self, store: Store) -> None:
        self.store = store
        # The newest writes that failed (the store was closed, ...), and how many ever did: a
        # store broken for hours must not grow the list without bound (server metrics show it).
        self.errors: deque[str] = deque(maxlen=MAX_ERRORS)
        self.failed = 0
        self._pending: dict[str, Trace] = {}
        self._cv = threading.Condition()
        self._io = threading.Lock()  # held while traces are being written
        self._thread: threading.Thread | None = None
        self._closed = False
        ref = weakref.ref(self)
        self._exit_hook: Callable[[], None] = lambda: _flush_ref(ref)
        atexit.register(self._exit_hook)

    def put(self, trace: Trace) -> None:
        with self._cv:
            if self._closed:
                self._write([trace])
                return
            self._pending[trace.id] = trace
            backlog = len(self._pending) >= MAX_PENDING
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="cw-trace-writer", daemon=True
                )
                self._thread.start()
        if backlog:
            self.flush()

    def get(self, trace_id: str) -> Trace | None:
        """A trace not yet written, or None."""
        with self._cv:
            return self._pending.get(trace_id)

    def pending(self) -> int:
        with self._cv:
            return len(self._pending)

    def flush(self) -> None:
        """Write every pending trace now, on the calling thread if the writer has not yet."""
        with self._io:
            self._write_pending()

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify()
        self.flush()
        thread = self._thread
        if thread is not None:
            thread.join(timeout=5)
        atexit.unregister(self._exit_hook)

    def _loop(self) -> None:
        idle_since = time.monotonic()
        while True:
            with self._cv:
                if not self._pending:
                    if self._closed or time.monotonic() - idle_since >= IDLE_S:
                        self._thread = None  # `put` starts a new thread when needed
                        return
                    self._cv.wait(timeout=TICK_S)  # `close` wakes it; `put` does not
                    continue
            with self._io:
                self._write_pending()
            idle_since = time.monotonic()

    def _write_pending(self) -> None:
        with self._cv:
            batch = list(self._pending.values())
        if batch:
            self._write(batch)

    def _write(self, batch: list[Trace]) -> None:
        if capable(self.store, PutsDocs) and self._write_together(batch):
            return
        for trace in batch:
            for attempt in range(RETRIES):
                try:
                    self.store.put_doc(
                        "traces",
                        trace.id,
                        trace.project,
                        trace.to_json_dict(),
                        trace.created_at,
                        key=trace.agent,
                    )
                    break
                except RuntimeError as exc:  # the trace changed while it was encoded
                    if attempt == RETRIES - 1:
                        self._lost(f"trace {trace.id}: {exc}")
                except Exception as exc:  # a closed or broken store: keep the call alive
                    self._lost(f"trace {trace.id}: {type(exc).__name__}: {exc}")
                    break
            self._done([trace])

    def _lost(self, error: str) -> None:
        with self._cv:  # `put` after close writes on the caller's thread, beside a flush
            self.errors.append(error)
            self.failed += 1

    def _done(self, written: list[Trace]) -> None:
        """No longer pending (unless put again meanwhile)."""
        with self._cv:
            for trace in written:
                if self._pending.get(trace.id) is trace:
                    del self._pending[trace.id]

    def _write_together(self, batch: list[Trace]) -> bool:
        """The batch in one transaction that waits for no disk flush (ports.PutsDocs): on
        PostgreSQL each trace had been a commit of its own, ~100 KB of write-ahead log flushed
        while the adds' commits queued behind it; on SQLite a commit each cost ~15% more CPU.
        False if a trace changed while it was encoded (here, or by the store, which encodes the
        documents and rolls the batch back): then each is written alone, with its retries."""
        try:
            docs = [(t.id, t.project, t.to_json_dict(), t.created_at, t.agent) for t in batch]
            cast(PutsDocs, self.store).put_docs("traces", docs, durable=False)
        except RuntimeError:
            return False
        except Exception as exc:  # a closed or broken store: keep the calls alive
            for t in batch:
                self._lost(f"trace {t.id}: {type(exc).__name__}: {exc}")
        self._done(batch)
        return True


def _flush_ref(ref: weakref.ref[TraceWriter]) -> None:
    writer = ref()
    if writer is not None:
        writer.flush()
