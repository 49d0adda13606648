"""The cyclic garbage collector of a process that serves: what start-up made left out of it, and
its youngest generation sized for assemble calls rather than for CPython's default."""

from __future__ import annotations

import gc

# CPython collects its youngest generation whenever the tracked objects allocated, net of those
# freed, pass 700. An assemble call holds thousands of such objects at once (candidates, their
# dicts and tuples, the answer's items) that it frees as it returns, so at 700 the collector ran
# in the middle of nearly every call, walking those objects and all they point to, only to find
# them alive: in `bench/load.py` (100k records, 2 workers, 13 s with the warm-up) the workers ran
# 2,300 young collections (4.4 s between the collector's start and stop callbacks, beside the
# other threads), 210 middle ones (0.7 s, up to 21 ms each) and 18 full ones (0.2 s). At 20,000
# the calls' objects are mostly freed, by their reference counts, before a collection comes: 4
# young collections, 37 ms, and no middle or full one in the same run; server CPU per request
# 0.87-1.09x (5 pairs of load runs, docs/benchmarks.md). Garbage in cycles waits for at most
# 20,000 allocations more, a few MB.
YOUNG_THRESHOLD = 20_000
THRESHOLDS = (YOUNG_THRESHOLD, 20, 10)


def settle_heap() -> None:
    """Leave what start-up made out of every later full collection of the cyclic GC (a
    server's modules, classes and functions, ~28,000 objects, which each full collection
    walked: 15-25 ms) and collect the young generation every YOUNG_THRESHOLD allocations.
    Called once, just before a server starts answering."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
