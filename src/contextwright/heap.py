"""The cyclic garbage collector of a process that serves: what start-up made left out of its
full collections, and its youngest generation sized for assemble calls rather than CPython's
default."""

from __future__ import annotations

import gc

# CPython collects its youngest generation whenever the tracked objects allocated, net of those
# freed, pass 700 (and the count restarts from zero after each collection). An assemble call
# holds thousands of such objects at once (candidates, their dicts and tuples, the answer's
# items) and frees them as it returns, so at 700 a collection came in the middle of nearly every
# call, walked those objects only to find them alive, and moved them to the older generations,
# whose collections then walked them again: in one process, 8 concurrent clients of the HTTP
# app at 100k records (70% adds), ~0.6 young collections a request and a middle one every ten,
# and 9-10% more CPU per request than at 20,000, where a call's objects are freed by their
# reference counts before any collection comes (docs/scaling.md). Garbage in cycles waits for
# at most 20,000 allocations more: a few MB.
YOUNG_THRESHOLD = 20_000
THRESHOLDS = (YOUNG_THRESHOLD, 10, 10)


def settle_heap() -> None:
    """Leave what start-up made out of every later full collection (a server's modules, classes
    and functions, ~28,000 objects, which each full collection walked: 15-25 ms) and collect the
    young generation every YOUNG_THRESHOLD allocations. Called once, just before a server starts
    answering."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
