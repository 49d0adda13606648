"""At most a few assemble calls of one process run at once; the others wait, asleep.

An assemble call is Python work that holds the GIL, and a process runs one thread of Python at a
time: eight assemble threads did no more work together than two, but each writer thread beside
them waited behind all eight every time it took the GIL back after a read or a write of the
store (8 writers beside 8 assemblers in one process: add p99 404 ms, bench/contention.py). Calls
past the limit wait on a semaphore, which costs the running ones nothing, and they run in the
order they came. Re-entrant: a call made inside an admitted one (the session pipeline's) on the
same thread is not counted again.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

from .errors import ValidationError
from .ports import NearestHere

T = TypeVar("T")


def default_limit(store: object, cpus: int | None = None) -> int:
    """One call per core (at least two, so that one call's reads overlap another's Python) on a
    store that reads in this process; four per core on one whose calls mostly wait for a
    database server, where the waits, not the GIL, bound the work (PostgreSQL)."""
    cores = max(2, (os.cpu_count() if cpus is None else cpus) or 1)
    return cores if isinstance(store, NearestHere) else 4 * cores


class CallGate:
    """First come, first served: a plain semaphore wakes any waiter, and under steady load some
    waited seconds while later calls went ahead (assemble p99 4 s in bench/contention.py)."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._free = limit or 0
        self._queue: deque[threading.Lock] = deque()
        self._inside = threading.local()
        # Told how long each admitted call waited for its slot, in seconds (0.0 when one was
        # free): the server's contextwright_assemble_queue_seconds. Under load most of an
        # assemble's latency can be this wait, not the call (docs/scaling.md).
        self.on_wait: Callable[[float], None] | None = None

    @classmethod
    def for_store(cls, store: object, slots: int | None) -> CallGate:
        """The engine's gate (`Engine(assemble_slots=...)`): None takes `default_limit(store)`,
        0 means no limit."""
        if slots is None:
            return cls(default_limit(store))
        if not isinstance(slots, int) or isinstance(slots, bool) or slots < 0:
            raise ValidationError(
                "assemble_slots", slots, "give a whole number of calls: 0 for no limit, or more"
            )
        return cls(slots)

    def run(self, call: Callable[..., T], *args: Any) -> T:
        nested: int = getattr(self._inside, "depth", 0)
        if not self.limit or nested:
            return call(*args)
        waited = self._enter()
        self._inside.depth = 1
        try:
            if self.on_wait is not None:  # in the `try`: whatever it raises gives the slot back
                self.on_wait(waited)
            return call(*args)
        finally:
            self._inside.depth = 0
            self._leave()

    def _enter(self) -> float:
        """Takes a slot, waiting for one in turn: the seconds waited."""
        with self._lock:
            if self._free > 0 and not self._queue:
                self._free -= 1
                turn = None
            else:
                turn = threading.Lock()
                turn.acquire()
                self._queue.append(turn)
        if turn is None:
            return 0.0
        start = time.perf_counter()
        turn.acquire()  # released by _leave when this call's turn comes: the slot is handed over
        return time.perf_counter() - start

    def _leave(self) -> None:
        with self._lock:
            if self._queue:
                self._queue.popleft().release()
            else:
                self._free += 1
