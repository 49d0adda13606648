"""What the slowest assemble calls on PostgreSQL wait for: each call's round trips (the calling
thread's and the pool's, the search ahead among them), the calling thread's wait for the search,
the cyclic GC's passes and the trace writer's batches, timed in the process; then the stages'
medians over all calls, and for the slowest 5% which stage held most of the call.

    .venv/bin/python bench/postgres_slow.py --dir DIR [--records 1000000] [--calls 300]
        [--settle-heap]

DIR is a `bench/postgres.py --dir DIR` whose store holds `--records` records (that run builds it);
the requests are bench/assemble.py's, after ten that warm the caches, as bench/postgres.py makes
them (SQLite's engine runs each request too, in turns, as there).
"""

from __future__ import annotations

import argparse
import collections
import gc
import os
import statistics
import sys
import threading
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from assemble import BUDGET, PROJECT, _requests, call_ms
from postgres import built, warm_up

from contextwright import Engine
from contextwright.assembly import ahead
from contextwright.stores.postgres import PostgresStore
from contextwright.stores.sqlite import SQLiteStore

# One event of a call: (what, thread, ms from the call's start, ms it took).
Event = tuple[str, str, float, float]


class Timeline:
    """Wraps the store's round trips, the search-ahead wait, the GC and trace writes."""

    def __init__(self, store: PostgresStore) -> None:
        self.events: list[Event] = []
        self.t0 = time.perf_counter()
        self._lock = threading.Lock()
        reading, put_docs, call = store._reading, store.put_docs, ahead.Early.__call__

        def timed(what: str, fn: Any, *args: Any, **kw: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*args, **kw)
            finally:
                self._add(what, t)

        def read(fn: Any) -> Any:
            parts = getattr(fn, "__qualname__", "read").split(".")  # Class.method.<locals>.read
            name = parts[-3] if len(parts) >= 3 else parts[-1]
            return timed(name, reading, fn)

        def wait(early: ahead.Early, *args: Any) -> Any:  # (project, agent, text, limit)
            return timed("wait for the search", call, early, *args)

        store._reading = read  # type: ignore[method-assign]
        store.put_docs = lambda *a, **k: timed("trace write", put_docs, *a, **k)  # type: ignore[method-assign]
        ahead.Early.__call__ = wait  # type: ignore[method-assign]
        self._gc_start = 0.0
        gc.callbacks.append(self._gc)

    def _add(self, what: str, t: float) -> None:
        with self._lock:
            self.events.append(
                (
                    what,
                    threading.current_thread().name,
                    (t - self.t0) * 1000,
                    (time.perf_counter() - t) * 1000,
                )
            )

    def _gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_start = time.perf_counter()
        else:
            self._add(f"gc gen{info['generation']}", self._gc_start)

    def start(self) -> None:
        with self._lock:
            self.events = []
            self.t0 = time.perf_counter()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--dir", required=True, help="a bench/postgres.py --dir with its store")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--settle-heap", action="store_true", help="as `contextwright serve`")
    args = parser.parse_args()
    with built(args.dir, args.records) as (_, store):
        engines = [Engine(SQLiteStore(os.path.join(args.dir, "bench.db"))), Engine(store)]
        reqs = _requests(args.calls)
        warm_up(engines, reqs, args.settle_heap)
        line = Timeline(store)
        load = os.getloadavg()
        calls: list[tuple[float, list[Event]]] = []
        for agent, task, day in reqs:
            engines[0].assemble(PROJECT, agent, task, BUDGET, session=f"{agent}-{day}")
            line.start()
            result, ms = call_ms(
                engines[1].assemble, PROJECT, agent, task, BUDGET, session=f"{agent}-{day}"
            )
            del result
            calls.append((ms, list(line.events)))
        _report(calls, load)
        for engine in engines:
            engine.close()


def _report(calls: list[tuple[float, list[Event]]], load: tuple[float, ...]) -> None:
    ms = sorted(c[0] for c in calls)
    print(
        f"{len(calls)} calls, load average {load} before, {os.getloadavg()} after: p50 "
        f"{statistics.median(ms):.2f} ms, p95 {ms[int(0.95 * len(ms))]:.2f}, "
        f"p99 {ms[int(0.99 * len(ms))]:.2f}"
    )
    took: dict[str, list[float]] = collections.defaultdict(list)
    for _, events in calls:
        for what, _, _, t in events:
            took[what].append(t)
    for what, ts in sorted(took.items()):
        print(f"  {what:>22}: {len(ts):4} times, p50 {statistics.median(ts):7.2f} ms")
    slow = sorted(calls, key=lambda c: c[0])[-max(1, len(calls) // 20) :]
    held: collections.Counter[str] = collections.Counter()
    for total, events in slow:
        stages = [e for e in events if e[0] not in ("trace write", "wait for the search")]
        top = max(stages, key=lambda e: e[3], default=None)
        held[top[0] if top is not None and top[3] > 0.4 * total else "(spread)"] += 1
        print(f"-- {total:.2f} ms")
        for what, thread, at, t in sorted(events, key=lambda e: e[2]):
            print(f"   +{at:7.2f} ms {t:7.2f} ms  {thread[:12]:<12} {what}")
    print(f"slowest {len(slow)}: the stage that held over 40% of the call: {dict(held)}")


if __name__ == "__main__":
    main()
